// The inert-adapter gate: per-module state from the norms, the verdict, and the count check.
#include "tprobe/core/adapter/lora_gate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/adapter/target_pattern.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"

namespace tprobe::core {

namespace {

using detail::ends_with;
using detail::starts_with;

// Every linear projection of the decoder PEFT could adapt by name (the router's proj included:
// a regex or suffix may reach it).
const std::vector<std::string>& linear_names() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",    "o_proj",
                                                 "gate_proj", "up_proj", "down_proj", "proj"};
  return names;
}

std::string relative(const std::string& module, const std::string& prefix) {
  return starts_with(module, prefix) ? module.substr(prefix.size()) : module;
}

struct Expected {
  std::string full;  // base module name
  int64_t layer;
  LayerType type;
  std::string target;
  int64_t in, out;
};

// The modules PEFT would adapt on `base` under `config`, keyed "layers.N.path".
std::map<std::string, Expected> expected_modules(const AdapterConfig& config, const GateBase& base,
                                                 std::vector<std::string>* notes) {
  const bool regex_form = !config.target_regex.empty();
  LoraPlan plan = plan_lora(base.config, base.tensors, base.prefix,
                            regex_form ? linear_names() : config.target_modules, config.r);
  // Linear-time matching of PEFT's re.fullmatch (never a backtracking engine; target_pattern.hpp).
  std::optional<TargetPattern> re;
  if (regex_form) {
    re.emplace(config.target_regex, kAdapterConfigName);
  } else {
    for (const auto& miss : plan.missing) notes->push_back(miss.message);
  }
  std::set<int64_t> layers(config.layers_to_transform.begin(), config.layers_to_transform.end());
  std::map<std::string, Expected> out;
  for (const auto& m : plan.modules) {
    if (re && !re->full_match(m.name)) continue;
    if (!layers.empty() && !layers.count(m.layer)) continue;
    bool excluded = false;
    for (const auto& e : config.exclude_modules) {
      excluded = excluded || m.name == e || ends_with(m.name, "." + e);
    }
    if (excluded) continue;
    std::size_t dot = m.name.rfind('.');
    out[relative(m.name, base.prefix)] = {
        m.name, m.layer, m.layer_type, m.name.substr(dot + 1), m.in_features, m.out_features};
  }
  return out;
}

// A saved tensor's name without PEFT's root and, for a modules_to_save copy in a state dict, without
// ".modules_to_save.<adapter>": "base_model.model.lm_head.modules_to_save.default.weight" and
// "base_model.model.lm_head.weight" (PEFT's saved form) are both "lm_head.weight".
std::string saved_name(const std::string& stored) {
  std::string n = starts_with(stored, "base_model.model.") ? stored.substr(17) : stored;
  const std::string marker = ".modules_to_save.";
  const std::size_t at = n.find(marker);
  if (at != std::string::npos) {
    const std::size_t next = n.find('.', at + marker.size());  // past the adapter name
    if (next != std::string::npos) n = n.substr(0, at) + n.substr(next);
  }
  return n;
}

// A tensor name relative to the text decoder ("layers.0.self_attn.q_proj.bias"), PEFT's wrapped
// base layer (".base_layer.bias") read as the layer's own; names outside the decoder unchanged.
std::string decoder_relative(std::string name) {
  for (const char* prefix : {"model.language_model.", "language_model.model.", "model."}) {
    if (starts_with(name, prefix)) {
      name = name.substr(std::string(prefix).size());
      break;
    }
  }
  const std::string wrapped = ".base_layer.bias";
  if (ends_with(name, wrapped)) name = name.substr(0, name.size() - wrapped.size()) + ".bias";
  return name;
}

