// The lora-gate evidence (results) and its terminal tables.
#include "tprobe/core/adapter/lora_gate_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {

namespace {

Json optional_number(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

std::string norm_cell(const std::optional<double>& v) {
  if (!v) return "-";
  if (*v == 0.0) return "0";
  return format_sci(*v, 3);
}

}  // namespace

Json to_json(const LoraGateReport& r) {
  Json out;
  out["adapter_dir"] = r.dir;
  out["files"] = r.files;
  out["sharded"] = r.sharded;
  Json cfg;
  cfg["peft_type"] = r.config.peft_type;
  cfg["r"] = r.config.r;
  cfg["lora_alpha"] = r.config.lora_alpha;
  if (r.config.target_regex.empty()) {
    cfg["target_modules"] = r.config.target_modules;
  } else {
    cfg["target_modules"] = r.config.target_regex;
  }
  cfg["layers_to_transform"] = r.config.layers_to_transform;
  cfg["exclude_modules"] = r.config.exclude_modules;
  cfg["base_model_name_or_path"] = r.config.base_model_name_or_path;
  cfg["modules_to_save"] = r.config.modules_to_save;
  cfg["bias"] = r.config.bias;
  out["adapter_config"] = std::move(cfg);
  out["naming_forms"] = r.naming_forms;
  out["dtypes"] = r.dtypes;
  out["verdict"] = to_string(r.verdict);
  out["verdict_message"] = r.verdict_message;
  out["passed"] = r.passed();
  int64_t learned = 0, inert = 0, other = 0;
  for (const auto& m : r.modules) {
    (m.state == ModuleState::kLearned ? learned
     : m.state == ModuleState::kInert ? inert
                                      : other) += 1;
  }
  out["module_count"] = static_cast<int64_t>(r.modules.size());
  out["learned_modules"] = learned;
  out["inert_modules"] = inert;
  out["other_problem_modules"] = other;
  Json count;
  count["checked"] = r.count.checked;
  count["ok"] = r.count.ok();
  count["base_source"] = r.count.checked ? Json(r.count.base_source) : Json(nullptr);
  count["why_unchecked"] = r.count.checked ? Json(nullptr) : Json(r.count.why_unchecked);
  count["expected_modules"] = r.count.checked ? Json(r.count.expected) : Json(nullptr);
  count["found_modules"] = r.count.found;
  count["missing"] = r.count.missing;
  count["unexpected"] = r.count.unexpected;
  count["absent_notes"] = r.count.absent_notes;
  out["count"] = std::move(count);
  Json targets = Json::array();
  for (const auto& t : r.per_target) {
    targets.push_back({{"target", t.target},
                       {"expected", t.expected < 0 ? Json(nullptr) : Json(t.expected)},
                       {"found", t.found},
                       {"sliding", t.sliding},
                       {"full", t.full},
                       {"inert", t.inert},
                       {"min_b_norm", t.min_b_norm},
                       {"max_b_norm", t.max_b_norm}});
  }
  out["per_target"] = std::move(targets);
  Json modules = Json::array();
  for (const auto& m : r.modules) {
    Json row;
    row["module"] = m.module;
    row["adapter_name"] = m.adapter_name;
    row["layer"] = m.layer < 0 ? Json(nullptr) : Json(m.layer);
    row["layer_type"] = m.layer_type ? Json(to_string(*m.layer_type)) : Json(nullptr);
    row["target"] = m.target;
    row["rank"] = m.rank;
    row["dtype"] = m.dtype;
    row["a_shape"] = m.a_shape;
    row["b_shape"] = m.b_shape;
    row["a_norm"] = optional_number(m.a_norm);
    row["b_norm"] = optional_number(m.b_norm);
    row["scaling"] = m.scaling;
    row["update_bound"] = optional_number(m.update_bound);
    row["in_text_decoder"] = m.in_text_decoder;
    row["expected"] = m.expected;
    row["state"] = to_string(m.state);
    row["message"] = m.message;
    modules.push_back(std::move(row));
  }
  out["modules"] = std::move(modules);
  out["outside_text_decoder"] = r.outside_text;
  Json other_tensors = Json::array();
  for (const auto& t : r.other_tensors) {
    other_tensors.push_back(
        {{"name", t.name}, {"dtype", to_string(t.dtype)}, {"shape", t.shape}, {"norm", t.norm}});
  }
  out["other_tensors"] = std::move(other_tensors);
  Json saved = Json::array();
  for (const auto& m : r.modules_to_save) {
    saved.push_back({{"module", m.name},
                     {"tensors", m.tensors},
                     {"non_finite", m.non_finite},
                     {"nonzero", m.nonzero},
                     {"norm", m.norm},
                     {"problem", m.problem.empty() ? Json(nullptr) : Json(m.problem)}});
  }
  out["modules_to_save"] = std::move(saved);
  out["bias"] = {{"mode", r.bias.mode},         {"checked", r.bias.checked},
                 {"ok", r.bias.ok()},           {"expected", r.bias.expected},
                 {"missing", r.bias.missing},   {"found", r.bias.found},
                 {"note", r.bias.note}};
  return out;
}

LoraGateReport lora_gate_report_from_json(const Json& results, const std::string& where) {
  using namespace json_read;
  LoraGateReport r;
  r.dir = string(results, "adapter_dir", where);
  r.files = strings(results, "files", where);
  r.sharded = boolean(results, "sharded", where);

  const Json& cfg = object(results, "adapter_config", where);
  const std::string cw = where + " adapter_config";
  r.config.peft_type = string(cfg, "peft_type", cw);
  r.config.r = integer(cfg, "r", cw, 0);
  r.config.lora_alpha = number(cfg, "lora_alpha", cw);
  // PEFT's two spellings: a list of names, or one regex string.
  if (field(cfg, "target_modules", cw).is_string()) {
    r.config.target_regex = string(cfg, "target_modules", cw);
  } else {
    r.config.target_modules = strings(cfg, "target_modules", cw);
  }
  r.config.layers_to_transform = integers(cfg, "layers_to_transform", cw, 0);
  r.config.exclude_modules = strings(cfg, "exclude_modules", cw);
  r.config.base_model_name_or_path = string(cfg, "base_model_name_or_path", cw);
  r.config.modules_to_save = strings(cfg, "modules_to_save", cw);
  r.config.bias = string(cfg, "bias", cw);

  r.naming_forms = strings(results, "naming_forms", where);
  r.dtypes = strings(results, "dtypes", where);
  r.verdict = enum_value(results, "verdict", where,
                         {GateVerdict::kReal, GateVerdict::kInert, GateVerdict::kPartial,
                          GateVerdict::kBroken, GateVerdict::kEmpty});
  r.verdict_message = string(results, "verdict_message", where);

  const Json& count = object(results, "count", where);
  const std::string nw = where + " count";
  GateCount& c = r.count;
  c.checked = boolean(count, "checked", nw);
  // The fields that do not apply (base_source unchecked, why_unchecked checked) are null.
  c.base_source = nullable_string(count, "base_source", nw).value_or("");
  c.why_unchecked = nullable_string(count, "why_unchecked", nw).value_or("");
  c.expected = nullable_integer(count, "expected_modules", nw, 0).value_or(0);
  c.found = integer(count, "found_modules", nw, 0);
  c.missing = strings(count, "missing", nw);
  c.unexpected = strings(count, "unexpected", nw);
  c.absent_notes = strings(count, "absent_notes", nw);

  const Json& targets = array(results, "per_target", where);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Json& j = targets[i];
    const std::string tw = at(where, "per_target", i);
    GateTargetRow t;
    t.target = string(j, "target", tw);
    t.expected = nullable_integer(j, "expected", tw, 0).value_or(-1);
    t.found = integer(j, "found", tw, 0);
    t.sliding = integer(j, "sliding", tw, 0);
    t.full = integer(j, "full", tw, 0);
    t.inert = integer(j, "inert", tw, 0);
    t.min_b_norm = number(j, "min_b_norm", tw);
    t.max_b_norm = number(j, "max_b_norm", tw);
    r.per_target.push_back(std::move(t));
  }

