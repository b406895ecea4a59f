// `tprobe kernels` analysis: load traces / evidence, build tables, ranks, diff, diagnostics.
#include "tprobe/core/trace/kernels.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/string_util.hpp"
#include "base/decoded_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/trace/critical_path.hpp"
#include "tprobe/core/trace/kernel_sequences.hpp"
#include "tprobe/core/trace/kernel_table_report.hpp"
#include "tprobe/core/trace/trace_memory_report.hpp"
#include "tprobe/core/trace/trace_series.hpp"
#include "tprobe/core/trace/trace_stats_report.hpp"
#include "tprobe/core/trace/user_ranges.hpp"

namespace tprobe::core {
namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// An evidence envelope starts with {"schema": ...; a Kineto trace with {"schemaVersion" or
// {"deviceProperties" or {"traceEvents". Reads at most 4 KiB (through zlib, so .gz works too).
bool looks_like_evidence(const std::string& path) {
  // A FIFO or pipe is read once, by the trace reader: its first bytes are not taken here.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return false;
  const int fd = open_input(path);
  if (fd < 0) fail("cannot open '{}': {}", path, std::strerror(errno));
  char buf[4096];
  std::size_t got = 0;
  {
    detail::DecodedFile file(fd, path);
    while (got < sizeof buf) {
      const std::size_t k = file.read(buf + got, sizeof buf - got, "");
      if (k == 0) break;
      got += k;
    }
  }
  const int n = static_cast<int>(got);
  if (n <= 0) return false;  // the trace reader names the problem
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  auto skip_ws = [&] {
    while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')) ++i;
  };
  skip_ws();
  if (i >= len || buf[i] != '{') return false;
  ++i;
  skip_ws();
  static const char kKey[] = "\"schema\"";
  return len - i >= sizeof kKey - 1 && std::memcmp(buf + i, kKey, sizeof kKey - 1) == 0;
}

// "ProfilerStep#2, ProfilerStep#3, …": the annotation names the trace holds (first 8).
std::string annotation_list(const DoubleCount& d) {
  std::string out;
  for (const std::string& n : d.annotation_names) out += (out.empty() ? "" : ", ") + n;
  if (d.annotation_names.size() >= 8) out += ", …";
  return out;
}

void diagnose_source(const KernelSource& s, const std::string& prefix,
                     std::vector<Diagnostic>& out) {
  auto add = [&](Severity sev, const char* code, std::string msg) {
    out.push_back(Diagnostic{sev, code, prefix + msg});
  };
  if (s.has_trace) {
    const TraceHealth& h = s.trace.health;
    if (h.negative_duration) {
      add(Severity::kWarning, "trace_negative_duration",
          fmt::format("{} device row(s) with a negative duration were left out",
                      h.negative_duration));
    }
    if (h.skipped_events) {
      add(Severity::kWarning, "trace_skipped_events",
          fmt::format("{} event(s) left out: no 'ph' field, or a host op without ts/dur",
                      h.skipped_events));
    }
    if (h.zero_duration) {
      add(Severity::kInfo, "trace_zero_duration",
          fmt::format("{} device row(s) have zero duration", h.zero_duration));
    }
    if (h.stream_overlaps) {
      add(Severity::kWarning, "trace_stream_overlap",
          fmt::format("{} pair(s) of device rows overlap on one stream ({} in all): a stream runs "
                      "one thing at a time, so the trace's clocks disagree",
                      h.stream_overlaps, format_seconds(double(h.stream_overlap_ns) * 1e-9)));
    }
    if (h.out_of_range) {
      add(Severity::kWarning, "trace_out_of_range",
          fmt::format("{} device row(s) lie more than 1 s outside the host events' span",
                      h.out_of_range));
    }
    if (h.past_trace_end) {
      add(Severity::kWarning, "trace_past_end",
          fmt::format("{} device row(s) end after the 'Record Window End' marker: the trace ended "
                      "mid-activity",
                      h.past_trace_end));
    }
    if (h.unmatched_begin) {
      add(Severity::kWarning, "trace_unmatched_begin",
          fmt::format("{} 'B' event(s) have no matching 'E': the trace ended mid-event",
                      h.unmatched_begin));
    }
    if (!h.messages.empty()) {
      add(Severity::kInfo, "trace_messages",
          fmt::format("the trace carries {} profiler message(s); first: {}", h.messages.size(),
                      h.messages.front().substr(0, 200)));
    }
    const DoubleCount& d = s.trace.double_count;
    if (d.linked_rows > 0) {
      // Only what this trace holds: the annotation ranges are named when there are some.
      const std::string ranges =
          d.annotations > 0
              ? fmt::format(", plus the {} gpu_user_annotation range(s) on the device ({})",
                            d.annotations, annotation_list(d))
              : "";
      add(Severity::kInfo, "key_averages_double_count",
          fmt::format("summing every key_averages() row's self device time would report {} — "
                      "{:.2f}× the {} the device rows hold (each kernel counted again in the op "
                      "that launched it{})",
                      format_seconds(double(d.key_averages_style_ns()) * 1e-9), d.ratio(),
                      format_seconds(double(d.device_rows_ns) * 1e-9), ranges));
    }
  }
  const ArchitectureSummary& a = s.table.architecture;
  if (a.older_kernels > 0) {
    add(Severity::kWarning, "older_architecture_kernels",
        fmt::format("{} kernel(s) built for a generation older than the device ({}): {} of device "
                    "time",
                    a.older_kernels, sm_label(a.device_sm), format_percent(a.older_share_ratio)));
  }
  if (a.device_sm == 0) {
    add(Severity::kInfo, "device_compute_capability_unknown",
        "no deviceProperties with a compute capability: kernels cannot be held against the card");
  }
  const CategoryRow& other = s.table.categories[static_cast<int>(KernelCategory::kOther)];
  if (other.count > 0) {
    add(Severity::kInfo, "uncategorised_kernels",
        fmt::format("{} kernel name(s) matched no category rule ({} of device time): see the "
                    "'other' rows",
                    other.kernels, format_percent(other.share_ratio)));
  }
}

// The profiler steps a trace's selection covers (ProfilerStep#N ranges; 1 without any).
int64_t selected_steps(const KernelTable& t) {
  int64_t n = 0;
  for (int64_t st : t.steps_selected) n += st >= 0 ? 1 : 0;
  return std::max<int64_t>(n, 1);
}

// results.by_phase_part, .by_layer, .attribution, .parts and .parts_steps of a trace.
void put_parts(Json& out, const KernelSource& s) {
  const Json p = to_json(s.trace.parts);
  for (const auto& [key, value] : p.items()) out[key] = value;
  out["parts_steps"] = selected_steps(s.table);
}

void diagnose_parts(const KernelSource& s, const std::string& prefix,
                    std::vector<Diagnostic>& out) {
  if (!s.has_trace) return;
  const TraceParts& p = s.trace.parts;
  if (p.attribution_off) {
    out.push_back(Diagnostic{Severity::kInfo, "trace_parts_off", prefix + trace_parts_why_none(p)});
    return;
  }
  if (!p.has_breakdown()) {
    out.push_back(Diagnostic{Severity::kInfo, "trace_no_module_events", prefix + trace_parts_hint()});
    return;
  }
  const StepBreakdown& b = p.breakdown;
  const double untagged = b.kernel_ns > 0 ? double(b.untagged_kernel_ns) / double(b.kernel_ns) : 0;
  if (untagged > 0.02) {
    out.push_back(Diagnostic{
        Severity::kWarning, "trace_parts_untagged",
        prefix + fmt::format("{} of the kernel time ({} of {} rows) could not be given a phase and "
                             "part: see attribution in the evidence",
                             format_percent(untagged), p.counts.untagged, p.counts.rows)});
  }
}

// What a reader of the memory figures should know: no [memory] events (how to record them),
// events left out, totals that disagree with the events, alive bytes the rule could not place.
void diagnose_memory(const KernelSource& s, const std::string& prefix,
                     std::vector<Diagnostic>& out) {
  if (!s.has_trace) return;
  const TraceMemory& m = s.trace.memory;
  if (m.skipped_events > 0) {
    out.push_back(Diagnostic{
        Severity::kWarning, "trace_memory_skipped_events",
        prefix + fmt::format("{} [memory] event(s) left out of the memory timeline; first: {}",
                             m.skipped_events, m.first_skipped)});
  }
  if (m.events == 0) {
    if (m.skipped_events == 0)
      out.push_back(Diagnostic{Severity::kInfo, "trace_no_memory_events",
                               prefix + trace_memory_hint(!m.attribution_off)});
    return;
  }
  for (const MemoryDevice& d : m.devices) {
    if (d.total_mismatches > 0) {
      out.push_back(Diagnostic{
          Severity::kWarning, "trace_memory_inconsistent_totals",
          prefix + fmt::format("{}: {} [memory] event(s) have a Total Allocated that is not the "
                               "previous event's plus their Bytes (events lost or reordered?): "
                               "{} of the peak is not explained by the events",
                               d.label, d.total_mismatches,
                               format_bytes(double(d.unexplained_at_peak_bytes)))});
    }
    const double untagged =
        d.alive_at_peak_bytes > 0 ? double(d.untagged_bytes) / double(d.alive_at_peak_bytes) : 0;
    if (d.attributed && untagged > 0.02) {
      out.push_back(Diagnostic{
          Severity::kWarning, "trace_memory_untagged",
          prefix + fmt::format("{}: {} of the bytes alive at the peak ({} of {}) could not be "
                               "placed by phase and part: see memory.devices[].alive_at_peak in "
                               "the evidence",
                               d.label, format_percent(untagged),
                               format_bytes(double(d.untagged_bytes)),
                               format_bytes(double(d.alive_at_peak_bytes)))});
    }
  }
}

Json source_json(const KernelSource& s) {
  Json out = {{"path", s.path}, {"kind", s.kind}};
  if (s.kind == "evidence") out["evidence_probe"] = s.evidence_probe;
  if (s.has_trace) out["trace"] = to_json(s.trace);
  out["kernel_table"] = to_json(s.table);
  if (s.has_trace) put_parts(out, s);
  if (s.has_trace) out["memory"] = to_json(s.trace.memory);
  return out;
}

}  // namespace

