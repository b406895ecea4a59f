// JSON, line and table views of a StepReport: no libtorch here, so they compile fast.
#include "tprobe/runs/step_report.hpp"

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/median.hpp"
#include "tprobe/core/evidence/profile_point.hpp"
#include "tprobe/core/step/routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tprobe::runs {

using engine::PointOutcome;
using engine::PointResult;
using engine::StepReport;

SampleStats sample_stats(const std::vector<double>& samples) {
  SampleStats s;
  if (samples.empty()) return s;
  s.median = core::median(samples);
  s.min = *std::min_element(samples.begin(), samples.end());
  s.max = *std::max_element(samples.begin(), samples.end());
  s.spread_ratio = s.median > 0 ? (s.max - s.min) / s.median : 0.0;
  return s;
}

core::Json point_to_json(const PointResult& r) {
  core::Json p = core::evidence::to_json(static_cast<const core::PointFigures&>(r));
  if (r.memory) {
    core::Json m = core::to_json(*r.memory);
    m["step_s"] = r.memory_step_s;
    // The allocator's own peak over the memory step (CUDA): the replay's peak must equal it.
    m["allocator_peak_allocated_bytes"] =
        r.memory->totals_known ? core::Json(r.memory_step_peak_allocated_bytes) : core::Json(nullptr);
    const double med = core::median_step_s(r);
    m["overhead_ratio"] = r.step_s.empty() ? core::Json(nullptr)
                          : med > 0        ? core::Json(r.memory_step_s / med - 1.0)
                                           : core::Json(0.0);
    p["memory"] = std::move(m);
  } else {
    p["memory"] = nullptr;
  }
  return p;
}

namespace jr = core::json_read;

PointResult point_from_json(const core::Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  PointResult r;
  static_cast<core::PointFigures&>(r) = core::evidence::from_json<core::PointFigures>(j, where);
  for (std::size_t i = 0; i < r.expert_load.layers.size(); ++i) {
    const core::ExpertLoadLayer& e = r.expert_load.layers[i];
    const core::LoadSummary again = core::summarize_load(e.tokens);
    if (again.max_over_mean != e.max_over_mean || again.cv != e.cv ||
        again.zero_experts != e.zero_experts)
      fail("{} layer {}: max_over_mean, cv or zero_experts is not what its tokens give", where,
           e.layer);
  }
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
    const bool null_ratio = jr::field(m, "overhead_ratio", mw).is_null();
    if (null_ratio != r.step_s.empty())
      fail("{}: field 'overhead_ratio' is {} but it is written where the point has step samples",
           mw, null_ratio ? "null" : "set");
    if (!null_ratio) jr::number(m, "overhead_ratio", mw);
  }
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
  static_cast<core::StepFigures&>(r) = core::evidence::from_json<core::StepFigures>(results, where);
  r.points = profile_points_from_json(results, where);
  return r;
}

core::Json to_json(const StepReport& r) {
  core::Json out = core::evidence::to_json(static_cast<const core::StepFigures&>(r));
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

std::vector<core::Table> field_tables(const StepReport& r) {
  std::vector<core::Table> out;
  core::Table sweep("the sweep, field by field (results; docs/profile.md's field list)");
  sweep.column("field", core::Align::kLeft).column("value", core::Align::kLeft).column("unit");
  const core::StepFigures& f = r;
  for (const auto& row : core::evidence::field_cells<core::StepFigures>({&f}))
    sweep.row({row.doc.path, row.cells.front(), row.doc.unit});
  out.push_back(std::move(sweep));
  if (r.points.empty()) return out;
  core::Table points("the points, field by field (results.points[], then padded_points[])");
  points.column("field", core::Align::kLeft).column("unit");
  std::vector<const core::PointFigures*> figures;
  for (const PointResult& p : r.points) {
    points.column(fmt::format("{}x{}{}", p.point.batch, p.point.width, p.point.padded() ? " pad" : ""),
                  core::Align::kLeft);
    figures.push_back(&p);
  }
  for (const auto& row : core::evidence::field_cells(figures)) {
    std::vector<std::string> cells{row.doc.path, row.doc.unit};
    cells.insert(cells.end(), row.cells.begin(), row.cells.end());
    points.row(cells);
  }
  out.push_back(std::move(points));
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
