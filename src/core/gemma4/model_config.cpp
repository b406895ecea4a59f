// Layer geometry resolution and the embedded Gemma-4 configs.
#include "tprobe/core/gemma4/model_config.hpp"

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

LayerGeometry ModelConfig::layer(int64_t i) const {
  if (i < 0 || i >= static_cast<int64_t>(layer_types.size())) {
    fail("model '{}': layer index {} out of range (0..{})", name, i,
         static_cast<int64_t>(layer_types.size()) - 1);
  }
  LayerGeometry g;
  g.type = layer_types[static_cast<size_t>(i)];
  g.head_dim = head_dim;
  g.num_kv_heads = num_kv_heads;
  g.has_v_proj = true;
  if (g.type == LayerType::kFull) {
    if (global_head_dim > 0) g.head_dim = global_head_dim;
    if (attention_k_eq_v) {
      g.has_v_proj = false;
      if (num_global_kv_heads > 0) g.num_kv_heads = num_global_kv_heads;
    }
  }
  auto it = per_layer.find(i);
  if (it != per_layer.end()) {
    if (it->second.head_dim) g.head_dim = *it->second.head_dim;
    if (it->second.num_key_value_heads) g.num_kv_heads = *it->second.num_key_value_heads;
  }
  return g;
}

int64_t ModelConfig::count_layers(LayerType type) const {
  int64_t n = 0;
  for (auto t : layer_types) n += t == type;
  return n;
}

namespace {

ModelConfig gemma4_26b_a4b() {
  // Values from docs/gemma4-model.md#config (the published text_config of google/gemma-4-26B-A4B).
  ModelConfig c;
  c.name = "gemma4-26b-a4b";
  c.hidden_size = 2816;
  c.num_layers = 30;
  c.intermediate_size = 2112;
  c.num_attention_heads = 16;
  c.num_kv_heads = 8;
  c.head_dim = 256;
  c.global_head_dim = 512;
  c.num_global_kv_heads = 2;
  c.attention_k_eq_v = true;
  for (int i = 0; i < 30; ++i) {
    c.layer_types.push_back(i % 6 == 5 ? LayerType::kFull : LayerType::kSliding);
  }
  c.sliding_window = 1024;
  c.rope_sliding = {RopeType::kDefault, 10000.0, 1.0};
  c.rope_full = {RopeType::kProportional, 1000000.0, 0.25};
  c.rms_norm_eps = 1e-6;
  c.vocab_size = 262144;
  c.tie_word_embeddings = true;
  c.final_logit_softcapping = 30.0;
  c.enable_moe_block = true;
  c.num_experts = 128;
  c.top_k_experts = 8;
  c.moe_intermediate_size = 704;
  c.hidden_size_per_layer_input = 0;
  c.num_kv_shared_layers = 0;
  c.dtype = "bfloat16";
  return c;
}

ModelConfig gemma4_tiny() {
  // Same structure at toy sizes: 6 layers (full at 2 and 5, key=value), window 8 < a 24-token
  // test sequence, 8 experts top-2. Small enough to train a step on a CPU in milliseconds.
  ModelConfig c;
  c.name = "gemma4-tiny";
  c.hidden_size = 64;
  c.num_layers = 6;
  c.intermediate_size = 96;
  c.num_attention_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.global_head_dim = 32;
  c.num_global_kv_heads = 1;
  c.attention_k_eq_v = true;
  c.layer_types = {LayerType::kSliding, LayerType::kSliding, LayerType::kFull,
                   LayerType::kSliding, LayerType::kSliding, LayerType::kFull};
  c.sliding_window = 8;
  c.rope_sliding = {RopeType::kDefault, 10000.0, 1.0};
  c.rope_full = {RopeType::kProportional, 1000000.0, 0.25};
  c.rms_norm_eps = 1e-6;
  c.vocab_size = 512;
  c.tie_word_embeddings = true;
  c.final_logit_softcapping = 30.0;
  c.enable_moe_block = true;
  c.num_experts = 8;
  c.top_k_experts = 2;
  c.moe_intermediate_size = 32;
  c.dtype = "float32";
  return c;
}

}  // namespace

std::vector<std::string> embedded_model_names() { return {"gemma4-26b-a4b", "gemma4-tiny"}; }

ModelConfig embedded_model(const std::string& name) {
  if (name == "gemma4-26b-a4b") return gemma4_26b_a4b();
  if (name == "gemma4-tiny") return gemma4_tiny();
  fail_usage("unknown model '{}': embedded models are {}", name, fmt::join(embedded_model_names(), ", "));
}

}  // namespace tprobe::core
