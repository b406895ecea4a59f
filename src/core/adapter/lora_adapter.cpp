// Reads a PEFT LoRA adapter directory: config, single or sharded safetensors, paired and normed.
#include "tprobe/core/adapter/lora_adapter.hpp"
#include "tprobe/core/adapter/target_pattern.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "base/out_of_memory.hpp"
#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"

namespace tprobe::core {

namespace {

using detail::starts_with;

// A lora_alpha (or an alpha_pattern value): positive and finite; 0 scales every update of the
// modules it covers to nothing (PEFT's scale is alpha / r), an adapter that cannot act.
void check_alpha(double alpha, const std::string& path, const std::string& what) {
  if (alpha == 0) {
    fail("{}: {} is 0: it scales every update to nothing (the scale is lora_alpha / r), so the "
         "adapter cannot change the model",
         path, what);
  }
  if (!(std::isfinite(alpha) && alpha > 0)) {
    fail("{}: {} is {}: must be a positive number", path, what, alpha);
  }
}

// A rank_pattern / alpha_pattern key as PEFT matches it against a module's name:
// re.match(r"(^|.*\.)KEY$"), i.e. the whole name is KEY after an optional "<prefix>.".
std::string module_pattern(const std::string& key) { return "(?:.*\\.)?(?:" + key + ")"; }

std::string read_text(const std::string& path) {
  return read_input_file(path, "adapter file", kMaxSmallInputBytes);
}

// IEEE half -> float, subnormals and specials included.
float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude =
        mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The text-decoder prefixes PEFT module names carry, longest first: the multimodal model
// (Gemma4ForConditionalGeneration), the older "language_model.model." form, text-only.
constexpr const char* kTextPrefixes[] = {"model.language_model.", "language_model.model.",
                                         "model."};

struct ParsedName {
  bool lora = false;
  char which = 0;  // 'A' or 'B'
  std::string module, adapter_name;
};

// "<module>.lora_A.weight" or "<module>.lora_A.<adapter>.weight".
ParsedName parse_name(const std::string& name) {
  ParsedName p;
  for (char which : {'A', 'B'}) {
    const std::string marker = std::string(".lora_") + which + ".";
    std::size_t at = name.rfind(marker);
    if (at == std::string::npos || at == 0) continue;
    std::string tail = name.substr(at + marker.size());
    if (tail == "weight") {
      p.adapter_name = "";
    } else if (tail.size() > 7 && tail.compare(tail.size() - 7, 7, ".weight") == 0 &&
               tail.find('.') == tail.size() - 7) {
      p.adapter_name = tail.substr(0, tail.size() - 7);
    } else {
      continue;
    }
    p.lora = true;
    p.which = which;
    p.module = name.substr(0, at);
    return p;
  }
  return p;
}

// Splits the PEFT module name into prefix, layer and in-layer path.
void locate(AdapterModule& m) {
  std::size_t dot = m.module.rfind('.');
  m.target = dot == std::string::npos ? m.module : m.module.substr(dot + 1);
  for (const char* prefix : kTextPrefixes) {
    const std::string lp = std::string(prefix) + "layers.";
    if (!starts_with(m.module, lp)) continue;
    std::size_t end = m.module.find('.', lp.size());
    if (end == std::string::npos || end == lp.size() || end - lp.size() > 6) return;
    int64_t layer = 0;
    for (std::size_t i = lp.size(); i < end; ++i) {
      if (m.module[i] < '0' || m.module[i] > '9') return;
      layer = layer * 10 + (m.module[i] - '0');
    }
    m.text_prefix = prefix;
    m.layer = layer;
    m.path = m.module.substr(end + 1);
    return;
  }
}

std::string naming_form(const std::string& stored, const ParsedName& p, const AdapterModule& m) {
  const bool peft_root = starts_with(stored, "base_model.model.");
  return fmt::format("{}{}layers.N.{}.lora_X.{}weight", peft_root ? "base_model.model." : "",
                     m.text_prefix.empty() ? "<other>." : m.text_prefix,
                     m.path.empty() ? m.target : m.path,
                     p.adapter_name.empty() ? "" : p.adapter_name + ".");
}

}  // namespace

// Size: adapter_config.json read field by field in one pass, each check beside its field.
AdapterConfig parse_adapter_config(const std::string& text, const std::string& path) {
  Json doc = detail::parse_json_strict(text, path);
  if (!doc.is_object()) fail("{}: adapter_config.json must be a JSON object", path);
  AdapterConfig c;
  auto str = [&](const char* key, bool required) -> std::string {
    auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) {
      if (required) fail("{}: field '{}' is missing", path, key);
      return "";
    }
    if (!it->is_string())
      fail("{}: field '{}' must be a string, got {}", path, key, it->type_name());
    return it->get<std::string>();
  };
  c.peft_type = str("peft_type", true);
  if (c.peft_type != "LORA") {
    fail("{}: field 'peft_type' is '{}': only LORA adapters are gated", path, c.peft_type);
  }
  auto r = doc.find("r");
  if (r == doc.end() || !r->is_number_integer() || r->get<int64_t>() <= 0) {
    fail("{}: field 'r' must be a positive integer", path);
  }
  c.r = r->get<int64_t>();
  auto alpha = doc.find("lora_alpha");
  if (alpha != doc.end() && !alpha->is_null()) {
    if (!alpha->is_number()) fail("{}: field 'lora_alpha' must be a number", path);
    c.lora_alpha = alpha->get<double>();
    check_alpha(c.lora_alpha, path, "field 'lora_alpha'");
  }
  auto targets = doc.find("target_modules");
  if (targets == doc.end() || targets->is_null()) {
    fail("{}: field 'target_modules' is missing: cannot tell which modules should be adapted",
         path);
  }
  if (targets->is_string()) {
    c.target_regex = targets->get<std::string>();
    if (c.target_regex.empty()) fail("{}: field 'target_modules' is an empty string", path);
    // Refused here, naming the file, when outside the linear-time subset.
    TargetPattern check(c.target_regex, path);
  } else if (targets->is_array()) {
    for (const auto& t : *targets) {
      if (!t.is_string() || t.get<std::string>().empty()) {
        fail("{}: field 'target_modules' must list non-empty strings, got {}", path, t.dump());
      }
      c.target_modules.push_back(t.get<std::string>());
    }
    if (c.target_modules.empty()) fail("{}: field 'target_modules' is an empty list", path);
    std::sort(c.target_modules.begin(), c.target_modules.end());
    c.target_modules.erase(std::unique(c.target_modules.begin(), c.target_modules.end()),
                           c.target_modules.end());
  } else {
    fail("{}: field 'target_modules' must be a list or a string, got {}", path,
         targets->type_name());
  }
  auto layers = doc.find("layers_to_transform");
  if (layers != doc.end() && !layers->is_null()) {
    if (layers->is_number_integer()) {
      c.layers_to_transform.push_back(layers->get<int64_t>());
    } else if (layers->is_array()) {
      for (const auto& l : *layers) {
        if (!l.is_number_integer() || l.get<int64_t>() < 0) {
          fail("{}: field 'layers_to_transform' must list layer indices, got {}", path, l.dump());
        }
        c.layers_to_transform.push_back(l.get<int64_t>());
      }
    } else {
      fail("{}: field 'layers_to_transform' must be an integer or a list", path);
    }
  }
  auto exclude = doc.find("exclude_modules");
  if (exclude != doc.end() && !exclude->is_null()) {
    if (!exclude->is_array()) {
      fail("{}: field 'exclude_modules' in string (regex) form is not supported", path);
    }
    for (const auto& e : *exclude) {
      if (!e.is_string()) fail("{}: field 'exclude_modules' must list strings", path);
      c.exclude_modules.push_back(e.get<std::string>());
    }
  }
  // rank_pattern / alpha_pattern: {module-name regex: value}; each key must be one the
  // linear-time matcher runs (check_config_against_tensors matches it).
  auto pattern = [&](const char* key, auto&& each) {
    auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) return;
    if (!it->is_object()) {
      fail("{}: field '{}' must be an object {{module pattern: value}}, got {}", path, key,
           it->type_name());
    }
    for (auto member = it->begin(); member != it->end(); ++member) {
      const std::string& name = member.key();
      if (name.empty()) fail("{}: field '{}' has an empty module pattern", path, key);
      TargetPattern check(module_pattern(name), path);
      each(name, member.value());
    }
  };
  pattern("rank_pattern", [&](const std::string& name, const Json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (int64_t{1} << 20)) {
      fail("{}: rank_pattern '{}' is {}: a rank is an integer 1..1048576", path,
           detail::printable(name), detail::printable(v.dump()));
    }
    c.rank_patterns.emplace_back(name, v.get<int64_t>());
  });
  pattern("alpha_pattern", [&](const std::string& name, const Json& v) {
    if (!v.is_number()) {
      fail("{}: alpha_pattern '{}' is {}: must be a number", path, detail::printable(name),
           detail::printable(v.dump()));
    }
    check_alpha(v.get<double>(), path, "alpha_pattern '" + detail::printable(name) + "'");
    c.alpha_patterns.emplace_back(name, v.get<double>());
  });
  c.rank_pattern = !c.rank_patterns.empty();
  c.alpha_pattern = !c.alpha_patterns.empty();
  auto flag = [&](const char* key) {
    auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) return false;
    if (!it->is_boolean())
      fail("{}: field '{}' must be true or false, got {}", path, key, it->type_name());
    return it->get<bool>();
  };
  c.use_rslora = flag("use_rslora");
  // PEFT writes use_dora only from 0.9 on; a DoRA adapter also holds lora_magnitude_vector
  // tensors (LoraAdapter::other_tensors).
  c.use_dora = flag("use_dora");
  c.base_model_name_or_path = str("base_model_name_or_path", false);
  // modules_to_save: whole modules saved beside the LoRA pairs (the gate checks they are there).
  auto saved = doc.find("modules_to_save");
  if (saved != doc.end() && !saved->is_null()) {
    if (!saved->is_array()) {
      fail("{}: field 'modules_to_save' must be a list of module names, got {}", path,
           saved->type_name());
    }
    if (saved->size() > kMaxModulesToSave) {
      fail("{}: field 'modules_to_save' lists {} modules (limit {})", path, saved->size(),
           kMaxModulesToSave);
    }
    for (const auto& m : *saved) {
      if (!m.is_string() || m.get<std::string>().empty()) {
        fail("{}: field 'modules_to_save' must list non-empty strings, got {}", path,
             detail::printable(m.dump()));
      }
      if (m.get<std::string>().size() > kMaxModuleToSaveBytes) {
        fail("{}: field 'modules_to_save' lists a name of {} bytes (limit {}): {}", path,
             m.get<std::string>().size(), kMaxModuleToSaveBytes,
             detail::printable(m.get<std::string>()));
      }
      c.modules_to_save.push_back(m.get<std::string>());
    }
    std::sort(c.modules_to_save.begin(), c.modules_to_save.end());
    c.modules_to_save.erase(std::unique(c.modules_to_save.begin(), c.modules_to_save.end()),
                            c.modules_to_save.end());
  }
  const std::string bias = str("bias", false);
  if (!bias.empty()) {
    if (bias != "none" && bias != "all" && bias != "lora_only") {
      fail("{}: field 'bias' is '{}': PEFT's values are \"none\", \"all\" and \"lora_only\"", path,
           detail::printable(bias));
    }
    c.bias = bias;
  }
  return c;
}

