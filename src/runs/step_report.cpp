// JSON, line and table views of a StepReport: no libtorch here, so they compile fast.
#include "tprobe/runs/step_report.hpp"

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/median.hpp"
#include "tprobe/core/evidence/operator_inputs.hpp"
#include "tprobe/core/step/routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tprobe::runs {

using torch_api::PointOutcome;
using torch_api::PointResult;
using torch_api::StepPoint;
using torch_api::StepReport;

SampleStats sample_stats(const std::vector<double>& samples) {
  SampleStats s;
  if (samples.empty()) return s;
  s.median = core::median(samples);
  s.min = *std::min_element(samples.begin(), samples.end());
  s.max = *std::max_element(samples.begin(), samples.end());
  s.spread_ratio = s.median > 0 ? (s.max - s.min) / s.median : 0.0;
  return s;
}

namespace {

core::Json series(const std::vector<double>& samples) {
  core::Json out = core::Json::array();
  for (double x : samples) out.push_back(x);
  return out;
}

core::Json stats_json(const std::vector<double>& samples) {
  if (samples.empty()) return nullptr;
  SampleStats s = sample_stats(samples);
  return {
      {"median_s", s.median}, {"min_s", s.min}, {"max_s", s.max}, {"spread_ratio", s.spread_ratio}};
}

}  // namespace

core::Json point_to_json(const PointResult& r) {
  core::Json p;
  p["batch"] = r.point.batch;
  p["width"] = r.point.width;
  p["lengths"] = r.point.lengths.empty() ? core::Json(nullptr) : core::Json(r.point.lengths);
  p["padded"] = r.point.padded();
  p["real_tokens"] = r.point.real_tokens();
  p["padded_tokens"] = r.point.batch * r.point.width;
  p["outcome"] = to_string(r.outcome);
  p["message"] = r.message.empty() ? core::Json(nullptr) : core::Json(r.message);
  p["oom_tried_bytes"] = r.oom_tried_bytes ? core::Json(*r.oom_tried_bytes) : core::Json(nullptr);
  p["planned_floor_bytes"] = r.planned_floor_bytes;
  p["refused_before_running"] = r.refused_before_running;
  p["samples_s"] = series(r.step_s);
  p["forward_samples_s"] = series(r.forward_s);
  p["loss_samples_s"] = series(r.loss_s);
  p["backward_samples_s"] = series(r.backward_s);
  p["optimizer_samples_s"] = series(r.optimizer_s);
  p["step"] = stats_json(r.step_s);
  p["forward"] = stats_json(r.forward_s);
  p["loss"] = stats_json(r.loss_s);
  p["backward"] = stats_json(r.backward_s);
  p["optimizer"] = stats_json(r.optimizer_s);
  p["peak_allocated_bytes"] =
      r.memory_measured ? core::Json(r.peak_allocated_bytes) : core::Json(nullptr);
  p["peak_reserved_bytes"] =
      r.memory_measured ? core::Json(r.peak_reserved_bytes) : core::Json(nullptr);
  p["loss_value"] = r.outcome == PointOutcome::kOk ? core::Json(r.loss_value) : core::Json(nullptr);
  p["loss_targets"] = r.loss_targets;
  p["inert_adapters"] = r.inert_adapters;
  p["attn_sliding"] = r.attn_sliding;
  p["attn_full"] = r.attn_full;
  p["moe_dispatch"] = r.moe;
  p["traced"] = r.traced;
  p["traced_step_s"] = r.traced ? core::Json(r.traced_step_s) : core::Json(nullptr);
  p["trace_priming_step_s"] =
      r.trace_priming_step_s > 0 ? core::Json(r.trace_priming_step_s) : core::Json(nullptr);
  if (r.traced && !r.step_s.empty()) {
    const double med = sample_stats(r.step_s).median;
    p["trace_overhead_ratio"] = med > 0 ? r.traced_step_s / med - 1.0 : 0.0;
  } else {
    p["trace_overhead_ratio"] = nullptr;
  }
  p["trace_message"] = r.trace_message.empty() ? core::Json(nullptr) : core::Json(r.trace_message);
  if (r.memory) {
    core::Json m = core::to_json(*r.memory);
    m["step_s"] = r.memory_step_s;
    // The allocator's own peak over the memory step (CUDA): the replay's peak must equal it.
    m["allocator_peak_allocated_bytes"] =
        r.memory->totals_known ? core::Json(r.memory_step_peak_allocated_bytes) : core::Json(nullptr);
    if (!r.step_s.empty()) {
      const double med = sample_stats(r.step_s).median;
      m["overhead_ratio"] = med > 0 ? r.memory_step_s / med - 1.0 : 0.0;
    } else {
      m["overhead_ratio"] = nullptr;
    }
    p["memory"] = std::move(m);
  } else {
    p["memory"] = nullptr;
  }
  p["memory_message"] = r.memory_message.empty() ? core::Json(nullptr) : core::Json(r.memory_message);
  // The operator's inputs (core/evidence/operator_inputs.hpp: each field declared there).
  p["tokens"] = r.point.tokens ? core::evidence::to_json(*r.point.tokens) : core::Json(nullptr);
  p.update(core::evidence::to_json(r.expert_load));  // routed_per_layer, expert_load
  return p;
}

