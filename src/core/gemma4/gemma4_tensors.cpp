// Gemma-4 text-decoder tensor layout from a config, and the config-vs-checkpoint cross-check.
#include "tprobe/core/gemma4/gemma4_tensors.hpp"

#include <fmt/format.h>

#include <map>

#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

namespace {

using detail::starts_with;

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Which config field decides a layer's head dim / kv heads (for messages).
std::string head_dim_field(const ModelConfig& c, int64_t layer) {
  auto it = c.per_layer.find(layer);
  if (it != c.per_layer.end() && it->second.head_dim) {
    return fmt::format("per_layer_config[{}].head_dim", layer);
  }
  if (c.layer_types[static_cast<size_t>(layer)] == LayerType::kFull && c.global_head_dim > 0) {
    return "global_head_dim";
  }
  return "head_dim";
}

std::string kv_heads_field(const ModelConfig& c, int64_t layer) {
  auto it = c.per_layer.find(layer);
  if (it != c.per_layer.end() && it->second.num_key_value_heads) {
    return fmt::format("per_layer_config[{}].num_key_value_heads", layer);
  }
  if (c.layer_types[static_cast<size_t>(layer)] == LayerType::kFull && c.attention_k_eq_v &&
      c.num_global_kv_heads > 0) {
    return "num_global_key_value_heads";
  }
  return "num_key_value_heads";
}

// "layers.12.self_attn.q_norm.weight" -> 12 and the rest; -1 when not a layer tensor.
int64_t layer_of(const std::string& local, std::string* rest) {
  if (!starts_with(local, "layers.")) return -1;
  std::size_t dot = local.find('.', 7);
  if (dot == std::string::npos || dot == 7) return -1;
  int64_t idx = 0;
  for (std::size_t i = 7; i < dot; ++i) {
    char ch = local[i];
    if (ch < '0' || ch > '9' || idx > 1000000) return -1;
    idx = idx * 10 + (ch - '0');
  }
  if (rest) *rest = local.substr(dot + 1);
  return idx;
}

}  // namespace

namespace {

// The linear modules of a layer, in HF order: PEFT target name, module path, role.
struct LinearSpec {
  const char* target;
  const char* path;
  TensorRole role;
};
constexpr LinearSpec kLinearSpecs[] = {
    {"q_proj", "self_attn.q_proj", TensorRole::kQProj},
    {"k_proj", "self_attn.k_proj", TensorRole::kKProj},
    {"v_proj", "self_attn.v_proj", TensorRole::kVProj},
    {"o_proj", "self_attn.o_proj", TensorRole::kOProj},
    {"gate_proj", "mlp.gate_proj", TensorRole::kMlpGateProj},
    {"up_proj", "mlp.up_proj", TensorRole::kMlpUpProj},
    {"down_proj", "mlp.down_proj", TensorRole::kMlpDownProj},
};

// [out, in] of a linear module on a layer; {0, 0} when the layer does not have it.
std::pair<int64_t, int64_t> linear_shape(const ModelConfig& c, const LayerGeometry& g,
                                         TensorRole role) {
  const int64_t h = c.hidden_size;
  const int64_t q_rows = c.num_attention_heads * g.head_dim;
  const int64_t kv_rows = g.num_kv_heads * g.head_dim;
  switch (role) {
    case TensorRole::kQProj:
      return {q_rows, h};
    case TensorRole::kKProj:
      return {kv_rows, h};
    case TensorRole::kVProj:
      return g.has_v_proj ? std::pair<int64_t, int64_t>{kv_rows, h}
                          : std::pair<int64_t, int64_t>{0, 0};
    case TensorRole::kOProj:
      return {h, q_rows};
    case TensorRole::kMlpGateProj:
    case TensorRole::kMlpUpProj:
      return {c.intermediate_size, h};
    case TensorRole::kMlpDownProj:
      return {h, c.intermediate_size};
    default:
      return {0, 0};
  }
}

}  // namespace

