// PEFT-style LoRA target matching over the text decoder's linear modules.
#include "tprobe/core/gemma4/lora_targets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/checked_math.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

namespace {

using detail::ends_with;
using detail::starts_with;
bool matches(const std::string& module, const std::string& target) {
  return module == target || ends_with(module, "." + target);
}

std::string trim(const std::string& s) { return std::string(detail::trim(s)); }

// "<prefix>layers.12.rest" -> 12; -1 otherwise.
int64_t layer_index(const std::string& name, const std::string& prefix, std::string* rest) {
  const std::string lp = prefix + "layers.";
  if (!starts_with(name, lp)) return -1;
  std::size_t dot = name.find('.', lp.size());
  if (dot == std::string::npos || dot == lp.size()) return -1;
  int64_t idx = 0;
  for (std::size_t i = lp.size(); i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || idx > 1000000) return -1;
    idx = idx * 10 + (name[i] - '0');
  }
  *rest = name.substr(dot + 1);
  return idx;
}

std::string join_layers(const std::vector<int64_t>& layers) {
  return fmt::format("{}", fmt::join(layers, ", "));
}

}  // namespace

std::string default_lora_targets() {
  return fmt::format("{}", fmt::join(linear_module_names(), ","));
}

void check_known_targets(const std::vector<std::string>& targets, const std::string& what) {
  const std::vector<std::string> known = linear_module_names();
  for (const auto& t : targets) {
    if (std::find(known.begin(), known.end(), t) == known.end()) {
      fail_usage("{}: unknown LoRA target '{}' (known: {})", what, t, fmt::join(known, ","));
    }
  }
}

std::vector<std::string> parse_target_list(const std::string& csv, const std::string& what) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = csv.find(',', start);
    std::string item =
        trim(csv.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) fail_usage("{} '{}': empty entry in the target list", what, csv);
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

LoraPlan plan_lora(const ModelConfig& config, const std::vector<TensorMeta>& tensors,
                   const std::string& prefix, const std::vector<std::string>& targets,
                   int64_t rank) {
  detail::require_count("LoRA rank", rank, detail::kMaxLoraRank);
  if (targets.empty()) fail_usage("the LoRA target list is empty");
  LoraPlan plan;
  plan.rank = rank;
  plan.targets = targets;

  // Linear modules and the non-linear parameters a target might name by mistake.
  std::vector<const TensorMeta*> sorted;
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorMeta* a, const TensorMeta* b) { return a->name < b->name; });
  std::map<std::string, std::vector<std::string>> non_linear_hits;  // target -> names
  std::map<std::string, std::set<int64_t>> layers_hit;
  for (const TensorMeta* t : sorted) {
    std::string rest;
    int64_t layer = layer_index(t->name, prefix, &rest);
    const bool linear = layer >= 0 && t->shape.size() == 2 && ends_with(t->name, ".weight");
    std::string module = linear ? t->name.substr(0, t->name.size() - 7) : t->name;
    for (const auto& target : targets) {
      if (!matches(module, target)) continue;
      if (!linear) {
        non_linear_hits[target].push_back(t->name);
        continue;
      }
      if (layer >= config.num_layers) continue;  // cross_check reports layers beyond the config
      LoraModule m;
      m.name = module;
      m.target = target;
      m.layer = layer;
      m.layer_type = config.layer_types[static_cast<std::size_t>(layer)];
      m.out_features = t->shape[0];
      m.in_features = t->shape[1];
      m.params = detail::mul_or_refuse(rank, m.in_features + m.out_features,
                                       "LoRA parameters (rank x features)");
      plan.modules.push_back(m);
      layers_hit[target].insert(layer);
      break;  // PEFT adapts a module once, whichever entry matched first
    }
  }

  for (const auto& target : targets) {
    LoraTargetSummary s;
    s.target = target;
    for (const auto& m : plan.modules) {
      if (m.target != target) continue;
      ++s.modules;
      (m.layer_type == LayerType::kFull ? s.full_modules : s.sliding_modules) += 1;
      s.trainable_params = detail::add_or_refuse(s.trainable_params, m.params, "LoRA parameters");
    }
    const std::set<int64_t>& hit = layers_hit[target];
    for (int64_t i = 0; i < config.num_layers; ++i) {
      if (!hit.count(i)) s.absent_layers.push_back(i);
    }
    plan.trainable_params =
        detail::add_or_refuse(plan.trainable_params, s.trainable_params, "LoRA parameters");
    plan.sliding_modules += s.sliding_modules;
    plan.full_modules += s.full_modules;

    if (!s.absent_layers.empty()) {
      LoraMissing miss;
      miss.target = target;
      miss.layers = s.absent_layers;
      std::set<LayerType> types;
      for (int64_t i : s.absent_layers)
        types.insert(config.layer_types[static_cast<std::size_t>(i)]);
      miss.layer_types = types.size() == 1 ? to_string(*types.begin()) : "mixed";
      const bool all_absent = s.modules == 0;
      if (all_absent && non_linear_hits.count(target)) {
        miss.message = fmt::format(
            "target '{}' matches no linear module: it names {} (e.g. '{}'), a fused 3-D expert "
            "parameter or other non-linear tensor that PEFT target_modules cannot adapt, so it "
            "trains nothing",
            target, non_linear_hits[target].size(), non_linear_hits[target].front());
      } else if (all_absent) {
        miss.message = fmt::format(
            "target '{}' matches no module of the text decoder: it trains "
            "nothing",
            target);
      } else if (matches("v_proj", target) && miss.layer_types == "full_attention" &&
                 config.attention_k_eq_v) {
        miss.message = fmt::format(
            "target '{}' is absent on the {} full_attention layers ({}): keys and values share "
            "k_proj there (attention_k_eq_v), so no v_proj adapter exists; a k_proj adapter on "
            "those layers changes K and V together (V is the raw k_proj output, before k_norm "
            "and RoPE)",
            target, miss.layers.size(), join_layers(miss.layers));
      } else {
        miss.message = fmt::format("target '{}' is absent on {} of {} layers ({}; {})", target,
                                   miss.layers.size(), config.num_layers, join_layers(miss.layers),
                                   miss.layer_types);
      }
      plan.missing.push_back(miss);
    }
    plan.per_target.push_back(std::move(s));
  }
  return plan;
}

}  // namespace tprobe::core
