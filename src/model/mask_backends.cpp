// SDPA backend eligibility per layer shape, K/V layout and mask case: each backend pinned alone,
// plus tprobe's windowed flash path; refusals recorded in the library's own words (docs/mask.md).
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/median.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/attention_mask.hpp"
#include "tprobe/model/torch_compat.hpp"
#include "tprobe/model/engine.hpp"

namespace tprobe::model {

// The engine works in engine's request and result types.
using namespace engine;
namespace {

using core::median;

const char* kBackends[] = {"flash", "efficient", "cudnn", "math"};

std::string first_line(const std::string& s) {
  const size_t n = s.find('\n');
  return n == std::string::npos ? s : s.substr(0, n);
}

struct Inputs {
  torch::Tensor q, k, v, mask, grad;
  bool is_causal = false;
  bool enable_gqa = false;
};

// One attempt: the call, timed fwd and fwd+bwd, warnings, kernels and finiteness.
template <typename Fn>
void attempt(MaskBackendRow& row, const MaskBackendsOptions& o, const Inputs& in, Fn&& call) {
  auto clear_grads = [&] {
    for (const torch::Tensor* t : {&in.q, &in.k, &in.v}) {
      if (t->grad().defined()) t->mutable_grad().reset();
    }
  };
  try {
    {
      WarningCapture warnings;
      torch::Tensor out;
      try {
        torch::NoGradGuard no_grad;
        out = call();
        cuda_synchronize();
      } catch (...) {
        std::vector<std::string> w = warnings.take();
        std::set<std::string> seen;
        for (auto& m : w) {
          if (seen.insert(m).second) row.warnings.push_back(m);
        }
        throw;
      }
      std::set<std::string> seen;
      for (auto& m : warnings.take()) {
        if (seen.insert(m).second) row.warnings.push_back(m);
      }
      row.output_finite = out.isfinite().all().item<bool>();
    }
    row.outcome = "accepted";
    {
      KernelNames kernels;
      {
        torch::NoGradGuard no_grad;
        call();
      }
      if (kernels.available()) {
        row.kernels = kernels.stop();
      } else {
        row.kernels_note = kernels.why_not();
      }
    }
    for (int64_t i = 0; i < o.warmup + o.repeats; ++i) {
      torch::NoGradGuard no_grad;
      cuda_synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      call();
      cuda_synchronize();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i >= o.warmup) row.fwd_s.push_back(s);
    }
    row.fwd_median_s = median(row.fwd_s);
    if (o.backward) {
      try {
        for (int64_t i = 0; i < o.warmup + o.repeats; ++i) {
          clear_grads();
          cuda_synchronize();
          const auto t0 = std::chrono::steady_clock::now();
          torch::Tensor out = call();
          out.backward(in.grad);
          cuda_synchronize();
          const double s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (i >= o.warmup) row.fwd_bwd_s.push_back(s);
        }
        row.fwd_bwd_median_s = median(row.fwd_bwd_s);
      } catch (const std::exception& e) {
        row.message = "backward failed: " + first_line(e.what());
      }
      clear_grads();
    }
  } catch (const c10::OutOfMemoryError& e) {
    row.outcome = "error";
    row.message = "out of memory: " + first_line(e.what());
  } catch (const c10::Error& e) {
    row.outcome = "refused";
    row.message = first_line(e.what_without_backtrace());
  } catch (const std::exception& e) {
    row.outcome = "error";
    row.message = first_line(e.what());
  }
}

}  // namespace