  const Json& modules = array(results, "modules", where);
  for (std::size_t i = 0; i < modules.size(); ++i) {
    const Json& j = modules[i];
    const std::string mw = at(where, "modules", i);
    GateModule m;
    m.module = string(j, "module", mw);
    m.adapter_name = string(j, "adapter_name", mw);
    m.layer = nullable_integer(j, "layer", mw, 0).value_or(-1);
    if (!field(j, "layer_type", mw).is_null()) {
      m.layer_type = enum_value(j, "layer_type", mw, {LayerType::kSliding, LayerType::kFull});
    }
    m.target = string(j, "target", mw);
    m.rank = integer(j, "rank", mw, 0);
    m.dtype = string(j, "dtype", mw);
    m.a_shape = integers(j, "a_shape", mw, 0);
    m.b_shape = integers(j, "b_shape", mw, 0);
    m.a_norm = nullable_number(j, "a_norm", mw);
    m.b_norm = nullable_number(j, "b_norm", mw);
    m.scaling = number(j, "scaling", mw);
    m.update_bound = nullable_number(j, "update_bound", mw);
    m.in_text_decoder = boolean(j, "in_text_decoder", mw);
    m.expected = boolean(j, "expected", mw);
    m.state = enum_value(j, "state", mw,
                         {ModuleState::kLearned, ModuleState::kInert, ModuleState::kDeadA,
                          ModuleState::kNegligible, ModuleState::kNonFinite,
                          ModuleState::kIncomplete, ModuleState::kBadShape});
    m.message = string(j, "message", mw);
    r.modules.push_back(std::move(m));
  }
  // A count that disagrees with the rows is a hand-edited file, not evidence.
  if (integer(results, "module_count", where, 0) != static_cast<int64_t>(r.modules.size())) {
    fail("{}: module_count {} but modules has {} rows", where,
         integer(results, "module_count", where), r.modules.size());
  }
  r.outside_text = strings(results, "outside_text_decoder", where);

