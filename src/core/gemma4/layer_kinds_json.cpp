// Any transformers decoder's config.json -> per-layer kinds (layer_kinds_json.hpp).
#include "tprobe/core/gemma4/layer_kinds_json.hpp"

#include <fmt/format.h>

#include <set>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::core {

namespace {

// The decoder's fields: a text-only config, or the "text_config" of a multimodal one.
class Reader {
 public:
  Reader(const Json& obj, std::string prefix, const std::string& source)
      : obj_(obj), prefix_(std::move(prefix)), source_(source) {}

  bool present(const char* key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }
  bool has(const char* key) const { return obj_.contains(key); }
  std::string path(const char* key) const { return prefix_ + key; }

  [[noreturn]] void bad(const char* key, const std::string& want) const {
    fail("{}: field '{}' must be {}, got {}", source_, path(key), want,
         detail::printable(obj_.at(key).dump()));
  }
  // An integer in [lo, hi].
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const Json& v = obj_.at(key);
    if (!v.is_number_integer()) bad(key, fmt::format("an integer in {}..{}", lo, hi));
    // a non-negative integer may be stored unsigned: compare it as such before narrowing
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
      bad(key, fmt::format("an integer in {}..{}", lo, hi));
    }
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) bad(key, fmt::format("an integer in {}..{}", lo, hi));
    return i;
  }
  bool boolean(const char* key) const {
    const Json& v = obj_.at(key);
    if (!v.is_boolean()) bad(key, "a boolean");
    return v.get<bool>();
  }
  std::string string(const char* key) const {
    const Json& v = obj_.at(key);
    if (!v.is_string()) bad(key, "a string");
    return v.get<std::string>();
  }
  const Json& at(const char* key) const { return obj_.at(key); }

 private:
  const Json& obj_;
  std::string prefix_;
  const std::string& source_;
};

void read_attention(const Reader& f, const std::string& source, ConfigLayerKinds& k) {
  const int64_t n = k.num_layers;
  k.attention.assign(static_cast<std::size_t>(n), std::nullopt);
  if (f.present("layer_types")) {
    const Json& lt = f.at("layer_types");
    if (!lt.is_array()) f.bad("layer_types", "an array of strings");
    if (static_cast<int64_t>(lt.size()) != n) {
      fail("{}: field '{}' has {} entries but num_hidden_layers is {}", source,
           f.path("layer_types"), lt.size(), n);
    }
    std::set<std::string> other;
    for (std::size_t i = 0; i < lt.size(); ++i) {
      if (!lt[i].is_string()) {
        fail("{}: field '{}[{}]' must be a string, got {}", source, f.path("layer_types"), i,
             lt[i].type_name());
      }
      LayerType t = LayerType::kSliding;
      if (parse_layer_type(lt[i].get<std::string>(), t)) {
        k.attention[i] = t;
      } else if (other.size() < 4) {
        other.insert(detail::printable(lt[i].get<std::string>(), 40));
      }
    }
    k.notes.push_back("attention kinds from layer_types");
    for (const std::string& o : other) {
      k.notes.push_back(fmt::format(
          "layer_types names '{}', neither sliding_attention nor full_attention: those layers' "
          "kind is -",
          o));
    }
    return;
  }
  if (!f.has("sliding_window")) {
    k.notes.push_back(
        "attention kinds -: the config has neither layer_types nor sliding_window");
    return;
  }
  if (!f.present("sliding_window")) {  // null: no window on any layer
    for (auto& a : k.attention) a = LayerType::kFull;
    k.notes.push_back("attention kinds from sliding_window null: every layer full");
    return;
  }
  f.integer("sliding_window", 1, int64_t{1} << 40);
  if (f.present("use_sliding_window")) {  // Qwen2 / Qwen3 / Qwen3-MoE
    if (!f.boolean("use_sliding_window")) {
      for (auto& a : k.attention) a = LayerType::kFull;
      k.notes.push_back("attention kinds from use_sliding_window false: every layer full");
      return;
    }
    if (!f.present("max_window_layers")) {
      k.notes.push_back(
          "attention kinds -: use_sliding_window is true but max_window_layers is absent");
      return;
    }
    const int64_t m = f.integer("max_window_layers", 0, ConfigLimits::kLayers);
    for (int64_t i = 0; i < n; ++i)
      k.attention[static_cast<std::size_t>(i)] = i >= m ? LayerType::kSliding : LayerType::kFull;
    k.notes.push_back(fmt::format(
        "attention kinds from use_sliding_window and max_window_layers {}: layers from {} sliding",
        m, m));
    return;
  }
  if (f.present("sliding_window_pattern")) {  // Gemma-2 / Gemma-3 before layer_types
    const int64_t p = f.integer("sliding_window_pattern", 1, ConfigLimits::kLayers);
    for (int64_t i = 0; i < n; ++i)
      k.attention[static_cast<std::size_t>(i)] =
          (i + 1) % p == 0 ? LayerType::kFull : LayerType::kSliding;
    k.notes.push_back(fmt::format(
        "attention kinds from sliding_window_pattern {}: every {}th layer full, the rest sliding",
        p, p));
    return;
  }
  for (auto& a : k.attention) a = LayerType::kSliding;  // Mistral / Mixtral: one window for all
  k.notes.push_back(
      "attention kinds from sliding_window without a pattern: every layer sliding");
}

