#include "tprobe/core/cost/levers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/median.hpp"
#include "tprobe/core/base/units.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {

const char* const kPackingLever = "packing";

const std::vector<LeverInfo>& lever_catalogue() {
  static const std::vector<LeverInfo> kLevers = [] {
    std::vector<LeverInfo> v;
    for (const KnobInfo& k : knob_registry()) {
      if (*k.lever) v.push_back({k.id, k.lever, k.moves, k.in_hf_stack});
    }
    v.push_back({std::nullopt, kPackingLever,
                 "a padded micro-batch run as its real tokens only (packed rows, attention kept "
                 "inside each row); in tprobe's engine it comes with the attention path that packs",
                 "a flattening data collator (transformers' DataCollatorWithFlattening, TRL's "
                 "padding_free) with an attention implementation that takes packed sequences"});
    return v;
  }();
  return kLevers;
}

std::vector<LeverConfig> lever_configs(const LeverPlanInput& in) {
  const StepConfig& b = in.baseline;
  std::vector<LeverConfig> out;
  out.push_back({"baseline", "", b, false});
  auto alone = [&](const char* lever, const StepConfig& c, bool padded_only = false) {
    if (c == b) return;
    out.push_back({lever, config_difference(c, b), c, padded_only});
  };
  for (const LeverInfo& l : lever_catalogue()) {
    if (!l.knob) continue;
    if (*l.knob == Knob::kBatch) {
      StepConfig c = b;
      if (b.batch >= 2 && b.batch % 2 == 0) {
        c.batch = b.batch / 2;
        alone(l.name, c);
      }
      c.batch = b.batch * 2;
      alone(l.name, c);
      continue;
    }
    const std::string current = knob_value(b, *l.knob);
    for (const KnobValue& v : knob_info(*l.knob).values) {
      if (!v.engine || !v.lever || current == v.name) continue;
      if (*v.lever_device && in.device != v.lever_device) continue;
      StepConfig c = b;
      set_knob(c, *l.knob, v.name);
      alone(l.name, c);
    }
  }
  if (in.padded_point && in.packing_path && in.packing_path != b.attn) {
    StepConfig c = b;
    c.attn = in.packing_path;
    alone(kPackingLever, c, true);
  }
  return out;
}

Timing make_timing(std::vector<double> samples_s) {
  Timing t;
  t.samples_s = std::move(samples_s);
  if (t.samples_s.empty()) return t;
  t.median_s = median(t.samples_s);
  t.min_s = *std::min_element(t.samples_s.begin(), t.samples_s.end());
  t.max_s = *std::max_element(t.samples_s.begin(), t.samples_s.end());
  return t;
}

LeverDelta compare(const Timing& baseline, const Timing& lever, double scale) {
  LeverDelta d;
  const double lm = lever.median_s * scale, lo = lever.min_s * scale, hi = lever.max_s * scale;
  d.delta_s = lm - baseline.median_s;
  d.ratio = lm > 0 ? baseline.median_s / lm : 0;
  d.spread_measured = baseline.samples_s.size() >= 2 && lever.samples_s.size() >= 2;
  d.inside_noise = lo <= baseline.max_s && baseline.min_s <= hi;
  if (!d.spread_measured) {
    d.verdict = "no spread measured";
  } else if (d.inside_noise) {
    d.verdict = "inside the noise";
  } else {
    d.verdict = d.delta_s < 0 ? "faster" : "slower";
  }
  return d;
}

namespace {

std::string point_key(int64_t width, const std::vector<int64_t>& lengths) {
  return fmt::format("{}/{}", width, fmt::join(lengths, ","));
}

}  // namespace

void compare_rows(LeversReport& report) {
  std::map<std::string, const LeverRow*> base;
  for (const LeverRow& r : report.rows) {
    if (r.lever == "baseline" && r.outcome == "ok") base[point_key(r.width, r.lengths)] = &r;
  }
  for (LeverRow& r : report.rows) {
    r.delta.reset();
    if (r.lever == "baseline" || r.outcome != "ok") continue;
    auto it = base.find(point_key(r.width, r.lengths));
    if (it == base.end()) continue;
    // The batch lever runs other rows per micro-batch: compare the time for the same tokens.
    const double scale =
        r.batch > 0 ? static_cast<double>(it->second->batch) / static_cast<double>(r.batch) : 1.0;
    r.delta = compare(it->second->timing, r.timing, scale);
  }
}