KernelSource load_kernel_source(const std::string& path, const KernelTableOptions& options,
                                const TracePartsOptions& parts) {
  KernelSource s;
  s.path = path;
  if (looks_like_evidence(path)) {
    if (!options.steps.empty() || options.skip_first > 0 || options.device >= 0) {
      fail_usage(
          "'{}' is an evidence file: step, skip-first and device selections apply to a trace, "
          "and this table was selected when it was written",
          path);
    }
    Json doc = read_evidence_file(path, "");
    // Named: g++ 13 reads a reference returned by a call given a temporary as possibly dangling.
    const std::string file = "'" + path + "'";
    const std::string name =
        json_read::string(json_read::object(doc, "schema", file), "name", file + " schema");
    s.kind = "evidence";
    s.evidence_probe = name.substr(name.find('.') + 1);
    const Json& results = json_read::object(doc, "results", file);
    const std::string where = path + ": results";
    auto no_table = [&] {
      fail(
          "'{}' ({} evidence) holds no results.kernel_table (a diff or per-rank evidence file "
          "has one table per input: give that input instead)",
          path, name);
    };
    if (s.evidence_probe == "kernels") {
      // Its own evidence is read whole, by its own reader.
      if (json_read::string(results, "mode", where) != "single") no_table();
      KernelsReport k = kernels_report_from_json(results, where);
      s.table = std::move(k.sources[0].table);
      s.parts = std::move(k.sources[0].parts);
      s.parts.label = path;
      if (s.parts.available) s.parts.origin = "kernels evidence";
      return s;
    }
    // Another probe's evidence (profile): its kernel table and phase × part rows.
    if (!json_read::optional(results, "kernel_table")) no_table();
    s.table = kernel_table_from_json(json_read::object(results, "kernel_table", where),
                                     path + ": results.kernel_table");
    s.parts = part_side_from_evidence(results, s.evidence_probe, path);
    return s;
  }
  TraceResult r = read_trace_file(path, options, parts);
  s.kind = "trace";
  s.has_trace = true;
  s.trace = std::move(r.summary);
  s.table = std::move(r.table);
  s.parts = part_side_from_trace(s.trace.parts, selected_steps(s.table), path);
  return s;
}

