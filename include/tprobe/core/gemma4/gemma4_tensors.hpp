// The Gemma-4 text decoder's checkpoint tensor names and shapes, derived from a ModelConfig
// (gemma4-architecture.md §3), and the config-vs-checkpoint cross-check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::core {

// Prefix of the text decoder: multimodal checkpoints (Gemma4ForConditionalGeneration) and
// text-only conversions (Gemma4ForCausalLM).
inline constexpr const char* kMultimodalTextPrefix = "model.language_model.";
inline constexpr const char* kTextOnlyPrefix = "model.";

// Every tensor the text decoder loads, in a stable order (embedding, final norm, then layer by
// layer), with the config's dtype. lm_head is not listed (tied). Per layer: q/k/(v)/o_proj,
// q_norm, k_norm, the seven norms, dense mlp, router.{proj.weight,scale,per_expert_scale},
// experts.{gate_up_proj,down_proj} when enable_moe_block, and layer_scalar.
std::vector<TensorMeta> expected_text_tensors(const ModelConfig& config,
                                              const std::string& prefix = kMultimodalTextPrefix);

// The decoder prefix a set of tensor names uses: "model.language_model." if any name starts with
// it, else "model.". Throws if neither holds a "layers." tensor.
std::string detect_text_prefix(const std::vector<std::string>& names);

// One disagreement between the config and the checkpoint.
struct Disagreement {
  std::string tensor;   // full tensor name
  std::string field;    // the config field that disagrees (e.g. "global_head_dim"), or ""
  std::string message;  // one sentence naming expected and found
};

// Compares the tensors of a checkpoint (name, dtype, shape) with what `config` implies: head
// dims via q_norm length, kv heads via k_proj rows / head_dim, presence of v_proj, expert shapes,
// every other expected shape, missing and unexpected text-decoder tensors (per-layer input
// embedding tensors are reported as such). Non-text tensors (outside the prefix and not
// lm_head.weight) are ignored. Empty result = they agree.
std::vector<Disagreement> cross_check(const ModelConfig& config,
                                      const std::vector<TensorMeta>& tensors,
                                      const std::string& prefix);

}  // namespace tprobe::core