namespace {

void check_lora_dtype(const TensorInfo& info, const std::string& file) {
  switch (info.dtype) {
    case DType::kF32:
    case DType::kF64:
    case DType::kF16:
    case DType::kBF16:
      return;
    default:
      fail("{}: tensor '{}' has dtype {}: a LoRA tensor must be F32, F16, BF16 or F64", file,
           info.name, to_string(info.dtype));
  }
}

// Adds `n` elements of `dtype` at `p` to `s`'s counts and to `sum` (the squares), in order: the
// same sum whether a tensor comes in one piece or in several.
void accumulate(DType dtype, const std::byte* p, int64_t n, TensorStats& s, double& sum) {
  auto add = [&](double v) {
    if (!std::isfinite(v)) {
      ++s.non_finite;
      return;
    }
    if (v != 0.0) ++s.nonzero;
    sum += v * v;
  };
  switch (dtype) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, p + i * 4, 4);
        add(f);
      }
      break;
    case DType::kF64:
      for (int64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + i * 8, 8);
        add(d);
      }
      break;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        add(dtype == DType::kF16 ? half_to_float(h) : bf16_to_float(h));
      }
      break;
    default:
      fail("internal: accumulate() on dtype {}", to_string(dtype));
  }
}

TensorStats stats_head(const TensorInfo& info, const std::string& file) {
  TensorStats s;
  s.name = info.name;
  s.file = file;
  s.dtype = info.dtype;
  s.shape = info.shape;
  return s;
}

