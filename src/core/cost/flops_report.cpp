// Renders FLOP counts: evidence JSON (every row, every pass) and the human tables.
#include "tprobe/core/cost/flops_report.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/layer_type.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {
namespace {

// A component's layer type in a chart label: the trace's word ("sliding", "full"), else as given.
std::string layer_label(const std::string& hf_name) {
  LayerType type = LayerType::kSliding;
  return parse_layer_type(hf_name, type) ? layer_kind_name(type) : hf_name;
}

Json passes_json(const PassFlops& f) {
  return Json{{"forward_flop", f[0]},
              {"backward_flop", f[1]},
              {"recompute_flop", f[2]},
              {"total_flop", total(f)}};
}

std::string flop(double v) { return v == 0 ? "0" : format_sci(v, 3); }

PassFlops passes_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  // total_flop is their sum, written for readers; it is recomputed on writing.
  return {number(j, "forward_flop", where), number(j, "backward_flop", where),
          number(j, "recompute_flop", where)};
}

std::pair<double, double> pairs_from_json(const Json& pairs, const char* key,
                                          const std::string& where) {
  using namespace json_read;
  const Json& p = object(pairs, key, where);
  const std::string w = where + " " + key;
  return {number(p, "intended", w), number(p, "performed", w)};
}

}  // namespace

Json to_json(const FlopsReport& r, const FlopsRates& rates) {
  Json out;
  const FlopsRequest& q = r.request;
  out["model"] = r.model;
  out["batch"] = q.batch;
  out["width"] = q.width;
  out["lengths"] = q.lengths;
  out["padded"] = r.padded;
  out["attention_path"] = to_string(q.path);
  out["gradient_checkpointing"] = q.gradient_checkpointing;
  out["real_tokens"] = r.real_tokens;
  out["padded_tokens"] = r.padded_tokens;
  Json mods = Json::array();
  int64_t modules = 0, params = 0;
  for (const auto& m : r.lora) {
    mods.push_back({{"target", m.target}, {"modules", m.modules},
                    {"trainable_params", m.trainable_params}});
    modules += m.modules;
    params += m.trainable_params;
  }
  out["lora"] = {{"targets", q.lora_targets}, {"rank", q.lora_rank}, {"modules", modules},
                 {"trainable_params", params}, {"per_target", mods}};
  out["attention_pairs"] = {
      {"sliding_attention", {{"intended", r.pairs_intended_sliding},
                             {"performed", r.pairs_performed_sliding}}},
      {"full_attention", {{"intended", r.pairs_intended_full},
                          {"performed", r.pairs_performed_full}}}};
  Json rows = Json::array();
  for (const auto& row : r.rows) {
    rows.push_back({{"component", row.component},
                    {"layer_type", row.layer_type},
                    {"layers", row.layers},
                    {"intended", passes_json(row.intended)},
                    {"performed", passes_json(row.performed)}});
  }
  out["components"] = rows;
  Json by_type = Json::array();
  for (const char* t : {"sliding_attention", "full_attention", "model"}) {
    by_type.push_back({{"layer_type", t},
                       {"intended", passes_json(r.sum(false, "", t))},
                       {"performed", passes_json(r.sum(true, "", t))}});
  }
  out["by_layer_type"] = by_type;
  const double ti = total(r.intended_total), tp = total(r.performed_total);
  out["totals"] = {{"intended", passes_json(r.intended_total)},
                   {"performed", passes_json(r.performed_total)},
                   {"performed_over_intended_ratio", ti > 0 ? Json(tp / ti) : Json(nullptr)}};
  Json m = {{"peak_tflops", rates.peak_tflops}, {"step_time_s", nullptr},
            {"intended_ratio", nullptr}, {"performed_ratio", nullptr}};
  if (rates.step_time_s) {
    m["step_time_s"] = *rates.step_time_s;
    m["intended_ratio"] = mfu(ti, *rates.step_time_s, rates.peak_tflops);
    m["performed_ratio"] = mfu(tp, *rates.step_time_s, rates.peak_tflops);
  }
  out["mfu"] = m;
  return out;
}

