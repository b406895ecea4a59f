// Gemma-4 config.json -> ModelConfig, strictly typed, with HF's defaults and traps made explicit.
#include "tprobe/core/gemma4/config_json.hpp"

#include <fmt/format.h>

#include <cctype>
#include <set>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::core {

namespace {

// Typed access to one JSON object; every message names the file and the dotted field path.
class Fields {
 public:
  Fields(const Json& object, std::string prefix, const std::string& source,
         std::vector<std::string>* defaulted)
      : obj_(object), prefix_(std::move(prefix)), source_(source), defaulted_(defaulted) {}

  std::string path(const std::string& key) const { return prefix_ + key; }
  bool has(const std::string& key) const { return obj_.contains(key); }
  bool present(const std::string& key) const { return has(key) && !obj_.at(key).is_null(); }
  const Json& at(const std::string& key) const { return obj_.at(key); }

  [[noreturn]] void bad(const std::string& key, const char* want) const {
    fail("{}: field '{}' must be {}, got {} {}", source_, path(key), want, obj_.at(key).type_name(),
         obj_.at(key).dump());
  }
  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    fail("{}: field '{}': {}", source_, path(key), why);
  }

  int64_t integer(const std::string& key, int64_t fallback) const {
    if (!has(key)) {
      note_default(key);
      return fallback;
    }
    return integer(key);
  }
  int64_t integer(const std::string& key) const {
    if (!has(key)) fail("{}: required field '{}' is missing", source_, path(key));
    const Json& v = obj_.at(key);
    if (!v.is_number_integer()) bad(key, "an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      bad(key, "an integer that fits in int64");
    }
    return v.get<int64_t>();
  }
  int64_t positive(const std::string& key, int64_t fallback) const {
    int64_t v = integer(key, fallback);
    if (v <= 0) refuse(key, fmt::format("must be positive, got {}", v));
    return v;
  }
  int64_t positive(const std::string& key) const {
    int64_t v = integer(key);
    if (v <= 0) refuse(key, fmt::format("must be positive, got {}", v));
    return v;
  }
  // A positive size no larger than tprobe's limit for it (ConfigLimits, docs/inspect.md#limits).
  int64_t bounded(const std::string& key, int64_t fallback, int64_t max) const {
    return within(key, positive(key, fallback), max);
  }
  int64_t bounded(const std::string& key, int64_t max) const {
    return within(key, positive(key), max);
  }
  int64_t within(const std::string& key, int64_t v, int64_t max) const {
    if (v > max) {
      fail("{}: field '{}' is {}, above tprobe's limit of {} (docs/inspect.md#limits)", source_,
           path(key), v, max);
    }
    return v;
  }
  // Rotary position embedding turns pairs of lanes (the two halves of each head: rotate_half,
  // and a frequency table of head_dim / 2 entries), so an odd head dim cannot run.
  int64_t head_dim(const std::string& key, int64_t v) const {
    within(key, v, ConfigLimits::kHeadDim);
    if (v % 2 != 0) {
      fail("{}: field '{}' is {}: tprobe's attention needs an even head dim (rotary position "
           "embedding rotates the two halves of each head)",
           source_, path(key), v);
    }
    return v;
  }
  // null means "not set" (HF's None).
  std::optional<int64_t> optional_integer(const std::string& key) const {
    if (!has(key)) note_default(key);
    if (!present(key)) return std::nullopt;
    return integer(key);
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) {
      note_default(key);
      return fallback;
    }
    const Json& v = obj_.at(key);
    if (!v.is_boolean()) bad(key, "a boolean");
    return v.get<bool>();
  }
  double number(const std::string& key, double fallback) const {
    if (!has(key)) {
      note_default(key);
      return fallback;
    }
    const Json& v = obj_.at(key);
    if (!v.is_number()) bad(key, "a number");
    return v.get<double>();
  }
  std::optional<double> optional_number(const std::string& key) const {
    if (!has(key)) note_default(key);
    if (!present(key)) return std::nullopt;
    return number(key, 0.0);
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) {
      note_default(key);
      return fallback;
    }
    const Json& v = obj_.at(key);
    if (!v.is_string()) bad(key, "a string");
    return v.get<std::string>();
  }
  std::optional<std::string> optional_string(const std::string& key) const {
    if (!present(key)) return std::nullopt;
    return string(key, "");
  }
  const Json* object(const std::string& key) const {
    if (!present(key)) return nullptr;
    if (!obj_.at(key).is_object()) bad(key, "an object");
    return &obj_.at(key);
  }

 private:
  void note_default(const std::string& key) const {
    if (defaulted_) defaulted_->push_back(path(key));
  }
  const Json& obj_;
  std::string prefix_;
  const std::string& source_;
  std::vector<std::string>* defaulted_;
};