MaskBackendsResult run_mask_backends(const MaskBackendsOptions& o) {
  MaskBackendsResult r;
  r.torch_version = torch_version();
  r.dtype = o.dtype;
  if (!TPROBE_HAS_TORCH_CUDA) {
    r.reason = fmt::format(
        "this build's libtorch {} has no CUDA kernels (a CPU build): backend eligibility is a "
        "question about the CUDA SDPA kernels (flash, memory-efficient, cuDNN); run a build of "
        "the cuda preset on a GPU host",
        r.torch_version);
    return r;
  }
  if (!has_sdpa()) {
    r.reason = fmt::format("libtorch {} has no scaled_dot_product_attention (needs >= 2.0)",
                           r.torch_version);
    return r;
  }
  if (!torch::cuda::is_available()) {
    r.reason = "no CUDA device is visible to this process";
    return r;
  }
  if (o.width < 1 || o.batch < 1 || o.repeats < 1 || o.warmup < 0) {
    fail("mask backends: width, batch and repeats must be positive, warm-up non-negative");
  }
  r.supported = true;
  r.device = "cuda:0";
  const torch::Device dev(torch::kCUDA, 0);
  const auto dtype = o.dtype == "fp16" ? torch::kHalf : torch::kBFloat16;
  const auto opts = torch::TensorOptions().dtype(dtype).device(dev);
  const int64_t s = o.width;
  const int64_t padded_len =
      o.padded_length > 0 ? std::min(o.padded_length, s) : std::max<int64_t>(1, s / 2);
  std::vector<int64_t> lengths(static_cast<size_t>(o.batch), s);
  lengths.back() = padded_len;
  torch::manual_seed(0);
  for (const MaskBackendShape& shape : o.shapes) {
    for (const char* kv : {"repeated", "gqa"}) {
      const bool gqa = std::string(kv) == "gqa";
      if (gqa && shape.kv_heads == shape.query_heads) continue;  // nothing to group
      const int64_t kv_heads = gqa ? shape.kv_heads : shape.query_heads;
      Inputs in;
      in.q =
          torch::randn({o.batch, shape.query_heads, s, shape.head_dim}, opts).requires_grad_(true);
      in.k = torch::randn({o.batch, kv_heads, s, shape.head_dim}, opts).requires_grad_(true);
      in.v = torch::randn({o.batch, kv_heads, s, shape.head_dim}, opts).requires_grad_(true);
      in.grad = torch::randn({o.batch, shape.query_heads, s, shape.head_dim}, opts);
      in.enable_gqa = gqa;
      for (const char* mask_case : {"none_is_causal", "explicit_band", "explicit_causal_padded"}) {
        const std::string mc = mask_case;
        Inputs case_in = in;
        case_in.is_causal = mc == "none_is_causal";
        if (mc == "explicit_band") {
          case_in.mask = causal_bool_mask(s, shape.window, dev);
        } else if (mc == "explicit_causal_padded") {
          case_in.mask = attention_bool_mask(s, shape.window, lengths, dev);
        }
        auto base_row = [&] {
          MaskBackendRow row;
          row.layer_type = shape.type;
          row.query_heads = shape.query_heads;
          row.kv_heads = shape.kv_heads;
          row.head_dim = shape.head_dim;
          row.window = shape.window;
          row.kv = kv;
          row.mask_case = mc;
          return row;
        };
        for (const char* backend : kBackends) {
          MaskBackendRow row = base_row();
          row.backend = backend;
          std::string why;
          if (!can_pin_sdpa_backend(backend, &why)) {
            row.outcome = "not_applicable";
            row.message = why;
          } else {
            attempt(row, o, case_in, [&] {
              return sdpa_pinned(backend, case_in.q, case_in.k, case_in.v, case_in.mask,
                                 case_in.is_causal, case_in.enable_gqa);
            });
          }
          r.rows.push_back(std::move(row));
        }
        // tprobe's windowed flash path takes the window as an argument and no mask.
        MaskBackendRow row = base_row();
        row.backend = "flash_window";
        if (mc != "none_is_causal") {
          row.outcome = "not_applicable";
          row.message =
              "tprobe's flash-window path takes no mask tensor: the window is a kernel "
              "argument";
        } else {
          attempt(row, o, case_in, [&] {
            return attention(core::AttentionPath::kFlashWindow, case_in.q, case_in.k, case_in.v,
                             shape.window, &row.resolved);
          });
        }
        r.rows.push_back(std::move(row));
      }
    }
  }
  return r;
}

}  // namespace tprobe::model
