// Version-guarded access to libtorch APIs that exist only in newer releases: the only file with
// TORCH_VERSION guards. What uses them (the attention paths, the step, the tracer's links) lives
// in rooms named for it and asks here first (has_*).
#include "tprobe/model/torch_compat.hpp"

#include <set>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/model/attention.hpp"

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

#if TPROBE_HAS_TORCH_CUDA
namespace {
// The caching allocator's statistics and its cap refuse a device before CUDA's lazy start
// ("Invalid device argument 0: did you call init?", torch 2.11), and a probe may ask for them
// before its first CUDA tensor (the load's peak, the cap). An empty CUDA tensor starts CUDA
// (context, allocator) without allocating: no byte of the figures comes from it.
bool cuda_ready() {
  static const bool ready = [] {
    if (!torch::cuda::is_available()) return false;
    (void)torch::empty({0}, torch::TensorOptions().device(torch::kCUDA, 0));
    return true;
  }();
  return ready;
}
}  // namespace
#endif

void cuda_reset_peak_memory() {
#if TPROBE_HAS_TORCH_CUDA
  if (cuda_ready()) c10::cuda::CUDACachingAllocator::resetPeakStats(0);
#endif
}

int64_t cuda_peak_allocated_bytes() {
#if TPROBE_HAS_TORCH_CUDA
  if (cuda_ready()) {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].peak;
  }
#endif
  return 0;
}

int64_t cuda_peak_reserved_bytes() {
#if TPROBE_HAS_TORCH_CUDA
  if (cuda_ready()) {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0).reserved_bytes[0].peak;
  }
#endif
  return 0;
}

int64_t cuda_allocated_bytes() {
#if TPROBE_HAS_TORCH_CUDA
  if (cuda_ready()) {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].current;
  }
#endif
  return 0;
}

int64_t cuda_reserved_bytes() {
#if TPROBE_HAS_TORCH_CUDA
  if (cuda_ready()) {
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
  if (!cuda_ready()) return;
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
  if (cuda_ready()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

// ---- SDPA and the varlen flash kernel (the attention paths', attention_paths.cpp) ----

bool has_sdpa_enable_gqa() { return TPROBE_TORCH_AT_LEAST(2, 5); }

torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                   const torch::Tensor& mask, bool is_causal, bool enable_gqa) {
#if TPROBE_TORCH_AT_LEAST(2, 0)
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
  fail("scaled_dot_product_attention needs libtorch >= 2.0 (this is {})", torch_version());
#endif
}

bool has_flash_varlen() { return TPROBE_HAS_TORCH_CUDA && TPROBE_TORCH_AT_LEAST(2, 5); }

// The variable-length flash kernel over rows [T, H, D] cut at the cumulative lengths `cum` (int32,
// on q's device; the longest row `max_len`), causal, and with window > 0 windowed:
// window_size_left = W - 1 (k >= q - (W - 1) <=> k > q - W), window_size_right = 0.
torch::Tensor flash_varlen(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& cum, int64_t max_len, int64_t window) {
#if TPROBE_HAS_TORCH_CUDA && TPROBE_TORCH_AT_LEAST(2, 5)
  c10::optional<int64_t> left;
  if (window > 0) left = window - 1;
  auto out = at::_flash_attention_forward(q, k, v, cum, cum, max_len, max_len, 0.0,
                                          /*is_causal=*/true, /*return_debug_mask=*/false, 1.0,
                                          left, c10::optional<int64_t>(0));
  return std::get<0>(out);
#else
  (void)q, (void)k, (void)v, (void)cum, (void)max_len, (void)window;
  fail("the varlen flash kernel needs a CUDA build of libtorch >= 2.5 (this is {})",
       torch_version());
#endif
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
#endif
  return sdpa(q, k, v, mask, is_causal, enable_gqa);
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

}  // namespace tprobe::model
