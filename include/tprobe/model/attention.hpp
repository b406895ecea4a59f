// Tensor-level attention entry points and the grouped GEMM. Implemented in torch_compat.cpp, the one
// file with libtorch version guards (sdpa and the flash kernels exist only in libtorch 2.x).
#pragma once

#include <torch/torch.h>

#include <cstdint>
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
// unspecified (eager/sdpa: what HF computes; flash-window: zeros or is_causal values).
torch::Tensor attention(AttnImpl impl, const torch::Tensor& q, const torch::Tensor& k,
                        const torch::Tensor& v, int64_t window, std::string* resolved,
                        const std::vector<int64_t>& lengths = {});

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

// a [M, K] with rows sorted by group, b [G, K, N], `offs` int32 [G] the cumulative row end of each
// group: out[rows of g] = a[rows of g] · b[g]. Only call when has_grouped_mm().
torch::Tensor grouped_mm(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& offs);

}  // namespace tprobe::model