// The bytes of an adapter tensor are read in pieces of this size (a multiple of every element
// size), so that memory stays bounded whatever the tensor's size.
constexpr std::size_t kStatsReadBytes = std::size_t{8} << 20;

// tensor_stats of `info` read from `f` piece by piece into `buf` (pread: a file that shrinks
// meanwhile is "changed while it was read", never a SIGBUS).
TensorStats read_tensor_stats(const SafetensorsFile& f, const TensorInfo& info,
                              std::vector<std::byte>& buf) {
  check_lora_dtype(info, f.path());
  TensorStats s = stats_head(info, f.path());
  const uint64_t total = info.end - info.begin;
  const auto elem = static_cast<uint64_t>(dtype_size(info.dtype));
  if (total > 0 && buf.empty()) {
    const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(total, kStatsReadBytes));
    detail::allocating(f.path() + ": tensor '" + info.name + "'", n, [&] { buf.resize(n); });
  }
  double sum = 0.0;
  for (uint64_t done = 0; done < total;) {
    const uint64_t piece = std::min<uint64_t>(total - done, buf.size() / elem * elem);
    f.read_data(info.begin + done, buf.data(), static_cast<std::size_t>(piece));
    accumulate(info.dtype, buf.data(), static_cast<int64_t>(piece / elem), s, sum);
    done += piece;
  }
  s.norm = std::sqrt(sum);
  return s;
}

}  // namespace