std::vector<TextTensor> text_tensor_layout(const ModelConfig& c, const std::string& prefix) {
  auto dtype = dtype_from_torch_name(c.dtype);
  if (!dtype) fail("model '{}': dtype '{}' is not bfloat16, float16 or float32", c.name, c.dtype);
  std::vector<TextTensor> out;
  int64_t layer = -1;
  auto add = [&](std::string name, TensorRole role, std::vector<int64_t> shape) {
    out.push_back({{std::move(name), *dtype, std::move(shape)}, role, layer});
  };
  const int64_t h = c.hidden_size;
  add(prefix + "embed_tokens.weight", TensorRole::kEmbedTokens, {c.vocab_size, h});
  for (layer = 0; layer < c.num_layers; ++layer) {
    const LayerGeometry g = c.layer(layer);
    const std::string p = fmt::format("{}layers.{}.", prefix, layer);
    auto add_linear = [&](const LinearSpec& s) {
      auto [rows, cols] = linear_shape(c, g, s.role);
      if (s.role == TensorRole::kVProj && !g.has_v_proj) return;
      add(p + s.path + ".weight", s.role, {rows, cols});
    };
    for (int i = 0; i < 4; ++i) add_linear(kLinearSpecs[i]);  // q, k, v, o
    add(p + "self_attn.q_norm.weight", TensorRole::kQNorm, {g.head_dim});
    add(p + "self_attn.k_norm.weight", TensorRole::kKNorm, {g.head_dim});
    add(p + "input_layernorm.weight", TensorRole::kInputLayernorm, {h});
    add(p + "post_attention_layernorm.weight", TensorRole::kPostAttentionLayernorm, {h});
    add(p + "pre_feedforward_layernorm.weight", TensorRole::kPreFeedforwardLayernorm, {h});
    add(p + "post_feedforward_layernorm.weight", TensorRole::kPostFeedforwardLayernorm, {h});
    if (c.enable_moe_block) {
      add(p + "post_feedforward_layernorm_1.weight", TensorRole::kPostFeedforwardLayernorm1, {h});
      add(p + "pre_feedforward_layernorm_2.weight", TensorRole::kPreFeedforwardLayernorm2, {h});
      add(p + "post_feedforward_layernorm_2.weight", TensorRole::kPostFeedforwardLayernorm2, {h});
    }
    for (int i = 4; i < 7; ++i) add_linear(kLinearSpecs[i]);  // gate, up, down
    if (c.enable_moe_block) {
      add(p + "router.proj.weight", TensorRole::kRouterProj, {c.num_experts, h});
      add(p + "router.scale", TensorRole::kRouterScale, {h});
      add(p + "router.per_expert_scale", TensorRole::kRouterPerExpertScale, {c.num_experts});
      add(p + "experts.gate_up_proj", TensorRole::kExpertsGateUp,
          {c.num_experts, 2 * c.moe_intermediate_size, h});
      add(p + "experts.down_proj", TensorRole::kExpertsDown,
          {c.num_experts, h, c.moe_intermediate_size});
    }
    add(p + "layer_scalar", TensorRole::kLayerScalar, {1});
  }
  layer = -1;
  add(prefix + "norm.weight", TensorRole::kFinalNorm, {h});
  if (!c.tie_word_embeddings) add("lm_head.weight", TensorRole::kLmHead, {c.vocab_size, h});
  return out;
}

std::vector<TensorMeta> expected_text_tensors(const ModelConfig& c, const std::string& prefix) {
  std::vector<TensorMeta> out;
  for (auto& t : text_tensor_layout(c, prefix)) out.push_back(std::move(t.meta));
  return out;
}

std::vector<LinearModule> layer_linear_modules(const ModelConfig& c, int64_t layer) {
  const LayerGeometry g = c.layer(layer);
  std::vector<LinearModule> out;
  for (const LinearSpec& s : kLinearSpecs) {
    auto [rows, cols] = linear_shape(c, g, s.role);
    if (rows <= 0 || cols <= 0) continue;
    out.push_back({s.target, s.path, s.role, cols, rows});
  }
  return out;
}

std::vector<std::string> linear_module_names() {
  std::vector<std::string> out;
  for (const LinearSpec& s : kLinearSpecs) out.emplace_back(s.target);
  return out;
}

std::string detect_text_prefix(const std::vector<std::string>& names) {
  bool plain = false;
  for (const auto& n : names) {
    if (starts_with(n, kMultimodalTextPrefix)) return kMultimodalTextPrefix;
    if (starts_with(n, std::string(kTextOnlyPrefix) + "layers.") ||
        n == std::string(kTextOnlyPrefix) + "embed_tokens.weight") {
      plain = true;
    }
  }
  if (plain) return kTextOnlyPrefix;
  fail(
      "no text-decoder tensors: expected names under '{}' (multimodal) or '{}layers.' "
      "(text-only)",
      kMultimodalTextPrefix, kTextOnlyPrefix);
}

