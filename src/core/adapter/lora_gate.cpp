// The inert-adapter gate: per-module state from the norms, the verdict, and the count check.
#include "tprobe/core/adapter/lora_gate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

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
  return verdict == GateVerdict::kReal && (!count.checked || count.ok());
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
  for (const auto& am : adapter.modules) {
    GateModule m;
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
        m.layer_type = to_string(base->config.layer_types[static_cast<std::size_t>(am.layer)]);
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
    }

    GateTargetRow& row = targets[am.target];
    row.target = am.target;
    if (m.in_text_decoder) {
      ++row.found;
      if (m.layer_type == "full_attention") ++row.full;
      if (m.layer_type == "sliding_attention") ++row.sliding;
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
  } else {
    r.verdict = GateVerdict::kPartial;
    std::vector<std::string> parts;
    for (ModuleState s : {ModuleState::kInert, ModuleState::kDeadA}) {
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
  if (!r.other_tensors.empty()) {
    diag(Severity::kWarning, "other_tensors",
         fmt::format("{} tensors are neither lora_A nor lora_B (e.g. {}); not gated",
                     r.other_tensors.size(), r.other_tensors.front().name));
  }
  r.outcome = r.passed() ? Outcome::kOk : Outcome::kNo;
  return r;
}

}  // namespace tprobe::core