namespace {

namespace jr = core::json_read;

// A width or batch: positive and at most 2^31, so batch × width (padded_tokens) cannot overflow.
constexpr int64_t kMaxShape = int64_t{1} << 31;

// A samples series and its stats object: the stats are the series' (recomputed on writing), so
// they are only checked for being there exactly when the series has samples.
std::vector<double> read_series(const core::Json& j, const char* samples_key,
                                const char* stats_key, const std::string& where) {
  std::vector<double> v = jr::numbers(j, samples_key, where);
  const core::Json& stats = jr::field(j, stats_key, where);
  if (stats.is_null() != v.empty()) {
    fail("{}: field '{}' is {} but '{}' has {} samples", where, stats_key,
         stats.is_null() ? "null" : "set", samples_key, v.size());
  }
  if (!stats.is_null()) {
    const std::string w = fmt::format("{}.{}", where, stats_key);
    for (const char* k : {"median_s", "min_s", "max_s", "spread_ratio"}) {
      jr::number(jr::object(j, stats_key, where), k, w);
    }
  }
  return v;
}

// A field point_to_json writes as null exactly when `null_expected`.
void expect_null_when(const core::Json& j, const char* key, const std::string& where,
                      bool null_expected, const char* why) {
  const bool is_null = jr::field(j, key, where).is_null();
  if (is_null != null_expected) {
    fail("{}: field '{}' is {} but {}", where, key, is_null ? "null" : "set", why);
  }
}

}  // namespace