LayerType parse_layer_type(const Fields& f, const std::string& key, const Json& v, std::size_t i,
                           const std::string& source) {
  if (!v.is_string()) {
    fail("{}: field '{}[{}]' must be a string, got {}", source, f.path(key), i, v.type_name());
  }
  std::string s = v.get<std::string>();
  LayerType type = LayerType::kSliding;
  if (parse_layer_type(s, type)) return type;
  fail("{}: field '{}[{}]' is '{}': tprobe knows 'sliding_attention' and 'full_attention'", source,
       f.path(key), i, s);
}

void check_model_type(const Fields& f, const std::string& want1, const std::string& want2) {
  auto mt = f.optional_string("model_type");
  if (mt && *mt != want1 && *mt != want2) {
    f.refuse("model_type", fmt::format("'{}' is not a Gemma-4 config (expected '{}')", *mt, want1));
  }
}

// The sections of a text config, each reading its fields into `c` (and what was defaulted into
// `info`). `f` is the decoder's fields (text_config in multimodal files), `top` the file's top
// level; `source` names the file in messages.

void read_dimensions(const Fields& f, const Fields& top, const std::string& prefix,
                     ConfigJsonInfo& info, ModelConfig& c) {
  // Defaults are Gemma4TextConfig's (docs/gemma4-model.md#config).
  // Every size is bounded here, where each file is parsed, so that no probe loops or allocates
  // by an absurd one (ConfigLimits).
  c.hidden_size = f.bounded("hidden_size", 2304, ConfigLimits::kHidden);
  c.num_layers = f.bounded("num_hidden_layers", 30, ConfigLimits::kLayers);
  c.intermediate_size = f.bounded("intermediate_size", 9216, ConfigLimits::kIntermediate);
  c.num_attention_heads = f.bounded("num_attention_heads", 8, ConfigLimits::kHeads);
  c.num_kv_heads = f.bounded("num_key_value_heads", 4, ConfigLimits::kHeads);
  c.head_dim = f.head_dim("head_dim", f.positive("head_dim", 256));
  c.attention_k_eq_v = f.boolean("attention_k_eq_v", false);
  c.sliding_window = f.bounded("sliding_window", 512, ConfigLimits::kSlidingWindow);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0.0)) f.refuse("rms_norm_eps", "must be positive");
  c.vocab_size = f.bounded("vocab_size", 262144, ConfigLimits::kVocab);
  c.pad_token_id = f.integer("pad_token_id", 0);
  c.attention_bias = f.boolean("attention_bias", false);

  // The decoder config or, in multimodal files, the top level may carry tie_word_embeddings.
  if (f.has("tie_word_embeddings") || !info.multimodal) {
    c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  } else {
    c.tie_word_embeddings = top.boolean("tie_word_embeddings", true);
  }

  // dtype: "dtype" (transformers 5) or "torch_dtype" (4.x), in the decoder config or top level.
  std::string dtype = "bfloat16";
  bool found_dtype = false;
  for (const Fields* where : {&f, &top}) {
    for (const char* key : {"dtype", "torch_dtype"}) {
      if (!found_dtype && where->present(key)) {
        dtype = where->string(key, "");
        if (!dtype_from_torch_name(dtype)) {
          where->refuse(key, fmt::format("'{}' is not one of bfloat16, float16, float32", dtype));
        }
        found_dtype = true;
      }
    }
  }
  if (!found_dtype) info.defaulted_fields.push_back(prefix + "dtype");
  c.dtype = dtype;

  c.hidden_activation = f.string("hidden_activation", "gelu_pytorch_tanh");
  if (c.hidden_activation != "gelu_pytorch_tanh") {
    f.refuse("hidden_activation", fmt::format("'{}' is not supported; tprobe implements "
                                              "gelu_pytorch_tanh (tanh-approximated GELU)",
                                              c.hidden_activation));
  }
  c.final_logit_softcapping = f.optional_number("final_logit_softcapping");
  if (c.final_logit_softcapping && !(*c.final_logit_softcapping > 0.0)) {
    f.refuse("final_logit_softcapping", "must be positive or null");
  }

}