  const Json& other = array(results, "other_tensors", where);
  for (std::size_t i = 0; i < other.size(); ++i) {
    const std::string ow = at(where, "other_tensors", i);
    TensorStats t;
    t.name = string(other[i], "name", ow);
    const std::string dtype = string(other[i], "dtype", ow);
    const std::optional<DType> d = parse_dtype(dtype);
    if (!d) fail("{}: field 'dtype' is no safetensors dtype: '{}'", ow, dtype.substr(0, 40));
    t.dtype = *d;
    t.shape = integers(other[i], "shape", ow, 0);
    t.norm = number(other[i], "norm", ow);
    r.other_tensors.push_back(std::move(t));
  }
  const Json& saved = array(results, "modules_to_save", where);
  for (std::size_t i = 0; i < saved.size(); ++i) {
    const std::string sw = at(where, "modules_to_save", i);
    SavedModule m;
    m.name = string(saved[i], "module", sw);
    m.tensors = strings(saved[i], "tensors", sw);
    m.non_finite = integer(saved[i], "non_finite", sw, 0);
    m.nonzero = integer(saved[i], "nonzero", sw, 0);
    m.norm = number(saved[i], "norm", sw);
    m.problem = nullable_string(saved[i], "problem", sw).value_or("");
    r.modules_to_save.push_back(std::move(m));
  }
  const Json& bias = object(results, "bias", where);
  const std::string bw = where + " bias";
  r.bias.mode = string(bias, "mode", bw);
  r.bias.checked = boolean(bias, "checked", bw);
  r.bias.expected = strings(bias, "expected", bw);
  r.bias.missing = strings(bias, "missing", bw);
  r.bias.found = strings(bias, "found", bw);
  r.bias.note = string(bias, "note", bw);
  // ok is written beside the list it is derived from: a file where they disagree was edited.
  if (boolean(bias, "ok", bw) != r.bias.ok()) {
    fail("{}: field 'ok' disagrees with its missing list", bw);
  }
  r.outcome = r.passed() ? Outcome::kOk : Outcome::kNo;
  return r;
}