std::vector<RankRow> rank_rows(const std::vector<RankTrace>& ranks) {
  std::vector<RankRow> out;
  for (const RankTrace& t : ranks) {
    RankRow row;
    row.rank = t.rank;
    row.path = t.path;
    row.totals = t.result.table.totals;
    std::vector<DeviceRow> devices = t.result.table.devices;
    if (t.result.table.other_devices > 0) devices.push_back(t.result.table.other_device);
    for (const DeviceRow& d : devices) {
      row.communication_ns += d.communication_ns;
      row.communication_union_ns += d.communication_union_ns;
      row.compute_union_ns += d.compute_union_ns;
      row.overlap_ns += d.overlap_ns;
    }
    row.exposed_communication_ns = row.communication_union_ns - row.overlap_ns;
    row.communication_share_ratio =
        row.totals.sum_ns > 0 ? double(row.communication_ns) / double(row.totals.sum_ns) : 0;
    row.overlap_ratio = row.communication_union_ns > 0
                            ? double(row.overlap_ns) / double(row.communication_union_ns)
                            : 0;
    out.push_back(row);
  }
  return out;
}

KernelsReport analyze_kernels(const KernelsRequest& q) {
  KernelsReport r;
  if (q.inputs.empty() || q.inputs.size() > 2) {
    fail_usage(
        "kernels takes one input (a trace, an evidence file or a directory of per-rank "
        "traces) or two (A B, to compare); got {}",
        q.inputs.size());
  }
  if (q.inputs.size() == 1 && is_directory(q.inputs[0])) {
    r.mode = KernelsReport::Mode::kRanks;
    std::vector<RankTrace> ranks = read_trace_directory(q.inputs[0], q.table, q.parts);
    r.ranks = rank_rows(ranks);
    int64_t longest = -1;
    for (const RankRow& row : r.ranks) {
      if (row.totals.span_ns > longest) {
        longest = row.totals.span_ns;
        r.slowest_rank = row.rank;
      }
    }
    for (RankTrace& t : ranks) {
      KernelSource s;
      s.path = t.path;
      s.kind = "trace";
      s.has_trace = true;
      s.trace = std::move(t.result.summary);
      s.table = std::move(t.result.table);
      s.parts = part_side_from_trace(s.trace.parts, selected_steps(s.table), t.path);
      const std::string prefix = fmt::format("rank {}: ", t.rank);
      diagnose_source(s, prefix, r.diagnostics);
      diagnose_parts(s, prefix, r.diagnostics);
      diagnose_memory(s, prefix, r.diagnostics);
      r.sources.push_back(std::move(s));
    }
    return r;
  }
  for (const std::string& in : q.inputs) {
    if (is_directory(in)) {
      fail_usage(
          "'{}' is a directory: compare two traces or evidence files (a directory of "
          "per-rank traces is read alone)",
          in);
    }
  }
  if (q.inputs.size() == 1) {
    r.mode = KernelsReport::Mode::kSingle;
    r.sources.push_back(load_kernel_source(q.inputs[0], q.table, q.parts));
    diagnose_source(r.sources[0], "", r.diagnostics);
    diagnose_parts(r.sources[0], "", r.diagnostics);
    diagnose_memory(r.sources[0], "", r.diagnostics);
    return r;
  }
  r.mode = KernelsReport::Mode::kDiff;
  r.sources.push_back(load_kernel_source(q.inputs[0], q.table, q.parts));
  r.sources.push_back(load_kernel_source(q.inputs[1], q.table, q.parts));
  diagnose_source(r.sources[0], "A: ", r.diagnostics);
  diagnose_source(r.sources[1], "B: ", r.diagnostics);
  diagnose_parts(r.sources[0], "A: ", r.diagnostics);
  diagnose_parts(r.sources[1], "B: ", r.diagnostics);
  diagnose_memory(r.sources[0], "A: ", r.diagnostics);
  diagnose_memory(r.sources[1], "B: ", r.diagnostics);
  r.diff = diff_kernel_tables(r.sources[0].table, q.inputs[0], r.sources[1].table, q.inputs[1]);
  r.part_diff = diff_parts(r.sources[0].parts, r.sources[1].parts);
  return r;
}

