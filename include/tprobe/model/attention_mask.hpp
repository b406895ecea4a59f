// The engine's attention masks as tensors, and the vectorised check of any bool mask against the
// reference band (docs/mask.md). Torch-level; probes reach it via engine/mask_check_request.hpp.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "tprobe/engine/mask_check_request.hpp"

namespace tprobe::model {

// The engine's bool attend-mask (true = attend): causal_bool_mask(seq_len, window) without
// lengths ([1, 1, S, S]), padded_bool_mask with them — keys at or past each row's real length
// masked, as Hugging Face's padding mask does (keys only; padded query rows keep the
// causal/window rule), [B, 1, S, S].
torch::Tensor attention_bool_mask(int64_t seq_len, int64_t window,
                                  const std::vector<int64_t>& lengths, const torch::Device& device);

// How check_mask_tensor reads each block of rows: kBytes scans the host bytes of each row in from
// both ends (CPU masks; about one read of the mask), kTensor runs three reductions on the mask's
// own device (count, first and last allowed key) and copies R values per statistic back; kAuto
// takes kBytes on the CPU and kTensor elsewhere. Both feed the same per-row decision.
enum class MaskScan { kAuto, kBytes, kTensor };

// Verifies `mask` ([1 or B, 1, S, S] bool) row by row, `row_block` query rows at a time: row i of
// batch row b must allow exactly the keys [max(0, i - window + 1), min(i, len_b - 1)] (window 0:
// from 0). A row passes iff it allows hi - lo + 1 keys, the first at lo and the last at hi, so no
// S x S reference is built; the first few bad rows are classified.
engine::MaskTensorCheck check_mask_tensor(const torch::Tensor& mask, int64_t window,
                                             const std::vector<int64_t>& lengths,
                                             int64_t row_block = 2048,
                                             MaskScan scan = MaskScan::kAuto);

}  // namespace tprobe::model