// Which modules_to_save entries name a module a saved tensor belongs to: PEFT saves the module it
// wraps, M, as "M.<param>" (a nested module's params have several components), and M is an entry
// E or ends with ".E". So E must equal a dot-aligned slice of the name that ends at a dot. Checked
// with a rolling hash over the name (each slice's hash in O(1), a hit compared byte for byte), so
// a tensor costs O(its length x the entries' distinct lengths): linear in the header, never the
// entries times every slice (the config caps them at kMaxModulesToSave of kMaxModuleToSaveBytes).
class SavedModuleMatcher {
 public:
  explicit SavedModuleMatcher(const std::vector<std::string>& entries) : entries_(entries) {
    std::set<std::size_t> lengths;
    for (std::size_t e = 0; e < entries_.size(); ++e) {
      by_key_[key(entries_[e].size(), hash(entries_[e], 0, entries_[e].size()))].push_back(e);
      lengths.insert(entries_[e].size());
    }
    lengths_.assign(lengths.begin(), lengths.end());
    const std::size_t longest = lengths_.empty() ? 0 : lengths_.back();
    power_.assign(longest + 1, 1);
    for (std::size_t i = 1; i <= longest; ++i) power_[i] = power_[i - 1] * kBase;
  }

  // matched[e] set for every entry naming a module `name` belongs to.
  void match(const std::string& name, std::vector<bool>& matched) {
    prefix_.assign(name.size() + 1, 0);
    for (std::size_t i = 0; i < name.size(); ++i) {
      prefix_[i + 1] = prefix_[i] * kBase + static_cast<unsigned char>(name[i]);
    }
    for (std::size_t end = 0; end < name.size(); ++end) {
      if (name[end] != '.') continue;
      for (std::size_t length : lengths_) {
        if (length > end) break;
        const std::size_t start = end - length;
        if (start > 0 && name[start - 1] != '.') continue;
        auto it = by_key_.find(key(length, prefix_[end] - prefix_[start] * power_[length]));
        if (it == by_key_.end()) continue;
        for (std::size_t e : it->second) {
          if (!matched[e] && name.compare(start, length, entries_[e]) == 0) matched[e] = true;
        }
      }
    }
  }

 private:
  static constexpr uint64_t kBase = 1099511628211ull;  // odd; arithmetic mod 2^64
  static uint64_t hash(const std::string& s, std::size_t from, std::size_t to) {
    uint64_t h = 0;
    for (std::size_t i = from; i < to; ++i) h = h * kBase + static_cast<unsigned char>(s[i]);
    return h;
  }
  static std::pair<std::size_t, uint64_t> key(std::size_t length, uint64_t h) {
    return {length, h};
  }
  const std::vector<std::string>& entries_;
  std::map<std::pair<std::size_t, uint64_t>, std::vector<std::size_t>> by_key_;
  std::vector<std::size_t> lengths_;
  std::vector<uint64_t> power_, prefix_;
};

// modules_to_save: each listed module's saved copies, present and finite (the gate reads no base
// weights, so it cannot tell a trained copy from an untrained one).
void check_saved_modules(const LoraAdapter& adapter, LoraGateReport& r,
                         std::set<std::string>& claimed) {
  const std::vector<std::string>& entries = adapter.config.modules_to_save;
  if (entries.empty()) return;
  std::vector<SavedModule> saved(entries.size());
  std::vector<double> sums(entries.size(), 0.0);
  SavedModuleMatcher matcher(entries);
  std::vector<bool> matched;
  for (const TensorStats& t : adapter.other_tensors) {
    matched.assign(entries.size(), false);
    matcher.match(saved_name(t.name), matched);
    for (std::size_t e = 0; e < entries.size(); ++e) {
      if (!matched[e]) continue;
      SavedModule& m = saved[e];
      m.tensors.push_back(t.name);
      m.non_finite += t.non_finite;
      m.nonzero += t.nonzero;
      sums[e] += t.norm * t.norm;
      claimed.insert(t.name);
    }
  }
  for (std::size_t e = 0; e < entries.size(); ++e) {
    SavedModule& m = saved[e];
    m.name = entries[e];
    m.norm = std::sqrt(sums[e]);
    if (m.tensors.empty()) {
      m.problem = fmt::format(
          "modules_to_save lists '{}', but the adapter holds no tensor saved for it (PEFT saves "
          "it as '<module>.weight' or '<module>.modules_to_save.<adapter>.weight'): loading the "
          "adapter keeps the base's copy, and what training changed in it is lost",
          detail::printable(m.name));
    } else if (m.non_finite > 0) {
      m.problem = fmt::format("modules_to_save '{}': {} non-finite values in its saved copy",
                              detail::printable(m.name), m.non_finite);
    }
    r.modules_to_save.push_back(std::move(m));
  }
}