TensorStats tensor_stats(const TensorInfo& info, const ByteSpan& bytes, const std::string& file) {
  TensorStats s = stats_head(info, file);
  const int64_t n = info.numel();
  const int64_t size = dtype_size(info.dtype);
  if (static_cast<uint64_t>(n) * static_cast<uint64_t>(size) != bytes.size) {
    fail("{}: tensor '{}': {} bytes for {} elements of {}", file, info.name, bytes.size, n,
         to_string(info.dtype));
  }
  check_lora_dtype(info, file);
  double sum = 0.0;
  accumulate(info.dtype, bytes.data, n, s, sum);
  s.norm = std::sqrt(sum);
  return s;
}

LoraAdapter read_lora_adapter(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    fail("{}: not an adapter directory (does not exist or is not a directory)", dir);
  }
  LoraAdapter adapter;
  adapter.dir = dir;
  const std::string config_path = dir + "/" + kAdapterConfigName;
  if (!is_regular_file(config_path))
    fail("{}: no {} in the adapter directory", dir, kAdapterConfigName);
  adapter.config = parse_adapter_config(read_text(config_path), config_path);

  // The files and, for shards, which tensors each must hold.
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  const std::string index_path = dir + "/" + kAdapterIndexName;
  const std::string single_path = dir + "/" + kAdapterWeightsName;
  if (is_regular_file(index_path)) {
    adapter.sharded = true;
    Json index = detail::parse_json_strict(read_text(index_path), index_path);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail("{}: field 'weight_map' must be an object of tensor name -> shard file", index_path);
    }
    std::map<std::string, std::string> weight_map;
    std::set<std::string> shards;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) {
        fail("{}: weight_map['{}'] must be a file name string, got {}", index_path, name,
             file.type_name());
      }
      std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
        fail("{}: weight_map['{}'] = '{}' is not a file name inside the adapter directory",
             index_path, name, f);
      }
      weight_map[name] = f;
      shards.insert(f);
    }
    if (shards.empty()) fail("{}: weight_map lists no tensors", index_path);
    std::set<std::string> seen;
    for (const auto& s : shards) {
      const std::string path = dir + "/" + s;
      if (!is_regular_file(path))
        fail("{}: shard '{}' listed in the weight_map does not exist", index_path, s);
      files.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(path)));
      for (const auto& t : files.back()->tensors()) {
        if (!seen.insert(t.name).second) fail("{}: tensor '{}' is in two shards", dir, t.name);
        auto wm = weight_map.find(t.name);
        if (wm == weight_map.end()) {
          fail("{}: tensor '{}' is in shard '{}' but not in the weight_map", index_path, t.name, s);
        }
        if (wm->second != s) {
          fail("{}: weight_map puts tensor '{}' in '{}', but it is in '{}'", index_path, t.name,
               wm->second, s);
        }
      }
    }
    for (const auto& [name, file] : weight_map) {
      if (!seen.count(name)) {
        fail("{}: weight_map puts tensor '{}' in '{}', which has no such tensor", index_path, name,
             file);
      }
    }
  } else if (is_regular_file(single_path)) {
    files.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(single_path)));
  } else if (is_regular_file(dir + "/adapter_model.bin")) {
    fail(
        "{}: only a pickled adapter_model.bin is here; tprobe reads safetensors only (re-save "
        "with PEFT's save_pretrained(..., safe_serialization=True))",
        dir);
  } else {
    fail("{}: neither {} nor {} exists", dir, kAdapterWeightsName, kAdapterIndexName);
  }

  std::map<std::pair<std::string, std::string>, AdapterModule> modules;
  std::set<std::string> forms;
  std::vector<std::byte> buf;  // the read buffer, reused from tensor to tensor
  for (const auto& f : files) {
    adapter.files.push_back(f->path());
    for (const auto& t : f->tensors()) {
      TensorStats stats = read_tensor_stats(*f, t, buf);
      ParsedName p = parse_name(t.name);
      if (!p.lora) {
        adapter.other_tensors.push_back(std::move(stats));
        continue;
      }
      std::string module = p.module;
      if (starts_with(module, "base_model.model.")) module = module.substr(17);
      auto key = std::make_pair(module, p.adapter_name);
      AdapterModule& m = modules[key];
      if (m.module.empty()) {
        m.module = module;
        m.adapter_name = p.adapter_name;
        locate(m);
      }
      std::optional<TensorStats>& slot = p.which == 'A' ? m.a : m.b;
      if (slot) {
        // Two stored names for one module (with and without "base_model.model.").
        fail("{}: module '{}' has two lora_{} tensors: '{}' and '{}'", dir, module, p.which,
             slot->name, t.name);
      }
      slot = std::move(stats);
      forms.insert(naming_form(t.name, p, m));
    }
  }
  for (auto& [key, m] : modules) adapter.modules.push_back(std::move(m));
  std::sort(adapter.modules.begin(), adapter.modules.end(), [](const auto& x, const auto& y) {
    return std::tie(x.layer, x.path, x.module, x.adapter_name) <
           std::tie(y.layer, y.path, y.module, y.adapter_name);
  });
  // Forms differ only by module path; keep one line per prefix/adapter-name combination.
  std::set<std::string> compact;
  for (const auto& form : forms) {
    std::size_t n = form.find("layers.N.");
    std::size_t l = form.find(".lora_X.");
    compact.insert(n == std::string::npos || l == std::string::npos
                       ? form
                       : form.substr(0, n + 9) + "<module>" + form.substr(l));
  }
  adapter.naming_forms.assign(compact.begin(), compact.end());
  check_config_against_tensors(adapter, config_path);
  return adapter;
}