PointResult point_from_json(const core::Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  PointResult r;
  StepPoint& pt = r.point;
  pt.batch = jr::integer(j, "batch", where, 1, kMaxShape);
  pt.width = jr::integer(j, "width", where, 1, kMaxShape);
  if (!jr::field(j, "lengths", where).is_null()) {
    pt.lengths = jr::integers(j, "lengths", where, 0, pt.width);
    // Written as null when every row is real, so an array names one length per row.
    if (static_cast<int64_t>(pt.lengths.size()) != pt.batch) {
      fail("{}: field 'lengths' has {} values for batch {}", where, pt.lengths.size(), pt.batch);
    }
  }
  // What the shape says, written beside it for readers without the rule.
  const bool padded = jr::boolean(j, "padded", where);
  if (padded != pt.padded()) {
    fail("{}: field 'padded' is {} but the lengths hold {}padding to width {}", where, padded,
         pt.padded() ? "" : "no ", pt.width);
  }
  const int64_t real = jr::integer(j, "real_tokens", where, 0);
  if (real != pt.real_tokens()) {
    fail("{}: field 'real_tokens' is {} but the lengths add up to {}", where, real,
         pt.real_tokens());
  }
  const int64_t padded_tokens = jr::integer(j, "padded_tokens", where, 0);
  if (padded_tokens != pt.batch * pt.width) {
    fail("{}: field 'padded_tokens' is {} but batch × width is {}", where, padded_tokens,
         pt.batch * pt.width);
  }
  r.outcome = jr::enum_value(j, "outcome", where,
                             {PointOutcome::kOk, PointOutcome::kOom, PointOutcome::kError});
  r.message = jr::nullable_string(j, "message", where).value_or("");
  r.oom_tried_bytes = jr::nullable_integer(j, "oom_tried_bytes", where, 0);
  r.planned_floor_bytes = jr::number(j, "planned_floor_bytes", where);
  r.refused_before_running = jr::boolean(j, "refused_before_running", where);

  r.step_s = read_series(j, "samples_s", "step", where);
  r.forward_s = read_series(j, "forward_samples_s", "forward", where);
  r.loss_s = read_series(j, "loss_samples_s", "loss", where);
  r.backward_s = read_series(j, "backward_samples_s", "backward", where);
  // Written since --optimizer (evidence from before it ran no optimizer step: none to read).
  if (j.contains("optimizer_samples_s") || j.contains("optimizer")) {
    r.optimizer_s = read_series(j, "optimizer_samples_s", "optimizer", where);
  }
  if (!r.optimizer_s.empty() && r.optimizer_s.size() != r.step_s.size()) {
    fail("{}: field 'optimizer_samples_s' has {} samples but 'samples_s' has {}", where,
         r.optimizer_s.size(), r.step_s.size());
  }
  // Both peaks are written, or neither (memory_measured false: the CPU has no caching allocator).
  std::optional<int64_t> peak_alloc = jr::nullable_integer(j, "peak_allocated_bytes", where, 0);
  std::optional<int64_t> peak_res = jr::nullable_integer(j, "peak_reserved_bytes", where, 0);
  if (peak_alloc.has_value() != peak_res.has_value()) {
    fail("{}: field 'peak_reserved_bytes' is {} but 'peak_allocated_bytes' is {}", where,
         peak_res ? "set" : "null", peak_alloc ? "set" : "null");
  }
  r.memory_measured = peak_alloc.has_value();
  r.peak_allocated_bytes = peak_alloc.value_or(0);
  r.peak_reserved_bytes = peak_res.value_or(0);

  // Only an ok point has a loss; a loss that was not finite (a diverged step) is null once the
  // evidence is written, and still the non-finite double in a document not yet written.
  const core::Json& loss_field = jr::field(j, "loss_value", where);
  const bool no_loss = loss_field.is_null() ||
                       (loss_field.is_number() && !std::isfinite(loss_field.get<double>()));
  const std::optional<double> loss =
      no_loss ? std::nullopt : std::optional<double>(jr::number(j, "loss_value", where));
  if (r.outcome == PointOutcome::kOk) {
    r.loss_value = loss.value_or(std::numeric_limits<double>::quiet_NaN());
  } else if (loss) {
    fail("{}: field 'loss_value' is set but the outcome is '{}'", where, to_string(r.outcome));
  }
  r.loss_targets = jr::integer(j, "loss_targets", where, 0);
  r.inert_adapters = jr::integer(j, "inert_adapters", where, 0);
  r.attn_sliding = jr::string(j, "attn_sliding", where);
  r.attn_full = jr::string(j, "attn_full", where);
  r.moe = jr::string(j, "moe_dispatch", where);
  // Absent in evidence from before the step counted its experts' load or took a dataset's tokens.
  if (const core::Json* t = jr::optional(j, "tokens"))
    r.point.tokens = core::evidence::from_json<core::PointTokens>(*t, where + ".tokens");
  if (jr::optional(j, "expert_load") != nullptr) {
    r.expert_load = core::evidence::from_json<core::ExpertLoad>(j, where);
    for (std::size_t i = 0; i < r.expert_load.layers.size(); ++i) {
      const core::ExpertLoadLayer& e = r.expert_load.layers[i];
      const std::string w = jr::at(where, "expert_load", i);
      int64_t sum = 0;
      for (int64_t t : e.tokens) {
        if (t < 0) fail("{}.tokens: a negative count ({})", w, t);
        sum += t;
      }
      if (sum != r.expert_load.routed_per_layer)
        fail("{}.tokens: sum to {}, but the point routed {} per layer", w, sum,
             r.expert_load.routed_per_layer);
      const core::LoadSummary again = core::summarize_load(e.tokens);
      if (again.max_over_mean != e.max_over_mean || again.cv != e.cv ||
          again.zero_experts != e.zero_experts)
        fail("{}: max_over_mean, cv or zero_experts is not what its tokens give", w);
    }
  }

  r.traced = jr::boolean(j, "traced", where);
  expect_null_when(j, "traced_step_s", where, !r.traced, "it is written for a traced point only");
  if (r.traced) r.traced_step_s = jr::number(j, "traced_step_s", where);
  // Written only where positive (the first traced point's priming step).
  if (jr::optional(j, "trace_priming_step_s") != nullptr) {
    r.trace_priming_step_s = jr::number(j, "trace_priming_step_s", where);
    if (!(r.trace_priming_step_s > 0)) {
      fail("{}: field 'trace_priming_step_s' must be positive or null, got {}", where,
           r.trace_priming_step_s);
    }
  } else {
    jr::field(j, "trace_priming_step_s", where);  // null, but there
  }
  expect_null_when(j, "trace_overhead_ratio", where, !(r.traced && !r.step_s.empty()),
                   "it is written for a traced point with step samples only");
  if (jr::optional(j, "trace_overhead_ratio") != nullptr) {
    jr::number(j, "trace_overhead_ratio", where);
  }
  r.trace_message = jr::nullable_string(j, "trace_message", where).value_or("");

  if (!jr::field(j, "memory", where).is_null()) {
    const std::string mw = where + ".memory";
    const core::Json& m = jr::object(j, "memory", where);
    r.memory = core::step_memory_from_json(m, mw);
    r.memory_step_s = jr::number(m, "step_s", mw);
    std::optional<int64_t> allocator_peak =
        jr::nullable_integer(m, "allocator_peak_allocated_bytes", mw, 0);
    if (allocator_peak.has_value() != r.memory->totals_known) {
      fail("{}: field 'allocator_peak_allocated_bytes' is {} but 'allocator_totals' is {}", mw,
           allocator_peak ? "set" : "null", r.memory->totals_known);
    }
    r.memory_step_peak_allocated_bytes = allocator_peak.value_or(0);
    expect_null_when(m, "overhead_ratio", mw, r.step_s.empty(),
                     "it is written where the point has step samples");
    if (jr::optional(m, "overhead_ratio") != nullptr) jr::number(m, "overhead_ratio", mw);
  }
  r.memory_message = jr::nullable_string(j, "memory_message", where).value_or("");
  return r;
}

