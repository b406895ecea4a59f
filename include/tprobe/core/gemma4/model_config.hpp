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

// The largest value tprobe accepts for each size a config.json gives (docs/inspect.md#limits).
// Past them a number is a typo or an attack, not a model: every loop and allocation a config
// sizes stays bounded. Each is the largest public decoder's value with a wide margin (the
// figures are the published configs' as of 2025: Llama-3.1-405B, DeepSeek-V3, Qwen3-235B-A22B,
// Kimi-K2, Gemma-3/4, GPT-OSS):
struct ConfigLimits {
  // num_hidden_layers: the largest have 126 (Llama-3.1-405B), 94 (Qwen3-235B), 62 (Gemma-3-27B).
  static constexpr int64_t kLayers = 1024;
  // hidden_size: 16,384 (Llama-3.1-405B), 7,168 (DeepSeek-V3).
  static constexpr int64_t kHidden = 131072;
  // intermediate_size and moe_intermediate_size: 53,248 (Llama-3.1-405B's dense MLP).
  static constexpr int64_t kIntermediate = 1048576;
  // num_attention_heads and every kv-head count: 128 (Llama-3.1-405B, DeepSeek-V3).
  static constexpr int64_t kHeads = 1024;
  // head_dim, global_head_dim and per-layer head_dim: 512 (Gemma-4's full layers), 256 usually.
  static constexpr int64_t kHeadDim = 4096;
  // num_experts: 384 (Kimi-K2), 256 (DeepSeek-V3), 128 (Gemma-4-26B-A4B, Qwen3).
  static constexpr int64_t kExperts = 16384;
  // top_k_experts: 8 (DeepSeek-V3, Kimi-K2, Gemma-4-26B-A4B); also at most num_experts.
  static constexpr int64_t kTopK = 1024;
  // vocab_size: 262,144 (Gemma-3/4), 256,000 (Gemma-2), 201,088 (GPT-OSS).
  static constexpr int64_t kVocab = 4194304;
  // sliding_window: 4,096 (Mistral), 1,024 (Gemma-4); the limit is the widest sequence tprobe
  // takes (2^31 - 1 tokens), beyond which a window means nothing.
  static constexpr int64_t kSlidingWindow = 2147483647;
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
