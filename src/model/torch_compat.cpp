// Version-guarded access to libtorch APIs that exist only in newer releases, and the attention
// implementations that use them. The only file with TORCH_VERSION guards.
#include "tprobe/model/torch_compat.hpp"

#include <set>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <atomic>
#include <cstdlib>

#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/step/knobs.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/blockwise_attention.hpp"

#if TPROBE_HAS_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif
#if TPROBE_HAS_KINETO_EVENTS
// Found usable at configure time (cmake/TprobeTorchFeatures.cmake compiles a probe of this API).
#include <torch/csrc/autograd/profiler_kineto.h>
#endif

#define TPROBE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||         \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace tprobe::model {

std::string torch_version() { return TORCH_VERSION; }

bool has_sdpa() {
#if TPROBE_TORCH_AT_LEAST(2, 0)
  return true;
#else
  return false;
#endif
}

std::vector<core::SdpaBackend> sdpa_backends() {
  std::vector<core::SdpaBackend> out;
#if TPROBE_TORCH_AT_LEAST(2, 0)
  auto& ctx = at::globalContext();
  const bool cuda = TPROBE_HAS_TORCH_CUDA != 0;
  out.push_back({"flash", cuda, ctx.userEnabledFlashSDP(),
                 cuda ? "head_dim <= 256, no explicit mask" : "CUDA kernels not in this build"});
  out.push_back({"mem_efficient", cuda, ctx.userEnabledMemEfficientSDP(),
                 cuda ? "accepts explicit masks" : "CUDA kernels not in this build"});
#if TPROBE_TORCH_AT_LEAST(2, 3)
  out.push_back(
      {"cudnn", cuda, ctx.userEnabledCuDNNSDP(), cuda ? "" : "CUDA kernels not in this build"});
#endif
  out.push_back({"math", true, ctx.userEnabledMathSDP(), "reference composite, any shape"});
#else
  out.push_back({"math", false, false,
                 "libtorch " TORCH_VERSION " has no public scaled_dot_product_attention; tprobe "
                 "uses its eager attention"});
#endif
  return out;
}

core::EngineFacts engine_facts(const std::string& device, const std::string& dtype) {
  core::EngineFacts f;
  f.torch_major = TORCH_VERSION_MAJOR;
  f.torch_minor = TORCH_VERSION_MINOR;
  f.cuda_build = TPROBE_HAS_TORCH_CUDA != 0;
  f.device = device;
  f.dtype = dtype;
  f.torch_version = torch_version();
  return f;
}

bool has_grouped_mm() {
#if TPROBE_HAS_TORCH_CUDA && TPROBE_TORCH_AT_LEAST(2, 8)
  return true;
#else
  return false;
#endif
}

torch::Tensor grouped_mm(const torch::Tensor& a, const torch::Tensor& b,
                         const torch::Tensor& offs) {
#if TPROBE_HAS_TORCH_CUDA && TPROBE_TORCH_AT_LEAST(2, 8)
  return at::_grouped_mm(a, b, offs);
#else
  (void)a;
  (void)b;
  (void)offs;
  fail("grouped GEMM is not available in libtorch {}", torch_version());
#endif
}

bool has_fused_rms_norm() {
#if TPROBE_TORCH_AT_LEAST(2, 4)
  return true;
#else
  return false;
#endif
}

torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
#if TPROBE_TORCH_AT_LEAST(2, 4)
  c10::optional<torch::Tensor> w;
  if (weight.defined()) w = weight;
  return at::rms_norm(x, {x.size(-1)}, w, eps);
#else
  (void)x;
  (void)weight;
  (void)eps;
  fail("at::rms_norm is not available in libtorch {} (it needs >= 2.4)", torch_version());
#endif
}

bool has_bmm_fp32_out(const torch::Tensor& like) {
#if TPROBE_TORCH_AT_LEAST(2, 9)
  return like.is_cuda();
#else
  (void)like;
  return false;
#endif
}

torch::Tensor bmm_fp32_out(const torch::Tensor& a, const torch::Tensor& b) {
  const auto t = a.scalar_type();
  if (t == torch::kFloat || t == torch::kDouble) return at::bmm(a, b);
#if TPROBE_TORCH_AT_LEAST(2, 9)
  if (a.is_cuda()) return at::bmm(a, b, torch::kFloat);
#endif
  return at::bmm(a, b).to(torch::kFloat);
}

