// The attention paths a Gemma-4 LoRA step can take: one name for each, shared by the FLOP counter
// (what "performed" means) and the libtorch engine (which kernels it calls).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tprobe::core {

// Every layer is causal; sliding layers also see only the last `sliding_window` keys.
//  kEager        HF "eager": scores materialised in full with an additive mask, repeated KV
//                heads, fp32 softmax. Performs the dense n×n product on every layer.
//  kSdpa         HF "sdpa" as transformers 5.17 calls it: is_causal (no mask) on full layers and
//                on sliding layers while the sequence is shorter than the window, an explicit
//                bool mask (with repeated KV heads) where HF materialises one. Needs libtorch >= 2.
//  kSdpaMasked   SDPA with an explicit bool mask on every layer, as a harness that builds its own
//                mask does: a dense n×n kernel everywhere (no flash, no causal skip).
//  kFlashWindow  sliding layers on the variable-length flash kernel with a left window (no mask);
//                full layers (head_dim 512, which no fused kernel takes) on the blockwise-GEMM
//                attention, skipping at block-row granularity (docs/global-attention.md;
//                TPROBE_FLASH_WINDOW_GLOBAL=sdpa puts them back on is_causal SDPA). CUDA builds of
//                libtorch >= 2.5, bf16/fp16 only.
//  kBlockwise    every layer on the blockwise-GEMM attention (windowed on sliding layers): causal
//                skip at block-row granularity, the window's keys only. Any device and dtype.
enum class AttentionPath { kEager, kSdpa, kSdpaMasked, kFlashWindow, kBlockwise };

// "eager", "sdpa", "sdpa-masked", "flash-window", "blockwise"
const char* to_string(AttentionPath path);
std::optional<AttentionPath> parse_attention_path(std::string_view text);
// The same, throwing UsageError that names `what` (the user-facing name, e.g. "--attn") and the
// known names for anything else.
AttentionPath attention_path_from_name(std::string_view text, std::string_view what);
// The attention registry: one entry per path holding every fact a probe, the FLOP counter, the
// mask geometry and the engine need about it. Adding a path = one entry here plus its engine code
// (src/model/torch_compat.cpp) and its FLOP rule (src/core/cost/flops.cpp).
struct AttentionPathInfo {
  AttentionPath path = AttentionPath::kEager;
  const char* name = "";
  const char* summary = "";  // the help text's words for it
  bool engine = true;        // the libtorch engine runs it (parity, profile, mask's rules)
  bool cuda_only = false;    // needs a CUDA device
  bool half_only = false;    // bf16/fp16 only
  int torch_major = 0, torch_minor = 0;  // the libtorch it needs at least (0.0: any)
  bool sliding_dense = false;   // sliding layers computed dense (attention grows with w²)
  bool packs_padding = false;   // a padded batch runs as the rows' real tokens, packed
  bool packs_padding_cuda_only = false;
};
// Fused attention kernels (flash, cuDNN, memory-efficient) take head_dim up to this; Gemma-4's
// full layers have 512. HF's sdpa passes enable_gqa only up to it (transformers 5.17).
constexpr int64_t kFusedAttentionMaxHeadDim = 256;
// Query positions per block row of the blockwise-GEMM attention (512 and 1024 ran equally fast on
// the H200, 512 holds half the memory: docs/global-attention.md).
constexpr int64_t kBlockwiseBlock = 512;

const std::vector<AttentionPathInfo>& attention_registry();
const AttentionPathInfo& attention_info(AttentionPath path);
// Which probes take a path: every path has a FLOP rule (flops); engine paths run (parity,
// profile, and mask's rules beside hf-sdpa).
enum class AttentionUse { kCost, kEngine };
std::vector<std::string> attention_names(AttentionUse use);
// "--attn" help: each name of `use` with its summary.
std::string attention_help(AttentionUse use);
// The same as attention_path_from_name, refusing a path `use` does not take.
AttentionPath attention_path_for(std::string_view text, AttentionUse use, std::string_view what);

// Whether the path computes the sliding layers' attention dense (every key up to the query, the
// window applied by a mask or not at all): their attention core then grows with w², as the full
// layers' always does; windowed paths (flash-window, blockwise) grow with w·window.
bool sliding_layers_dense(AttentionPath path);
// The names above, in enum order (for CLI checks and help text).
std::vector<std::string> attention_path_names();

}  // namespace tprobe::core