std::optional<StepConfig> best_combination(const LeversReport& report,
                                           std::vector<std::string>* from) {
  // A lever setting wins when every one of its rows ran and was faster beyond the noise.
  std::map<std::string, bool> wins;  // setting -> still winning
  std::map<std::string, const LeverRow*> first;
  for (const LeverRow& r : report.rows) {
    if (r.lever == "baseline" || r.lever == "best" || r.lever == knob_info(Knob::kBatch).lever ||
        r.lever == kPackingLever) {
      continue;
    }
    const bool faster = r.outcome == "ok" && r.delta && r.delta->verdict == "faster";
    auto [it, fresh] = wins.emplace(r.setting, faster);
    if (!fresh) it->second = it->second && faster;
    first.emplace(r.setting, &r);
  }
  StepConfig best = report.baseline;
  std::vector<std::string> used;
  // The fastest winning setting of each lever at the widest point it ran.
  std::map<std::string, std::pair<double, const LeverRow*>> per_lever;
  for (const LeverRow& r : report.rows) {
    auto w = wins.find(r.setting);
    if (w == wins.end() || !w->second || !r.delta) continue;
    auto& slot = per_lever[r.lever];
    if (!slot.second || r.width > slot.second->width ||
        (r.width == slot.second->width && r.delta->ratio > slot.first)) {
      slot = {r.delta->ratio, &r};
    }
  }
  for (const LeverInfo& l : lever_catalogue()) {
    auto it = per_lever.find(l.name);
    // Batch changes the recipe (reported on its own); packing comes with its attention path.
    if (it == per_lever.end() || !l.knob || *l.knob == Knob::kBatch) continue;
    set_knob(best, *l.knob, knob_value(it->second.second->config, *l.knob));
    used.push_back(it->second.second->setting);
  }
  if (from) *from = used;
  if (used.size() < 2) return std::nullopt;  // one lever alone is already its own row
  return best;
}

namespace {

std::string point_label(const LeverRow& r) {
  std::string s = fmt::format("{}×{}", r.batch, format_count(r.width));
  if (!r.lengths.empty()) s += " padded";
  return s;
}

}  // namespace

std::optional<size_t> edge_start(const std::vector<EdgeCandidate>& sweep) {
  std::optional<size_t> ran, oom;
  for (size_t i = 0; i < sweep.size(); ++i) {
    const EdgeCandidate& c = sweep[i];
    if (c.padded) continue;
    if (c.probe.outcome == "ok" && (!ran || c.width > sweep[*ran].width)) ran = i;
    if (c.probe.outcome == "oom" && (!oom || c.width > sweep[*oom].width)) oom = i;
  }
  return ran ? ran : oom;
}

std::optional<int64_t> next_edge_batch(int64_t start, const std::vector<EdgeProbe>& done,
                                       int64_t max_up) {
  if (start < 1) return std::nullopt;
  if (done.empty()) return start;
  const EdgeProbe& first = done.front();
  const EdgeProbe& last = done.back();
  if (first.outcome == "ok") {
    // Upward: stop at the first failure or at start + max_up.
    if (last.outcome != "ok" || last.batch >= start + max_up) return std::nullopt;
    return last.batch + 1;
  }
  // Downward from a start that failed: stop at the first fit or after batch 1.
  if (last.outcome == "ok" || last.batch <= 1) return std::nullopt;
  return last.batch - 1;
}