void cuda_synchronize() {
#if TPROBE_HAS_TORCH_CUDA
  if (torch::cuda::is_available()) torch::cuda::synchronize();
#endif
}

void cuda_reset_peak_memory() {
#if TPROBE_HAS_TORCH_CUDA
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::resetPeakStats(0);
#endif
}

int64_t cuda_peak_allocated_bytes() {
#if TPROBE_HAS_TORCH_CUDA
  if (torch::cuda::is_available()) {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].peak;
  }
#endif
  return 0;
}

int64_t cuda_peak_reserved_bytes() {
#if TPROBE_HAS_TORCH_CUDA
  if (torch::cuda::is_available()) {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0).reserved_bytes[0].peak;
  }
#endif
  return 0;
}

int64_t cuda_allocated_bytes() {
#if TPROBE_HAS_TORCH_CUDA
  if (torch::cuda::is_available()) {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].current;
  }
#endif
  return 0;
}

int64_t cuda_reserved_bytes() {
#if TPROBE_HAS_TORCH_CUDA
  if (torch::cuda::is_available()) {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0).reserved_bytes[0].current;
  }
#endif
  return 0;
}

int64_t cuda_total_memory_bytes() {
#if TPROBE_HAS_TORCH_CUDA
  if (!torch::cuda::is_available()) return 0;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return 0;
  return static_cast<int64_t>(total_bytes);
#else
  return 0;
#endif
}

void cuda_set_memory_cap(int64_t bytes) {
#if TPROBE_HAS_TORCH_CUDA
  if (!torch::cuda::is_available()) return;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess || total_bytes == 0) {
    fail("cudaMemGetInfo failed: the allocator cannot be capped");
  }
  const double fraction =
      bytes <= 0 ? 1.0 : std::min(1.0, static_cast<double>(bytes) / static_cast<double>(total_bytes));
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, 0);
#else
  (void)bytes;
#endif
}

// ---- allocator events -------------------------------------------------------------------------
namespace {

// The totals' type of MemoryReportingInfoBase::reportMemoryUsage: int64_t in libtorch 1.13,
// size_t in 2.x. Read off the declaration, so that no version number has to be guessed.
template <typename T>
struct ReportArgs;
template <typename C, typename R, typename P, typename S, typename A, typename B, typename D>
struct ReportArgs<R (C::*)(P, S, A, B, D)> {
  using Total = A;
};
using ReportTotal = ReportArgs<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::Total;

class EventReporter final : public c10::MemoryReportingInfoBase {
 public:
  EventReporter(AllocatorEvents::Sink sink, void* user) : sink_(sink), user_(user) {}
  void reportMemoryUsage(void* ptr, int64_t bytes, ReportTotal total_allocated,
                         ReportTotal total_reserved, c10::Device device) override {
    const bool cuda = device.is_cuda();
    sink_(user_, ptr, bytes, cuda ? static_cast<int64_t>(total_allocated) : -1,
          cuda ? static_cast<int64_t>(total_reserved) : -1, cuda);
  }
  bool memoryProfilingEnabled() const override { return true; }

 private:
  AllocatorEvents::Sink sink_;
  void* user_;
};

}  // namespace

struct AllocatorEvents::Impl {
  c10::DebugInfoGuard guard;
  Impl(AllocatorEvents::Sink sink, void* user)
      : guard(c10::DebugInfoKind::PROFILER_STATE, std::make_shared<EventReporter>(sink, user)) {}
};

AllocatorEvents::AllocatorEvents(Sink sink, void* user) : impl_(new Impl(sink, user)) {}
AllocatorEvents::~AllocatorEvents() { delete impl_; }