std::vector<Table> lora_gate_tables(const LoraGateReport& r) {
  std::vector<Table> tables;
  Table summary("lora-gate: " + r.dir);
  summary.column("", Align::kLeft).column("", Align::kLeft);
  summary.row(
      {"verdict", fmt::format("{} ({})", to_string(r.verdict), r.passed() ? "pass" : "FAIL")});
  summary.row({"files", fmt::format("{}{}", r.files.size(), r.sharded ? " shards" : " file")});
  summary.row({"dtypes", fmt::format("{}", fmt::join(r.dtypes, ", "))});
  summary.row({"naming", fmt::format("{}", fmt::join(r.naming_forms, " | "))});
  summary.row({"r / alpha", fmt::format("{} / {}", r.config.r, r.config.lora_alpha)});
  summary.row({"targets", r.config.target_regex.empty()
                              ? fmt::format("{}", fmt::join(r.config.target_modules, ", "))
                              : "regex " + r.config.target_regex});
  if (r.count.checked) {
    summary.row({"module count",
                 fmt::format("{} found, {} expected from {}: {}", r.count.found, r.count.expected,
                             r.count.base_source, r.count.ok() ? "ok" : "OFF")});
  } else {
    summary.row({"module count", "not checked: " + r.count.why_unchecked});
  }
  if (!r.config.modules_to_save.empty()) {
    std::vector<std::string> cells;
    for (const auto& m : r.modules_to_save) {
      cells.push_back(fmt::format("{} ({})", m.name,
                                  !m.problem.empty()  ? "PROBLEM"
                                  : m.nonzero == 0    ? "all zero"
                                                      : fmt::format("{} tensor(s), |W| {}",
                                                                    m.tensors.size(),
                                                                    norm_cell(m.norm))));
    }
    summary.row({"modules_to_save", fmt::format("{}", fmt::join(cells, ", "))});
  }
  if (r.bias.mode != "none") summary.row({"bias", r.bias.note});
  summary.note(r.verdict_message);
  for (const auto& m : r.modules_to_save) {
    if (!m.problem.empty()) summary.note(m.problem);
  }
  for (const auto& n : r.count.absent_notes) summary.note(n);
  for (std::size_t i = 0; i < r.count.missing.size() && i < 10; ++i) {
    summary.note("missing: " + r.count.missing[i]);
  }
  if (r.count.missing.size() > 10)
    summary.note(fmt::format("... {} more missing", r.count.missing.size() - 10));
  for (std::size_t i = 0; i < r.count.unexpected.size() && i < 10; ++i) {
    summary.note("not expected: " + r.count.unexpected[i]);
  }
  tables.push_back(std::move(summary));

  Table targets("per target");
  targets.column("target", Align::kLeft)
      .column("expected")
      .column("found")
      .column("sliding")
      .column("full")
      .column("zero B")
      .column("min |B|")
      .column("max |B|");
  for (const auto& t : r.per_target) {
    targets.row({t.target, t.expected < 0 ? "-" : format_count(t.expected), format_count(t.found),
                 format_count(t.sliding), format_count(t.full), format_count(t.inert),
                 norm_cell(t.min_b_norm), norm_cell(t.max_b_norm)});
  }
  tables.push_back(std::move(targets));

  Table modules("per module (problems first)");
  modules.column("layer")
      .column("type", Align::kLeft)
      .column("target", Align::kLeft)
      .column("rank")
      .column("dtype", Align::kLeft)
      .column("|A|")
      .column("|B|")
      .column("state", Align::kLeft);
  std::vector<const GateModule*> order;
  for (const auto& m : r.modules) order.push_back(&m);
  std::stable_sort(order.begin(), order.end(), [](const GateModule* a, const GateModule* b) {
    return (a->state != ModuleState::kLearned) > (b->state != ModuleState::kLearned);
  });
  for (const GateModule* m : order) {
    modules.row({m->layer < 0 ? "-" : std::to_string(m->layer),
                 m->layer_type ? to_string(*m->layer_type) : (m->in_text_decoder ? "?" : "outside"),
                 m->in_text_decoder ? m->target : m->module, std::to_string(m->rank), m->dtype,
                 norm_cell(m->a_norm), norm_cell(m->b_norm), to_string(m->state)});
  }
  tables.push_back(std::move(modules));
  return tables;
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

void lora_gate_report_section(SectionBuilder& c) {
  const Json& r = c.results();
  const std::string verdict = string_at(r, "verdict");
  c.fact("verdict", verdict + ": " + string_at(r, "verdict_message"), "verdict", verdict != "real");
  const Json* count = find_path(r, "count");
  if (count && find_path(*count, "checked") && *find_path(*count, "checked") == true) {
    const bool ok = *find_path(*count, "ok") == true;
    c.fact("module count",
           string_at(*count, "found_modules") + " found, " + string_at(*count, "expected_modules") +
               " expected (" + string_at(*count, "base_source") + ")" + (ok ? "" : ": OFF"),
           "count", !ok);
  } else {
    c.fact("module count", "not checked", "count.checked");
  }
  c.fact(
      "dtypes / naming",
      cell(r.value("dtypes", Json::array())) + " / " + cell(r.value("naming_forms", Json::array())),
      {"dtypes", "naming_forms"});
  if (const Json* notes = array_at(r, "count.absent_notes")) {
    for (const auto& n : *notes) {
      if (n.is_string()) c.note(n.get<std::string>());
    }
  }
  const Json* mods = array_at(r, "modules");
  if (!mods) {
    c.absent("modules", "the lora_B norm figure");
    return;
  }
  XYChart chart;
  chart.title = "lora_B norm per module";
  chart.x_label = "decoder layer";
  chart.y_label = "‖lora_B‖ (Frobenius)";
  chart.crosses_label = "lora_B all zero (inert module)";
  std::map<std::string, ChartSeries> by_target;
  for (const auto& m : *mods) {
    auto layer = number_at(m, "layer"), n = number_at(m, "b_norm");
    if (!layer) continue;
    if (!n || *n == 0) {
      chart.crosses_x.push_back(*layer);
      continue;
    }
    ChartSeries& s = by_target[string_at(m, "target")];
    s.label = string_at(m, "target");
    s.x.push_back(*layer);
    s.y.push_back(*n);
  }
  int color = 0;
  for (auto& [t, s] : by_target) {
    s.color = color++;
    chart.series.push_back(s);
  }

  c.figure("norms", chart.title, render_svg(chart),
           {"modules[].layer", "modules[].target", "modules[].b_norm"},
           "A trained adapter has every module above zero; an inert one has every module "
           "as a cross on the axis; a few crosses mean those modules never learned.");
  if (const Json* t = array_at(r, "per_target")) {
    c.table(c.generic_table("tab-lora-gate-targets", "Per target", *t, "per_target"));
  }
}
}  // namespace tprobe::core