void read_ffn(const Reader& f, const std::string& source, ConfigLayerKinds& k) {
  const int64_t n = k.num_layers;
  k.ffn.assign(static_cast<std::size_t>(n), "-");
  const char* count_key = nullptr;
  for (const char* key : {"num_experts", "num_local_experts", "n_routed_experts"}) {
    if (f.present(key)) {
      count_key = key;
      break;
    }
  }
  if (!count_key) {
    k.notes.push_back(
        "feed-forward kinds -: no expert count (num_experts, num_local_experts, n_routed_experts)");
    return;
  }
  const int64_t experts = f.integer(count_key, 0, ConfigLimits::kExperts);
  if (experts == 0) {
    for (auto& x : k.ffn) x = "dense";
    k.notes.push_back(fmt::format("feed-forward kinds from {} 0: every layer dense", count_key));
    return;
  }
  std::vector<uint8_t> moe(static_cast<std::size_t>(n), 1);
  std::vector<std::string> by;
  if (f.present("mlp_only_layers")) {  // Qwen2-MoE / Qwen3-MoE
    const Json& v = f.at("mlp_only_layers");
    if (!v.is_array() || static_cast<int64_t>(v.size()) > ConfigLimits::kLayers) {
      f.bad("mlp_only_layers", fmt::format("an array of at most {} layer indices",
                                           ConfigLimits::kLayers));
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number_integer() ||
          (v[i].is_number_unsigned() && v[i].get<uint64_t>() >= static_cast<uint64_t>(n)) ||
          v[i].get<int64_t>() < 0 || v[i].get<int64_t>() >= n) {
        fail("{}: field '{}[{}]' must be a layer index in 0..{}, got {}", source,
             f.path("mlp_only_layers"), i, n - 1, detail::printable(v[i].dump()));
      }
      moe[static_cast<std::size_t>(v[i].get<int64_t>())] = 0;
    }
    by.push_back("mlp_only_layers");
  }
  if (f.present("decoder_sparse_step")) {  // Qwen: MoE where (i + 1) % step == 0
    const int64_t step = f.integer("decoder_sparse_step", 1, ConfigLimits::kLayers);
    for (int64_t i = 0; i < n; ++i) {
      if ((i + 1) % step != 0) moe[static_cast<std::size_t>(i)] = 0;
    }
    by.push_back(fmt::format("decoder_sparse_step {}", step));
  }
  if (f.present("first_k_dense_replace")) {  // DeepSeek: the first k layers dense
    const int64_t first = f.integer("first_k_dense_replace", 0, ConfigLimits::kLayers);
    for (int64_t i = 0; i < std::min(first, n); ++i) moe[static_cast<std::size_t>(i)] = 0;
    by.push_back(fmt::format("first_k_dense_replace {}", first));
  }
  if (f.present("moe_layer_freq")) {  // DeepSeek: MoE where i % freq == 0 (past the first k)
    const int64_t freq = f.integer("moe_layer_freq", 1, ConfigLimits::kLayers);
    for (int64_t i = 0; i < n; ++i) {
      if (i % freq != 0) moe[static_cast<std::size_t>(i)] = 0;
    }
    by.push_back(fmt::format("moe_layer_freq {}", freq));
  }
  for (int64_t i = 0; i < n; ++i)
    k.ffn[static_cast<std::size_t>(i)] = moe[static_cast<std::size_t>(i)] ? "moe" : "dense";
  if (by.empty()) {
    k.notes.push_back(fmt::format(
        "feed-forward kinds from {} {} and no layer pattern (mlp_only_layers, "
        "decoder_sparse_step, first_k_dense_replace, moe_layer_freq): every layer MoE",
        count_key, experts));
  } else {
    std::string list;
    for (const std::string& b : by) list += (list.empty() ? "" : ", ") + b;
    k.notes.push_back(fmt::format("feed-forward kinds from {} {} and {}", count_key, experts, list));
  }
}

}  // namespace

ConfigLayerKinds parse_layer_kinds_json(const Json& doc, const std::string& source) {
  if (!doc.is_object()) fail("{}: config must be a JSON object, got {}", source, doc.type_name());
  ConfigLayerKinds k;
  const Json* text = &doc;
  std::string prefix;
  auto model_type = [&](const Json& o) -> std::string {
    if (!o.contains("model_type") || o.at("model_type").is_null()) return "";
    if (!o.at("model_type").is_string()) {
      fail("{}: field '{}model_type' must be a string", source, &o == &doc ? "" : "text_config.");
    }
    return o.at("model_type").get<std::string>();
  };
  k.model_type = model_type(doc);
  if (doc.contains("text_config") && !doc.at("text_config").is_null()) {
    if (!doc.at("text_config").is_object()) {
      fail("{}: field 'text_config' must be an object, got {}", source,
           doc.at("text_config").type_name());
    }
    text = &doc.at("text_config");
    prefix = "text_config.";
    const std::string t = model_type(*text);
    if (k.model_type.empty()) k.model_type = t;
  }
  // Gemma-4 (and a config that names no model type, as tprobe's own fixtures): the Gemma-4
  // reader, its kinds exactly as before.
  if (k.model_type.empty() || k.model_type == "gemma4" || k.model_type == "gemma4_text") {
    const ConfigJson g = parse_config_json(doc, source);
    k.gemma4 = true;
    k.num_layers = g.config.num_layers;
    for (int64_t i = 0; i < g.config.num_layers; ++i) k.attention.push_back(g.config.layer(i).type);
    return k;
  }
  Reader f(*text, prefix, source);
  if (!f.has("num_hidden_layers")) {
    fail("{}: required field '{}' is missing", source, f.path("num_hidden_layers"));
  }
  k.num_layers = f.integer("num_hidden_layers", 1, ConfigLimits::kLayers);
  read_attention(f, source, k);
  read_ffn(f, source, k);
  return k;
}

ConfigLayerKinds read_layer_kinds_json(const std::string& path) {
  return parse_layer_kinds_json(
      detail::parse_json_strict(read_input_file(path, "config", kMaxSmallInputBytes), path), path);
}

}  // namespace tprobe::core