void cuda_empty_cache() {
#if TPROBE_HAS_TORCH_CUDA
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

torch::Tensor repeat_kv(const torch::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  auto s = x.sizes();
  return x.unsqueeze(2)
      .expand({s[0], s[1], n_rep, s[2], s[3]})
      .reshape({s[0], s[1] * n_rep, s[2], s[3]});
}

torch::Tensor causal_bool_mask(int64_t seq_len, int64_t window, const torch::Device& device) {
  // Key k is allowed for query q iff k <= q (lower triangle) and, on sliding layers, k > q - W
  // (on or above the (W-1)-th subdiagonal): two in-place passes over one bool tensor.
  torch::Tensor allowed =
      torch::ones({seq_len, seq_len}, torch::TensorOptions().dtype(torch::kBool).device(device));
  allowed.tril_(0);
  if (window > 0) allowed.triu_(-(window - 1));
  return allowed.view({1, 1, seq_len, seq_len});
}

bool has_padding(const std::vector<int64_t>& lengths, int64_t seq_len) {
  for (int64_t l : lengths) {
    if (l < seq_len) return true;
  }
  return false;
}

torch::Tensor padded_bool_mask(int64_t seq_len, int64_t window, const std::vector<int64_t>& lengths,
                               const torch::Device& device) {
  torch::Tensor allowed = causal_bool_mask(seq_len, window, device);  // [1, 1, S, S]
  torch::Tensor len = torch::tensor(lengths, torch::TensorOptions().dtype(torch::kLong))
                          .to(device)
                          .view({-1, 1, 1, 1});
  torch::Tensor k = torch::arange(seq_len, torch::TensorOptions().dtype(torch::kLong).device(device))
                        .view({1, 1, 1, seq_len});
  return allowed.logical_and(k.lt(len));  // [B, 1, S, S]
}

namespace {

void check_lengths(const torch::Tensor& q, const std::vector<int64_t>& lengths) {
  if (lengths.empty()) return;
  if (static_cast<int64_t>(lengths.size()) != q.size(0)) {
    fail("attention: {} lengths for a batch of {}", lengths.size(), q.size(0));
  }
  for (int64_t l : lengths) {
    if (l < 1 || l > q.size(2)) fail("attention: length {} outside 1..{}", l, q.size(2));
  }
}

torch::Tensor eager_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, int64_t window,
                              const std::vector<int64_t>& lengths, const torch::Tensor& mask) {
  const int64_t n_rep = q.size(1) / k.size(1);
  torch::Tensor kr = repeat_kv(k, n_rep);
  torch::Tensor vr = repeat_kv(v, n_rep);
  torch::Tensor scores = torch::matmul(q, kr.transpose(2, 3));  // scaling = 1.0
  // HF's eager mask: 0 where allowed, finfo(dtype).min elsewhere, added to the scores.
  const bool padded = has_padding(lengths, q.size(2));
  torch::Tensor allowed = padded           ? padded_bool_mask(q.size(2), window, lengths, q.device())
                          : mask.defined() ? mask
                                           : causal_bool_mask(q.size(2), window, q.device());
  double min_value = 0;
  switch (q.scalar_type()) {
    case torch::kFloat:
      min_value = std::numeric_limits<float>::lowest();
      break;
    case torch::kDouble:
      min_value = std::numeric_limits<double>::lowest();
      break;
    case torch::kBFloat16:
      min_value = -3.3895313892515355e38;
      break;
    case torch::kHalf:
      min_value = -65504.0;
      break;
    default:
      fail("eager attention: unsupported dtype {}", std::string(c10::toString(q.scalar_type())));
  }
  torch::Tensor additive =
      torch::zeros(allowed.sizes(), q.options()).masked_fill(allowed.logical_not(), min_value);
  scores = scores + additive;
  // HF: softmax in fp32, cast back. fp64 (tests only) keeps fp64 so references stay exact.
  const auto acc = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  torch::Tensor probs = torch::softmax(scores, -1, acc).to(q.scalar_type());
  return torch::matmul(probs, vr);
}

#if TPROBE_TORCH_AT_LEAST(2, 0)
// An explicit bool mask on every layer, as a harness that builds its own mask does.
torch::Tensor sdpa_masked_attention(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, int64_t window, std::string* resolved) {
  const int64_t n_rep = q.size(1) / k.size(1);
  if (resolved) *resolved = "sdpa(bool_mask,repeat_kv)";
  torch::Tensor mask = causal_bool_mask(q.size(2), window, q.device());
  return at::scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask, 0.0,
                                          false, 1.0);
}