FlopsEvidence flops_report_from_json(const Json& results, const std::string& where) {
  using namespace json_read;
  FlopsEvidence e;
  FlopsReport& r = e.report;
  FlopsRequest& q = r.request;
  r.model = string(results, "model", where);
  q.batch = integer(results, "batch", where, 1);
  q.width = integer(results, "width", where, 1);
  q.lengths = integers(results, "lengths", where, 1, q.width);
  r.padded = boolean(results, "padded", where);
  const std::string path = string(results, "attention_path", where);
  const std::optional<AttentionPath> ap = parse_attention_path(path);
  if (!ap) fail("{}: field 'attention_path' names no attention path: '{}'", where, path);
  q.path = *ap;
  q.gradient_checkpointing = boolean(results, "gradient_checkpointing", where);
  r.real_tokens = integer(results, "real_tokens", where, 0);
  r.padded_tokens = integer(results, "padded_tokens", where, 0);

  const Json& lora = object(results, "lora", where);
  const std::string lw = where + " lora";
  q.lora_targets = strings(lora, "targets", lw);
  q.lora_rank = integer(lora, "rank", lw, 1);
  const Json& per = array(lora, "per_target", lw);
  for (std::size_t i = 0; i < per.size(); ++i) {
    const std::string pw = at(lw, "per_target", i);
    r.lora.push_back({string(per[i], "target", pw), integer(per[i], "modules", pw, 0),
                      integer(per[i], "trainable_params", pw, 0)});
  }
  // lora.modules and lora.trainable_params are the per-target sums.

  const Json& pairs = object(results, "attention_pairs", where);
  const std::string aw = where + " attention_pairs";
  std::tie(r.pairs_intended_sliding, r.pairs_performed_sliding) =
      pairs_from_json(pairs, "sliding_attention", aw);
  std::tie(r.pairs_intended_full, r.pairs_performed_full) =
      pairs_from_json(pairs, "full_attention", aw);

  const Json& rows = array(results, "components", where);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string cw = at(where, "components", i);
    FlopsRow row;
    row.component = string(rows[i], "component", cw);
    row.layer_type = string(rows[i], "layer_type", cw);
    row.layers = integer(rows[i], "layers", cw, 0);
    row.intended = passes_from_json(object(rows[i], "intended", cw), cw + " intended");
    row.performed = passes_from_json(object(rows[i], "performed", cw), cw + " performed");
    r.rows.push_back(std::move(row));
  }
  // by_layer_type sums the rows; it is recomputed on writing.
  const Json& totals = object(results, "totals", where);
  const std::string tw = where + " totals";
  r.intended_total = passes_from_json(object(totals, "intended", tw), tw + " intended");
  r.performed_total = passes_from_json(object(totals, "performed", tw), tw + " performed");

  const Json& m = object(results, "mfu", where);
  const std::string mw = where + " mfu";
  e.rates.peak_tflops = number(m, "peak_tflops", mw);
  e.rates.step_time_s = nullable_number(m, "step_time_s", mw);
  return e;
}

