// The engine's attention masks as tensors, and the vectorised check of any bool mask against the
// reference band (docs/mask.md). Torch-level; probes reach it through mask_check.hpp.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "tprobe/model/mask_check.hpp"

namespace tprobe::model {

// Bool attend-mask (true = attend) for right-padded rows: causal_bool_mask(seq_len, window) and
// keys at or past each row's real length masked, as Hugging Face's padding mask does (keys only;
// padded query rows keep the causal/window rule). [B, 1, S, S]; lengths empty: [1, 1, S, S].
torch::Tensor attention_bool_mask(int64_t seq_len, int64_t window,
                                  const std::vector<int64_t>& lengths, const torch::Device& device);

// Verifies `mask` ([1 or B, 1, S, S] bool) row by row, `row_block` query rows at a time: row i of
// batch row b must allow exactly the keys [max(0, i − window + 1), min(i, len_b − 1)] (window 0:
// from 0). Per row it compares the count, the number of runs of allowed keys (must be one) and
// both ends, so no S×S reference is built; the first few bad rows are classified.
MaskTensorCheck check_mask_tensor(const torch::Tensor& mask, int64_t window,
                                  const std::vector<int64_t>& lengths, int64_t row_block = 2048);

}  // namespace tprobe::model