// HF sdpa_attention_forward for a text-only forward with no padding and no cache: the mask is
// dropped (is_causal) on full layers and on sliding layers while S < window; otherwise a bool
// mask is materialised, which forces repeat-kv. GQA without a mask uses enable_gqa only for
// head_dim <= 256 (HF PR #46960: enable_gqa at 512 fell back to the math kernel).
// With padding HF always materialises the mask (padding_mask and-ed in), on full layers too:
// the global layers lose is_causal.
torch::Tensor sdpa_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             int64_t window, std::string* resolved,
                             const std::vector<int64_t>& lengths, const torch::Tensor& mask) {
  const int64_t seq = q.size(2);
  const int64_t n_rep = q.size(1) / k.size(1);
  if (has_padding(lengths, seq)) {
    if (resolved) *resolved = "sdpa(bool_mask,padding,repeat_kv)";
    torch::Tensor padded = padded_bool_mask(seq, window, lengths, q.device());
    // A padded query whose whole window is padding has no key: some SDPA kernels return NaN for
    // such a row, and a NaN value row poisons real queries through 0·NaN. HF (without torch's
    // fix) lets those rows attend everywhere; so does tprobe — only padded outputs change.
    if (window > 0) padded = padded.logical_or(padded.any(-1, true).logical_not());
    return at::scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), padded,
                                            0.0, false, 1.0);
  }
  const bool mask_skipped = window <= 0 || seq < window;
  if (mask_skipped) {
    const bool causal = seq > 1;
#if TPROBE_TORCH_AT_LEAST(2, 5)
    if (n_rep > 1 && q.size(3) <= core::kFusedAttentionMaxHeadDim) {
      if (resolved) *resolved = causal ? "sdpa(is_causal,enable_gqa)" : "sdpa(no_mask,enable_gqa)";
      return at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal, 1.0, true);
    }
#endif
    if (resolved) *resolved = n_rep > 1 ? "sdpa(is_causal,repeat_kv)" : "sdpa(is_causal)";
    return at::scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), {}, 0.0,
                                            causal, 1.0);
  }
  if (!mask.defined()) return sdpa_masked_attention(q, k, v, window, resolved);
  if (resolved) *resolved = "sdpa(bool_mask,repeat_kv)";
  return at::scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask, 0.0,
                                          false, 1.0);
}
#endif

// What the blockwise-GEMM path ran: "blockwise_gemm(block=512)", plus ",window=W" on windowed
// layers, ",scores=rounded" where the scores GEMM cannot write fp32, then `suffix`.
std::string blockwise_name(const torch::Tensor& q, const BlockwiseAttentionOptions& o,
                           const char* suffix = "") {
  const bool reduced = q.scalar_type() == torch::kBFloat16 || q.scalar_type() == torch::kHalf;
  return fmt::format("blockwise_gemm(block={}{}{}{})", o.block,
                     o.window > 0 ? fmt::format(",window={}", o.window) : std::string(),
                     reduced && !has_bmm_fp32_out(q) ? ",scores=rounded" : "", suffix);
}

// The blockwise-GEMM path with the default block.
torch::Tensor blockwise_gemm_attention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v, int64_t window,
                                       std::string* resolved,
                                       const std::vector<int64_t>& lengths) {
  BlockwiseAttentionOptions o;
  o.window = window;
  if (has_padding(lengths, q.size(2))) o.lengths = lengths;
  if (resolved) *resolved = blockwise_name(q, o);
  return blockwise_attention(q, k, v, o);
}

#if TPROBE_HAS_TORCH_CUDA && TPROBE_TORCH_AT_LEAST(2, 5)
// TPROBE_FLASH_WINDOW_GLOBAL=sdpa: the pre-blockwise path for head_dim > 256, for A/B runs.
bool flash_window_global_on_sdpa() {
  const char* e = std::getenv("TPROBE_FLASH_WINDOW_GLOBAL");
  if (e == nullptr || *e == '\0' || std::string(e) == "blockwise") return false;
  if (std::string(e) == "sdpa") return true;
  fail("TPROBE_FLASH_WINDOW_GLOBAL='{}': expected blockwise or sdpa", e);
}

// The variable-length flash kernel over rows [T, H, D] cut at the cumulative lengths `cum` (int32,
// on q's device; the longest row `max_len`), causal, and with window > 0 windowed:
// window_size_left = W - 1 (k >= q - (W - 1) <=> k > q - W), window_size_right = 0.
torch::Tensor flash_varlen(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& cum, int64_t max_len, int64_t window) {
  c10::optional<int64_t> left;
  if (window > 0) left = window - 1;
  auto out = at::_flash_attention_forward(q, k, v, cum, cum, max_len, max_len, 0.0,
                                          /*is_causal=*/true, /*return_debug_mask=*/false, 1.0,
                                          left, c10::optional<int64_t>(0));
  return std::get<0>(out);
}