std::vector<Table> flops_tables(const FlopsReport& r, const FlopsRates& rates) {
  const FlopsRequest& q = r.request;
  std::string shape = fmt::format("{}×{}", q.batch, format_count(q.width));
  Table t(fmt::format("FLOPs of one LoRA fwd+bwd step: {} at {}{}, {}, checkpointing {}", r.model,
                      shape, r.padded ? fmt::format(" ({} real tokens)", format_count(r.real_tokens)) : "",
                      to_string(q.path), q.gradient_checkpointing ? "on" : "off"));
  t.column("component", Align::kLeft).column("layer type", Align::kLeft).column("layers")
      .column("fwd").column("bwd").column("recompute").column("intended").column("performed")
      .column("perf/int");
  for (const auto& row : r.rows) {
    const double ti = total(row.intended), tp = total(row.performed);
    t.row({row.component, row.layer_type, std::to_string(row.layers), flop(row.intended[0]),
           flop(row.intended[1]), flop(row.intended[2]), flop(ti), flop(tp),
           ti > 0 ? fmt::format("{:.2f}×", tp / ti) : "-"});
  }
  t.separator();
  const double ti = total(r.intended_total), tp = total(r.performed_total);
  t.row({"total", "", "", flop(r.intended_total[0]), flop(r.intended_total[1]),
         flop(r.intended_total[2]), flop(ti), flop(tp), fmt::format("{:.2f}×", tp / ti)});
  t.note("fwd/bwd/recompute columns are intended FLOPs; performed = what the attention path computes");
  t.note(fmt::format(
      "attention pairs per forward (batch): sliding {} intended / {} performed; full {} / {}",
      flop(r.pairs_intended_sliding), flop(r.pairs_performed_sliding),
      flop(r.pairs_intended_full), flop(r.pairs_performed_full)));
  if (!r.lora.empty()) {
    int64_t modules = 0, params = 0;
    for (const auto& m : r.lora) {
      modules += m.modules;
      params += m.trainable_params;
    }
    t.note(fmt::format("LoRA r{} on {}: {} modules, {} trainable parameters", q.lora_rank,
                       fmt::join(q.lora_targets, ","), modules, format_count(params)));
  }
  if (rates.step_time_s) {
    t.note(fmt::format("MFU at {} per step and {} TFLOP/s peak: intended {}, performed {}",
                       format_seconds(*rates.step_time_s), rates.peak_tflops,
                       format_percent(mfu(ti, *rates.step_time_s, rates.peak_tflops)),
                       format_percent(mfu(tp, *rates.step_time_s, rates.peak_tflops))));
  } else {
    t.note("MFU: needs a measured step time to divide these by");
  }
  return {t};
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

void flops_report_section(SectionBuilder& c) {
  const Json& r = c.results();
  auto ti = number_at(r, "totals.intended.total_flop"),
       tp = number_at(r, "totals.performed.total_flop");
  if (ti && tp) {
    c.fact("FLOPs per step, intended / performed",
           fmt::format("{:.3g} / {:.3g} (×{:.2f})", *ti, *tp, *tp / *ti),
           {"totals.intended.total_flop", "totals.performed.total_flop"}, *tp / *ti > 1.2);
  }
  c.fact("attention path", string_at(r, "attention_path"), "attention_path");
  auto mi = number_at(r, "mfu.intended_ratio"), mp = number_at(r, "mfu.performed_ratio");
  if (mi && mp) {
    c.fact("MFU intended / performed",
           format_percent(*mi) + " / " + format_percent(*mp) + " of " +
               string_at(r, "mfu.peak_tflops") + " TFLOP/s",
           {"mfu.intended_ratio", "mfu.performed_ratio"});
  } else {
    c.fact("MFU", "not computed: the run gave no measured step time", "mfu.step_time_s");
  }
  const Json* comps = array_at(r, "components");
  if (!comps) {
    c.absent("components", "the FLOPs figure");
    return;
  }
  BarChart chart;
  chart.title = "FLOPs per step by component: intended vs performed";
  chart.value_label = "FLOP per step (forward + backward + recompute)";
  chart.series = {"intended (causal, window-aware, real tokens)",
                  "performed (what the kernels compute)"};
  chart.highlight_label = "performed > 1.5 × intended";
  for (const auto& comp : *comps) {
    auto i = number_at(comp, "intended.total_flop"), p = number_at(comp, "performed.total_flop");
    if (!i || !p || (*i <= 0 && *p <= 0)) continue;
    std::string lt = string_at(comp, "layer_type");
    std::string label =
        string_at(comp, "component") +
        (lt.empty() || lt == "model" ? "" : " (" + layer_label(lt) + ")");
    chart.items.push_back({label, {*i, *p}, *p > 1.5 * *i, ""});
  }
  c.figure("components", chart.title, render_svg(chart),
           {"components[].intended.total_flop", "components[].performed.total_flop"},
           "A masked dense kernel computes every query-key pair of a sliding layer, "
           "so performed exceeds intended there; an MFU must say which it divides.");
  if (mi && mp) {
    BarChart mfu;
    mfu.title = "MFU";
    mfu.value_label = "model FLOP utilisation (ratio of peak)";
    mfu.items = {{"intended FLOPs / time", {*mi}, false, format_percent(*mi)},
                 {"performed FLOPs / time", {*mp}, false, format_percent(*mp)}};
    c.figure("mfu", mfu.title, render_svg(mfu), {"mfu.intended_ratio", "mfu.performed_ratio"},
             "Both utilisations of the same step time.");
  }
}
}  // namespace tprobe::core