void summarise_edge(LeverEdge& e, int64_t max_up) {
  e.largest_batch = 0;
  bool failed_past = false;
  for (const EdgeProbe& p : e.probes) {
    if (p.outcome == "ok") e.largest_batch = std::max(e.largest_batch, p.batch);
  }
  for (const EdgeProbe& p : e.probes) {
    if (p.outcome != "ok" && p.batch == e.largest_batch + 1) failed_past = true;
  }
  if (e.probes.empty()) {
    e.outcome = "not measured";
  } else if (e.largest_batch == 0) {
    const bool one_failed = std::any_of(e.probes.begin(), e.probes.end(), [](const EdgeProbe& p) {
      return p.batch == 1 && p.outcome != "ok";
    });
    e.outcome = one_failed ? "none fits" : "not measured";
  } else if (failed_past) {
    e.outcome = "measured";
  } else if (e.largest_batch >= e.start_batch + max_up) {
    e.outcome = "at least";
  } else {
    e.outcome = "not measured";  // the search stopped early (a signal)
  }
}

std::optional<std::string> edge_change(const LeverEdge& baseline, const LeverEdge& lever) {
  // Each edge as a range of largest batches: exact, or [n, unbounded) for "at least n".
  auto exact = [](const LeverEdge& e) { return e.outcome == "measured" || e.outcome == "none fits"; };
  if (!(exact(baseline) || baseline.outcome == "at least") ||
      !(exact(lever) || lever.outcome == "at least")) {
    return std::nullopt;
  }
  const int64_t b = baseline.largest_batch, l = lever.largest_batch;
  // Drops: the lever's edge is exact and below every value the baseline's can take.
  if (exact(lever) && l < b) return std::string("drops");
  // Rises: the baseline's edge is exact and the lever's smallest value passes it.
  if (exact(baseline) && l > b) return std::string("rises");
  return std::nullopt;
}

namespace {

// Why there is no best combination when the run stopped first: read back as best_considered.
constexpr const char* kBestNotReached =
    "not reached: the run stopped before every lever was measured";

// Why a report has no best combination (results.best.why_none).
std::string why_no_best(const LeversReport& report) {
  if (!report.best_considered) return kBestNotReached;
  if (report.best_from.empty()) return "no lever was faster beyond the noise at every point";
  return "one lever alone: its own row is the best";
}

}  // namespace

Json to_json(const LeversReport& report) {
  Json j;
  j["baseline"] = {{"reproduces", report.baseline_name}, {"knobs", to_json(report.baseline)}};
  j["device"] = report.device;
  j["model"] = report.model;
  Json levers = Json::array();
  for (const LeverInfo& l : lever_catalogue()) {
    levers.push_back({{"lever", l.name}, {"moves", l.moves}, {"in_hf_stack", l.in_hf_stack}});
  }
  j["levers"] = levers;
  Json rows = Json::array();
  for (const LeverRow& r : report.rows) {
    Json row = {{"lever", r.lever},
                {"setting", r.setting},
                {"knobs", to_json(r.config)},
                {"batch", r.batch},
                {"width", r.width},
                {"lengths", r.lengths},
                {"tokens", r.tokens},
                {"outcome", r.outcome},
                {"message", r.message}};
    const bool ran = r.outcome == "ok" && !r.timing.samples_s.empty();
    auto spread = [&](double v) { return ran ? std::optional<double>(v) : std::nullopt; };
    row.update(evidence::to_json(LeverFigures{
        r.timing.samples_s, spread(r.timing.median_s), spread(r.timing.min_s),
        spread(r.timing.max_s), r.peak_allocated_bytes, r.peak_reserved_bytes, r.performed_mfu}));
    if (r.delta) {
      row["vs_baseline"] = {{"delta_s", r.delta->delta_s},
                            {"speedup_ratio", r.delta->ratio},
                            {"inside_noise", r.delta->inside_noise},
                            {"spread_measured", r.delta->spread_measured},
                            {"verdict", r.delta->verdict},
                            {"per_token", r.batch != 0 && r.lever == knob_info(Knob::kBatch).lever}};
    } else {
      row["vs_baseline"] = nullptr;
    }
    rows.push_back(std::move(row));
  }
  j["rows"] = rows;
  if (report.best) {
    j["best"] = {{"knobs", to_json(*report.best)},
                 {"setting", report.best_setting},
                 {"combines", report.best_from}};
  } else {
    j["best"] = {{"knobs", nullptr},
                 {"setting", ""},
                 {"combines", report.best_from},
                 {"why_none", why_no_best(report)}};
  }
  j["epoch"] = report.epoch ? to_json(*report.epoch) : Json(nullptr);
  if (report.edge_card_gib) {
    Json edges = Json::array();
    for (const LeverEdge& e : report.edges) {
      edges.push_back({{"lever", e.lever},
                       {"setting", e.setting},
                       {"width", e.width},
                       {"start_batch", e.start_batch},
                       {"largest_batch", e.largest_batch},
                       {"outcome", e.outcome},
                       {"message", e.message},
                       {"probes", evidence::to_json(e.probes)}});
    }
    const double reserve = report.edge_reserve_gib.value_or(0);
    j["memory_edge"] = {{"gpu_memory_gib", *report.edge_card_gib},
                        {"reserve_gib", reserve},
                        {"cap_bytes", report.edge_cap_bytes},
                        {"rows", edges}};
  } else {
    j["memory_edge"] = nullptr;
  }
  return j;
}

