// The report: evidence collection, provenance, and one section builder per probe. Every figure,
// table and fact names the evidence file and the JSON field it was drawn from.
#include "tprobe/core/report/report.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {

namespace {

using detail::ends_with;
using detail::starts_with;

// ---- JSON access that never throws ----

const Json* find_path(const Json& j, const std::string& dotted) {
  const Json* cur = &j;
  std::size_t start = 0;
  while (start <= dotted.size()) {
    std::size_t dot = dotted.find('.', start);
    std::string key =
        dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

std::optional<double> number_at(const Json& j, const std::string& dotted) {
  const Json* v = find_path(j, dotted);
  if (!v || !v->is_number()) return std::nullopt;
  double d = v->get<double>();
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

std::string string_at(const Json& j, const std::string& dotted) {
  const Json* v = find_path(j, dotted);
  if (!v) return "";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_null()) return "";
  return v->dump();
}

const Json* array_at(const Json& j, const std::string& dotted) {
  const Json* v = find_path(j, dotted);
  return v && v->is_array() ? v : nullptr;
}

// A scalar cell for tables of unknown shape.
std::string cell(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer()) return format_count(v.get<int64_t>());
  if (v.is_number()) return axis_number(v.get<double>());
  if (v.is_null()) return "-";
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string pct(std::optional<double> r) { return r ? format_percent(*r) : "-"; }

// The time field of a row of unknown shape: a preferred key, else the first "*_s" or "*_ns".
std::optional<double> row_seconds(const Json& row, std::string* key) {
  static const char* kPreferred[] = {
      "device_time_s",  "time_s",  "total_s",  "self_device_time_s", "duration_s", "sum_s",
      "device_time_ns", "time_ns", "total_ns", "duration_ns",        "sum_ns"};
  if (!row.is_object()) return std::nullopt;
  auto take = [&](const std::string& k) -> std::optional<double> {
    auto it = row.find(k);
    if (it == row.end() || !it->is_number()) return std::nullopt;
    *key = k;
    double v = it->get<double>();
    return ends_with(k, "_ns") ? v * 1e-9 : v;
  };
  for (const char* k : kPreferred) {
    if (auto v = take(k)) return v;
  }
  for (const auto& [k, v] : row.items()) {
    if (ends_with(k, "_s") || ends_with(k, "_ns")) {
      if (auto t = take(k)) return t;
    }
  }
  return std::nullopt;
}

std::string row_label(const Json& row, std::string* key) {
  static const char* kKeys[] = {"short_name", "name",       "kernel", "category",
                                "phase",      "layer_type", "label",  "component"};
  if (!row.is_object()) return "";
  for (const char* k : kKeys) {
    auto it = row.find(k);
    if (it != row.end() && it->is_string()) {
      *key = k;
      return it->get<std::string>();
    }
  }
  return "";
}

// A table of every scalar key of an array of objects, in first-seen order.
ReportTable generic_table(const std::string& id, const std::string& title, const Json& rows,
                          const std::string& source, const std::string& field,
                          std::size_t max_rows = 60) {
  ReportTable t;
  t.id = id;
  t.title = title;
  t.source = source;
  t.fields = {field + "[]"};
  std::vector<std::string> keys;
  for (const auto& r : rows) {
    if (!r.is_object()) continue;
    for (const auto& [k, v] : r.items()) {
      if (v.is_structured()) continue;
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  t.header = keys;
  for (const auto& r : rows) {
    if (t.rows.size() >= max_rows) break;
    std::vector<std::string> cells;
    for (const auto& k : keys) cells.push_back(r.is_object() && r.contains(k) ? cell(r[k]) : "");
    t.rows.push_back(std::move(cells));
  }
  if (rows.size() > max_rows) t.title += fmt::format(" (first {} of {})", max_rows, rows.size());
  return t;
}

struct Ctx {
  const EvidenceInput& in;
  ReportSection& sec;
  const Json& results;
  void absent(const std::string& field, const std::string& what) {
    sec.notes.push_back(
        fmt::format("{} absent or not of the documented type: {} not drawn", field, what));
  }
  void fact(std::string label, std::string value, std::string field, bool alarm = false) {
    sec.facts.push_back({std::move(label), std::move(value), std::move(field), alarm});
  }
  ReportFigure figure(std::string id, std::string title, std::string svg,
                      std::vector<std::string> fields, std::string caption) {
    return {"fig-" + sec.probe + "-" + id,
            std::move(title),
            std::move(svg),
            in.name,
            std::move(fields),
            std::move(caption)};
  }
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- per-probe sections ----

void env_section(Ctx& c) {
  const Json& e = c.in.doc["environment"];
  c.fact("torch",
         string_at(e, "torch.version") +
             (find_path(e, "torch.cuda_build") && *find_path(e, "torch.cuda_build") == true
                  ? " (CUDA build)"
                  : " (CPU build)"),
         "environment.torch");
  const bool cuda = find_path(e, "cuda.usable") && *find_path(e, "cuda.usable") == true;
  c.fact("CUDA",
         cuda ? "usable, runtime " + string_at(e, "cuda.runtime_version")
              : "not usable: " + string_at(e, "cuda.unusable_reason"),
         "environment.cuda");
  std::string dev = string_at(e, "device.name");
  if (!dev.empty()) {
    c.fact("device",
           fmt::format("{} (sm {}), {}", dev, string_at(e, "device.compute_capability"),
                       format_bytes(number_at(e, "device.memory_bytes").value_or(0))),
           "environment.device");
  }
  const bool cupti = find_path(e, "cupti.usable") && *find_path(e, "cupti.usable") == true;
  c.fact("CUPTI",
         cupti ? "usable, version " + string_at(e, "cupti.version")
               : "not usable: " + string_at(e, "cupti.unavailable_reason"),
         "environment.cupti");
  if (const Json* b = array_at(e, "sdpa_backends")) {
    c.sec.tables.push_back(generic_table("tab-env-sdpa", "SDPA backends of the linked libtorch", *b,
                                         c.in.name, "environment.sdpa_backends"));
  }
}

void inspect_section(Ctx& c) {
  const Json& r = c.results;
  if (auto p = number_at(r, "total_params"))
    c.fact("parameters", format_count(static_cast<int64_t>(*p)), "results.total_params");
  if (auto b = number_at(r, "total_bytes"))
    c.fact("bytes", format_bytes(*b), "results.total_bytes");
  if (auto s = number_at(r, "quantization.saved_ratio")) {
    c.fact("linear-only 4-bit saves",
           format_percent(*s) + " of the bytes; fused experts untouched: " +
               pct(number_at(r, "quantization.untouched_expert_params_ratio")) +
               " of the parameters",
           "results.quantization.saved_ratio, untouched_expert_params_ratio", true);
  }
  if (auto m = number_at(r, "lora.modules")) {
    c.fact(
        "LoRA modules / trainable",
        format_count(static_cast<int64_t>(*m)) + " / " +
            format_count(static_cast<int64_t>(number_at(r, "lora.trainable_params").value_or(0))),
        "results.lora.modules, results.lora.trainable_params");
  }
  if (const Json* blocks = array_at(r, "blocks")) {
    BarChart chart;
    chart.title = "Parameters by block";
    chart.value_label = "parameters";
    chart.highlight_label = "untouched by a linear-only 4-bit quantizer (fused 3-D experts)";
    for (const auto& b : *blocks) {
      auto p = number_at(b, "params");
      if (!p || *p <= 0) continue;
      BarItem item{string_at(b, "label"),
                   {*p},
                   string_at(b, "block") == "experts",
                   pct(number_at(b, "params_share_ratio"))};
      chart.items.push_back(std::move(item));
    }
    c.sec.figures.push_back(
        c.figure("blocks", chart.title, render_svg(chart),
                 {"results.blocks[].params", "results.blocks[].params_share_ratio"},
                 "Where the parameters are. The experts are fused 3-D tensors, not nn.Linear "
                 "modules: a quantizer or LoRA that walks nn.Linear never touches them."));
  } else {
    c.absent("results.blocks", "the parameters-by-block figure");
  }
  if (const Json* t = array_at(r, "lora.per_target")) {
    c.sec.tables.push_back(generic_table("tab-inspect-lora", "LoRA modules per target", *t,
                                         c.in.name, "results.lora.per_target"));
  }
}

void padding_section(Ctx& c) {
  const Json& r = c.results;
  c.fact("padding waste", pct(number_at(r, "waste_ratio")), "results.waste_ratio",
         number_at(r, "waste_ratio").value_or(0) > 0.1);
  if (auto tr = number_at(r, "truncation.tokens_ratio")) {
    c.fact("truncated at " + string_at(r, "truncation.max_seq_len"),
           format_percent(*tr) + " of tokens, " + pct(number_at(r, "truncation.records_ratio")) +
               " of records",
           "results.truncation.tokens_ratio, records_ratio", *tr > 0.05);
  }
  if (auto l = number_at(r, "loss_head.naive_ce_transient_bytes")) {
    c.fact("naive CE transient (widest micro-batch)", format_bytes(*l),
           "results.loss_head.naive_ce_transient_bytes");
  }
  const Json* hist = array_at(r, "histogram");
  const Json* widths = array_at(r, "micro_batch_widths");
  if (!hist) {
    c.absent("results.histogram", "the length histogram");
    return;
  }
  BarChart chart;
  chart.title = "Sequence lengths and padded micro-batch widths";
  chart.value_label = "count";
  chart.series = {"records by real length", "micro-batches by padded width"};
  std::map<int64_t, double> width_counts;
  if (widths) {
    for (const auto& w : *widths) {
      if (!w.is_number()) continue;
      const double v = w.get<double>();
      for (const auto& h : *hist) {
        auto lo = number_at(h, "lo"), hi = number_at(h, "hi");
        if (lo && hi && v >= *lo && v < *hi) width_counts[static_cast<int64_t>(*lo)] += 1;
      }
    }
  }
  for (const auto& h : *hist) {
    auto lo = number_at(h, "lo"), hi = number_at(h, "hi"), n = number_at(h, "records");
    if (!lo || !hi || !n) continue;
    chart.items.push_back({fmt::format("{} – {}", format_count(static_cast<int64_t>(*lo)),
                                       format_count(static_cast<int64_t>(*hi) - 1)),
                           {*n, width_counts[static_cast<int64_t>(*lo)]},
                           false,
                           ""});
  }
  std::vector<std::string> fields = {"results.histogram[].lo/hi/records"};
  std::string caption =
      "Each row is a length bin (tokens). Blue: how many records have a real length in it. "
      "Orange: how many micro-batches are padded to a width in it";
  if (widths) {
    fields.push_back("results.micro_batch_widths[]");
    caption += fmt::format(" ({} micro-batches of {} rows, the probe's order).",
                           format_count(static_cast<int64_t>(widths->size())),
                           string_at(c.in.doc, "invocation.options.micro-batch"));
  } else {
    caption += ": not drawn, results.micro_batch_widths absent.";
  }
  c.sec.figures.push_back(c.figure("lengths", chart.title, render_svg(chart), fields, caption));
  if (const Json* ps = array_at(r, "truncation.per_source")) {
    c.sec.tables.push_back(generic_table("tab-padding-truncation", "Truncation per source", *ps,
                                         c.in.name, "results.truncation.per_source"));
  }
}

void bucket_section(Ctx& c) {
  const Json& r = c.results;
  c.fact("chosen bucket", string_at(r, "chosen.bucket"), "results.chosen.bucket");
  c.fact(
      "waste: sequential → chosen",
      pct(number_at(r, "baseline.waste_ratio")) + " → " + pct(number_at(r, "chosen.waste_ratio")),
      "results.baseline.waste_ratio, results.chosen.waste_ratio");
  if (auto t0 = number_at(r, "baseline.predicted_time_s")) {
    if (auto t1 = number_at(r, "chosen.predicted_time_s")) {
      c.fact("predicted epoch time",
             format_seconds(*t0) + " → " + format_seconds(*t1) + " (" +
                 format_percent(1 - *t1 / *t0) + " saved)",
             "results.baseline.predicted_time_s, results.chosen.predicted_time_s");
    }
  }
  if (const Json* noop = find_path(r, "noop_sweep"); noop && *noop == true) {
    c.fact("sweep", "NO-OP: every bucket size gave the same micro-batches", "results.noop_sweep",
           true);
  }
  const Json* sweep = array_at(r, "sweep");
  if (!sweep || sweep->empty()) {
    c.absent("results.sweep", "the bucket sweep figures");
    return;
  }
  struct Metric {
    const char* id;
    const char* title;
    const char* key;       // in each sweep row
    const char* seeds;     // over_seeds.<x>
    const char* baseline;  // results.baseline.<x>
    const char* y_label;
  };
  const Metric metrics[] = {
      {"waste", "Padding waste against bucket size", "waste_ratio", "waste_ratio", "waste_ratio",
       "padding waste (ratio of padded tokens)"},
      {"time", "Predicted epoch time against bucket size", "predicted_time_s", "predicted_time_s",
       "predicted_time_s", "predicted time (s)"},
      {"sources", "Data sources per accumulation window", "sources_per_window.mean",
       "sources_per_window_mean", "sources_per_window.mean", "distinct sources per window (mean)"},
  };
  for (const auto& m : metrics) {
    ChartSeries s;
    s.label = "bucket sampler (mean over seeds, bar: min–max)";
    bool spread = true;
    for (const auto& row : *sweep) {
      auto b = number_at(row, "bucket"), v = number_at(row, m.key);
      if (!b || !v) continue;
      s.x.push_back(*b);
      s.y.push_back(*v);
      auto lo = number_at(row, std::string("over_seeds.") + m.seeds + ".min");
      auto hi = number_at(row, std::string("over_seeds.") + m.seeds + ".max");
      if (lo && hi) {
        s.y_low.push_back(*lo);
        s.y_high.push_back(*hi);
      } else {
        spread = false;
      }
    }
    if (!spread) s.y_low.clear(), s.y_high.clear();
    if (s.x.empty()) {
      c.absent(std::string("results.sweep[].") + m.key, m.title);
      continue;
    }
    XYChart chart;
    chart.title = m.title;
    chart.x_label = "bucket size (records)";
    chart.y_label = m.y_label;
    chart.log2_x = true;
    ChartSeries joined = s;  // the same points, joined, to read the trend
    joined.kind = ChartSeries::Kind::kLine;
    joined.label = "";
    joined.y_low.clear();
    joined.y_high.clear();
    chart.series = {joined, s};
    if (auto base = number_at(r, std::string("baseline.") + m.baseline)) {
      chart.markers.push_back({false, *base, "sequential order: " + axis_number(*base)});
    }
    std::vector<std::string> fields = {std::string("results.sweep[].bucket"),
                                       std::string("results.sweep[].") + m.key,
                                       std::string("results.baseline.") + m.baseline};
    c.sec.figures.push_back(
        c.figure(m.id, chart.title, render_svg(chart), fields,
                 "One point per swept bucket size; the dashed line is the sequential "
                 "order without bucketing."));
  }
}

// t(w) = C + A w + B w^2 sampled for drawing.
void scaling_fit_section(Ctx& c) {
  const Json& r = c.results;
  c.fact("fit", string_at(r, "fit_status") + ", model " + string_at(r, "model"),
         "results.fit_status, results.model", string_at(r, "fit_status") == "refused");
  auto a = number_at(r, "coefficients.a_s_per_token");
  auto b = number_at(r, "coefficients.b_s_per_token2");
  auto cc = number_at(r, "coefficients.c_s");
  if (a) c.fact("A (linear)", format_sci(*a) + " s/token", "results.coefficients.a_s_per_token");
  if (b)
    c.fact("B (quadratic)", format_sci(*b) + " s/token²", "results.coefficients.b_s_per_token2");
  if (cc) c.fact("C (fixed)", format_seconds(*cc), "results.coefficients.c_s");
  if (auto x = number_at(r, "crossover_width"))
    c.fact("crossover A/B", format_count(std::llround(*x)) + " tokens", "results.crossover_width");
  if (auto q = number_at(r, "widths_from.quadratic_share")) {
    c.fact("quadratic share over the real width distribution", format_percent(*q),
           "results.widths_from.quadratic_share");
  }
  std::string verdict = string_at(r, "fixed_term.verdict");
  if (!verdict.empty()) c.sec.notes.push_back("fixed term: " + verdict);

  const Json* pts = array_at(r, "input_points");
  if (!pts) {
    c.absent("results.input_points", "the step-time figure");
    return;
  }
  std::map<double, std::vector<double>> by_width;
  for (const auto& p : *pts) {
    auto w = number_at(p, "width"), s = number_at(p, "seconds");
    if (w && s) by_width[*w].push_back(*s);
  }
  ChartSeries measured;
  measured.label = "measured (median, bar: min–max of repeats)";
  double wmax = 0;
  for (const auto& [w, v] : by_width) {
    measured.x.push_back(w);
    measured.y.push_back(median_of(v));
    measured.y_low.push_back(*std::min_element(v.begin(), v.end()));
    measured.y_high.push_back(*std::max_element(v.begin(), v.end()));
    wmax = std::max(wmax, w);
  }
  XYChart chart;
  chart.title = "Step time against sequence width";
  chart.x_label = "width (tokens per sequence)";
  chart.y_label = "step time (s)";
  if (a && b) {
    ChartSeries total, lin, quad;
    total.kind = lin.kind = quad.kind = ChartSeries::Kind::kLine;
    total.label = "fit t(w) = " + std::string(cc ? "C + " : "") + "A·w + B·w²";
    lin.label = "linear part A·w";
    quad.label = "quadratic part B·w² (attention)";
    total.color = 0;
    lin.color = 2;
    quad.color = 1;
    lin.dashed = quad.dashed = true;
    for (int i = 0; i <= 60; ++i) {
      const double w = wmax * i / 60.0;
      total.x.push_back(w), lin.x.push_back(w), quad.x.push_back(w);
      total.y.push_back(cc.value_or(0) + *a * w + *b * w * w);
      lin.y.push_back(*a * w);
      quad.y.push_back(*b * w * w);
    }
    chart.series = {total, lin, quad};
    if (auto x = number_at(r, "crossover_width"); x && *x > 0 && *x < wmax) {
      chart.markers.push_back({true, *x, "A/B = " + axis_number(std::round(*x))});
    }
  } else {
    c.sec.notes.push_back(
        "no coefficients (the fit was refused): only the measured points are drawn");
  }
  measured.color = 6;
  chart.series.push_back(measured);
  c.sec.figures.push_back(c.figure(
      "time", chart.title, render_svg(chart),
      {"results.input_points[].width/seconds", "results.coefficients", "results.crossover_width"},
      "Measured steps with the fitted curve split into its linear and quadratic terms; where the "
      "dashed orange curve overtakes the green one, attention dominates."));
  if (const Json* fp = array_at(r, "points")) {
    ReportTable t;
    t.id = "tab-scaling-fit-points";
    t.title = "Per point";
    t.source = c.in.name;
    t.fields = {"results.points[]"};
    t.header = {"width",  "measured",  "predicted",      "residual",
                "linear", "quadratic", "quadratic share"};
    for (const auto& p : *fp) {
      t.rows.push_back({axis_number(number_at(p, "width").value_or(0)),
                        format_seconds(number_at(p, "seconds").value_or(0)),
                        format_seconds(number_at(p, "predicted_s").value_or(0)),
                        format_seconds(number_at(p, "residual_s").value_or(0)),
                        format_seconds(number_at(p, "linear_s").value_or(0)),
                        format_seconds(number_at(p, "quadratic_s").value_or(0)),
                        pct(number_at(p, "quadratic_share"))});
    }
    c.sec.tables.push_back(std::move(t));
  }
}

void flops_section(Ctx& c) {
  const Json& r = c.results;
  auto ti = number_at(r, "totals.intended.total_flop"),
       tp = number_at(r, "totals.performed.total_flop");
  if (ti && tp) {
    c.fact("FLOPs per step, intended / performed",
           fmt::format("{:.3g} / {:.3g} (×{:.2f})", *ti, *tp, *tp / *ti),
           "results.totals.intended.total_flop, results.totals.performed.total_flop",
           *tp / *ti > 1.2);
  }
  c.fact("attention path", string_at(r, "attention_path"), "results.attention_path");
  auto mi = number_at(r, "mfu.intended_ratio"), mp = number_at(r, "mfu.performed_ratio");
  if (mi && mp) {
    c.fact("MFU intended / performed",
           format_percent(*mi) + " / " + format_percent(*mp) + " of " +
               string_at(r, "mfu.peak_tflops") + " TFLOP/s",
           "results.mfu.intended_ratio, results.mfu.performed_ratio");
  } else {
    c.fact("MFU", "not computed: the run gave no measured step time", "results.mfu.step_time_s");
  }
  const Json* comps = array_at(r, "components");
  if (!comps) {
    c.absent("results.components", "the FLOPs figure");
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
        (lt.empty() || lt == "model" ? ""
                                     : " (" +
                                           (lt == "sliding_attention" ? std::string("sliding")
                                            : lt == "full_attention"  ? std::string("global")
                                                                      : lt) +
                                           ")");
    chart.items.push_back({label, {*i, *p}, *p > 1.5 * *i, ""});
  }
  c.sec.figures.push_back(c.figure(
      "components", chart.title, render_svg(chart),
      {"results.components[].intended.total_flop", "results.components[].performed.total_flop"},
      "A masked dense kernel computes every query-key pair of a sliding layer, "
      "so performed exceeds intended there; an MFU must say which it divides."));
  if (mi && mp) {
    BarChart mfu;
    mfu.title = "MFU";
    mfu.value_label = "model FLOP utilisation (ratio of peak)";
    mfu.items = {{"intended FLOPs / time", {*mi}, false, format_percent(*mi)},
                 {"performed FLOPs / time", {*mp}, false, format_percent(*mp)}};
    c.sec.figures.push_back(c.figure("mfu", mfu.title, render_svg(mfu),
                                     {"results.mfu.intended_ratio", "results.mfu.performed_ratio"},
                                     "Both utilisations of the same step time."));
  }
}

void parity_section(Ctx& c) {
  const Json& r = c.results;
  const bool ok = find_path(r, "within_tolerance") && *find_path(r, "within_tolerance") == true;
  c.fact("relative L2 error",
         axis_number(number_at(r, "rel_l2_error").value_or(NAN)) + " (tolerance " +
             axis_number(number_at(r, "tolerance_rel_l2").value_or(NAN)) +
             "): " + (ok ? "within" : "OUTSIDE"),
         "results.rel_l2_error, results.tolerance_rel_l2", !ok);
  c.fact("max abs error", axis_number(number_at(r, "max_abs_error").value_or(NAN)),
         "results.max_abs_error");
  c.fact("argmax agreement", pct(number_at(r, "argmax_agreement_ratio")),
         "results.argmax_agreement_ratio");
  c.fact("dtype / attention",
         string_at(r, "dtype") + " / sliding " + string_at(r, "attn_sliding") + ", full " +
             string_at(r, "attn_full"),
         "results.dtype, results.attn_sliding, results.attn_full");
  if (auto l = number_at(r, "loss_abs_diff"))
    c.fact("loss difference", axis_number(*l), "results.loss_abs_diff");
}

void lora_gate_section(Ctx& c) {
  const Json& r = c.results;
  const std::string verdict = string_at(r, "verdict");
  c.fact("verdict", verdict + ": " + string_at(r, "verdict_message"), "results.verdict",
         verdict != "real");
  const Json* count = find_path(r, "count");
  if (count && find_path(*count, "checked") && *find_path(*count, "checked") == true) {
    const bool ok = *find_path(*count, "ok") == true;
    c.fact("module count",
           string_at(*count, "found_modules") + " found, " + string_at(*count, "expected_modules") +
               " expected (" + string_at(*count, "base_source") + ")" + (ok ? "" : ": OFF"),
           "results.count", !ok);
  } else {
    c.fact("module count", "not checked", "results.count.checked");
  }
  c.fact(
      "dtypes / naming",
      cell(r.value("dtypes", Json::array())) + " / " + cell(r.value("naming_forms", Json::array())),
      "results.dtypes, results.naming_forms");
  if (const Json* notes = array_at(r, "count.absent_notes")) {
    for (const auto& n : *notes) {
      if (n.is_string()) c.sec.notes.push_back(n.get<std::string>());
    }
  }
  const Json* mods = array_at(r, "modules");
  if (!mods) {
    c.absent("results.modules", "the lora_B norm figure");
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
  c.sec.figures.push_back(
      c.figure("norms", chart.title, render_svg(chart),
               {"results.modules[].layer", "results.modules[].target", "results.modules[].b_norm"},
               "A trained adapter has every module above zero; an inert one has every module "
               "as a cross on the axis; a few crosses mean those modules never learned."));
  if (const Json* t = array_at(r, "per_target")) {
    c.sec.tables.push_back(
        generic_table("tab-lora-gate-targets", "Per target", *t, c.in.name, "results.per_target"));
  }
}

// profile: results.points[] = {batch, width, outcome, samples_s, ...} (docs/scaling-fit.md).
void profile_section(Ctx& c);
void kernels_section(Ctx& c);

void mask_section(Ctx& c) {
  const Json& r = c.results;
  if (const Json* layers = array_at(r, "layers")) {
    ReportTable t =
        generic_table("tab-mask-layers", "Mask per layer", *layers, c.in.name, "results.layers");
    for (const auto& l : *layers) {
      const Json* fp = l.is_object() ? find_path(l, "fast_path") : nullptr;
      t.highlight.push_back(fp && fp->is_boolean() && !fp->get<bool>());
    }
    t.highlight.resize(t.rows.size());
    c.sec.tables.push_back(std::move(t));
    int64_t explicit_masks = 0;
    for (const auto& l : *layers) explicit_masks += string_at(l, "mask") == "explicit";
    c.fact("layers with an explicit mask", fmt::format("{} of {}", explicit_masks, layers->size()),
           "results.layers[].mask", explicit_masks > 0);
  } else {
    c.absent("results.layers", "the mask table");
  }
  if (const Json* be = array_at(r, "backends")) {
    c.sec.tables.push_back(generic_table("tab-mask-backends", "SDPA backends per layer shape", *be,
                                         c.in.name, "results.backends"));
  }
}

// Kernel table (kernels probe, or profile's embedded table): categories and top kernels by time,
// architecture mismatches highlighted, sum vs union vs wall.
void kernel_table_figures(Ctx& c, const Json& kt, const std::string& base) {
  for (const char* cat_key : {"categories", "by_category"}) {
    const Json* cats = array_at(kt, cat_key);
    if (!cats) continue;
    BarChart chart;
    chart.title = "Kernel time by category";
    std::string tkey, lkey;
    for (const auto& row : *cats) {
      auto t = row_seconds(row, &tkey);
      std::string label = row_label(row, &lkey);
      if (!t) continue;
      auto share = number_at(row, "share_ratio");
      chart.items.push_back({label, {*t}, false, share ? format_percent(*share) : ""});
    }
    chart.value_label = "device time (s), field " + tkey;
    c.sec.figures.push_back(c.figure("categories", chart.title, render_svg(chart),
                                     {base + cat_key + "[]." + lkey, base + cat_key + "[]." + tkey},
                                     "Device kernel rows only (ATen op rows would double-count)."));
    break;
  }
  const auto device_sm = number_at(kt, "architecture.device_sm");
  if (auto older = number_at(kt, "architecture.older_share_ratio"); older && device_sm) {
    c.fact("kernels built for an older architecture than sm" + axis_number(*device_sm),
           format_percent(*older) + " of kernel time", base + "architecture.older_share_ratio",
           *older > 0);
  }
  for (const char* k_key : {"top_kernels", "kernels"}) {
    const Json* ks = array_at(kt, k_key);
    if (!ks) continue;
    BarChart chart;
    chart.title = "Top kernels";
    chart.highlight_label = "built for an older architecture than the device";
    std::string tkey, lkey;
    std::vector<std::pair<double, BarItem>> items;
    for (const auto& row : *ks) {
      auto t = row_seconds(row, &tkey);
      std::string label = row_label(row, &lkey);
      if (!t) continue;
      bool mismatch = false;
      for (const char* mk : {"arch_mismatch", "architecture_mismatch", "mismatch", "older_arch"}) {
        const Json* m = find_path(row, mk);
        if (m && m->is_boolean() && m->get<bool>()) mismatch = true;
      }
      // The kernels probe's table: architecture_sm from the name against architecture.device_sm.
      auto sm = number_at(row, "architecture_sm");
      if (sm && *sm > 0 && device_sm && *device_sm > 0 && *sm < *device_sm) mismatch = true;
      std::string note = string_at(row, "category");
      std::string arch = string_at(row, "kernel_arch").empty() ? string_at(row, "arch")
                                                               : string_at(row, "kernel_arch");
      if (arch.empty() && sm && *sm > 0) arch = fmt::format("sm{}", static_cast<int>(*sm));
      if (!arch.empty()) note += (note.empty() ? "" : ", ") + arch;
      items.push_back({*t, {label, {*t}, mismatch, note}});
    }
    std::stable_sort(items.begin(), items.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (std::size_t i = 0; i < items.size() && i < 15; ++i) chart.items.push_back(items[i].second);
    chart.value_label = "device time (s), field " + tkey;
    c.sec.figures.push_back(
        c.figure("top-kernels", chart.title, render_svg(chart),
                 {base + k_key + "[]." + lkey, base + k_key + "[]." + tkey},
                 "The 15 largest kernels; a red outline marks a kernel whose architecture "
                 "is older than the card's."));
    break;
  }
  // Sum vs union vs wall.
  BarChart sums;
  sums.title = "Kernel time: sum vs union vs wall";
  sums.value_label = "seconds";
  std::vector<std::string> fields;
  for (const auto& [label, keys] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"sum of kernel times",
            {"totals.sum_ns", "sum_s", "kernel_sum_s", "totals.sum_s", "sum_ns"}},
           {"union (busy time)",
            {"totals.union_busy_ns", "union_s", "kernel_union_s", "totals.union_s", "union_ns",
             "totals.union_ns"}},
           {"wall span", {"totals.span_ns", "wall_s", "wall_time_s", "totals.wall_s", "wall_ns",
                          "totals.wall_ns"}}}) {
    for (const auto& k : keys) {
      if (auto v = number_at(kt, k)) {
        const double s = ends_with(k, "_ns") ? *v * 1e-9 : *v;
        sums.items.push_back({label, {s}, false, format_seconds(s)});
        fields.push_back(base + k);
        break;
      }
    }
  }
  if (sums.items.size() >= 2) {
    c.sec.figures.push_back(
        c.figure("sum-union-wall", sums.title, render_svg(sums), fields,
                 "A sum above the union means kernels overlapped (streams); a union well "
                 "below the wall means the device sat idle."));
  }
  if (const Json* phases = array_at(kt, "phases")) {
    BarChart chart;
    chart.title = "Kernel time by phase";
    std::string tkey, lkey;
    for (const auto& row : *phases) {
      auto t = row_seconds(row, &tkey);
      if (t) chart.items.push_back({row_label(row, &lkey), {*t}, false, format_seconds(*t)});
    }
    chart.value_label = "device time (s), field " + tkey;
    if (!chart.items.empty()) {
      c.sec.figures.push_back(c.figure("kernel-phases", chart.title, render_svg(chart),
                                       {base + "phases[]." + lkey, base + "phases[]." + tkey}, ""));
    }
  }
  if (c.sec.figures.empty()) {
    c.sec.notes.push_back("no kernel categories or kernels found under " +
                          (base.empty() ? std::string("results") : base) +
                          " (looked for categories[], by_category[], top_kernels[], kernels[])");
  }
}

void kernels_section(Ctx& c) {
  const Json* kt = find_path(c.results, "kernel_table");
  if (kt && kt->is_object()) {
    kernel_table_figures(c, *kt, "results.kernel_table.");
  } else {
    kernel_table_figures(c, c.results, "results.");
  }
}

// Profile's attribution (docs/profile.md, "Attribution"): the traced step of one point (the
// kernel table's, else the widest) as a stacked bar per phase split by part, and one stacked bar
// per decoder layer, sliding and full layers named.
int phase_part_series(const std::string& part, const std::string& kind) {
  if (part == "attention_core") return kind == "full" ? 0 : 1;
  if (part == "attention_proj") return 2;
  if (part == "dense_mlp") return 3;
  if (part == "router") return 4;
  if (part == "experts") return 5;
  if (part == "loss_head") return 6;
  if (part == "untagged") return 8;
  return 7;  // embedding, other
}

void phase_part_figures(Ctx& c, const Json& pts) {
  const std::vector<std::string> series = {
      "attention core (full layers)", "attention core (sliding layers)", "attention projections",
      "dense MLP", "router", "experts", "loss head", "embedding and other", "untagged"};
  const auto table_width = number_at(c.results, "kernel_table_point.width");
  std::optional<size_t> chosen;
  for (size_t i = 0; i < pts.size(); ++i) {
    const Json& p = pts[i];
    const Json* kt = p.is_object() ? find_path(p, "kernel_trace") : nullptr;
    if (!kt || !kt->is_object() || !array_at(*kt, "by_phase_part")) continue;
    auto w = number_at(p, "width");
    if (!w) continue;
    if (table_width ? *w == *table_width
                    : (!chosen || *w > number_at(pts[*chosen], "width").value_or(0)))
      chosen = i;
  }
  if (!chosen) return;
  const Json& p = pts[*chosen];
  const Json& kt = p["kernel_trace"];
  const std::string point = fmt::format("{}x{}", number_at(p, "batch").value_or(0),
                                        number_at(p, "width").value_or(0));
  const std::string base = fmt::format("results.points[{}].kernel_trace.", *chosen);

  BarChart phases;
  phases.title = "Where the traced step's device time went, " + point + ": phase by part";
  phases.series = series;
  phases.stacked = true;
  phases.value_label = "kernel time, seconds";
  for (const char* phase : {"forward", "loss", "recompute", "backward", "untagged"}) {
    std::vector<double> v(series.size(), 0.0);
    double total = 0;
    for (const auto& row : *array_at(kt, "by_phase_part")) {
      if (string_at(row, "phase") != phase) continue;
      const double t = number_at(row, "kernel_s").value_or(0);
      v[static_cast<size_t>(
          phase_part_series(string_at(row, "part"), string_at(row, "layer_kind")))] += t;
      total += t;
    }
    if (total > 0) phases.items.push_back({phase, v, false, format_seconds(total)});
  }
  if (!phases.items.empty()) {
    c.sec.figures.push_back(c.figure(
        "phase-part", phases.title, render_svg(phases),
        {base + "by_phase_part[].phase", base + "by_phase_part[].part",
         base + "by_phase_part[].layer_kind", base + "by_phase_part[].kernel_s"},
        "Each backward kernel is given the part of the forward (or recompute) operation it "
        "differentiates; recompute is the checkpointed forward run again inside the backward."));
  }
  const Json* layers = array_at(kt, "by_layer");
  if (!layers || layers->empty()) return;
  BarChart per_layer;
  per_layer.title = "Device time per decoder layer, " + point + ": forward, recompute and backward";
  per_layer.series = series;
  per_layer.stacked = true;
  per_layer.value_label = "kernel time, seconds";
  for (const auto& l : *layers) {
    const Json* phases_of = l.is_object() ? find_path(l, "kernel_s") : nullptr;
    if (!phases_of || !phases_of->is_object()) continue;
    std::vector<double> v(series.size(), 0.0);
    double total = 0;
    const std::string kind = string_at(l, "layer_kind");
    for (const auto& [phase, parts] : phases_of->items()) {
      if (!parts.is_object()) continue;
      for (const auto& [part, t] : parts.items()) {
        if (!t.is_number()) continue;
        v[static_cast<size_t>(phase_part_series(part, kind))] += t.get<double>();
        total += t.get<double>();
      }
    }
    per_layer.items.push_back({fmt::format("layer {} {}", number_at(l, "layer").value_or(-1), kind),
                               v, false, format_seconds(total)});
  }
  if (!per_layer.items.empty()) {
    c.sec.figures.push_back(c.figure(
        "per-layer", per_layer.title, render_svg(per_layer),
        {base + "by_layer[].layer", base + "by_layer[].layer_kind",
         base + "by_layer[].kernel_s.PHASE.PART"},
        "One bar per layer; full (global) layers carry the head_dim-512 attention."));
  }
}

void profile_section(Ctx& c) {
  const Json& r = c.results;
  const Json* pts = array_at(r, "points");
  if (!pts) {
    c.absent("results.points", "the profile figures");
    return;
  }
  std::map<double, ChartSeries> time_by_batch, mem_by_batch;
  std::vector<double> oom;
  std::string mem_key;
  int64_t failed = 0;
  for (const auto& p : *pts) {
    auto b = number_at(p, "batch"), w = number_at(p, "width");
    if (!b || !w) continue;
    if (string_at(p, "outcome") != "ok") {
      oom.push_back(*w);
      ++failed;
      continue;
    }
    std::vector<double> samples;
    if (const Json* s = array_at(p, "samples_s")) {
      for (const auto& v : *s) {
        if (v.is_number()) samples.push_back(v.get<double>());
      }
    }
    if (!samples.empty()) {
      ChartSeries& s = time_by_batch[*b];
      s.label = fmt::format("batch {} (median, bar: min–max)", axis_number(*b));
      s.x.push_back(*w);
      s.y.push_back(median_of(samples));
      s.y_low.push_back(*std::min_element(samples.begin(), samples.end()));
      s.y_high.push_back(*std::max_element(samples.begin(), samples.end()));
    }
    for (const char* k : {"peak_allocated_bytes", "peak_reserved_bytes", "peak_bytes",
                          "memory.peak_allocated_bytes", "memory.peak_bytes"}) {
      if (auto m = number_at(p, k)) {
        mem_key = k;
        ChartSeries& s = mem_by_batch[*b];
        s.label = fmt::format("batch {}", axis_number(*b));
        s.x.push_back(*w);
        s.y.push_back(*m / (1024.0 * 1024 * 1024));
        break;
      }
    }
  }
  c.fact("points",
         fmt::format("{} measured, {} failed (OOM or refused)", pts->size() - failed, failed),
         "results.points[].outcome", failed > 0);
  XYChart t;
  t.title = "Step time against width";
  t.x_label = "width (tokens per sequence)";
  t.y_label = "step time (s)";
  t.crosses_label = "not measured (outcome ≠ ok, e.g. OOM)";
  t.crosses_x = oom;
  int color = 0;
  for (auto& [b, s] : time_by_batch) {
    s.color = color++;
    ChartSeries joined = s;
    joined.kind = ChartSeries::Kind::kLine;
    joined.label = "";
    joined.y_low.clear();
    joined.y_high.clear();
    t.series.push_back(joined);
    t.series.push_back(s);
  }
  c.sec.figures.push_back(
      c.figure("time", t.title, render_svg(t), {"results.points[].batch/width/outcome/samples_s"},
               "Every timed repeat is in the evidence; the point is the median."));
  if (!mem_by_batch.empty()) {
    XYChart m;
    m.title = "Peak memory against width";
    m.x_label = "width (tokens per sequence)";
    m.y_label = "peak memory (GiB)";
    m.crosses_label = "out of memory / failed";
    m.crosses_x = oom;
    color = 0;
    for (auto& [b, s] : mem_by_batch) {
      s.color = color++;
      m.series.push_back(s);
    }
    if (auto cap = number_at(c.in.doc, "environment.device.memory_bytes"); cap && *cap > 0) {
      m.markers.push_back({false, *cap / (1024.0 * 1024 * 1024), "device memory"});
    }
    c.sec.figures.push_back(c.figure("memory", m.title, render_svg(m),
                                     {"results.points[]." + mem_key},
                                     "Crosses mark widths that did not fit."));
  } else if (std::any_of(pts->begin(), pts->end(), [](const Json& p) {
               return p.is_object() && p.contains("peak_allocated_bytes") &&
                      p["peak_allocated_bytes"].is_null();
             })) {
    c.sec.notes.push_back(
        "peak memory not measured (results.points[].peak_allocated_bytes is null: tprobe reads "
        "CUDA's caching allocator, and this run had none, e.g. on the CPU): memory figure not "
        "drawn");
  } else {
    c.sec.notes.push_back(
        "no peak-memory field found in results.points[] (looked for peak_allocated_bytes, "
        "peak_reserved_bytes, peak_bytes, memory.peak_*): memory figure not drawn");
  }
  // Time by phase and by layer type, if the profile breaks it down.
  for (const auto& [key, title] :
       std::vector<std::pair<std::string, std::string>>{{"phases", "Time by phase"},
                                                        {"by_phase", "Time by phase"},
                                                        {"layer_types", "Time by layer type"},
                                                        {"by_layer_type", "Time by layer type"}}) {
    const Json* rows = array_at(r, key);
    if (!rows) continue;
    BarChart chart;
    chart.title = title;
    std::string tkey, lkey;
    for (const auto& row : *rows) {
      auto tt = row_seconds(row, &tkey);
      std::string label = row_label(row, &lkey);
      if (tt) chart.items.push_back({label, {*tt}, false, format_seconds(*tt)});
    }
    chart.value_label = "seconds, field " + tkey;
    if (!chart.items.empty()) {
      c.sec.figures.push_back(
          c.figure(key, title, render_svg(chart),
                   {"results." + key + "[]." + lkey, "results." + key + "[]." + tkey}, ""));
    }
  }
  phase_part_figures(c, *pts);
  for (const char* k : {"kernel_table", "kernels"}) {
    const Json* kt = find_path(r, k);
    if (kt && kt->is_object()) kernel_table_figures(c, *kt, std::string("results.") + k + ".");
  }
}

using Builder = void (*)(Ctx&);
struct KnownProbe {
  const char* name;
  const char* title;
  Builder build;
};
// The page's order: the environment, then as the main job runs the probes. Adding a probe's
// pictures = one builder and one line here.
const KnownProbe kProbes[] = {
    {"env", "Environment", env_section},
    {"inspect", "Checkpoint: parameters, the 4-bit trap, LoRA targets", inspect_section},
    {"mask", "Attention masks", mask_section},
    {"padding", "Padding and truncation", padding_section},
    {"bucket", "Length-bucketed sampler sweep", bucket_section},
    {"profile", "Profile: time and memory per width", profile_section},
    {"scaling-fit", "Scaling fit: linear vs quadratic", scaling_fit_section},
    {"kernels", "Kernel table", kernels_section},
    {"flops", "FLOPs: intended vs performed, MFU", flops_section},
    {"parity", "Parity with Hugging Face", parity_section},
    {"lora-gate", "LoRA adapter gate", lora_gate_section},
};

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string base_name(const std::string& p) {
  std::size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

std::vector<std::string> report_known_probes() {
  std::vector<std::string> out;
  for (const auto& p : kProbes) out.push_back(p.name);
  return out;
}

std::vector<std::string> list_evidence_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    if (is_dir(p)) {
      DIR* d = ::opendir(p.c_str());
      if (!d) fail("{}: cannot list the directory", p);
      std::vector<std::string> names;
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.size() > 5 && ends_with(n, ".json")) names.push_back(n);
      }
      ::closedir(d);
      std::sort(names.begin(), names.end());
      for (const auto& n : names) files.push_back((p.back() == '/' ? p : p + "/") + n);
    } else {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0) fail("{}: no such evidence file or directory", p);
      files.push_back(p);
    }
  }
  return files;
}

std::vector<EvidenceInput> collect_evidence(const std::vector<std::string>& paths) {
  const std::vector<std::string> files = list_evidence_files(paths);
  std::vector<EvidenceInput> out;
  for (const auto& f : files) {
    EvidenceInput in;
    in.path = f;
    in.name = base_name(f);
    std::ifstream is(f, std::ios::binary);
    if (!is) {
      in.error = "cannot open";
    } else {
      std::stringstream ss;
      ss << is.rdbuf();
      try {
        in.doc = detail::parse_json_strict(ss.str(), f);
      } catch (const Error& e) {
        in.error = e.what();
        in.doc = nullptr;
      }
    }
    out.push_back(std::move(in));
  }
  return out;
}

Report build_report(const std::vector<EvidenceInput>& inputs, const std::string& since) {
  Report rep;
  rep.generated_at = utc_timestamp_now();
  rep.tool_version = TPROBE_VERSION;
  rep.git_sha = TPROBE_GIT_SHA;
  std::vector<std::pair<int, ReportSection>> ordered;
  for (const auto& in : inputs) {
    if (!in.error.empty()) {
      rep.notes.push_back(fmt::format("{}: not read ({})", in.name, in.error));
      continue;
    }
    const std::string schema = string_at(in.doc, "schema.name");
    if (!in.doc.is_object() || !starts_with(schema, "tprobe.")) {
      rep.notes.push_back(fmt::format(
          "{}: not a tprobe evidence file (no schema.name \"tprobe.<probe>\"); skipped", in.name));
      continue;
    }
    const std::string probe = schema.substr(7);
    if (probe == "report") continue;  // a report's own evidence, from an earlier run
    ReportSection sec;
    sec.probe = probe;
    sec.id = "sec-" + probe;
    sec.source = in.name;
    sec.outcome = string_at(in.doc, "status.outcome");
    ProvenanceRow pr;
    pr.file = in.name;
    pr.probe = probe;
    pr.schema = schema + " v" + string_at(in.doc, "schema.version");
    pr.tool_version = string_at(in.doc, "tool.version");
    pr.git_sha = string_at(in.doc, "tool.git_sha");
    pr.started_at = string_at(in.doc, "invocation.started_at");
    if (const Json* argv = array_at(in.doc, "invocation.argv")) {
      std::vector<std::string> parts;
      for (const auto& a : *argv) parts.push_back(a.is_string() ? a.get<std::string>() : a.dump());
      if (!parts.empty()) parts[0] = "tprobe";
      pr.argv = fmt::format("{}", fmt::join(parts, " "));
    }
    pr.device = string_at(in.doc, "environment.device.name");
    if (pr.device.empty()) pr.device = "CPU (" + string_at(in.doc, "environment.host") + ")";
    pr.torch = string_at(in.doc, "environment.torch.version");
    pr.attn_requested = string_at(in.doc, "environment.attn_requested");
    pr.attn_resolved = string_at(in.doc, "environment.attn_resolved");
    pr.outcome = sec.outcome;
    rep.provenance.push_back(pr);

    const auto version = number_at(in.doc, "schema.version");
    const bool known_version = version && *version == kEvidenceSchemaVersion;
    if (!known_version) {
      sec.notes.push_back(fmt::format(
          "schema version {} is not the one this tprobe reads ({}): only the status is shown",
          string_at(in.doc, "schema.version"), kEvidenceSchemaVersion));
    }
    // Timestamps are fixed-width UTC ISO 8601, so text order is time order.
    if (!since.empty() && !pr.started_at.empty() && pr.started_at < since) {
      const std::string stale = fmt::format(
          "{}: stale: started {}, before the run it belongs to (started {})", in.name,
          pr.started_at, since);
      sec.notes.push_back(stale);
      rep.notes.push_back(stale);
    }
    if (pr.tool_version != TPROBE_VERSION) {
      sec.notes.push_back(fmt::format(
          "written by tprobe {} (this report: {}): fields may differ from what is drawn here",
          pr.tool_version.empty() ? "?" : pr.tool_version, TPROBE_VERSION));
    }
    if (const Json* diags = array_at(in.doc, "status.diagnostics")) {
      for (const auto& d : *diags) {
        std::string s = string_at(d, "severity");
        sec.diagnostics.push_back({s == "error"     ? Severity::kError
                                   : s == "warning" ? Severity::kWarning
                                                    : Severity::kInfo,
                                   string_at(d, "code"), string_at(d, "message")});
      }
    }
    int order = static_cast<int>(std::size(kProbes));
    const KnownProbe* known = nullptr;
    for (std::size_t i = 0; i < std::size(kProbes); ++i) {
      if (probe == kProbes[i].name) known = &kProbes[i], order = static_cast<int>(i);
    }
    sec.title = known ? known->title : "tprobe " + probe;
    const Json* results = find_path(in.doc, "results");
    static const Json kEmpty = Json::object();
    Ctx ctx{in, sec, results && results->is_object() ? *results : kEmpty};
    if (!results || !results->is_object()) sec.notes.push_back("no results object");
    if (known && known_version) {
      try {
        known->build(ctx);
      } catch (const std::exception& e) {
        // A shape the builder did not foresee: say so and keep the page.
        sec.notes.push_back("could not draw this section: " +
                            detail::printable(detail::json_error_text(e.what()), 200));
      }
    } else if (!known) {
      sec.notes.push_back("this tprobe draws no figures for probe '" + probe +
                          "'; its status is shown");
    }
    ordered.emplace_back(order, std::move(sec));
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Every id of the page unique: two files of one probe give their sections, figures and tables
  // the same ids, which the second gets with "-2" (and so on).
  std::set<std::string> used = {"provenance"};
  auto unique = [&](std::string& id) {
    if (used.insert(id).second) return;
    for (int n = 2;; ++n) {
      std::string candidate = id + "-" + std::to_string(n);
      if (used.insert(candidate).second) {
        id = std::move(candidate);
        return;
      }
    }
  };
  for (auto& [o, sec] : ordered) {
    unique(sec.id);
    for (auto& f : sec.figures) unique(f.id);
    for (auto& t : sec.tables) unique(t.id);
    rep.sections.push_back(std::move(sec));
  }
  return rep;
}

Json to_json(const Report& rep) {
  Json out;
  out["generated_at"] = rep.generated_at;
  Json files = Json::array();
  for (const auto& p : rep.provenance) {
    files.push_back({{"file", p.file},
                     {"probe", p.probe},
                     {"schema", p.schema},
                     {"tool_version", p.tool_version},
                     {"git_sha", p.git_sha},
                     {"outcome", p.outcome}});
  }
  out["files"] = std::move(files);
  Json sections = Json::array();
  for (const auto& s : rep.sections) {
    Json figs = Json::array();
    for (const auto& f : s.figures)
      figs.push_back(
          {{"id", f.id}, {"title", f.title}, {"source", f.source}, {"fields", f.fields}});
    Json tabs = Json::array();
    for (const auto& t : s.tables)
      tabs.push_back(
          {{"id", t.id}, {"title", t.title}, {"rows", t.rows.size()}, {"fields", t.fields}});
    sections.push_back({{"id", s.id},
                        {"probe", s.probe},
                        {"source", s.source},
                        {"outcome", s.outcome},
                        {"figures", std::move(figs)},
                        {"tables", std::move(tabs)},
                        {"notes", s.notes}});
  }
  out["sections"] = std::move(sections);
  out["notes"] = rep.notes;
  return out;
}

}  // namespace tprobe::core