void refuse_unsupported_features(const Fields& f, const std::string& source, ModelConfig& c) {
  // Features tprobe does not implement: refused, never ignored.
  if (!f.has("hidden_size_per_layer_input")) {
    fail(
        "{}: field '{}' is missing: Hugging Face then defaults it to 256, i.e. per-layer input "
        "embeddings ON, which tprobe does not implement; if this model has no "
        "embed_tokens_per_layer tensor (26B-A4B carries an explicit 0), add "
        "\"hidden_size_per_layer_input\": 0",
        source, f.path("hidden_size_per_layer_input"));
  }
  c.hidden_size_per_layer_input = f.integer("hidden_size_per_layer_input");
  if (c.hidden_size_per_layer_input != 0) {
    f.refuse("hidden_size_per_layer_input",
             fmt::format("{}: per-layer input embeddings (PLE, the E2B/E4B variants) are not "
                         "supported by tprobe; only 0 is",
                         c.hidden_size_per_layer_input));
  }
  c.num_kv_shared_layers = f.integer("num_kv_shared_layers", 0);
  if (c.num_kv_shared_layers != 0) {
    f.refuse("num_kv_shared_layers",
             fmt::format("{}: KV sharing across layers is not supported by tprobe; only 0 is",
                         c.num_kv_shared_layers));
  }
  if (c.attention_bias) f.refuse("attention_bias", "true: attention biases are not supported");
  if (f.present("attn_logit_softcapping")) {
    f.refuse("attn_logit_softcapping",
             "attention logit softcapping is not supported (Gemma-4 "
             "has none; the field must be null or absent)");
  }
  if (f.present("rope_scaling")) {
    f.refuse("rope_scaling", "RoPE scaling is not supported; the field must be null or absent");
  }
  if (auto bidi = f.optional_string("use_bidirectional_attention")) {
    if (*bidi != "vision") {
      f.refuse(
          "use_bidirectional_attention",
          fmt::format("'{}' is not supported: only null or \"vision\" (text stays causal)", *bidi));
    }
  }

}

void read_moe(const Fields& f, ModelConfig& c) {
  // MoE.
  c.enable_moe_block = f.boolean("enable_moe_block", false);
  auto num_experts = f.optional_integer("num_experts");
  auto top_k = f.optional_integer("top_k_experts");
  auto moe_width = f.optional_integer("moe_intermediate_size");
  if (c.enable_moe_block) {
    if (!num_experts || *num_experts <= 0) {
      f.refuse("num_experts", "enable_moe_block is true, so a positive num_experts is required");
    }
    if (!top_k || *top_k <= 0 || *top_k > *num_experts) {
      f.refuse("top_k_experts",
               "enable_moe_block is true, so top_k_experts must be in "
               "1..num_experts");
    }
    if (!moe_width || *moe_width <= 0) {
      f.refuse("moe_intermediate_size",
               "enable_moe_block is true, so a positive moe_intermediate_size is required");
    }
    c.num_experts = f.within("num_experts", *num_experts, ConfigLimits::kExperts);
    c.top_k_experts = f.within("top_k_experts", *top_k, ConfigLimits::kTopK);
    c.moe_intermediate_size =
        f.within("moe_intermediate_size", *moe_width, ConfigLimits::kIntermediate);
  }

}

void read_layer_types(const Fields& f, const std::string& source, ConfigJsonInfo& info,
                      ModelConfig& c) {
  // Layer types: explicit list, or HF's default pattern (every 6th full, last forced to full).
  if (f.present("layer_types")) {
    const Json& lt = f.at("layer_types");
    if (!lt.is_array()) f.bad("layer_types", "an array of strings");
    if (static_cast<int64_t>(lt.size()) != c.num_layers) {
      f.refuse("layer_types",
               fmt::format("has {} entries but num_hidden_layers is {}", lt.size(), c.num_layers));
    }
    for (std::size_t i = 0; i < lt.size(); ++i) {
      c.layer_types.push_back(parse_layer_type(f, "layer_types", lt[i], i, source));
    }
  } else {
    info.defaulted_fields.push_back(f.path("layer_types"));
    for (int64_t i = 0; i < c.num_layers; ++i) {
      c.layer_types.push_back((i + 1) % 6 == 0 ? LayerType::kFull : LayerType::kSliding);
    }
    c.layer_types.back() = LayerType::kFull;
  }

}

