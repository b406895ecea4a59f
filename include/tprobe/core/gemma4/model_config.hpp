// The Gemma-4 text-decoder configuration as tprobe uses it, and the embedded model configs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/layer_type.hpp"

namespace tprobe::core {

enum class RopeType { kDefault, kProportional };

struct RopeParams {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;  // only used by kProportional
};

// Per-layer overrides as HF's per_layer_config carries them (docs/gemma4-model.md#config).
struct LayerOverride {
  std::optional<int64_t> head_dim;
  std::optional<int64_t> num_key_value_heads;
};

// Resolved attention geometry of one decoder layer.
struct LayerGeometry {
  LayerType type = LayerType::kSliding;
  int64_t head_dim = 0;
  int64_t num_kv_heads = 0;
  bool has_v_proj = true;  // false on key=value full layers: V comes from the raw k_proj output
};

struct ModelConfig {
  std::string name;  // embedded name or the config.json path it came from

  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t intermediate_size = 0;    // dense MLP width
  int64_t num_attention_heads = 0;
  int64_t num_kv_heads = 0;         // sliding layers
  int64_t head_dim = 0;             // sliding layers
  int64_t global_head_dim = 0;      // full layers (0: same as head_dim)
  int64_t num_global_kv_heads = 0;  // full layers when attention_k_eq_v (0: num_kv_heads)
  bool attention_k_eq_v = false;
  std::vector<LayerType> layer_types;
  std::map<int64_t, LayerOverride> per_layer;  // explicit per_layer_config entries
  int64_t sliding_window = 0;
  RopeParams rope_sliding;
  RopeParams rope_full;
  double rms_norm_eps = 1e-6;
  std::string hidden_activation = "gelu_pytorch_tanh";
  int64_t vocab_size = 0;
  bool tie_word_embeddings = true;
  std::optional<double> final_logit_softcapping;
  bool enable_moe_block = false;
  int64_t num_experts = 0;
  int64_t top_k_experts = 0;
  int64_t moe_intermediate_size = 0;
  bool attention_bias = false;
  int64_t hidden_size_per_layer_input = 0;  // PLE width; tprobe supports only 0
  int64_t num_kv_shared_layers = 0;         // tprobe supports only 0
  int64_t pad_token_id = 0;
  std::string dtype = "bfloat16";           // checkpoint dtype

  // Geometry of layer i after applying global_* fields and per_layer overrides.
  LayerGeometry layer(int64_t i) const;
  int64_t count_layers(LayerType type) const;
};

// Names accepted by --model: "gemma4-26b-a4b" (published shapes), "gemma4-tiny" (CPU-sized).
std::vector<std::string> embedded_model_names();
// Throws tprobe::Error listing the known names when `name` is not one of them.
ModelConfig embedded_model(const std::string& name);

}  // namespace tprobe::core