// "flash_varlen(window_left=W-1<suffix>)" or "flash_varlen(causal<suffix>)".
std::string flash_varlen_name(int64_t window, const char* suffix = "") {
  return window > 0 ? fmt::format("flash_varlen(window_left={}{})", window - 1, suffix)
                    : fmt::format("flash_varlen(causal{})", suffix);
}

// Cumulative row lengths as the varlen kernel takes them, and the longest row.
torch::Tensor cumulative_lengths(const std::vector<int64_t>& lengths, const torch::Device& device,
                                 int64_t* max_len) {
  std::vector<int32_t> cum = {0};
  *max_len = 0;
  for (int64_t l : lengths) {
    cum.push_back(cum.back() + static_cast<int32_t>(l));
    *max_len = std::max(*max_len, l);
  }
  return torch::tensor(cum, torch::TensorOptions().dtype(torch::kInt)).to(device);
}

// Sliding layers: the variable-length flash kernel over packed rows [B·S, H, D] with cumulative
// sequence lengths and window_size_left = window − 1 (k ≥ q − (W − 1) ⇔ k > q − W), no mask.
// GQA is native to flash. head_dim > 256 (flash and cuDNN refuse it): the blockwise-GEMM path,
// or (TPROBE_FLASH_WINDOW_GLOBAL=sdpa) is_causal SDPA on repeated KV heads as HF does there.
// Right padding: the varlen kernel packs only the real tokens (cum_seq from the lengths; padded
// positions cost nothing and come back as zeros). On the head_dim > 256 layers is_causal stays
// exact for every real token (a real query only sees keys before it, all real), so no mask.
torch::Tensor flash_window_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, int64_t window, std::string* resolved,
                                     const std::vector<int64_t>& lengths) {
  const int64_t batch = q.size(0), seq = q.size(2), dim = q.size(3);
  const int64_t n_rep = q.size(1) / k.size(1);
  if (q.scalar_type() != torch::kBFloat16 && q.scalar_type() != torch::kHalf) {
    fail(
        "flash-window runs in bf16 or fp16 only (the flash kernels have no fp32 variant): use "
        "bf16, or sdpa/eager for fp32");
  }
  const bool padded = has_padding(lengths, seq);
  if (dim > core::kFusedAttentionMaxHeadDim && !flash_window_global_on_sdpa()) {
    return blockwise_gemm_attention(q, k, v, window, resolved, lengths);
  }
  if (dim > core::kFusedAttentionMaxHeadDim) {
    if (resolved) {
      *resolved = padded ? "sdpa(is_causal,repeat_kv) head_dim>256, right padding exact"
                         : "sdpa(is_causal,repeat_kv) head_dim>256";
    }
    return at::scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), {}, 0.0,
                                            true, 1.0);
  }
  if (padded) {
    std::vector<int64_t> rows;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < lengths[b]; ++t) rows.push_back(b * seq + t);
    }
    int64_t max_len = 0;
    torch::Tensor cum = cumulative_lengths(lengths, q.device(), &max_len);
    torch::Tensor index =
        torch::tensor(rows, torch::TensorOptions().dtype(torch::kLong)).to(q.device());
    auto pack_real = [&](const torch::Tensor& t) {
      return t.transpose(1, 2).reshape({batch * seq, t.size(1), dim}).index_select(0, index);
    };
    torch::Tensor out =
        flash_varlen(pack_real(q), pack_real(k), pack_real(v), cum, max_len, window);
    torch::Tensor full =
        torch::zeros({batch * seq, q.size(1), dim}, q.options()).index_copy(0, index, out);
    if (resolved) *resolved = flash_varlen_name(window, ",padding");
    return full.view({batch, seq, q.size(1), dim}).transpose(1, 2);
  }
  auto pack = [&](const torch::Tensor& t) {
    return t.transpose(1, 2).reshape({batch * seq, t.size(1), dim});
  };
  torch::Tensor cum = torch::arange(0, (batch + 1) * seq, seq,
                                    torch::TensorOptions().dtype(torch::kInt).device(q.device()));
  torch::Tensor out = flash_varlen(pack(q), pack(k), pack(v), cum, seq, window);
  if (resolved) *resolved = flash_varlen_name(window);
  return out.view({batch, seq, q.size(1), dim}).transpose(1, 2);
}
#endif

}  // namespace

