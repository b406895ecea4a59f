// The attention paths a Gemma-4 LoRA step can take, and the attention registry: one entry per path
// holding every fact a probe, the FLOP counter, the mask geometry, the levers and the engine's
// checks need about it. Adding a path is one entry here plus its engine code
// (src/model/attention_paths.cpp): the FLOP counter and the mask geometry read the entry's rules,
// the engine's checks its requirement, and every probe's --attn its name and summary
// (tests/core/knobs_test.cpp, "A hypothetical attention path").
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

// What running a value of a knob needs (the engine's checks hold it against core::EngineFacts).
struct Requirement {
  int torch_major = 0, torch_minor = 0;  // libtorch at least (0.0: any)
  bool cuda_build = false;   // a CUDA build of libtorch
  bool cuda_device = false;  // the cuda device
  bool half_dtype = false;   // bf16 (the kernels take no fp32)
  const char* api = "";      // what it calls, for the refusal ("windowed varlen flash")
};

// How many query-key pairs a path computes on one kind of layer (core/cost/flops.cpp).
enum class PairRule {
  kDense,     // every pair of the width: an explicit mask, or no skip at all
  kCausal,    // the causal half (is_causal), padding included
  kIntended,  // causal and windowed over each row's real tokens (packed rows, windowed kernels)
  kHfSdpa,    // transformers' sdpa: causal while unpadded and (sliding layers) narrower than the
              // window, dense otherwise
};
// How a path computes one layer's mask (core/mask/mask_geometry.cpp).
enum class MaskPlanKind {
  kHfSdpa,       // transformers 5.17's sdpa: is_causal where it may, else a bool mask [B,1,S,S]
  kSdpa,         // tprobe's sdpa: the same calls, rows left without a key on sliding layers
                 // un-masked (as transformers does only for torch < 2.5)
  kEager,        // an additive mask, always materialised
  kMasked,       // SDPA with a bool mask [B,1,S,S] on every layer (no is_causal skip)
  kFlashVarlen,  // windowed varlen flash (window and lengths as arguments); heads wider than flash
                 // takes on the blockwise GEMMs
  kBlockwise,    // blockwise GEMMs on every layer, window and lengths as arguments
};

struct AttentionPathInfo {
  AttentionPath path = AttentionPath::kEager;
  const char* name = "";
  const char* summary = "";  // the help text's words for it
  bool engine = true;        // the libtorch engine runs it (parity, profile, mask's rules)
  Requirement needs;      // what the engine needs to run it
  PairRule sliding_pairs = PairRule::kDense, full_pairs = PairRule::kDense;
  MaskPlanKind mask = MaskPlanKind::kEager;
  // A padded batch runs as the rows' real tokens, packed (where packs_requires holds).
  bool packs_padding = false;
  Requirement packs_requires;
  // A lever's alternative (`levers`): never the slow reference; on any device or one only.
  bool lever = true;
  const char* lever_device = "";  // "", "cpu" or "cuda"
};
// Fused attention kernels (flash, cuDNN, memory-efficient) take head_dim up to this; Gemma-4's
// full layers have 512. HF's sdpa passes enable_gqa only up to it (transformers 5.17).
constexpr int64_t kFusedAttentionMaxHeadDim = 256;
// Query positions per block row of the blockwise-GEMM attention (512 and 1024 ran equally fast on
// the H200, 512 holds half the memory: docs/global-attention.md).
constexpr int64_t kBlockwiseBlock = 512;

// In AttentionPath's order.
const std::vector<AttentionPathInfo>& attention_registry();
const AttentionPathInfo& attention_info(AttentionPath path);
const char* to_string(AttentionPath path);  // the entry's name
std::optional<AttentionPath> parse_attention_path(std::string_view text);
// The same, throwing UsageError that names `what` (e.g. "--attn") and the known names.
AttentionPath attention_path_from_name(std::string_view text, std::string_view what);
// Which probes take a path: every path has a FLOP rule (flops); engine paths run.
enum class AttentionUse { kCost, kEngine };
std::vector<std::string> attention_names(AttentionUse use);
// The same as attention_path_from_name, refusing a path `use` does not take.
AttentionPath attention_path_for(std::string_view text, AttentionUse use, std::string_view what);

// Whether the path runs a padded batch as its rows' real tokens on `device` (cpu | cuda): its entry
// packs and the packing requirement's device holds (the engine checks the rest).
bool path_packs_on(AttentionPath path, const std::string& device);
// The first engine path that packs on `device`, if any (flash-window on CUDA, blockwise on the CPU).
std::optional<AttentionPath> packing_path(const std::string& device);

// Whether the path computes the sliding layers' attention dense (every key up to the query, the
// window applied by a mask or not at all): their attention core then grows with w², as the full
// layers' always does; windowed paths (flash-window, blockwise) grow with w·window. From the
// entry's sliding pair rule.
bool sliding_layers_dense(AttentionPath path);

}  // namespace tprobe::core