namespace {

namespace jr = json_read;

LeverRow lever_row_from_json(const Json& j, const std::string& w) {
  LeverRow r;
  r.lever = jr::string(j, "lever", w);
  r.setting = jr::string(j, "setting", w);
  r.config = step_config_from_json(jr::object(j, "knobs", w), w + ".knobs");
  r.batch = jr::integer(j, "batch", w, 0);
  r.width = jr::integer(j, "width", w, 0);
  r.lengths = jr::integers(j, "lengths", w, 0, r.width);
  r.tokens = jr::integer(j, "tokens", w, 0);
  r.outcome = jr::string(j, "outcome", w);
  r.message = jr::string(j, "message", w);
  // The spread as written where it was (an ok row), else as the repeats give it.
  const auto f = evidence::from_json<LeverFigures>(j, w);
  r.timing = make_timing(f.samples_s);
  r.timing.median_s = f.median_s.value_or(r.timing.median_s);
  r.timing.min_s = f.min_s.value_or(r.timing.min_s);
  r.timing.max_s = f.max_s.value_or(r.timing.max_s);
  r.peak_allocated_bytes = f.peak_allocated_bytes;
  r.peak_reserved_bytes = f.peak_reserved_bytes;
  r.performed_mfu = f.performed_mfu_ratio;
  if (!jr::field(j, "vs_baseline", w).is_null()) {
    const Json& d = jr::object(j, "vs_baseline", w);
    const std::string dw = w + ".vs_baseline";
    LeverDelta delta;
    delta.delta_s = jr::number(d, "delta_s", dw);
    delta.ratio = jr::number(d, "speedup_ratio", dw);
    delta.inside_noise = jr::boolean(d, "inside_noise", dw);
    delta.spread_measured = jr::boolean(d, "spread_measured", dw);
    delta.verdict = jr::string(d, "verdict", dw);
    r.delta = delta;
  }
  return r;
}

LeverEdge lever_edge_from_json(const Json& j, const std::string& w) {
  LeverEdge e;
  e.lever = jr::string(j, "lever", w);
  e.setting = jr::string(j, "setting", w);
  e.width = jr::integer(j, "width", w, 0);
  e.start_batch = jr::integer(j, "start_batch", w, 0);
  e.largest_batch = jr::integer(j, "largest_batch", w, 0);
  e.outcome = jr::string(j, "outcome", w);
  e.message = jr::string(j, "message", w);
  const Json& probes = jr::array(j, "probes", w);
  for (std::size_t i = 0; i < probes.size(); ++i)
    e.probes.push_back(evidence::from_json<EdgeProbe>(probes[i], jr::at(w, "probes", i)));
  return e;
}

}  // namespace