torch::Tensor attention(core::AttentionPath path, const torch::Tensor& q, const torch::Tensor& k,
                        const torch::Tensor& v, int64_t window, std::string* resolved,
                        const std::vector<int64_t>& lengths, const torch::Tensor& mask) {
  check_lengths(q, lengths);
  switch (path) {
    case core::AttentionPath::kEager:
      if (resolved) *resolved = has_padding(lengths, q.size(2)) ? "eager(padding)" : "eager";
      return eager_attention(q, k, v, window, lengths, mask);
    case core::AttentionPath::kSdpa:
#if TPROBE_TORCH_AT_LEAST(2, 0)
      return sdpa_attention(q, k, v, window, resolved, lengths, mask);
#else
      break;
#endif
    case core::AttentionPath::kSdpaMasked:
#if TPROBE_TORCH_AT_LEAST(2, 0)
      return sdpa_masked_attention(q, k, v, window, resolved);
#else
      break;
#endif
    case core::AttentionPath::kFlashWindow:
#if TPROBE_HAS_TORCH_CUDA && TPROBE_TORCH_AT_LEAST(2, 5)
      if (q.is_cuda()) return flash_window_attention(q, k, v, window, resolved, lengths);
#endif
      break;
    case core::AttentionPath::kBlockwise:
      return blockwise_gemm_attention(q, k, v, window, resolved, lengths);
  }
  const auto why = core::unavailable(core::Knob::kAttn, core::to_string(path),
                                     engine_facts(q.is_cuda() ? "cuda" : "cpu", "bf16"));
  fail("attention path '{}' cannot run here: {}", core::to_string(path),
       why.value_or("not on this device"));
}

