// LoRA target discovery: which linear modules a PEFT-style target list adapts, per layer type,
// how many parameters that trains, and which targets are absent on some layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::core {

// The LoRA target names tprobe knows are the decoder layer's linear modules,
// linear_module_names() in gemma4_tensors.hpp. All seven are the default, as the post-mortem
// adapted them (docs/findings.md#lora-targets): "q_proj,k_proj,v_proj,o_proj,gate_proj,...".
std::string default_lora_targets();

// "q_proj, k_proj" -> {"q_proj", "k_proj"} (duplicates dropped); throws UsageError naming
// `what` (the user-facing name of the list, e.g. "--targets") on an empty list or entry.
std::vector<std::string> parse_target_list(const std::string& csv,
                                           const std::string& what = "target list");

// Throws UsageError naming `what` for a target that is not a linear-module name.
void check_known_targets(const std::vector<std::string>& targets,
                         const std::string& what = "target list");

// One adapted linear module: A is [rank, in], B is [out, rank].
struct LoraModule {
  std::string name;    // module path, e.g. "model.language_model.layers.5.self_attn.q_proj"
  std::string target;  // the target entry that matched it
  int64_t layer = -1;
  LayerType layer_type = LayerType::kSliding;
  int64_t in_features = 0;
  int64_t out_features = 0;
  int64_t params = 0;  // rank * (in + out)
};

struct LoraTargetSummary {
  std::string target;
  int64_t modules = 0;
  int64_t sliding_modules = 0;
  int64_t full_modules = 0;
  int64_t trainable_params = 0;
  std::vector<int64_t> absent_layers;  // decoder layers where this target matched nothing
};

// A target that is absent on some (or all) layers, with what that means.
struct LoraMissing {
  std::string target;
  std::vector<int64_t> layers;
  std::string layer_types;  // "full_attention", "sliding_attention", or "mixed"
  std::string message;
};

struct LoraPlan {
  int64_t rank = 0;
  std::vector<std::string> targets;
  std::vector<LoraModule> modules;            // in tensor-name order
  std::vector<LoraTargetSummary> per_target;  // in target order
  std::vector<LoraMissing> missing;
  int64_t trainable_params = 0;
  int64_t sliding_modules = 0;
  int64_t full_modules = 0;
};

// Matching follows PEFT's target_modules rule for a list: a module matches a target when its
// name equals the target or ends with "." + target. Modules are the text decoder's linear layers
// (2-D "<prefix>layers.N.<path>.weight" tensors); the fused 3-D expert parameters and the
// embedding are not linear modules, and a target that only names them is reported missing with
// the reason. The vision/audio towers are outside the text decoder and never matched; tensors of
// layers beyond config.num_layers are skipped (cross_check reports them).
LoraPlan plan_lora(const ModelConfig& config, const std::vector<TensorMeta>& tensors,
                   const std::string& prefix, const std::vector<std::string>& targets,
                   int64_t rank);

}  // namespace tprobe::core
