// Tensor-level attention entry points and the grouped GEMM. The paths are attention_paths.cpp's;
// the calls that exist only in some libtorch releases (sdpa, the varlen flash kernel, the grouped
// GEMM, bmm into fp32, the fused RMSNorm) are torch_compat.cpp's, the one file with version
// guards.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tprobe/model/torch_compat.hpp"

namespace tprobe::model {

// q [B, Hq, S, D], k and v [B, Hkv, S, D] (Hq a multiple of Hkv, contiguous head groups: query
// head h reads kv head h / (Hq/Hkv)); causal, plus a sliding window of `window` keys including
// the query itself when window > 0 (allowed(q,k) ⇔ k ≤ q ∧ k > q − window). Scale 1.0.
// Returns [B, Hq, S, D]; `resolved` receives what actually ran, e.g. "sdpa(is_causal,gqa)".
// `lengths` (size B, or empty = no padding): row b's keys at positions >= lengths[b] are
// padding and never attended to (HF's padding mask); the output at padded query positions is
// unspecified (eager/sdpa: what HF computes; flash-window/blockwise: zeros or is_causal values).
// `mask` (eager and sdpa without padding; undefined: built here): the bool attend-mask
// [1 or B, 1, S, S] of the rule above, built once per step by the caller, used where the path
// materialises one (sdpa keeps is_causal where HF skips the mask).
torch::Tensor attention(core::AttentionPath path, const torch::Tensor& q, const torch::Tensor& k,
                        const torch::Tensor& v, int64_t window, std::string* resolved,
                        const std::vector<int64_t>& lengths = {},
                        const torch::Tensor& mask = {});

// Right-padded batches as packed rows: the paths for which the engine drops padded positions
// from the whole layer stack (flash-window on CUDA, blockwise anywhere) instead of carrying them.
bool packs_padding(core::AttentionPath path, const torch::Device& device);

// Attention over packed rows: q [1, Hq, T, D], k and v [1, Hkv, T, D] hold the rows of `lengths`
// one after another (T = their sum); each row is causal (and windowed) within itself and sees no
// other row. flash-window: the variable-length flash kernel over the rows' cumulative lengths
// (head_dim <= 256), the blockwise path row by row above that; blockwise: row by row. Returns
// [1, Hq, T, D] with token-major storage. Throws for a path that does not pack.
torch::Tensor packed_attention(core::AttentionPath path, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, int64_t window,
                               std::string* resolved, const std::vector<int64_t>& lengths);

// SDPA as the paths call it (scale 1.0, no dropout; `mask` undefined: none). Only call when
// has_sdpa() (and has_sdpa_enable_gqa() for enable_gqa); throws tprobe::Error otherwise.
torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                   const torch::Tensor& mask, bool is_causal, bool enable_gqa = false);
// The variable-length flash kernel over rows [T, H, D] cut at the cumulative lengths `cum` (int32,
// on q's device; the longest row `max_len`), causal, and with window > 0 windowed. Only call when
// has_flash_varlen(); throws tprobe::Error otherwise.
torch::Tensor flash_varlen(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& cum, int64_t max_len, int64_t window);
// HF's repeat_kv: [B, Hkv, S, D] -> [B, Hkv*n_rep, S, D], each kv head repeated n_rep times in
// place.
torch::Tensor repeat_kv(const torch::Tensor& x, int64_t n_rep);

// Boolean attend-mask [1, 1, S, S] (true = attend) for the rule above.
torch::Tensor causal_bool_mask(int64_t seq_len, int64_t window, const torch::Device& device);
// The same with HF's padding mask on keys: [B, 1, S, S], allowed ∧ k < lengths[b].
torch::Tensor padded_bool_mask(int64_t seq_len, int64_t window, const std::vector<int64_t>& lengths,
                               const torch::Device& device);
// Whether any row is shorter than seq_len (an empty list: none).
bool has_padding(const std::vector<int64_t>& lengths, int64_t seq_len);

// SDPA with only `backend` enabled ("flash",
// "efficient", "cudnn", "math"), every other backend switched off for the call and the global
// flags restored after. `mask` undefined: none. Refusals surface as the library's own exception;
// throws tprobe::Error when the linked libtorch cannot pin `backend` at all (e.g. < 2.0).
torch::Tensor sdpa_pinned(const std::string& backend, const torch::Tensor& q,
                          const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& mask, bool is_causal, bool enable_gqa);
// Whether this libtorch can pin `backend` (names above); when not, `why` says why.
bool can_pin_sdpa_backend(const std::string& backend, std::string* why);

// Collects the library's warnings (TORCH_WARN, once-only warnings included) raised while it
// lives, instead of printing them: SDPA explains each backend it refuses this way.
class WarningCapture {
 public:
  WarningCapture();
  ~WarningCapture();
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;
  std::vector<std::string> take();  // the messages so far, oldest first; clears them

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Device kernel names launched while it lives (libtorch's Kineto profiler, CUDA activities).
// available() false, with why_not(), where this build cannot collect them.
class KernelNames {
 public:
  KernelNames();
  ~KernelNames();
  KernelNames(const KernelNames&) = delete;
  KernelNames& operator=(const KernelNames&) = delete;
  bool available() const { return available_; }
  const std::string& why_not() const { return why_not_; }
  std::vector<std::string> stop();  // distinct names in first-launch order

 private:
  bool available_ = false;
  bool running_ = false;
  std::string why_not_;
};
// a [N, M, K] · b [N, K, P] as float32 (fp64 inputs stay fp64). For bf16/fp16 inputs the GEMM
// accumulates in fp32 and, where libtorch has bmm's out_dtype (CUDA, >= 2.9), writes fp32
// without rounding the product to the input dtype; elsewhere the product is rounded and then
// widened (has_bmm_fp32_out() says which). The blockwise attention's scores go through here.
torch::Tensor bmm_fp32_out(const torch::Tensor& a, const torch::Tensor& b);
bool has_bmm_fp32_out(const torch::Tensor& like);

// a [M, K] with rows sorted by group, b [G, K, N], `offs` int32 [G] the cumulative row end of each
// group: out[rows of g] = a[rows of g] · b[g]. Needs CUDA and libtorch >= 2.8.
torch::Tensor grouped_mm(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& offs);

// RMSNorm over the last dimension through libtorch's own at::rms_norm: x · rsqrt(mean(x²) + eps)
// · weight, accumulated in fp32 and rounded once to x's dtype, as the reference formula does; on
// CUDA builds of libtorch >= 2.9 one fused kernel each way instead of the formula's chain of
// elementwise kernels. weight may be undefined (no scale). Only call when has_fused_rms_norm().
torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);
bool has_fused_rms_norm();

}  // namespace tprobe::model