void read_rope(const Fields& f, const std::string& source, ConfigJsonInfo& info, ModelConfig& c) {
  // RoPE per layer type.
  c.rope_sliding = {RopeType::kDefault, 10000.0, 1.0};
  c.rope_full = {RopeType::kProportional, 1000000.0, 0.25};
  if (const Json* rp = f.object("rope_parameters")) {
    Fields r(*rp, f.path("rope_parameters") + ".", source, &info.defaulted_fields);
    if (r.has("rope_type") || r.has("rope_theta")) {
      f.refuse("rope_parameters",
               "must be keyed by layer type (\"sliding_attention\", "
               "\"full_attention\"), as Gemma-4 configs are");
    }
    for (const auto& [key, value] : rp->items()) {
      if (key != "sliding_attention" && key != "full_attention") {
        r.refuse(key, "unknown layer type (expected sliding_attention or full_attention)");
      }
      (void)value;
    }
    for (const char* key : {"sliding_attention", "full_attention"}) {
      RopeParams& p = std::string(key) == "full_attention" ? c.rope_full : c.rope_sliding;
      const Json* one = r.object(key);
      if (!one) {
        info.defaulted_fields.push_back(r.path(key));
        continue;
      }
      Fields e(*one, r.path(key) + ".", source, &info.defaulted_fields);
      std::string type =
          e.string("rope_type", p.type == RopeType::kProportional ? "proportional" : "default");
      if (type == "default") {
        p.type = RopeType::kDefault;
      } else if (type == "proportional") {
        p.type = RopeType::kProportional;
      } else {
        e.refuse("rope_type", fmt::format("'{}' is not supported (default, proportional)", type));
      }
      p.theta = e.number("rope_theta", p.theta);
      if (!(p.theta > 0.0)) e.refuse("rope_theta", "must be positive");
      // An absent factor means 1.0 (whole head rotates) in HF's rope functions; only worth
      // listing as a default where it changes something, i.e. for proportional RoPE.
      double partial = 1.0;
      if (e.has("partial_rotary_factor") || p.type == RopeType::kProportional) {
        partial = e.number("partial_rotary_factor", 1.0);
      }
      if (!(partial > 0.0 && partial <= 1.0))
        e.refuse("partial_rotary_factor", "must be in (0, 1]");
      if (p.type == RopeType::kDefault && partial != 1.0) {
        e.refuse("partial_rotary_factor",
                 "partial rotation is only supported with rope_type "
                 "\"proportional\"");
      }
      p.partial_rotary_factor = p.type == RopeType::kProportional ? partial : 1.0;
      if (e.present("factor") && e.number("factor", 1.0) != 1.0) {
        e.refuse("factor", "RoPE frequency scaling (factor != 1) is not supported");
      }
    }
  } else {
    info.defaulted_fields.push_back(f.path("rope_parameters"));
  }

}

void read_layer_geometry(const Fields& f, const std::string& source, ConfigJsonInfo& info,
                         ModelConfig& c) {
  // Per-layer geometry: flat global_* fields, then per_layer_config overrides.
  const Json* plc = f.object("per_layer_config");
  info.per_layer_config_form = plc != nullptr;
  if (plc) {
    // HF >= 5.15 moved global_head_dim into per_layer_config; an explicit flat field still counts.
    c.global_head_dim =
        f.has("global_head_dim") ? f.head_dim("global_head_dim", f.positive("global_head_dim")) : 0;
    c.num_global_kv_heads = f.present("num_global_key_value_heads")
                                ? f.bounded("num_global_key_value_heads", ConfigLimits::kHeads)
                                : 0;
    std::set<int64_t> seen;
    for (const auto& [key, value] : plc->items()) {
      std::string where = f.path("per_layer_config") + "[\"" + key + "\"]";
      bool digits = !key.empty() && key.size() <= 9;
      for (char ch : key) digits = digits && std::isdigit(static_cast<unsigned char>(ch));
      if (!digits)
        fail("{}: field '{}': key must be a layer index (decimal digits)", source, where);
      int64_t idx = std::stoll(key);
      if (idx >= c.num_layers) {
        fail("{}: field '{}': layer {} does not exist (num_hidden_layers is {})", source, where,
             idx, c.num_layers);
      }
      if (!seen.insert(idx).second) {
        fail(
            "{}: field '{}': layer {} is given twice (keys may be zero-padded, so \"5\" and "
            "\"05\" are the same layer)",
            source, where, idx);
      }
      if (!value.is_object()) {
        fail("{}: field '{}' must be an object, got {}", source, where, value.type_name());
      }
      Fields e(value, where + ".", source, nullptr);
      LayerOverride o;
      for (const auto& [k, v] : value.items()) {
        (void)v;
        if (k == "head_dim") {
          o.head_dim = e.head_dim(k, e.positive(k));
        } else if (k == "num_key_value_heads") {
          o.num_key_value_heads = e.bounded(k, ConfigLimits::kHeads);
        } else {
          e.refuse(k,
                   "per-layer overrides of this field are not supported (only head_dim and "
                   "num_key_value_heads)");
        }
      }
      c.per_layer[idx] = o;
    }
  } else {
    c.global_head_dim = f.head_dim("global_head_dim", f.positive("global_head_dim", 512));
    auto g = f.optional_integer("num_global_key_value_heads");
    if (g && *g <= 0) f.refuse("num_global_key_value_heads", "must be positive or null");
    if (g) f.within("num_global_key_value_heads", *g, ConfigLimits::kHeads);
    c.num_global_kv_heads = g.value_or(0);
  }

}