// bias "all" / "lora_only": the base's bias tensors PEFT trains under it must be in the adapter.
void check_bias(const LoraAdapter& adapter, const std::optional<GateBase>& base,
                LoraGateReport& r, std::set<std::string>& claimed) {
  BiasCheck& b = r.bias;
  b.mode = adapter.config.bias;
  if (b.mode == "none") return;
  std::set<std::string> held;
  for (const TensorStats& t : adapter.other_tensors) {
    if (claimed.count(t.name) || !ends_with(t.name, ".bias")) continue;
    b.found.push_back(t.name);
    held.insert(decoder_relative(saved_name(t.name)));
    claimed.insert(t.name);
  }
  if (!base) {
    b.note = fmt::format(
        "bias '{}' not checked: no base model to tell which bias tensors exist; the adapter holds "
        "{} bias tensor(s)",
        b.mode, b.found.size());
    return;
  }
  b.checked = true;
  std::set<std::string> adapted;  // "layers.N.path" of the adapted modules
  for (const AdapterModule& m : adapter.modules) {
    if (m.layer >= 0) adapted.insert("layers." + std::to_string(m.layer) + "." + m.path);
  }
  for (const TensorMeta& t : base->tensors) {
    if (!ends_with(t.name, ".bias")) continue;
    const std::string rel = relative(t.name, base->prefix);
    if (b.mode == "lora_only" && !adapted.count(rel.substr(0, rel.size() - 5))) continue;
    b.expected.push_back(rel);
    if (!held.count(rel)) b.missing.push_back(rel);
  }
  const std::string which = b.mode == "all" ? "" : " on the adapted modules";
  if (b.expected.empty()) {
    b.note = fmt::format(
        "bias '{}': the base ({}) has no bias tensors{} (Gemma-4's linear layers have none), so "
        "there is nothing for it to train{}",
        b.mode, base->source, which,
        b.found.empty() ? std::string("; the adapter holds none either")
                        : fmt::format("; the adapter holds {} bias tensor(s) anyway (e.g. {}), "
                                      "which no parameter of the base takes",
                                      b.found.size(), b.found.front()));
  } else if (!b.missing.empty()) {
    b.note = fmt::format(
        "bias '{}': {} of the base's {} bias tensor(s){} are not in the adapter (first: {}): PEFT "
        "trains and saves them under this setting",
        b.mode, b.missing.size(), b.expected.size(), which, b.missing.front());
  } else {
    b.note = fmt::format("bias '{}': all {} bias tensor(s) of the base{} are in the adapter",
                         b.mode, b.expected.size(), which);
  }
}

std::string layer_list(const std::vector<int64_t>& layers) {
  return fmt::format("{}", fmt::join(layers, ", "));
}

}  // namespace

const char* to_string(ModuleState state) {
  switch (state) {
    case ModuleState::kLearned:
      return "learned";
    case ModuleState::kInert:
      return "inert";
    case ModuleState::kDeadA:
      return "dead_a";
    case ModuleState::kNegligible:
      return "negligible";
    case ModuleState::kNonFinite:
      return "non_finite";
    case ModuleState::kIncomplete:
      return "incomplete";
    case ModuleState::kBadShape:
      return "bad_shape";
  }
  return "?";
}

const char* to_string(GateVerdict verdict) {
  switch (verdict) {
    case GateVerdict::kReal:
      return "real";
    case GateVerdict::kInert:
      return "inert";
    case GateVerdict::kPartial:
      return "partial";
    case GateVerdict::kBroken:
      return "broken";
    case GateVerdict::kEmpty:
      return "empty";
  }
  return "?";
}

bool LoraGateReport::passed() const {
  bool saved_ok = true;
  for (const auto& m : modules_to_save) saved_ok = saved_ok && m.problem.empty();
  return verdict == GateVerdict::kReal && (!count.checked || count.ok()) && saved_ok && bias.ok();
}

