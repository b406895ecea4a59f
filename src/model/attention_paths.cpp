// The attention paths of the engine (core/step/attention_path.hpp's registry names them and says
// what each needs): HF's eager and sdpa as transformers 5.17 calls them, SDPA with a mask on every
// layer, the windowed varlen flash path and the blockwise-GEMM path, their packed-rows form for
// padded batches, and the masks. No version guard here: what exists only in some libtorch
// releases (SDPA, enable_gqa, the varlen flash kernel) is reached through torch_compat.hpp's
// has_* / call pairs.
#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdlib>
#include <limits>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/step/knobs.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/blockwise_attention.hpp"
#include "tprobe/model/torch_compat.hpp"

namespace tprobe::model {

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

// An explicit bool mask on every layer, as a harness that builds its own mask does.
torch::Tensor sdpa_masked_attention(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, int64_t window, std::string* resolved) {
  const int64_t n_rep = q.size(1) / k.size(1);
  if (resolved) *resolved = "sdpa(bool_mask,repeat_kv)";
  torch::Tensor mask = causal_bool_mask(q.size(2), window, q.device());
  return sdpa(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask, false);
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
    return sdpa(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), padded, false);
  }
  const bool mask_skipped = window <= 0 || seq < window;
  if (mask_skipped) {
    const bool causal = seq > 1;
    if (has_sdpa_enable_gqa() && n_rep > 1 && q.size(3) <= core::kFusedAttentionMaxHeadDim) {
      if (resolved) *resolved = causal ? "sdpa(is_causal,enable_gqa)" : "sdpa(no_mask,enable_gqa)";
      return sdpa(q, k, v, {}, causal, /*enable_gqa=*/true);
    }
    if (resolved) *resolved = n_rep > 1 ? "sdpa(is_causal,repeat_kv)" : "sdpa(is_causal)";
    return sdpa(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), {}, causal);
  }
  if (!mask.defined()) return sdpa_masked_attention(q, k, v, window, resolved);
  if (resolved) *resolved = "sdpa(bool_mask,repeat_kv)";
  return sdpa(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask, false);
}

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

// TPROBE_FLASH_WINDOW_GLOBAL=sdpa: the pre-blockwise path for head_dim > 256, for A/B runs.
bool flash_window_global_on_sdpa() {
  const char* e = std::getenv("TPROBE_FLASH_WINDOW_GLOBAL");
  if (e == nullptr || *e == '\0' || std::string(e) == "blockwise") return false;
  if (std::string(e) == "sdpa") return true;
  fail("TPROBE_FLASH_WINDOW_GLOBAL='{}': expected blockwise or sdpa", e);
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
    return sdpa(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), {}, true);
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
      if (has_sdpa()) return sdpa_attention(q, k, v, window, resolved, lengths, mask);
      break;
    case core::AttentionPath::kSdpaMasked:
      if (has_sdpa()) return sdpa_masked_attention(q, k, v, window, resolved);
      break;
    case core::AttentionPath::kFlashWindow:
      if (has_flash_varlen() && q.is_cuda()) {
        return flash_window_attention(q, k, v, window, resolved, lengths);
      }
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
  return has_flash_varlen() && device.is_cuda();
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
  if (path == core::AttentionPath::kFlashWindow && q.size(3) <= core::kFusedAttentionMaxHeadDim) {
    int64_t longest = 0;
    torch::Tensor cum = cumulative_lengths(lengths, q.device(), &longest);
    auto rows = [](const torch::Tensor& t) { return t.squeeze(0).transpose(0, 1).contiguous(); };
    if (resolved) *resolved = flash_varlen_name(window, ",packed rows");
    torch::Tensor out = flash_varlen(rows(q), rows(k), rows(v), cum, longest, window);
    return out.unsqueeze(0).transpose(1, 2);  // [T, H, D] -> [1, H, T, D]
  }
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

}  // namespace tprobe::model