LeversReport levers_report_from_json(const Json& results, const std::string& where) {
  if (!results.is_object()) fail("{} must be an object", where);
  LeversReport r;
  const Json& base = jr::object(results, "baseline", where);
  r.baseline_name = jr::string(base, "reproduces", where + ".baseline");
  r.baseline = step_config_from_json(jr::object(base, "knobs", where + ".baseline"),
                                     where + ".baseline.knobs");
  r.device = jr::string(results, "device", where);
  r.model = jr::string(results, "model", where);
  const Json& rows = jr::array(results, "rows", where);
  for (std::size_t i = 0; i < rows.size(); ++i)
    r.rows.push_back(lever_row_from_json(rows[i], jr::at(where, "rows", i)));
  const Json& best = jr::object(results, "best", where);
  const std::string bw = where + ".best";
  r.best_from = jr::strings(best, "combines", bw);
  if (!jr::field(best, "knobs", bw).is_null()) {
    r.best = step_config_from_json(jr::object(best, "knobs", bw), bw + ".knobs");
    r.best_setting = jr::string(best, "setting", bw);
    r.best_considered = true;
  } else {
    r.best_considered = jr::string(best, "why_none", bw) != kBestNotReached;
  }
  if (!jr::field(results, "epoch", where).is_null())
    r.epoch = epoch_report_from_json(jr::object(results, "epoch", where), where + ".epoch");
  if (!jr::field(results, "memory_edge", where).is_null()) {
    const Json& m = jr::object(results, "memory_edge", where);
    const std::string mw = where + ".memory_edge";
    r.edge_card_gib = jr::number(m, "gpu_memory_gib", mw);
    r.edge_reserve_gib = jr::number(m, "reserve_gib", mw);
    r.edge_cap_bytes = jr::integer(m, "cap_bytes", mw, 0);
    const Json& edges = jr::array(m, "rows", mw);
    for (std::size_t i = 0; i < edges.size(); ++i)
      r.edges.push_back(lever_edge_from_json(edges[i], jr::at(mw, "rows", i)));
  }
  return r;
}