std::vector<ModuleScaling> module_scalings(const AdapterConfig& c,
                                           const std::vector<AdapterModule>& modules,
                                           const std::string& where) {
  std::vector<TargetPattern> rank_keys, alpha_keys;
  for (const auto& [key, rank] : c.rank_patterns) {
    rank_keys.emplace_back(module_pattern(key), where);
  }
  for (const auto& [key, alpha] : c.alpha_patterns) {
    alpha_keys.emplace_back(module_pattern(key), where);
  }
  const double alpha = c.lora_alpha > 0 ? c.lora_alpha : kPeftDefaultLoraAlpha;
  std::vector<ModuleScaling> out;
  out.reserve(modules.size());
  for (const AdapterModule& m : modules) {
    ModuleScaling s;
    s.rank = c.r;
    s.alpha = alpha;
    for (std::size_t k = 0; k < rank_keys.size(); ++k) {
      if (rank_keys[k].full_match(m.module)) {
        s.rank = c.rank_patterns[k].second;
        s.rank_key = c.rank_patterns[k].first;
        break;
      }
    }
    for (std::size_t k = 0; k < alpha_keys.size(); ++k) {
      if (alpha_keys[k].full_match(m.module)) {
        s.alpha = c.alpha_patterns[k].second;
        s.alpha_key = c.alpha_patterns[k].first;
        break;
      }
    }
    const double r = static_cast<double>(s.rank);
    s.scaling = s.alpha / (c.use_rslora ? std::sqrt(r) : r);
    out.push_back(std::move(s));
  }
  return out;
}