// Every count and byte figure a probe derives from the config (parameters, their bytes at up to
// 8 bytes each) must fit in 64 bits: within the limits one size each is realistic, but all at
// once (16,384 experts of width 2^20 on 1,024 layers of hidden 131,072) is not, and a wrapped
// count would print as a small plausible number.
void check_parameter_bytes(const ModelConfig& c, const std::string& source) {
  uint64_t params = 0;
  uint64_t bytes = 0;
  for (const TextTensor& t : text_tensor_layout(c, "")) {
    uint64_t n = 1;
    bool fits = true;
    for (int64_t d : t.meta.shape) fits = fits && !__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n);
    fits = fits && !__builtin_add_overflow(params, n, &params) &&
           !__builtin_mul_overflow(params, uint64_t{8}, &bytes);
    if (!fits) {
      fail("{}: the model's parameter bytes do not fit in 64 bits (num_hidden_layers {}, "
           "hidden_size {}, num_experts {}, moe_intermediate_size {}, vocab_size {}); the sizes "
           "are not realistic",
           source, c.num_layers, c.hidden_size, c.num_experts, c.moe_intermediate_size,
           c.vocab_size);
    }
  }
}

}  // namespace

ConfigJson parse_config_json(const Json& doc, const std::string& source) {
  if (!doc.is_object()) fail("{}: config must be a JSON object, got {}", source, doc.type_name());
  ConfigJson out;
  ConfigJsonInfo& info = out.info;
  ModelConfig& c = out.config;
  c.name = source;

  Fields top(doc, "", source, nullptr);
  const Json* text = &doc;
  std::string prefix;
  if (top.has("text_config")) {
    if (!doc.at("text_config").is_object()) top.bad("text_config", "an object");
    text = &doc.at("text_config");
    prefix = "text_config.";
    info.multimodal = true;
    check_model_type(top, "gemma4", "gemma4");
    info.has_vision_config = top.present("vision_config");
    info.has_audio_config = top.present("audio_config");
  }
  if (top.present("architectures")) {
    if (!doc.at("architectures").is_array()) top.bad("architectures", "an array of strings");
    for (const auto& a : doc.at("architectures")) {
      if (!a.is_string()) top.bad("architectures", "an array of strings");
      info.architectures.push_back(a.get<std::string>());
    }
  }
  Fields f(*text, prefix, source, &info.defaulted_fields);
  check_model_type(f, "gemma4_text", "gemma4");

  read_dimensions(f, top, prefix, info, c);
  refuse_unsupported_features(f, source, c);
  read_moe(f, c);
  read_layer_types(f, source, info, c);
  read_rope(f, source, info, c);
  read_layer_geometry(f, source, info, c);

  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerGeometry g = c.layer(i);
    if (c.num_attention_heads % g.num_kv_heads != 0) {
      fail("{}: layer {} ({}) has {} kv heads, which does not divide num_attention_heads {}",
           source, i, to_string(g.type), g.num_kv_heads, c.num_attention_heads);
    }
  }
  check_parameter_bytes(c, source);
  return out;
}

ConfigJson read_config_json(const std::string& path) {
  return parse_config_json(
      detail::parse_json_strict(read_input_file(path, "config", kMaxSmallInputBytes), path), path);
}

namespace {

Json rope_json(const RopeParams& p) {
  Json r = Json::object();
  r["rope_type"] = p.type == RopeType::kProportional ? "proportional" : "default";
  if (p.type == RopeType::kProportional) r["partial_rotary_factor"] = p.partial_rotary_factor;
  r["rope_theta"] = p.theta;
  return r;
}

}  // namespace