namespace {

// "2", "at least 5", "none", "-": an edge's largest batch as a table cell.
std::string edge_cell(const LeverEdge& e) {
  if (e.outcome == "measured") return std::to_string(e.largest_batch);
  if (e.outcome == "at least") return "at least " + std::to_string(e.largest_batch);
  if (e.outcome == "none fits") return "none";
  return "-";
}

// The lever's step ratio against the baseline at the edge's width (its unpadded row).
std::optional<double> ratio_at(const LeversReport& report, const LeverEdge& e) {
  for (const LeverRow& r : report.rows) {
    if (r.lever == e.lever && r.setting == e.setting && r.width == e.width && r.lengths.empty() &&
        r.delta) {
      return r.delta->ratio;
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<Table> edge_tables(const LeversReport& report) {
  std::vector<Table> out;
  if (!report.edge_card_gib) return out;
  const double reserve = report.edge_reserve_gib.value_or(0);
  Table t(fmt::format("What each lever does to the memory edge: the largest batch at its widest "
                      "width that runs under an allocator cap of {:g} GiB - {:g} reserve, measured",
                      *report.edge_card_gib, reserve));
  t.column("lever", Align::kLeft)
      .column("setting", Align::kLeft)
      .column("width")
      .column("largest batch")
      .column("baseline's")
      .column("step vs baseline")
      .column("measured (batch: outcome, peak reserved)", Align::kLeft);
  const LeverEdge* base = nullptr;
  for (const LeverEdge& e : report.edges) {
    if (e.lever == "baseline") base = &e;
  }
  std::vector<std::string> lines;
  for (const LeverEdge& e : report.edges) {
    std::vector<std::string> probes;
    for (const EdgeProbe& p : e.probes) {
      probes.push_back(fmt::format("{}: {}{}{}", p.batch, p.outcome,
                                   p.peak_reserved_bytes ? " " + format_bytes(*p.peak_reserved_bytes)
                                                         : std::string(),
                                   p.uncapped ? " (the sweep's point, uncapped)" : ""));
    }
    const auto ratio = ratio_at(report, e);
    const bool comparable = base && e.lever != "baseline" && base->width == e.width;
    t.row({e.lever, e.setting.empty() ? "(baseline)" : e.setting, format_count(e.width),
           edge_cell(e), comparable ? edge_cell(*base) : "-",
           ratio ? fmt::format("{:.2f}×", *ratio) : "-",
           probes.empty() ? (e.message.empty() ? e.outcome : e.message)
                          : fmt::format("{}", fmt::join(probes, "; "))});
    const auto change = comparable ? edge_change(*base, e) : std::nullopt;
    if (change) {
      const std::string speed =
          ratio ? fmt::format("{:.2f}× {} the baseline", *ratio >= 1 ? *ratio : 1 / *ratio,
                              *ratio >= 1 ? "faster than" : "slower than")
                : std::string("no step time to set beside the baseline's");
      lines.push_back(fmt::format("{}: {}, and the largest batch at {} {} from {} to {}",
                                  e.setting, speed, format_count(e.width), *change,
                                  edge_cell(*base), edge_cell(e)));
    }
  }
  for (const std::string& l : lines) t.note(l);
  out.push_back(std::move(t));
  return out;
}



std::vector<Table> levers_tables(const LeversReport& report) {
  // The defaults as they resolve where transformers' grouped_mm experts run (a GPU).
  StepConfig typical = hf_peft_baseline(report.baseline.batch);
  typical.moe = MoeDispatch::kHfGroupedMm;
  const std::string resolved = config_difference(report.baseline, typical);
  Table t(fmt::format("Levers against the baseline ({}), {} on {}",
                      resolved.empty() ? std::string("the HF + PEFT defaults")
                                       : "the HF + PEFT defaults as they resolved here: " + resolved,
                      report.model, report.device));
  t.column("lever", Align::kLeft)
      .column("setting", Align::kLeft)
      .column("point", Align::kLeft)
      .column("step (median)")
      .column("min–max")
      .column("vs baseline")
      .column("verdict", Align::kLeft)
      .column("peak alloc")
      .column("MFU");
  // A configuration refused (or failed) alike at every point is one row.
  auto same_failure_everywhere = [&](const LeverRow& r) {
    if (r.outcome == "ok") return false;
    for (const LeverRow& o : report.rows) {
      if (o.lever == r.lever && o.setting == r.setting &&
          (o.outcome != r.outcome || o.message != r.message)) {
        return false;
      }
    }
    return true;
  };
  std::set<std::string> collapsed;
  for (const LeverRow& r : report.rows) {
    if (same_failure_everywhere(r)) {
      if (!collapsed.insert(r.lever + "|" + r.setting).second) continue;
      t.row({r.lever, r.setting.empty() ? "(baseline)" : r.setting, "every point", "-", "-", "-",
             r.outcome + (r.message.empty() ? "" : ": " + r.message), "-", "-"});
      continue;
    }
    std::string step = "-", range = "-", vs = "-", verdict = r.outcome;
    if (r.outcome == "ok" && !r.timing.samples_s.empty()) {
      step = format_seconds(r.timing.median_s);
      range = fmt::format("{}–{}", format_seconds(r.timing.min_s), format_seconds(r.timing.max_s));
    }
    if (r.delta) {
      vs = fmt::format("{}{:.2f}×", r.lever == knob_info(Knob::kBatch).lever ? "per token " : "",
                       r.delta->ratio);
      verdict = r.delta->verdict;
    } else if (r.outcome != "ok") {
      verdict = r.outcome + (r.message.empty() ? "" : ": " + r.message);
    } else if (r.lever == "baseline") {
      verdict = "";
    }
    t.row({r.lever, r.setting.empty() ? "(baseline)" : r.setting, point_label(r), step, range, vs,
           verdict, r.peak_allocated_bytes ? format_bytes(*r.peak_allocated_bytes) : "-",
           r.performed_mfu ? format_percent(*r.performed_mfu) : "-"});
  }
  Table best("The best combination");
  best.column("combines", Align::kLeft).column("measured as", Align::kLeft);
  best.row({report.best_from.empty() ? "(none)" : fmt::format("{}", fmt::join(report.best_from, "; ")),
            report.best                    ? report.best_setting
            : !report.best_considered      ? "not reached: the run stopped before every lever was measured"
            : report.best_from.empty()     ? "no lever was faster beyond the noise at every point"
                                           : "one lever alone: its own rows are the best"});
  Table how("How to pull each lever in a Hugging Face + PEFT harness");
  how.column("lever", Align::kLeft)
      .column("what it moves", Align::kLeft)
      .column("in your stack", Align::kLeft);
  for (const LeverInfo& l : lever_catalogue()) how.row({l.name, l.moves, l.in_hf_stack});
  std::vector<Table> out = {t, best, how};
  for (Table& e : edge_tables(report)) out.push_back(std::move(e));
  if (report.epoch) {
    for (Table& e : epoch_tables(*report.epoch)) out.push_back(std::move(e));
  }
  return out;
}

void levers_report_section(SectionBuilder& c) {
  // The section draws the report as its own reader reads it: a file it cannot read is one note.
  LeversReport rep;
  try {
    rep = levers_report_from_json(c.results(), c.source() + " results");
  } catch (const Error& e) {
    c.note(fmt::format("{}: the lever figures not drawn", e.what()));
    return;
  }
  c.fact("baseline", rep.baseline_name, "baseline.reproduces");
  c.fact("best combination", rep.best ? rep.best_setting : "none: " + why_no_best(rep),
         "best.setting");
  // One chart per point, in the order the points first appear: step time (with the baseline's
  // min–max as the noise band) and, beside it, peak allocated memory.
  std::vector<std::string> points;
  std::map<std::string, BarChart> charts, memory;
  std::map<std::string, bool> memory_measured;  // a point where some row has a peak
  std::map<std::string, double> baseline_peak;  // bytes, where the baseline's was measured
  int64_t refused = 0;
  auto point_key = [](const LeverRow& row) {
    return fmt::format("{}{}", format_count(row.width), row.lengths.empty() ? "" : " padded");
  };
  for (const LeverRow& row : rep.rows) {
    if (row.lever == "baseline" && row.peak_allocated_bytes)
      baseline_peak[point_key(row)] = static_cast<double>(*row.peak_allocated_bytes);
  }
  for (const LeverRow& row : rep.rows) {
    // The batch lever runs another batch: it is drawn with the baseline's point, per token.
    const std::string key = point_key(row);
    const std::string& lever = row.lever;
    if (!charts.count(key)) {
      points.push_back(key);
      BarChart& ch = charts[key];
      ch.title = "Step time per lever, width " + key;
      ch.value_label = "step time (s, median; the batch lever per the baseline's tokens)";
      ch.series = {"step"};
      ch.width = 860;  // room for each bar's min–max and verdict
      BarChart& mem = memory[key];
      mem.title = "Peak allocated memory per lever, width " + key;
      mem.value_label = "peak allocated memory (GiB, the caching allocator's peak per step of "
                        "the row's batch; in brackets: minus the baseline's)";
      mem.series = {"peak allocated"};
      mem.width = 860;
    }
    const std::string& outcome = row.outcome;
    const std::string label = lever + (row.setting.empty() ? "" : " " + row.setting);
    // Memory: a bar only where the peak was measured; "not measured" (the CPU) is said, not drawn.
    {
      BarChart& mem = memory[key];
      if (outcome != "ok") {
        mem.items.push_back({label, {}, false, outcome.empty() ? "did not run" : outcome});
      } else if (!row.peak_allocated_bytes) {
        mem.items.push_back({label, {}, false, "not measured (no allocator peaks on this device)"});
      } else {
        const double peak = static_cast<double>(*row.peak_allocated_bytes);
        memory_measured[key] = true;
        // Short enough for the chart's right margin: "62 GiB (+6)", the difference in brackets.
        std::string note = fmt::format("{:.3g} GiB", peak / kGiB);
        if (lever == "baseline") {
          note += " (baseline)";
        } else if (auto base = baseline_peak.find(key); base != baseline_peak.end()) {
          note += fmt::format(" ({:+.3g})", (peak - base->second) / kGiB);
        }
        mem.items.push_back({label, {peak / kGiB}, false, note});
      }
    }
    // to_json writes a median for an ok row with repeats only.
    if (outcome != "ok" || row.timing.samples_s.empty()) {
      ++refused;
      charts[key].items.push_back({label, {0.0}, false, outcome});
      continue;
    }
    const Timing& t = row.timing;
    if (lever == "baseline") {
      // The noise band: the baseline's own min–max at this point, across every bar.
      BarChart& ch = charts[key];
      ch.band = true;
      ch.band_low = t.min_s;
      ch.band_high = t.max_s;
      ch.band_label = fmt::format("the baseline's min–max ({}–{} s): the noise band",
                                  axis_number(t.min_s), axis_number(t.max_s));
    }
    double scale = 1;
    if (lever == knob_info(Knob::kBatch).lever && row.batch > 0) {
      for (const LeverRow& b : rep.rows) {
        if (b.lever == "baseline" && b.width == row.width) {
          scale = static_cast<double>(b.batch) / static_cast<double>(row.batch);
          break;
        }
      }
    }
    std::string note =
        fmt::format("{}–{}", axis_number(t.min_s * scale), axis_number(t.max_s * scale));
    const std::string verdict = row.delta ? row.delta->verdict : "";
    if (!verdict.empty()) note += "; " + verdict;
    charts[key].items.push_back({label, {t.median_s * scale}, verdict == "inside the noise", note});
  }
  bool any_memory = false;
  for (std::size_t i = 0; i < points.size(); ++i) {
    BarChart& ch = charts[points[i]];
    ch.highlight_label = "inside the noise (min–max overlaps the baseline's)";
    c.figure(fmt::format("point-{}", i + 1), ch.title, render_svg(ch),
             {"rows[].lever/setting/width/median_s/min_s/max_s", "rows[].vs_baseline.verdict"},
             "One bar per configuration: the median of its timed repeats, its min–max and its "
             "verdict against the baseline beside it. The shaded band is the baseline's min–max "
             "at this point: a bar ending inside it is within the baseline's own spread. A "
             "highlighted bar cannot be told from the baseline; an empty one did not run (its "
             "outcome beside it).");
    if (!memory_measured[points[i]]) continue;
    any_memory = true;
    c.figure(fmt::format("memory-{}", i + 1), memory[points[i]].title,
             render_svg(memory[points[i]]),
             {"rows[].lever/setting/width/peak_allocated_bytes", "rows[].outcome"},
             "One bar per configuration: the peak memory the caching allocator held allocated "
             "during its timed steps, and the difference from the baseline's beside it. A row "
             "without a bar was not measured (its note says why: no allocator peaks on the CPU, "
             "or the configuration did not run).");
  }
  if (!any_memory && !points.empty()) {
    c.fact("peak memory", "not measured: no row has peak_allocated_bytes (libtorch keeps "
                          "allocator peaks on CUDA only), so no memory chart is drawn",
           "rows[].peak_allocated_bytes");
  }
  if (refused > 0) {
    c.fact("not measured", fmt::format("{} rows (OOM, refused or failed: the outcome says why)",
                                       refused),
           "rows[].outcome", false);
  }
  // The tables show every field as written: the rows the reader just read, untouched.
  c.table(c.generic_table("tab-levers-rows", "Every row", *c.array_at("rows"), "rows"));
  if (rep.edge_card_gib) {
    c.table(c.generic_table(
        "tab-levers-memory-edge",
        fmt::format("The memory edge: the largest batch at each configuration's widest width "
                    "under an allocator cap of {:g} GiB - {:g} reserve, measured",
                    *rep.edge_card_gib, rep.edge_reserve_gib.value_or(0)),
        *c.array_at("memory_edge.rows"), "memory_edge.rows"));
  }
  if (rep.epoch) epoch_report_section(c, *rep.epoch);
}

}  // namespace tprobe::core