void check_config_against_tensors(const LoraAdapter& adapter, const std::string& config_path) {
  const AdapterConfig& c = adapter.config;
  if (c.lora_alpha != 0.0 && !(std::isfinite(c.lora_alpha) && c.lora_alpha > 0)) {
    fail("{}: field 'lora_alpha' is {}: must be a positive number", config_path, c.lora_alpha);
  }
  std::optional<TargetPattern> re;
  if (!c.target_regex.empty()) re.emplace(c.target_regex, config_path);
  const std::vector<ModuleScaling> scalings =
      module_scalings(c, adapter.modules, config_path);
  for (std::size_t i = 0; i < adapter.modules.size(); ++i) {
    const AdapterModule& m = adapter.modules[i];
    // Rank: lora_A is [r, in], lora_B is [out, r], r the config's or the first rank_pattern key
    // matching the module's name.
    const int64_t expected = scalings[i].rank;
    const std::string& by_key = scalings[i].rank_key;
    for (const bool is_a : {true, false}) {
      const std::optional<TensorStats>& t = is_a ? m.a : m.b;
      if (!t || t->shape.size() != 2) continue;
      const int64_t rank = is_a ? t->shape[0] : t->shape[1];
      if (rank == expected) continue;
      if (!by_key.empty()) {
        fail("{}: tensor '{}' has rank {} ([{}]), but {} says r = {} for it (rank_pattern '{}')",
             t->file, t->name, rank, fmt::join(t->shape, ", "), config_path, expected,
             detail::printable(by_key));
      }
      fail("{}: tensor '{}' has rank {} ([{}]), but {} says r = {}", t->file, t->name, rank,
           fmt::join(t->shape, ", "), config_path, c.r);
    }
    // Targets: PEFT adapts a module when its name is a target or ends with ".<target>" (list),
    // or when the whole name matches (string form).
    bool targeted = false;
    if (re) {
      targeted = re->full_match(m.module);
    } else {
      for (const auto& t : c.target_modules) {
        targeted = targeted || m.module == t || detail::ends_with(m.module, "." + t);
      }
    }
    if (!targeted) {
      const TensorStats& t0 = m.a ? *m.a : *m.b;
      const TensorStats* t = &t0;
      fail("{}: tensor '{}' adapts module '{}', which {} target_modules does not name", t->file,
           t->name, m.module, config_path);
    }
  }
}

}  // namespace tprobe::core