namespace {
// The summary's own facts; to_json(TraceSummary) adds the launch-bound statistics beside them.
Json trace_summary_json(const TraceSummary& s) {
  Json devices = Json::array();
  for (const DeviceProperties& p : s.devices) {
    devices.push_back({{"id", p.id},
                       {"name", p.name},
                       {"compute_major", p.compute_major},
                       {"compute_minor", p.compute_minor},
                       {"total_memory_bytes", p.total_memory_bytes},
                       {"multiprocessors", p.multiprocessors}});
  }
  Json steps = Json::array();
  for (const TraceStepRange& st : s.steps) {
    steps.push_back({{"step", st.step},
                     {"start_ns", st.start_ns},
                     {"end_ns", st.end_ns},
                     {"duration_ns", st.end_ns - st.start_ns}});
  }
  Json cats = Json::object();
  for (const auto& [k, v] : s.categories) cats[k] = v;
  const TraceHealth& h = s.health;
  const DoubleCount& d = s.double_count;
  return Json{
      {"source", s.source},
      {"gzip", s.gzip},
      {"uncompressed_bytes", s.uncompressed_bytes},
      {"events", s.events},
      {"categories", cats},
      {"schema_version", s.schema_version},
      {"base_time_ns", s.base_time_ns},
      {"rank", s.rank},
      {"world_size", s.world_size},
      {"device_properties", devices},
      {"profiler_steps", steps},
      {"health",
       {{"zero_duration", h.zero_duration},
        {"negative_duration", h.negative_duration},
        {"stream_overlaps", h.stream_overlaps},
        {"stream_overlap_ns", h.stream_overlap_ns},
        {"out_of_range", h.out_of_range},
        {"past_trace_end", h.past_trace_end},
        {"unmatched_begin", h.unmatched_begin},
        {"skipped_events", h.skipped_events},
        {"bad_launch_durations", h.bad_launch_durations},
        {"messages", h.messages}}},
      {"key_averages_trap",
       {{"what", "NOT a total: what summing every key_averages() row's self device time reports"},
        {"device_rows_ns", d.device_rows_ns},
        {"host_attributed_ns", d.host_attributed_ns},
        {"gpu_user_annotation_ns", d.annotation_ns},
        {"gpu_user_annotations", d.annotations},
        {"gpu_user_annotation_names", d.annotation_names},
        {"op_and_kernel_ns", d.op_and_kernel_ns()},
        {"op_and_kernel_ratio", d.op_and_kernel_ratio()},
        {"key_averages_style_ns", d.key_averages_style_ns()},
        {"double_count_ratio", d.ratio()},
        {"linked_rows", d.linked_rows},
        {"unlinked_rows", d.unlinked_rows},
        {"ac2g_flows", d.flows}}}};
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

Json to_json(const KernelsReport& r) {
  Json out;
  switch (r.mode) {
    case KernelsReport::Mode::kSingle:
      out["mode"] = "single";
      out["source"] = {{"path", r.sources[0].path}, {"kind", r.sources[0].kind}};
      if (r.sources[0].kind == "evidence")
        out["source"]["evidence_probe"] = r.sources[0].evidence_probe;
      if (r.sources[0].has_trace) out["trace"] = to_json(r.sources[0].trace);
      out["kernel_table"] = to_json(r.sources[0].table);
      if (r.sources[0].has_trace) put_parts(out, r.sources[0]);
      if (r.sources[0].has_trace) out["memory"] = to_json(r.sources[0].trace.memory);
      break;
    case KernelsReport::Mode::kDiff:
      out["mode"] = "diff";
      out["a"] = source_json(r.sources[0]);
      out["b"] = source_json(r.sources[1]);
      out["diff"] = to_json(r.diff);
      out["part_diff"] = to_json(r.part_diff);
      break;
    case KernelsReport::Mode::kRanks: {
      out["mode"] = "ranks";
      Json rows = Json::array();
      for (const RankRow& row : r.ranks) {
        rows.push_back({{"rank", row.rank},
                        {"path", row.path},
                        {"events", row.totals.events},
                        {"sum_ns", row.totals.sum_ns},
                        {"union_busy_ns", row.totals.union_busy_ns},
                        {"span_ns", row.totals.span_ns},
                        {"idle_ns", row.totals.idle_ns},
                        {"communication_ns", row.communication_ns},
                        {"communication_share_ratio", row.communication_share_ratio},
                        {"communication_union_ns", row.communication_union_ns},
                        {"compute_union_ns", row.compute_union_ns},
                        {"overlap_ns", row.overlap_ns},
                        {"overlap_ratio", row.overlap_ratio},
                        {"exposed_communication_ns", row.exposed_communication_ns}});
      }
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
  s.source = jr::string(j, "source", where);
  s.gzip = jr::boolean(j, "gzip", where);
  s.uncompressed_bytes = jr::integer(j, "uncompressed_bytes", where, 0);
  s.events = jr::integer(j, "events", where, 0);
  const Json& cats = jr::object(j, "categories", where);
  for (const auto& [name, count] : cats.items())
    s.categories[name] = jr::element_integer(count, where + ".categories." + name, 0, s.events);
  s.schema_version = jr::string(j, "schema_version", where);
  s.base_time_ns = jr::integer(j, "base_time_ns", where);
  s.rank = jr::integer(j, "rank", where, -1);
  s.world_size = jr::integer(j, "world_size", where, -1);
  const Json& devices = jr::array(j, "device_properties", where);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string w = jr::at(where, "device_properties", i);
    DeviceProperties p;
    p.id = static_cast<int32_t>(jr::integer(devices[i], "id", w, 0, INT32_MAX));
    p.name = jr::string(devices[i], "name", w);
    p.compute_major = static_cast<int32_t>(jr::integer(devices[i], "compute_major", w, 0, 99));
    p.compute_minor = static_cast<int32_t>(jr::integer(devices[i], "compute_minor", w, 0, 99));
    p.total_memory_bytes = jr::integer(devices[i], "total_memory_bytes", w, 0);
    p.multiprocessors =
        static_cast<int32_t>(jr::integer(devices[i], "multiprocessors", w, 0, INT32_MAX));
    s.devices.push_back(std::move(p));
  }
  const Json& steps = jr::array(j, "profiler_steps", where);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string w = jr::at(where, "profiler_steps", i);
    TraceStepRange r;
    r.step = jr::integer(steps[i], "step", w, 0);
    r.start_ns = jr::integer(steps[i], "start_ns", w);
    r.end_ns = jr::integer(steps[i], "end_ns", w, r.start_ns);
    s.steps.push_back(r);
  }
  const std::string hw = where + ".health";
  const Json& h = jr::object(j, "health", where);
  s.health.zero_duration = jr::integer(h, "zero_duration", hw, 0);
  s.health.negative_duration = jr::integer(h, "negative_duration", hw, 0);
  s.health.stream_overlaps = jr::integer(h, "stream_overlaps", hw, 0);
  s.health.stream_overlap_ns = jr::integer(h, "stream_overlap_ns", hw, 0);
  s.health.out_of_range = jr::integer(h, "out_of_range", hw, 0);
  s.health.past_trace_end = jr::integer(h, "past_trace_end", hw, 0);
  s.health.unmatched_begin = jr::integer(h, "unmatched_begin", hw, 0);
  s.health.skipped_events = jr::integer(h, "skipped_events", hw, 0);
  s.health.bad_launch_durations = jr::integer(h, "bad_launch_durations", hw, 0);
  s.health.messages = jr::strings(h, "messages", hw);
  const std::string tw = where + ".key_averages_trap";
  const Json& t = jr::object(j, "key_averages_trap", where);
  DoubleCount& d = s.double_count;
  d.device_rows_ns = jr::integer(t, "device_rows_ns", tw, 0);
  d.host_attributed_ns = jr::integer(t, "host_attributed_ns", tw, 0);
  d.annotation_ns = jr::integer(t, "gpu_user_annotation_ns", tw, 0);
  d.annotations = jr::integer(t, "gpu_user_annotations", tw, 0);
  d.annotation_names = jr::strings(t, "gpu_user_annotation_names", tw);
  d.linked_rows = jr::integer(t, "linked_rows", tw, 0);
  d.unlinked_rows = jr::integer(t, "unlinked_rows", tw, 0);
  d.flows = jr::integer(t, "ac2g_flows", tw, 0);
}

// A source as source_json wrote it: path, kind, kernel table, and a trace's phase × part rows.
KernelSource source_from_json(const Json& j, const std::string& where) {
  KernelSource s;
  s.path = jr::string(j, "path", where);
  s.kind = jr::choice(j, "kind", where, {"trace", "evidence"}) == 0 ? "trace" : "evidence";
  if (s.kind == "evidence") s.evidence_probe = jr::string(j, "evidence_probe", where);
  s.table = kernel_table_from_json(jr::object(j, "kernel_table", where), where + ".kernel_table");
  s.parts.label = s.path;
  if (s.kind != "trace") {
    s.parts.why_not = "an evidence input's rows are not kept in the evidence";
    return s;
  }
  // Files from before parts_steps was written cover one step.
  if (jr::optional(j, "parts_steps"))
    s.parts.steps = jr::integer(j, "parts_steps", where, 1, int64_t{1} << 30);
  if (!jr::optional(j, "by_phase_part")) {
    s.parts.why_not = "its results hold no by_phase_part (a trace without module events)";
    return s;
  }
  s.parts.rows =
      part_rows_from_json(jr::field(j, "by_phase_part", where), where + ".by_phase_part");
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

KernelsReport kernels_report_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  KernelsReport r;
  const std::size_t mode = jr::choice(j, "mode", where, {"single", "diff", "ranks"});
  if (mode == 0) {
    r.mode = KernelsReport::Mode::kSingle;
    // The single source's fields sit in results itself, its path and kind under "source".
    const Json& src = jr::object(j, "source", where);
    Json flat = j;
    for (const auto& [key, value] : src.items()) flat[key] = value;
    r.sources.push_back(source_from_json(flat, where));
    trace_from_json(flat, where, r.sources.back());
    return r;
  }
  if (mode == 1) {
    r.mode = KernelsReport::Mode::kDiff;
    for (const char* side : {"a", "b"}) {
      const Json& x = jr::object(j, side, where);
      r.sources.push_back(source_from_json(x, where + "." + side));
      trace_from_json(x, where + "." + side, r.sources.back());
    }
    r.diff = kernel_diff_from_json(jr::object(j, "diff", where), where + ".diff");
    r.part_diff = part_diff_from_json(jr::object(j, "part_diff", where), where + ".part_diff");
    return r;
  }
  r.mode = KernelsReport::Mode::kRanks;
  const Json& rows = jr::array(j, "rank_summary", where);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string w = jr::at(where, "rank_summary", i);
    const Json& x = rows[i];
    RankRow row;
    row.rank = jr::integer(x, "rank", w, 0);
    row.path = jr::string(x, "path", w);
    row.totals.events = jr::integer(x, "events", w, 0);
    row.totals.sum_ns = jr::integer(x, "sum_ns", w, 0);
    row.totals.union_busy_ns = jr::integer(x, "union_busy_ns", w, 0);
    row.totals.span_ns = jr::integer(x, "span_ns", w, 0);
    row.totals.idle_ns = jr::integer(x, "idle_ns", w);
    row.communication_ns = jr::integer(x, "communication_ns", w, 0);
    row.communication_share_ratio = jr::number(x, "communication_share_ratio", w);
    row.communication_union_ns = jr::integer(x, "communication_union_ns", w, 0);
    row.compute_union_ns = jr::integer(x, "compute_union_ns", w, 0);
    row.overlap_ns = jr::integer(x, "overlap_ns", w, 0);
    row.overlap_ratio = jr::number(x, "overlap_ratio", w);
    row.exposed_communication_ns = jr::integer(x, "exposed_communication_ns", w);
    r.ranks.push_back(std::move(row));
  }
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
               format_count(row.totals.events), s(row.totals.sum_ns), s(row.totals.union_busy_ns),
               s(row.totals.span_ns), s(row.totals.idle_ns), s(row.communication_ns),
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