Json to_config_json(const ModelConfig& c, ConfigJsonForm form) {
  Json t = Json::object();
  t["model_type"] = "gemma4_text";
  t["hidden_size"] = c.hidden_size;
  t["num_hidden_layers"] = c.num_layers;
  t["intermediate_size"] = c.intermediate_size;
  t["num_attention_heads"] = c.num_attention_heads;
  t["num_key_value_heads"] = c.num_kv_heads;
  t["head_dim"] = c.head_dim;
  t["attention_k_eq_v"] = c.attention_k_eq_v;
  if (form != ConfigJsonForm::kMultimodalPerLayer) {
    t["global_head_dim"] = c.global_head_dim > 0 ? c.global_head_dim : c.head_dim;
    if (c.num_global_kv_heads > 0) {
      t["num_global_key_value_heads"] = c.num_global_kv_heads;
    } else {
      t["num_global_key_value_heads"] = nullptr;
    }
  }
  Json types = Json::array();
  for (auto lt : c.layer_types) types.push_back(to_string(lt));
  t["layer_types"] = types;
  t["sliding_window"] = c.sliding_window;
  t["rope_parameters"] = {{"sliding_attention", rope_json(c.rope_sliding)},
                          {"full_attention", rope_json(c.rope_full)}};
  t["rms_norm_eps"] = c.rms_norm_eps;
  t["hidden_activation"] = c.hidden_activation;
  t["vocab_size"] = c.vocab_size;
  t["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.final_logit_softcapping) {
    t["final_logit_softcapping"] = *c.final_logit_softcapping;
  } else {
    t["final_logit_softcapping"] = nullptr;
  }
  t["enable_moe_block"] = c.enable_moe_block;
  if (c.enable_moe_block) {
    t["num_experts"] = c.num_experts;
    t["top_k_experts"] = c.top_k_experts;
    t["moe_intermediate_size"] = c.moe_intermediate_size;
  }
  t["attention_bias"] = c.attention_bias;
  t["hidden_size_per_layer_input"] = c.hidden_size_per_layer_input;
  t["num_kv_shared_layers"] = c.num_kv_shared_layers;
  t["pad_token_id"] = c.pad_token_id;
  t["dtype"] = c.dtype;
  if (form == ConfigJsonForm::kMultimodalPerLayer) {
    // Keys zero-padded to the digits of the largest layer index, as HF serialises them.
    std::size_t width = std::to_string(std::max<int64_t>(c.num_layers - 1, 0)).size();
    Json plc = Json::object();
    for (int64_t i = 0; i < c.num_layers; ++i) {
      LayerGeometry g = c.layer(i);
      Json entry = Json::object();
      if (g.head_dim != c.head_dim) entry["head_dim"] = g.head_dim;
      if (g.num_kv_heads != c.num_kv_heads) entry["num_key_value_heads"] = g.num_kv_heads;
      if (!entry.empty()) plc[fmt::format("{:0{}}", i, width)] = entry;
    }
    t["per_layer_config"] = plc;
  } else if (!c.per_layer.empty()) {
    // The flat forms keep the explicit per-layer overrides too: without them a layer whose
    // override made it valid (a full layer's kv heads) was written with the flat value alone, and
    // the written config was refused on reading (found by tprobe_fuzz_config_json).
    Json plc = Json::object();
    for (const auto& [i, o] : c.per_layer) {
      Json entry = Json::object();
      if (o.head_dim) entry["head_dim"] = *o.head_dim;
      if (o.num_key_value_heads) entry["num_key_value_heads"] = *o.num_key_value_heads;
      plc[std::to_string(i)] = entry;
    }
    t["per_layer_config"] = plc;
  }
  if (form == ConfigJsonForm::kTextOnlyFlat) {
    t["architectures"] = {"Gemma4ForCausalLM"};
    return t;
  }
  Json doc = Json::object();
  doc["architectures"] = {"Gemma4ForConditionalGeneration"};
  doc["model_type"] = "gemma4";
  doc["text_config"] = t;
  doc["vision_config"] = nullptr;
  doc["audio_config"] = nullptr;
  doc["dtype"] = c.dtype;
  return doc;
}

ModelConfig model_config_of(const std::string& model, const std::string& checkpoint_dir,
                            const std::string& config_path) {
  if (!config_path.empty()) return read_config_json(config_path).config;
  if (!checkpoint_dir.empty()) return read_config_json(checkpoint_dir + "/config.json").config;
  for (const std::string& name : embedded_model_names()) {
    if (model == name) return embedded_model(name);
  }
  return read_config_json(model).config;
}

}  // namespace tprobe::core