GateBase gate_base_from_checkpoint(const Checkpoint& ck) {
  std::vector<TensorMeta> tensors = ck.tensors();
  const std::vector<Disagreement> disagreements =
      cross_check(ck.config(), tensors, ck.text_prefix());
  if (!disagreements.empty()) {
    // One line, worded as parity's loader words it: the first disagreement and how many more.
    const Disagreement& d = disagreements.front();
    fail("{}: checkpoint disagrees with its config.json: {}: {}{}", ck.dir(), d.tensor, d.message,
         disagreements.size() > 1
             ? fmt::format(" (and {} more; tprobe inspect --checkpoint lists them)",
                           disagreements.size() - 1)
             : "");
  }
  return GateBase{ck.config(), std::move(tensors), ck.text_prefix(), "--checkpoint " + ck.dir()};
}

GateBase gate_base_from_model(const std::string& name) {
  GateBase base;
  base.config = embedded_model(name);
  base.prefix = kMultimodalTextPrefix;
  base.tensors = expected_text_tensors(base.config, base.prefix);
  base.source = "embedded model " + name;
  return base;
}

std::optional<GateBase> gate_base_from_adapter(const LoraAdapter& adapter) {
  const auto names = embedded_model_names();
  const std::string& named = adapter.config.base_model_name_or_path;
  if (std::find(names.begin(), names.end(), named) == names.end()) return std::nullopt;
  GateBase base = gate_base_from_model(named);
  base.source = "adapter_config.json base_model_name_or_path '" + named + "'";
  return base;
}