std::vector<PointResult> profile_points_from_json(const core::Json& results,
                                                  const std::string& where) {
  if (!results.is_object()) fail("{} must be an object", where);
  std::vector<PointResult> out;
  for (const char* key : {"points", "padded_points"}) {
    const bool padded = std::string(key) == "padded_points";
    const core::Json& pts = jr::array(results, key, where);
    for (size_t i = 0; i < pts.size(); ++i) {
      const std::string w = jr::at(where, key, i);
      PointResult p = point_from_json(pts[i], w);
      // scaling-fit fits `points` as one curve over widths: a padded point there would bend it.
      if (p.point.padded() != padded) {
        fail("{}: a point {}padding is filed under '{}'", w, padded ? "without " : "with ", key);
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

StepReport step_report_from_json(const core::Json& results, const std::string& where) {
  if (!results.is_object()) fail("{} must be an object", where);
  StepReport r;
  r.model = jr::string(results, "model", where);
  r.source = jr::string(results, "source", where);
  r.config_digest = jr::string(results, "config_digest", where);
  r.device_resolved = jr::string(results, "device", where);
  r.dtype = jr::string(results, "dtype", where);
  r.clock = jr::string(results, "clock", where);
  r.init_s = jr::number(results, "init_s", where);
  if (r.init_s < 0) fail("{}.init_s: negative", where);
  r.base_parameters = jr::integer(results, "base_parameters", where, 0);
  r.lora_modules = jr::integer(results, "lora_modules", where, 0);
  r.lora_parameters = jr::integer(results, "lora_parameters", where, 0);
  r.weights_allocated_bytes = jr::integer(results, "weights_allocated_bytes", where, 0);
  if (const core::Json* load = jr::optional(results, "load"))
    r.load = core::evidence::from_json<core::LoadFigures>(*load, where + ".load");
  r.interrupted = jr::boolean(results, "interrupted", where);
  const std::optional<std::string> at = jr::nullable_string(results, "interrupted_at", where);
  if (at) {
    if (at->empty()) fail("{}.interrupted_at: empty (written null when there is none)", where);
    if (!r.interrupted) fail("{}.interrupted_at: set but interrupted is false", where);
    r.interrupted_at = *at;
  }
  r.points = profile_points_from_json(results, where);
  return r;
}

core::Json to_json(const StepReport& r) {
  core::Json out;
  out["model"] = r.model;
  out["source"] = r.source;
  out["config_digest"] = r.config_digest;
  out["device"] = r.device_resolved;
  out["dtype"] = r.dtype;
  out["clock"] = r.clock;
  out["init_s"] = r.init_s;
  out["base_parameters"] = r.base_parameters;
  out["lora_modules"] = r.lora_modules;
  out["lora_parameters"] = r.lora_parameters;
  out["weights_allocated_bytes"] = r.weights_allocated_bytes;
  out["load"] = core::evidence::to_json(r.load);
  out["interrupted"] = r.interrupted;  // a signal stopped the sweep: later points are missing
  out["interrupted_at"] = r.interrupted_at.empty() ? core::Json(nullptr) : core::Json(r.interrupted_at);
  out["points"] = core::Json::array();
  out["padded_points"] = core::Json::array();
  for (const auto& p : r.points) {
    out[p.point.padded() ? "padded_points" : "points"].push_back(point_to_json(p));
  }
  return out;
}

std::string point_line(const PointResult& r) {
  std::string shape = fmt::format("{}x{}", r.point.batch, r.point.width);
  if (r.point.padded()) shape += fmt::format(" (lengths {})", fmt::join(r.point.lengths, ","));
  if (r.outcome != PointOutcome::kOk) {
    std::string tried = r.oom_tried_bytes
                            ? " (tried to allocate " + core::format_bytes(*r.oom_tried_bytes) + ")"
                            : "";
    // A refusal before running is tprobe's own sentence, every size in it: said whole.
    std::string msg = r.refused_before_running ? r.message : r.message.substr(0, 160);
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    return fmt::format("{} {}{}: {}", shape, to_string(r.outcome), tried, msg);
  }
  SampleStats s = sample_stats(r.step_s);
  std::string line = fmt::format(
      "{} ok: step {} (min {}, spread {}), fwd {}, loss {}, bwd {}{}, {}", shape,
      core::format_seconds(s.median), core::format_seconds(s.min),
      core::format_percent(s.spread_ratio), core::format_seconds(sample_stats(r.forward_s).median),
      core::format_seconds(sample_stats(r.loss_s).median),
      core::format_seconds(sample_stats(r.backward_s).median),
      r.optimizer_s.empty()
          ? std::string()
          : ", opt " + core::format_seconds(sample_stats(r.optimizer_s).median),
      r.memory_measured
          ? fmt::format("peak {} alloc / {} reserved",
                        core::format_bytes(static_cast<double>(r.peak_allocated_bytes)),
                        core::format_bytes(static_cast<double>(r.peak_reserved_bytes)))
          : std::string("peak memory not measured (no caching allocator on the CPU)"));
  if (r.traced && s.median > 0) {
    line += fmt::format(", traced step {} ({:+.1f} %)", core::format_seconds(r.traced_step_s),
                        100.0 * (r.traced_step_s / s.median - 1.0));
  }
  return line;
}

std::vector<core::Table> memory_tables(const StepReport& r) {
  std::vector<core::Table> out;
  std::vector<const PointResult*> pts;
  for (const auto& p : r.points) {
    if (p.memory) pts.push_back(&p);
  }
  if (pts.empty()) return out;
  const bool cuda = pts.front()->memory->totals_known;
  core::Table items(fmt::format(
      "where the peak goes (one more step per point under the allocator's event hook, {})",
      cuda ? "CUDA's caching allocator" : "the CPU allocator"));
  items.column("item", core::Align::kLeft);
  for (const PointResult* p : pts) {
    items.column(fmt::format("{}x{}{}", p->point.batch, p->point.width, p->point.padded() ? " pad" : ""));
  }
  const auto& first = pts.front()->memory->items;
  auto bytes = [](int64_t b) { return core::format_bytes(static_cast<double>(b)); };
  for (size_t i = 0; i < first.size(); ++i) {
    std::vector<std::string> row{first[i].label + (first[i].in_peak ? "" : " *")};
    for (const PointResult* p : pts) {
      const auto& it = p->memory->items;
      row.push_back(i < it.size() ? bytes(it[i].bytes) : "-");
    }
    items.row(row);
  }
  std::vector<std::string> sum{"= the items (in the peak)"}, peak{"peak allocated (replayed)"},
      alloc{"peak allocated (the allocator, memory step)"}, at{"the peak is in"},
      over{"memory step vs timed median"};
  for (const PointResult* p : pts) {
    const core::StepMemory& m = *p->memory;
    int64_t total = 0;
    for (const auto& it : m.items) {
      if (it.in_peak) total += it.bytes;
    }
    sum.push_back(bytes(total));
    peak.push_back(bytes(m.peak_allocated));
    alloc.push_back(m.totals_known ? bytes(p->memory_step_peak_allocated_bytes) : "-");
    at.push_back(m.peak_event < 0 ? m.peak_phase
                 : m.peak_layer >= 0
                     ? fmt::format("{} {} L{}", m.peak_phase, m.peak_part, m.peak_layer)
                     : fmt::format("{} {}", m.peak_phase, m.peak_part));
    const double med = p->step_s.empty() ? 0 : sample_stats(p->step_s).median;
    over.push_back(med > 0 ? fmt::format("{:+.1f} %", 100.0 * (p->memory_step_s / med - 1.0)) : "-");
  }
  items.row(sum).row(peak).row(alloc).row(at).row(over);
  items.note("* beside the peak, not in it: the reserved-but-unused cache, and with --optimizer "
             "none AdamW's two fp32 moments per LoRA parameter (computed: the step ran no "
             "optimizer). With --optimizer adamw the moments are resident, in the peak");
  if (!cuda) {
    items.note("CPU: the allocator reports only what it allocates while recording, so the "
               "resident set is the parameters' own bytes and nothing is checked against an "
               "allocator total");
  }
  out.push_back(std::move(items));

  // Bytes alive at the widest point's peak by part (rows) and phase (columns).
  const PointResult* widest = pts.front();
  for (const PointResult* p : pts) {
    if (!p->point.padded() && p->point.batch * p->point.width >= widest->point.batch * widest->point.width)
      widest = p;
  }
  const core::StepMemory& m = *widest->memory;
  std::vector<std::string> phases;
  for (const auto& c : m.alive_at_peak) {
    if (std::find(phases.begin(), phases.end(), c.phase) == phases.end()) phases.push_back(c.phase);
  }
  core::Table cells(fmt::format("bytes alive at the {}x{} peak by part and phase (allocated "
                                "during the step; the resident set apart)",
                                widest->point.batch, widest->point.width));
  cells.column("part", core::Align::kLeft);
  for (const auto& ph : phases) cells.column(ph);
  cells.column("total");
  std::vector<std::string> parts;
  for (const auto& c : m.alive_at_peak) {
    if (std::find(parts.begin(), parts.end(), c.part) == parts.end()) parts.push_back(c.part);
  }
  for (const auto& pa : parts) {
    std::vector<std::string> row{pa};
    int64_t total = 0;
    for (const auto& ph : phases) {
      int64_t b = 0;
      for (const auto& c : m.alive_at_peak) {
        if (c.part == pa && c.phase == ph) b += c.bytes;
      }
      total += b;
      row.push_back(b ? bytes(b) : "");
    }
    row.push_back(bytes(total));
    cells.row(row);
  }
  out.push_back(std::move(cells));
  return out;
}

core::Table timing_table(const StepReport& r) {
  core::Table t(fmt::format("step times ({} on {}, {}; median of the timed repeats)", r.model,
                            r.device_resolved, r.clock));
  t.column("batch").column("width").column("real tokens").column("outcome", core::Align::kLeft);
  t.column("step").column("min").column("spread").column("forward").column("loss");
  t.column("backward").column("optimizer").column("peak alloc").column("peak reserved");
  for (const auto& p : r.points) {
    if (p.outcome != PointOutcome::kOk) {
      t.row({std::to_string(p.point.batch), core::format_count(p.point.width),
             core::format_count(p.point.real_tokens()), to_string(p.outcome)});
      continue;
    }
    SampleStats s = sample_stats(p.step_s);
    t.row({std::to_string(p.point.batch), core::format_count(p.point.width),
           core::format_count(p.point.real_tokens()), "ok", core::format_seconds(s.median),
           core::format_seconds(s.min), core::format_percent(s.spread_ratio),
           core::format_seconds(sample_stats(p.forward_s).median),
           core::format_seconds(sample_stats(p.loss_s).median),
           core::format_seconds(sample_stats(p.backward_s).median),
           p.optimizer_s.empty() ? "-" : core::format_seconds(sample_stats(p.optimizer_s).median),
           p.memory_measured ? core::format_bytes(static_cast<double>(p.peak_allocated_bytes))
                             : "-",
           p.memory_measured ? core::format_bytes(static_cast<double>(p.peak_reserved_bytes))
                             : "-"});
  }
  t.note(
      "forward = embedding + decoder layers + final norm; loss = the CE forward; backward = "
      "CE backward + layer recompute and backward; optimizer = AdamW's step on the LoRA "
      "parameters ('-': --optimizer none); step = all of them");
  if (std::any_of(r.points.begin(), r.points.end(), [](const PointResult& p) {
        return p.outcome == PointOutcome::kOk && !p.memory_measured;
      })) {
    t.note("peak memory '-': not measured (CUDA's caching allocator only; none on the CPU)");
  }
  return t;
}

}  // namespace tprobe::runs