bool packs_padding(core::AttentionPath path, const torch::Device& device) {
  const core::AttentionPathInfo& info = core::attention_info(path);
  if (!info.packs_padding) return false;
  if (!info.packs_requires.cuda_device) return true;
#if TPROBE_HAS_TORCH_CUDA && TPROBE_TORCH_AT_LEAST(2, 5)
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

torch::Tensor packed_attention(core::AttentionPath path, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, int64_t window,
                               std::string* resolved, const std::vector<int64_t>& lengths) {
  if (!packs_padding(path, q.device())) {
    fail("attention path '{}' does not run packed rows", core::to_string(path));
  }
  int64_t total = 0;
  for (int64_t l : lengths) {
    if (l < 1) fail("packed attention: row length {} must be at least 1", l);
    total += l;
  }
  if (q.dim() != 4 || q.size(0) != 1 || q.size(2) != total) {
    fail("packed attention: q must be [1, H, {}, D] for rows of {} tokens", total, total);
  }
#if TPROBE_HAS_TORCH_CUDA && TPROBE_TORCH_AT_LEAST(2, 5)
  if (path == core::AttentionPath::kFlashWindow && q.size(3) <= 256) {
    int64_t longest = 0;
    torch::Tensor cum = cumulative_lengths(lengths, q.device(), &longest);
    auto rows = [](const torch::Tensor& t) { return t.squeeze(0).transpose(0, 1).contiguous(); };
    if (resolved) *resolved = flash_varlen_name(window, ",packed rows");
    torch::Tensor out = flash_varlen(rows(q), rows(k), rows(v), cum, longest, window);
    return out.unsqueeze(0).transpose(1, 2);  // [T, H, D] -> [1, H, T, D]
  }
#endif
  BlockwiseAttentionOptions o;
  o.window = window;
  std::vector<torch::Tensor> parts;  // each [1, len, Hq, D]
  int64_t start = 0;
  for (int64_t l : lengths) {
    parts.push_back(
        blockwise_attention(q.narrow(2, start, l), k.narrow(2, start, l), v.narrow(2, start, l), o)
            .transpose(1, 2));
    start += l;
  }
  if (resolved) *resolved = blockwise_name(q, o, ",packed rows");
  return torch::cat(parts, 1).transpose(1, 2);
}

// ---- backend pinning, warning capture and kernel names (tprobe mask --backends) ----

bool can_pin_sdpa_backend(const std::string& backend, std::string* why) {
#if TPROBE_TORCH_AT_LEAST(2, 0)
  if (backend == "flash" || backend == "efficient" || backend == "math") return true;
  if (backend == "cudnn") {
#if TPROBE_TORCH_AT_LEAST(2, 3)
    return true;
#else
    if (why) *why = "libtorch " + torch_version() + " has no cuDNN SDPA backend (needs >= 2.3)";
    return false;
#endif
  }
  if (why) *why = "unknown SDPA backend '" + backend + "'";
  return false;
#else
  if (why) {
    *why = "libtorch " + torch_version() + " has no scaled_dot_product_attention (needs >= 2.0)";
  }
  (void)backend;
  return false;
#endif
}

#if TPROBE_TORCH_AT_LEAST(2, 0)
namespace {

// Saves the global SDPA switches, enables one backend alone, restores them on destruction.
class SdpaPin {
 public:
  explicit SdpaPin(const std::string& backend) {
    auto& c = at::globalContext();
    flash_ = c.userEnabledFlashSDP();
    mem_ = c.userEnabledMemEfficientSDP();
    math_ = c.userEnabledMathSDP();
    c.setSDPUseFlash(backend == "flash");
    c.setSDPUseMemEfficient(backend == "efficient");
    c.setSDPUseMath(backend == "math");
#if TPROBE_TORCH_AT_LEAST(2, 3)
    cudnn_ = c.userEnabledCuDNNSDP();
    c.setSDPUseCuDNN(backend == "cudnn");
#endif
#if TPROBE_TORCH_AT_LEAST(2, 5)
    overrideable_ = c.userEnabledOverrideableSDP();
    c.setSDPUseOverrideable(false);
#endif
  }
  ~SdpaPin() {
    auto& c = at::globalContext();
    c.setSDPUseFlash(flash_);
    c.setSDPUseMemEfficient(mem_);
    c.setSDPUseMath(math_);
#if TPROBE_TORCH_AT_LEAST(2, 3)
    c.setSDPUseCuDNN(cudnn_);
#endif
#if TPROBE_TORCH_AT_LEAST(2, 5)
    c.setSDPUseOverrideable(overrideable_);
#endif
  }
  SdpaPin(const SdpaPin&) = delete;
  SdpaPin& operator=(const SdpaPin&) = delete;

 private:
  bool flash_ = true, mem_ = true, math_ = true, cudnn_ = true, overrideable_ = true;
};

}  // namespace
#endif

torch::Tensor sdpa_pinned(const std::string& backend, const torch::Tensor& q,
                          const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& mask, bool is_causal, bool enable_gqa) {
  std::string why;
  if (!can_pin_sdpa_backend(backend, &why)) fail("SDPA backend {}: {}", backend, why);
#if TPROBE_TORCH_AT_LEAST(2, 0)
  SdpaPin pin(backend);
  c10::optional<torch::Tensor> m;
  if (mask.defined()) m = mask;
#if TPROBE_TORCH_AT_LEAST(2, 5)
  return at::scaled_dot_product_attention(q, k, v, m, 0.0, is_causal, 1.0, enable_gqa);
#else
  if (enable_gqa) fail("enable_gqa needs libtorch >= 2.5 (this is {})", torch_version());
  return at::scaled_dot_product_attention(q, k, v, m, 0.0, is_causal, 1.0);
#endif
#else
  (void)q, (void)k, (void)v, (void)mask, (void)is_causal, (void)enable_gqa;
  fail("unreachable");
#endif
}

// The handler's signature changed in libtorch 2.x: process(const Warning&) replaced
// process(SourceLocation, msg, verbatim), and the guard moved from c10::Warning to
// c10::WarningUtils.
struct WarningCapture::Impl : public c10::WarningHandler {
  std::vector<std::string> messages;  // first: outlives the guard that routes warnings here
#if TPROBE_TORCH_AT_LEAST(2, 1)
  void process(const c10::Warning& warning) override { messages.push_back(warning.msg()); }
  c10::WarningUtils::WarningHandlerGuard guard{this};
  c10::WarningUtils::WarnAlways always{true};
#else
  void process(const c10::SourceLocation&, const std::string& msg, const bool) override {
    messages.push_back(msg);
  }
  c10::Warning::WarningHandlerGuard guard{this};
  c10::Warning::WarnAlways always{true};
#endif
};

WarningCapture::WarningCapture() : impl_(std::make_unique<Impl>()) {}
WarningCapture::~WarningCapture() = default;

std::vector<std::string> WarningCapture::take() {
  std::vector<std::string> out;
  out.swap(impl_->messages);
  return out;
}

KernelNames::KernelNames() {
#if TPROBE_HAS_KINETO_EVENTS && TPROBE_HAS_TORCH_CUDA
  try {
    namespace prof = torch::profiler::impl;
    const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
    const std::set<prof::ActivityType> activities{prof::ActivityType::CUDA};
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
    available_ = running_ = true;
  } catch (const std::exception& e) {
    why_not_ = std::string("libtorch's profiler did not start: ") + e.what();
  }
#else
  why_not_ = TPROBE_HAS_TORCH_CUDA
                 ? "this libtorch's Kineto C++ profiler API did not compile at configure time"
                 : "CPU build: no device kernels";
#endif
}

KernelNames::~KernelNames() {
  if (running_) {
    try {
      stop();
    } catch (...) {
    }
  }
}

std::vector<std::string> KernelNames::stop() {
  std::vector<std::string> names;
#if TPROBE_HAS_KINETO_EVENTS && TPROBE_HAS_TORCH_CUDA
  if (!running_) return names;
  running_ = false;
  cuda_synchronize();
  auto result = torch::autograd::profiler::disableProfiler();
  std::set<std::string> seen;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    const std::string name = e.name();
    if (seen.insert(name).second) names.push_back(name);
  }
#endif
  return names;
}

