// Causal (optionally windowed) GQA attention built from batched GEMMs, one block row of scores at
// a time, with a backward that recomputes each block row's probabilities instead of saving them
// (docs/global-attention.md). Runs on any device and float dtype; on CUDA it is what
// flash-window uses for head_dim > 256, which no fused kernel accepts.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "tprobe/core/step/attention_path.hpp"

namespace tprobe::model {

// Query positions per block when the caller does not choose: on the H200 at B=2, N=16,384 blocks
// of 512 and 1024 ran equally fast and 512 holds half the memory (docs/global-attention.md).
constexpr int64_t kBlockwiseDefaultBlock = core::kBlockwiseBlock;

// How the backward gets a block row's probabilities back. Every block row holds all the keys its
// queries see, so a softmax over it again is exact; kLogSumExp saves the fp32 per-row
// log-sum-exp L [B·Hkv, G, S] in the forward and takes exp(S − L) instead.
enum class BlockwiseRecompute { kSoftmax, kLogSumExp };

struct BlockwiseAttentionOptions {
  int64_t block = kBlockwiseDefaultBlock;  // query positions per block row, >= 1
  int64_t window = 0;                      // > 0: key k allowed for query q iff q - window < k <= q
  // Right padding: empty, or one length per batch row (0 <= length <= S). Keys at or beyond a
  // row's length are masked; queries at or beyond it give zero output and receive no gradient.
  std::vector<int64_t> lengths;
  BlockwiseRecompute recompute = BlockwiseRecompute::kSoftmax;
};

// q [B, Hq, S, D], k and v [B, Hkv, S, D], Hq a multiple of Hkv (query head h reads kv head
// h / (Hq / Hkv)), scale 1.0, any strides. Differentiable in q, k and v (separate dK and dV even
// when the caller passes one tensor twice). Returns [B, Hq, S, D] whose storage is [B, S, Hq, D],
// so the caller's transpose(1, 2) back to token-major order is free. Throws tprobe::Error on
// shapes, dtypes or options it cannot run.
torch::Tensor blockwise_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const BlockwiseAttentionOptions& options);

}  // namespace tprobe::model
