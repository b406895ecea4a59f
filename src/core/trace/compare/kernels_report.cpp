// `tprobe kernels`' views: the evidence's results in each mode (single, diff, ranks), their
// reader, and the tables.
#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/trace/compare/kernels.hpp"
#include "tprobe/core/trace/stats/critical_path.hpp"
#include "tprobe/core/trace/stats/kernel_sequences.hpp"
#include "tprobe/core/trace/stats/kernel_table_report.hpp"
#include "tprobe/core/trace/stats/trace_memory_report.hpp"
#include "tprobe/core/trace/stats/trace_series.hpp"
#include "tprobe/core/trace/stats/trace_stats_report.hpp"
#include "tprobe/core/trace/stats/user_ranges.hpp"

namespace tprobe::core {
namespace {

// results.by_phase_part, .by_layer, .attribution, .parts and .parts_steps of a trace.
void put_parts(Json& out, const KernelSource& s) {
  const Json p = to_json(s.trace.parts);
  for (const auto& [key, value] : p.items()) out[key] = value;
  out["parts_steps"] = kernel_table_steps(s.table);
}

Json source_json(const KernelSource& s) {
  Json out = {{"path", s.path}, {"kind", s.kind}};
  if (s.kind == "evidence") out["evidence_probe"] = s.evidence_probe;
  if (s.has_trace) out["trace"] = to_json(s.trace);
  out[kKernelTableKey] = to_json(s.table);
  if (s.has_trace) put_parts(out, s);
  if (s.has_trace) out["memory"] = to_json(s.trace.memory);
  return out;
}

// The summary's own facts; to_json(TraceSummary) adds the launch-bound statistics beside them.
Json trace_summary_json(const TraceSummary& s) {
  return evidence::to_json(static_cast<const TraceFacts&>(s));
}
}  // namespace

Json to_json(const TraceSummary& s) {
  Json out = trace_summary_json(s);
  const Json stats = to_json(s.stats);  // named: items() of a temporary would dangle
  for (const auto& [key, value] : stats.items()) out[key] = value;
  out["user_ranges"] = to_json(s.user_ranges);
  out["kernel_sequences"] = to_json(s.kernel_sequences);
  out["time_series"] = to_json(s.series);
  out["critical_path"] = to_json(s.critical_path);
  return out;
}

const char* to_string(KernelsReport::Mode mode) {
  switch (mode) {
    case KernelsReport::Mode::kSingle:
      return "single";
    case KernelsReport::Mode::kRanks:
      return "ranks";
    case KernelsReport::Mode::kDiff:
      break;
  }
  return "diff";
}

Json to_json(const KernelsReport& r) {
  Json out;
  out["mode"] = to_string(r.mode);
  switch (r.mode) {
    case KernelsReport::Mode::kSingle: {
      // The source's fields in results itself, its path and kind under "source".
      const Json one = source_json(r.sources[0]);  // named: items() of a temporary would dangle
      for (const auto& [key, value] : one.items()) {
        const bool whose = key == "path" || key == "kind" || key == "evidence_probe";
        (whose ? out["source"][key] : out[key]) = value;
      }
      break;
    }
    case KernelsReport::Mode::kDiff:
      out["a"] = source_json(r.sources[0]);
      out["b"] = source_json(r.sources[1]);
      out["diff"] = to_json(r.diff);
      out["part_diff"] = to_json(r.part_diff);
      break;
    case KernelsReport::Mode::kRanks: {
      Json rows = Json::array();
      for (const RankRow& row : r.ranks) rows.push_back(evidence::to_json(row));
      out["rank_summary"] = rows;
      out["slowest_rank"] = r.slowest_rank;
      Json per = Json::array();
      for (std::size_t i = 0; i < r.sources.size(); ++i) {
        Json one = source_json(r.sources[i]);
        one["rank"] = r.ranks[i].rank;
        per.push_back(one);
      }
      out["ranks"] = per;
      break;
    }
  }
  return out;
}

namespace {

namespace jr = json_read;

// The summary's own facts as trace_summary_json writes them; the derived ones (a step's duration,
// the trap's sums and ratios and its sentence) are checked by writing them again.
void summary_facts_from_json(const Json& j, const std::string& where, TraceSummary& s) {
  static_cast<TraceFacts&>(s) = evidence::from_json<TraceFacts>(j, where);
}

// A source as source_json wrote it: path, kind, kernel table, and a trace's phase × part rows.
KernelSource source_from_json(const Json& j, const std::string& where) {
  KernelSource s;
  s.path = jr::string(j, "path", where);
  s.kind = jr::choice(j, "kind", where, {"trace", "evidence"}) == 0 ? "trace" : "evidence";
  if (s.kind == "evidence") s.evidence_probe = jr::string(j, "evidence_probe", where);
  s.table = kernel_table_from_json(jr::object(j, kKernelTableKey, where), where + ".kernel_table");
  s.parts.label = s.path;
  if (s.kind != "trace") {
    s.parts.why_not = "an evidence input's rows are not kept in the evidence";
    return s;
  }
  // Files from before parts_steps was written cover one step.
  if (jr::optional(j, "parts_steps"))
    s.parts.steps = jr::integer(j, "parts_steps", where, 1, int64_t{1} << 30);
  const PartCells cells = evidence::from_json<PartCells>(j, where);
  if (!cells.by_phase_part) {
    s.parts.why_not = "its results hold no by_phase_part (a trace without module events)";
    return s;
  }
  s.parts.rows = part_rows_from_json(cells, where);
  for (const PartRow& r : s.parts.rows) s.parts.kernel_ns += r.kernel_ns;
  s.parts.origin = "trace";
  s.parts.available = true;
  return s;
}

// A trace source's whole: the summary, its attribution and its memory, as source_json wrote them
// (a source written before they were kept has no "trace" and stays summary-less).
void trace_from_json(const Json& j, const std::string& where, KernelSource& s) {
  if (s.kind != "trace" || !jr::optional(j, "trace")) return;
  s.trace = trace_summary_from_json(jr::object(j, "trace", where), where + ".trace");
  s.trace.parts = trace_parts_from_json(j, where);
  s.trace.memory = trace_memory_from_json(jr::object(j, "memory", where), where + ".memory");
  s.has_trace = true;
}

}  // namespace

TraceSummary trace_summary_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  TraceSummary s;
  summary_facts_from_json(j, where, s);
  s.stats = trace_stats_from_json(j, where);
  s.user_ranges =
      user_ranges_from_json(jr::object(j, "user_ranges", where), where + ".user_ranges");
  s.kernel_sequences = kernel_sequences_from_json(jr::object(j, "kernel_sequences", where),
                                                  where + ".kernel_sequences");
  s.series = trace_series_from_json(jr::object(j, "time_series", where), where + ".time_series");
  s.critical_path =
      critical_path_from_json(jr::object(j, "critical_path", where), where + ".critical_path");
  jr::check_rewritten(j, to_json(s), where);
  return s;
}