// ---- autograd links ---------------------------------------------------------------------------
// libtorch's dispatcher records, for an op called while grad mode is on, the sequence number the
// next autograd node of the calling thread will get (at::sequence_number::peek()); the node made
// by that op carries it, and Node::operator() runs under a BACKWARD_FUNCTION RecordFunction with
// the same number and the forward thread's id — the pairing torch.profiler's forward/backward
// links are drawn from. The callbacks are global (the autograd engine's device threads run nodes
// too) and read one process-wide observer.
namespace {

std::atomic<core::StepObserver*> g_link_observer{nullptr};

std::unique_ptr<at::ObserverContext> link_start(const at::RecordFunction& fn) {
  core::StepObserver* o = g_link_observer.load(std::memory_order_acquire);
  if (o == nullptr) return nullptr;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    // AccumulateGrad and the graph root carry no sequence number (UINT64_MAX, read as -1): they
    // stay transparent, and their launches take the enclosing entry.
    if (fn.seqNr() >= 0) o->node_enter(fn.forwardThreadId(), fn.seqNr());
  } else if (fn.seqNr() >= 0) {
    o->forward_op(fn.threadId(), fn.seqNr());
  }
  return nullptr;
}

void link_end(const at::RecordFunction& fn, at::ObserverContext*) {
  core::StepObserver* o = g_link_observer.load(std::memory_order_acquire);
  if (o == nullptr) return;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION && fn.seqNr() >= 0) o->node_leave();
}

}  // namespace

AutogradLinks::AutogradLinks(core::StepObserver* observer) {
  if (observer == nullptr || !observer->wants_links()) return;
  // TPROBE_AUTOGRAD_LINKS=off: no RecordFunction callbacks (backward launches then take only the
  // engine's scopes) — the A/B knob that isolates what the links cost a traced step.
  if (const char* e = std::getenv("TPROBE_AUTOGRAD_LINKS"); e != nullptr && std::string(e) == "off")
    return;
  core::StepObserver* expected = nullptr;
  if (!g_link_observer.compare_exchange_strong(expected, observer))
    fail("autograd links: another tracer is already installed in this process");
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(link_start, link_end)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION})
          .needsInputs(false)
          .needsOutputs(false)
          .needsIds(false));
  installed_ = true;
}

AutogradLinks::~AutogradLinks() {
  if (!installed_) return;
  at::removeCallback(handle_);
  g_link_observer.store(nullptr, std::memory_order_release);
}

void note_custom_node() {
  core::StepObserver* o = g_link_observer.load(std::memory_order_acquire);
  if (o == nullptr || !at::GradMode::is_enabled()) return;
  o->forward_op(at::RecordFunction::currentThreadId(),
                static_cast<int64_t>(at::sequence_number::peek()));
}

}  // namespace tprobe::model