// Size: the gate's checks in the order the verdict weighs them, over one set of module maps.
LoraGateReport gate_lora_adapter(const LoraAdapter& adapter, const std::optional<GateBase>& base) {
  LoraGateReport r;
  r.dir = adapter.dir;
  r.files = adapter.files;
  r.sharded = adapter.sharded;
  r.config = adapter.config;
  r.naming_forms = adapter.naming_forms;
  r.other_tensors = adapter.other_tensors;

  std::map<std::string, Expected> expected;
  if (base) {
    expected = expected_modules(adapter.config, *base, &r.count.absent_notes);
    r.count.checked = true;
    r.count.base_source = base->source;
    r.count.expected = static_cast<int64_t>(expected.size());
  } else {
    r.count.why_unchecked =
        "no base model given and adapter_config.json's "
        "base_model_name_or_path names no embedded model";
  }

  std::set<std::string> dtypes, found_keys;
  std::map<std::string, GateTargetRow> targets;
  std::map<std::string, int64_t> b_seen;
  const std::vector<ModuleScaling> scalings =
      module_scalings(adapter.config, adapter.modules, kAdapterConfigName);
  for (std::size_t index = 0; index < adapter.modules.size(); ++index) {
    const AdapterModule& am = adapter.modules[index];
    const ModuleScaling& scale = scalings[index];
    GateModule m;
    m.scaling = scale.scaling;
    if (am.a && am.b) m.update_bound = scale.scaling * am.b->norm * am.a->norm;
    m.module = am.module;
    m.adapter_name = am.adapter_name;
    m.layer = am.layer;
    m.target = am.target;
    m.in_text_decoder = am.layer >= 0;
    if (am.a) {
      m.a_shape = am.a->shape;
      m.a_norm = am.a->norm;
      if (!am.a->shape.empty()) m.rank = am.a->shape[0];
    }
    if (am.b) m.b_shape = am.b->shape, m.b_norm = am.b->norm;
    const TensorStats* any = am.b ? &*am.b : am.a ? &*am.a : nullptr;
    if (any) {
      m.dtype = to_string(any->dtype);
      dtypes.insert(m.dtype);
    }
    const std::string key = "layers." + std::to_string(am.layer) + "." + am.path;
    const Expected* exp = nullptr;
    if (m.in_text_decoder && base) {
      if (am.layer < base->config.num_layers) {
        m.layer_type = base->config.layer_types[static_cast<std::size_t>(am.layer)];
      }
      auto it = expected.find(key);
      if (it != expected.end() && !found_keys.count(key)) {
        exp = &it->second;
        m.expected = true;
      }
    }
    if (m.in_text_decoder) {
      if (found_keys.count(key)) {
        r.count.unexpected.push_back(
            fmt::format("{} (second copy, adapter name '{}')", am.module, am.adapter_name));
      } else if (base && !exp) {
        r.count.unexpected.push_back(am.module);
      }
      found_keys.insert(key);
    } else {
      r.outside_text.push_back(am.module);
    }

    // State, worst first.
    if (!am.a || !am.b) {
      m.state = ModuleState::kIncomplete;
      m.message = fmt::format("lora_{} is missing", am.a ? 'B' : 'A');
    } else if (am.a->non_finite || am.b->non_finite) {
      m.state = ModuleState::kNonFinite;
      m.message = fmt::format("{} non-finite values in lora_A, {} in lora_B", am.a->non_finite,
                              am.b->non_finite);
    } else if (am.a->shape.size() != 2 || am.b->shape.size() != 2 ||
               am.a->shape[0] != am.b->shape[1]) {
      m.state = ModuleState::kBadShape;
      m.message = fmt::format("lora_A [{}] and lora_B [{}] are not [r, in] and [out, r]",
                              fmt::join(am.a->shape, ", "), fmt::join(am.b->shape, ", "));
    } else if (exp && (am.a->shape[1] != exp->in || am.b->shape[0] != exp->out)) {
      m.state = ModuleState::kBadShape;
      m.message = fmt::format(
          "lora_A [{}] / lora_B [{}] do not fit the base linear {} ([out {}, in {}])",
          fmt::join(am.a->shape, ", "), fmt::join(am.b->shape, ", "), exp->full, exp->out, exp->in);
    } else if (am.b->nonzero == 0) {
      m.state = ModuleState::kInert;
      m.message = "lora_B is all zero: the module adds nothing";
    } else if (am.a->nonzero == 0) {
      m.state = ModuleState::kDeadA;
      m.message = "lora_A is all zero: the module adds nothing and lora_B gets no gradient";
    } else if (!(scale.scaling >= kNegligibleUpdate) || !(*m.update_bound >= kNegligibleUpdate)) {
      // Not written as `<`: a NaN (an overflowing product) is negligible too, never "learned".
      m.state = ModuleState::kNegligible;
      const std::string from =
          fmt::format("alpha {}{} / {}rank {}{}", scale.alpha,
                      scale.alpha_key.empty() ? "" : " (alpha_pattern '" +
                                                         detail::printable(scale.alpha_key) + "')",
                      adapter.config.use_rslora ? "sqrt " : "", scale.rank,
                      scale.rank_key.empty()
                          ? ""
                          : " (rank_pattern '" + detail::printable(scale.rank_key) + "')");
      m.message =
          !(scale.scaling >= kNegligibleUpdate)
              ? fmt::format("the scaling {} = {:.3g} is below 2^-126 (float32's smallest normal "
                            "number): the update is scaled to nothing",
                            from, scale.scaling)
              : fmt::format("the update's elements are at most scaling * |B| * |A| = {:.3g} "
                            "(scaling {} = {:.3g}), below 2^-126 (float32's smallest normal "
                            "number): the module adds nothing",
                            *m.update_bound, from, scale.scaling);
    }

    GateTargetRow& row = targets[am.target];
    row.target = am.target;
    if (m.in_text_decoder) {
      ++row.found;
      if (m.layer_type) ++(*m.layer_type == LayerType::kFull ? row.full : row.sliding);
    }
    if (am.b) {
      const bool first = b_seen[am.target]++ == 0;
      row.min_b_norm = first ? am.b->norm : std::min(row.min_b_norm, am.b->norm);
      row.max_b_norm = std::max(row.max_b_norm, am.b->norm);
      if (am.b->nonzero == 0) ++row.inert;
    }
    r.modules.push_back(std::move(m));
  }
  r.dtypes.assign(dtypes.begin(), dtypes.end());

  if (base) {
    for (const auto& [key, exp] : expected) {
      if (!found_keys.count(key)) r.count.missing.push_back(exp.full);
    }
    r.count.found = static_cast<int64_t>(found_keys.size());
    std::map<std::string, int64_t> per_target_expected;
    for (const auto& [key, exp] : expected) ++per_target_expected[exp.target];
    for (const auto& [target, n] : per_target_expected) {
      targets[target].target = target;
      targets[target].expected = n;
    }
    for (auto& [target, row] : targets) {
      if (row.expected < 0) row.expected = 0;
    }
  }
  for (auto& [target, row] : targets) r.per_target.push_back(row);

  std::set<std::string> claimed;  // other tensors the two checks below account for
  check_saved_modules(adapter, r, claimed);
  check_bias(adapter, base, r, claimed);

  // Verdict.
  std::map<ModuleState, std::vector<const GateModule*>> by_state;
  for (const auto& m : r.modules) by_state[m.state].push_back(&m);
  auto count_of = [&](ModuleState s) {
    auto it = by_state.find(s);
    return it == by_state.end() ? std::size_t{0} : it->second.size();
  };
  const std::size_t total = r.modules.size();
  auto describe = [&](ModuleState s) {
    // "v_proj on layers 0, 1; q_proj on layer 3"
    std::map<std::string, std::vector<int64_t>> where;
    for (const GateModule* m : by_state[s]) where[m->target].push_back(m->layer);
    std::vector<std::string> parts;
    for (const auto& [target, layers] : where) {
      parts.push_back(fmt::format("{} on layer{} {}", target, layers.size() == 1 ? "" : "s",
                                  layer_list(layers)));
    }
    return fmt::format("{}", fmt::join(parts, "; "));
  };
  const std::size_t broken = count_of(ModuleState::kNonFinite) +
                             count_of(ModuleState::kIncomplete) + count_of(ModuleState::kBadShape);
  if (total == 0) {
    r.verdict = GateVerdict::kEmpty;
    r.verdict_message = fmt::format("{}: no lora_A / lora_B tensors at all", r.dir);
  } else if (broken > 0) {
    r.verdict = GateVerdict::kBroken;
    std::vector<std::string> parts;
    for (ModuleState s :
         {ModuleState::kNonFinite, ModuleState::kIncomplete, ModuleState::kBadShape}) {
      if (count_of(s))
        parts.push_back(fmt::format("{} {} ({})", count_of(s), to_string(s), describe(s)));
    }
    r.verdict_message =
        fmt::format("broken adapter: {} of {} modules: {}", broken, total, fmt::join(parts, "; "));
  } else if (count_of(ModuleState::kLearned) == total) {
    r.verdict = GateVerdict::kReal;
    r.verdict_message =
        fmt::format("real: every one of the {} modules has a non-zero lora_B and lora_A", total);
  } else if (count_of(ModuleState::kInert) == total) {
    r.verdict = GateVerdict::kInert;
    r.verdict_message = fmt::format(
        "inert: all {} lora_B tensors are zero, so the adapter changes nothing (untrained, or "
        "trained without gradients reaching the adapters: e.g. gradient checkpointing over a "
        "frozen base whose inputs do not require grad)",
        total);
  } else if (count_of(ModuleState::kInert) + count_of(ModuleState::kNegligible) == total) {
    r.verdict = GateVerdict::kInert;
    const GateModule& first = *by_state[ModuleState::kNegligible].front();
    r.verdict_message = fmt::format(
        "inert in effect: {} of {} modules have non-zero tensors whose update the scaling "
        "(lora_alpha / r) brings below 2^-126, where float32 and bf16 arithmetic lose it{} "
        "(first: {}: {})",
        count_of(ModuleState::kNegligible), total,
        count_of(ModuleState::kInert)
            ? fmt::format(", and {} have an all-zero lora_B", count_of(ModuleState::kInert))
            : std::string(),
        first.module, first.message);
  } else {
    r.verdict = GateVerdict::kPartial;
    std::vector<std::string> parts;
    for (ModuleState s : {ModuleState::kInert, ModuleState::kDeadA, ModuleState::kNegligible}) {
      if (count_of(s))
        parts.push_back(fmt::format("{} {} ({})", count_of(s), to_string(s), describe(s)));
    }
    r.verdict_message = fmt::format(
        "partial: {} of {} modules learned, the rest add nothing: {} — a module-selection "
        "problem (those modules got no gradient or were frozen)",
        count_of(ModuleState::kLearned), total, fmt::join(parts, "; "));
  }

  auto diag = [&](Severity s, const char* code, std::string msg) {
    r.diagnostics.push_back({s, code, std::move(msg)});
  };
  switch (r.verdict) {
    case GateVerdict::kReal:
      break;
    case GateVerdict::kInert:
      diag(Severity::kError, "inert_adapter", r.verdict_message);
      break;
    case GateVerdict::kPartial:
      diag(Severity::kError, "partial_adapter", r.verdict_message);
      break;
    case GateVerdict::kBroken:
      diag(Severity::kError, "broken_adapter", r.verdict_message);
      break;
    case GateVerdict::kEmpty:
      diag(Severity::kError, "empty_adapter", r.verdict_message);
      break;
  }
  if (r.count.checked && !r.count.ok()) {
    std::string msg = fmt::format(
        "module count: {} expected from {} ({}), {} found", r.count.expected, r.count.base_source,
        r.config.target_regex.empty()
            ? fmt::format("targets {}", fmt::join(r.config.target_modules, ","))
            : "target regex '" + r.config.target_regex + "'",
        r.count.found);
    if (!r.count.missing.empty()) {
      msg +=
          fmt::format("; {} missing (first: {})", r.count.missing.size(), r.count.missing.front());
    }
    if (!r.count.unexpected.empty()) {
      msg += fmt::format("; {} not expected (first: {})", r.count.unexpected.size(),
                         r.count.unexpected.front());
    }
    diag(Severity::kError, "count_mismatch", msg);
  } else if (!r.count.checked) {
    diag(Severity::kWarning, "count_unchecked",
         "module count not checked: " + r.count.why_unchecked);
  }
  for (const auto& note : r.count.absent_notes) diag(Severity::kInfo, "target_absent", note);
  if (!r.outside_text.empty()) {
    diag(Severity::kInfo, "outside_text_decoder",
         fmt::format("{} adapted modules are outside the text decoder (e.g. {}); not counted",
                     r.outside_text.size(), r.outside_text.front()));
  }
  for (const SavedModule& m : r.modules_to_save) {
    if (!m.problem.empty()) {
      diag(Severity::kError,
           m.tensors.empty() ? "modules_to_save_missing" : "modules_to_save_non_finite",
           m.problem);
    } else if (m.nonzero == 0) {
      diag(Severity::kWarning, "modules_to_save_zero",
           fmt::format("modules_to_save '{}': its {} saved tensor(s) are all zero: loading the "
                       "adapter replaces the base's module with zeros",
                       detail::printable(m.name), m.tensors.size()));
    }
  }
  if (r.bias.mode != "none") {
    if (!r.bias.ok()) {
      diag(Severity::kError, "bias_missing", r.bias.note);
    } else if (!r.bias.checked) {
      diag(Severity::kWarning, "bias_unchecked", r.bias.note);
    } else if (r.bias.expected.empty()) {
      diag(Severity::kWarning, "bias_nothing_to_train", r.bias.note);
    } else {
      diag(Severity::kInfo, "bias_present", r.bias.note);
    }
  }
  std::vector<const TensorStats*> unaccounted;
  for (const TensorStats& t : r.other_tensors) {
    if (!claimed.count(t.name)) unaccounted.push_back(&t);
  }
  if (!unaccounted.empty()) {
    diag(Severity::kWarning, "other_tensors",
         fmt::format("{} tensors are neither lora_A nor lora_B{} (e.g. {}); not gated",
                     unaccounted.size(),
                     r.config.modules_to_save.empty() ? "" : " nor a modules_to_save copy",
                     unaccounted.front()->name));
  }
  r.outcome = r.passed() ? Outcome::kOk : Outcome::kNo;
  return r;
}

}  // namespace tprobe::core