namespace {

// The single source's fields sit in results itself, its path and kind under "source".
void single_from_json(const Json& j, const std::string& where, KernelsReport& r) {
  const Json& src = jr::object(j, "source", where);
  Json flat = j;
  for (const auto& [key, value] : src.items()) flat[key] = value;
  r.sources.push_back(source_from_json(flat, where));
  trace_from_json(flat, where, r.sources.back());
}

void diff_from_json(const Json& j, const std::string& where, KernelsReport& r) {
  for (const char* side : {"a", "b"}) {
    const Json& x = jr::object(j, side, where);
    r.sources.push_back(source_from_json(x, where + "." + side));
    trace_from_json(x, where + "." + side, r.sources.back());
  }
  r.diff = kernel_diff_from_json(jr::object(j, "diff", where), where + ".diff");
  r.part_diff = part_diff_from_json(jr::object(j, "part_diff", where), where + ".part_diff");
}

void ranks_from_json(const Json& j, const std::string& where, KernelsReport& r) {
  const Json& rows = jr::array(j, "rank_summary", where);
  for (std::size_t i = 0; i < rows.size(); ++i)
    r.ranks.push_back(evidence::from_json<RankRow>(rows[i], jr::at(where, "rank_summary", i)));
  r.slowest_rank = jr::integer(j, "slowest_rank", where, -1);
  const Json& per = jr::array(j, "ranks", where);
  if (per.size() != r.ranks.size())
    fail("{}: {} ranks but {} rank_summary rows", where, per.size(), r.ranks.size());
  for (std::size_t i = 0; i < per.size(); ++i) {
    const std::string w = jr::at(where, "ranks", i);
    if (jr::integer(per[i], "rank", w) != r.ranks[i].rank)
      fail("{}: rank is not rank_summary[{}]'s", w, i);
    r.sources.push_back(source_from_json(per[i], w));
    trace_from_json(per[i], w, r.sources.back());
  }
}

}  // namespace