std::vector<Disagreement> cross_check(const ModelConfig& c, const std::vector<TensorMeta>& tensors,
                                      const std::string& prefix) {
  std::vector<Disagreement> out;
  std::map<std::string, const TensorMeta*> actual;
  for (const auto& t : tensors) {
    if (starts_with(t.name, prefix) || t.name == "lm_head.weight") actual[t.name] = &t;
  }
  std::vector<TensorMeta> expected = expected_text_tensors(c, prefix);
  std::map<std::string, const TensorMeta*> wanted;
  for (const auto& e : expected) wanted[e.name] = &e;

  for (const auto& e : expected) {
    std::string rest;
    int64_t layer = layer_of(e.name.substr(prefix.size()), &rest);
    auto it = actual.find(e.name);
    if (it == actual.end()) {
      if (rest == "self_attn.v_proj.weight") {
        out.push_back(
            {e.name, "attention_k_eq_v",
             fmt::format("layer {} ({}) has no v_proj in the checkpoint, but the config "
                         "expects one (attention_k_eq_v is {} for this layer type)",
                         layer, to_string(c.layer_types[static_cast<size_t>(layer)]),
                         c.attention_k_eq_v ? "true, but only full layers drop v_proj" : "false")});
      } else if (starts_with(rest, "experts.") || starts_with(rest, "router.")) {
        out.push_back({e.name, "enable_moe_block",
                       fmt::format("missing: the config enables the MoE block (enable_moe_block "
                                   "true) but layer {} has no {}",
                                   layer, rest)});
      } else {
        out.push_back(
            {e.name, "",
             fmt::format("missing: expected {} {}", to_string(e.dtype), shape_text(e.shape))});
      }
      continue;
    }
    const TensorMeta& a = *it->second;
    if (a.shape == e.shape) continue;
    std::string found = shape_text(a.shape);
    if (rest == "self_attn.q_norm.weight" && a.shape.size() == 1) {
      out.push_back(
          {e.name, head_dim_field(c, layer),
           fmt::format("layer {}: q_norm has length {}, so head_dim is {}; the config "
                       "gives {} ({})",
                       layer, a.shape[0], a.shape[0], e.shape[0], head_dim_field(c, layer))});
    } else if (rest == "self_attn.k_proj.weight" && a.shape.size() == 2) {
      // Use the checkpoint's own head dim (q_norm length) when it has one.
      int64_t dh = e.shape[0] / std::max<int64_t>(c.layer(layer).num_kv_heads, 1);
      auto qn = actual.find(fmt::format("{}layers.{}.self_attn.q_norm.weight", prefix, layer));
      if (qn != actual.end() && qn->second->shape.size() == 1 && qn->second->shape[0] > 0) {
        dh = qn->second->shape[0];
      }
      std::string heads = a.shape[0] % dh == 0 ? fmt::format("{}", a.shape[0] / dh)
                                               : fmt::format("{}/{} (not whole)", a.shape[0], dh);
      out.push_back({e.name, kv_heads_field(c, layer),
                     fmt::format("layer {}: k_proj is {}, i.e. {} kv heads of dim {}; the config "
                                 "gives {} ({}), expecting {}",
                                 layer, found, heads, dh, c.layer(layer).num_kv_heads,
                                 kv_heads_field(c, layer), shape_text(e.shape))});
    } else if (starts_with(rest, "experts.")) {
      out.push_back({e.name, "num_experts / moe_intermediate_size",
                     fmt::format("layer {}: {} is {}, the config (num_experts {}, "
                                 "moe_intermediate_size {}, hidden_size {}) expects {}",
                                 layer, rest, found, c.num_experts, c.moe_intermediate_size,
                                 c.hidden_size, shape_text(e.shape))});
    } else {
      out.push_back(
          {e.name, "",
           fmt::format("shape {} but the config expects {}", found, shape_text(e.shape))});
    }
  }

  for (const auto& [name, meta] : actual) {
    if (wanted.count(name)) continue;
    if (name == "lm_head.weight") continue;  // a saved copy of the tied embedding is harmless
    std::string local = name.substr(prefix.size());
    std::string rest;
    int64_t layer = layer_of(local, &rest);
    if (rest == "self_attn.v_proj.weight" && layer >= 0 && layer < c.num_layers) {
      out.push_back({name, "attention_k_eq_v",
                     fmt::format("layer {} ({}) has a v_proj in the checkpoint, but the config "
                                 "says attention_k_eq_v (keys and values share k_proj there)",
                                 layer, to_string(c.layer_types[static_cast<size_t>(layer)]))});
    } else if (!c.enable_moe_block && layer >= 0 &&
               (starts_with(rest, "experts.") || starts_with(rest, "router."))) {
      out.push_back({name, "enable_moe_block",
                     fmt::format("layer {} has {} in the checkpoint, but the config says "
                                 "enable_moe_block is false",
                                 layer, rest)});
    } else if (local.find("per_layer") != std::string::npos) {
      out.push_back({name, "hidden_size_per_layer_input",
                     "a per-layer input embedding tensor: the checkpoint uses PLE, which the "
                     "config says is off and tprobe does not support"});
    } else if (layer >= c.num_layers) {
      out.push_back({name, "num_hidden_layers",
                     fmt::format("layer {} exists in the checkpoint but the config has {} layers",
                                 layer, c.num_layers)});
    } else {
      out.push_back({name, "",
                     fmt::format("unexpected text-decoder tensor {} {}", to_string(meta->dtype),
                                 shape_text(meta->shape))});
    }
  }
  return out;
}

}  // namespace tprobe::core