KernelsReport kernels_report_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  KernelsReport r;
  r.mode = jr::enum_value(j, "mode", where,
                          {KernelsReport::Mode::kSingle, KernelsReport::Mode::kDiff,
                           KernelsReport::Mode::kRanks});
  switch (r.mode) {
    case KernelsReport::Mode::kSingle:
      single_from_json(j, where, r);
      break;
    case KernelsReport::Mode::kDiff:
      diff_from_json(j, where, r);
      break;
    case KernelsReport::Mode::kRanks:
      ranks_from_json(j, where, r);
      break;
  }
  return r;
}

std::vector<Table> kernels_tables(const KernelsReport& r, int top) {
  std::vector<Table> out;
  auto trace_tables = [&](const KernelSource& s) {
    if (!s.has_trace) {
      Table t(fmt::format("{} ({} evidence)", s.path, s.evidence_probe));
      t.column("kernel table read from results.kernel_table", Align::kLeft);
      out.push_back(t);
      return;
    }
    const TraceSummary& m = s.trace;
    Table t(fmt::format("Trace {}", m.source));
    t.column("fact", Align::kLeft).column("value", Align::kLeft);
    t.row({"events",
           fmt::format("{} ({} uncompressed{})", format_count(m.events),
                       format_bytes(double(m.uncompressed_bytes)), m.gzip ? ", gzip" : "")});
    for (const DeviceProperties& p : m.devices) {
      t.row({fmt::format("device {}", p.id),
             fmt::format("{} (compute {}.{}, {} SMs, {})", p.name, p.compute_major, p.compute_minor,
                         p.multiprocessors, format_bytes(double(p.total_memory_bytes)))});
    }
    if (!m.steps.empty()) {
      std::string list;
      for (const TraceStepRange& st : m.steps)
        list += (list.empty() ? "" : ", ") + std::to_string(st.step);
      t.row({"profiler steps", list});
    }
    if (m.rank >= 0) t.row({"rank", fmt::format("{} of {}", m.rank, m.world_size)});
    const TraceHealth& h = m.health;
    t.row({"health", fmt::format("zero-duration {}, negative {}, same-stream overlaps {}, out of "
                                 "range {}, past trace end {}, unmatched B {}",
                                 h.zero_duration, h.negative_duration, h.stream_overlaps,
                                 h.out_of_range, h.past_trace_end, h.unmatched_begin)});
    out.push_back(t);
    const DoubleCount& d = m.double_count;
    if (d.linked_rows > 0) {
      Table trap("The key_averages() trap — NOT a total");
      trap.column("what a user might add up", Align::kLeft).column("time").column("× device time");
      const double dev = double(d.device_rows_ns);
      trap.row({"device rows (kernel, memcpy, memset): the real total", format_seconds(dev * 1e-9),
                "1.00×"});
      trap.row({"the same time again, in the host op that launched each row",
                format_seconds(double(d.host_attributed_ns) * 1e-9),
                fmt::format("{:.2f}×", dev > 0 ? double(d.host_attributed_ns) / dev : 0)});
      trap.row({"op + kernel: each kernel counted twice",
                format_seconds(double(d.op_and_kernel_ns()) * 1e-9),
                fmt::format("{:.2f}×", d.op_and_kernel_ratio())});
      if (d.annotations > 0) {  // only ranges the trace holds, by their names
        trap.row({fmt::format("{} gpu_user_annotation range(s) on the device ({})", d.annotations,
                              annotation_list(d).substr(0, 60)),
                  format_seconds(double(d.annotation_ns) * 1e-9),
                  fmt::format("{:.2f}×", dev > 0 ? double(d.annotation_ns) / dev : 0)});
      }
      trap.row({"sum of every key_averages() row's self device time",
                format_seconds(double(d.key_averages_style_ns()) * 1e-9),
                fmt::format("{:.2f}×", d.ratio())});
      trap.note(fmt::format("{} of {} device rows carry the External id of a host op",
                            format_count(d.linked_rows),
                            format_count(d.linked_rows + d.unlinked_rows)));
      out.push_back(trap);
    }
  };
  switch (r.mode) {
    case KernelsReport::Mode::kSingle:
      trace_tables(r.sources[0]);
      for (auto& t : kernel_table_tables(r.sources[0].table, top)) out.push_back(std::move(t));
      if (r.sources[0].has_trace) {
        for (auto& t : trace_parts_tables(r.sources[0].trace.parts)) out.push_back(std::move(t));
        for (auto& t : trace_memory_tables(r.sources[0].trace.memory)) out.push_back(std::move(t));
        for (auto& t : trace_stats_tables(r.sources[0].trace.stats, top))
          out.push_back(std::move(t));
        for (auto& t : user_range_tables(r.sources[0].trace.user_ranges))
          out.push_back(std::move(t));
        for (auto& t : kernel_sequence_tables(r.sources[0].trace.kernel_sequences))
          out.push_back(std::move(t));
        for (auto& t : trace_series_tables(r.sources[0].trace.series)) out.push_back(std::move(t));
        for (auto& t : critical_path_tables(r.sources[0].trace.critical_path, top))
          out.push_back(std::move(t));
      }
      break;
    case KernelsReport::Mode::kDiff:
      for (auto& t : kernel_diff_tables(r.diff, top)) out.push_back(std::move(t));
      for (auto& t : part_diff_tables(r.part_diff)) out.push_back(std::move(t));
      break;
    case KernelsReport::Mode::kRanks: {
      Table t(fmt::format("{} rank(s); slowest: rank {}", r.ranks.size(), r.slowest_rank));
      t.column("rank")
          .column("device rows")
          .column("sum")
          .column("union busy")
          .column("span")
          .column("idle")
          .column("comm")
          .column("comm share")
          .column("overlap")
          .column("exposed comm");
      for (const RankRow& row : r.ranks) {
        auto s = [](int64_t ns) { return format_seconds(double(ns) * 1e-9); };
        t.row({std::to_string(row.rank) + (row.rank == r.slowest_rank ? " *" : ""),
               format_count(row.events), s(row.sum_ns), s(row.union_busy_ns),
               s(row.span_ns), s(row.idle_ns), s(row.communication_ns),
               format_percent(row.communication_share_ratio),
               row.communication_union_ns ? format_percent(row.overlap_ratio) : "",
               s(row.exposed_communication_ns)});
      }
      t.note(
          "overlap: share of communication busy time with compute running beside it; exposed "
          "comm: communication busy time with nothing else running");
      out.push_back(t);
      // Every rank by phase and part, as a single trace is.
      for (std::size_t i = 0; i < r.sources.size(); ++i) {
        for (auto& x : trace_parts_tables(r.sources[i].trace.parts,
                                          fmt::format("rank {}: ", r.ranks[i].rank)))
          out.push_back(std::move(x));
        // Without [memory] events the rank's diagnostic says how to record them.
        if (r.sources[i].trace.memory.devices.empty()) continue;
        for (auto& x : trace_memory_tables(r.sources[i].trace.memory,
                                           fmt::format("rank {}: ", r.ranks[i].rank)))
          out.push_back(std::move(x));
      }
      for (std::size_t i = 0; i < r.sources.size(); ++i) {
        if (r.ranks[i].rank != r.slowest_rank) continue;
        Table h(fmt::format("The slowest rank ({}): {}", r.slowest_rank, r.sources[i].path));
        h.column("", Align::kLeft);
        out.push_back(h);
        for (auto& x : kernel_table_tables(r.sources[i].table, top)) out.push_back(std::move(x));
      }
      break;
    }
  }
  return out;
}

}  // namespace tprobe::core
