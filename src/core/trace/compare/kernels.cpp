// `tprobe kernels` analysis: load traces / evidence, build tables, ranks, diff, diagnostics (its
// views, evidence and reader in kernels_report.cpp).
#include "tprobe/core/trace/compare/kernels.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/decoded_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/trace/stats/critical_path.hpp"
#include "tprobe/core/trace/stats/kernel_table_report.hpp"

namespace tprobe::core {
namespace {

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

}  // namespace

// "ProfilerStep#2, ProfilerStep#3, …": the annotation names the trace holds (first 8).
std::string annotation_list(const DoubleCount& d) {
  std::string out;
  for (const std::string& n : d.annotation_names) out += (out.empty() ? "" : ", ") + n;
  if (d.annotation_names.size() >= 8) out += ", …";
  return out;
}

int64_t kernel_table_steps(const KernelTable& t) {
  int64_t n = 0;
  for (int64_t st : t.steps_selected) n += st >= 0 ? 1 : 0;
  return std::max<int64_t>(n, 1);
}

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
    if (!json_read::optional(results, kKernelTableKey)) no_table();
    s.table = kernel_table_from_json(json_read::object(results, kKernelTableKey, where),
                                     path + ": results.kernel_table");
    s.parts = part_side_from_evidence(results, s.evidence_probe, path);
    return s;
  }
  TraceResult r = read_trace_file(path, options, parts);
  s.kind = "trace";
  s.has_trace = true;
  s.trace = std::move(r.summary);
  s.table = std::move(r.table);
  s.parts = part_side_from_trace(s.trace.parts, kernel_table_steps(s.table), path);
  return s;
}

std::vector<RankRow> rank_rows(const std::vector<RankTrace>& ranks) {
  std::vector<RankRow> out;
  for (const RankTrace& t : ranks) {
    RankRow row;
    row.rank = t.rank;
    row.path = t.path;
    static_cast<BusyFigures&>(row) = t.result.table.totals;
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
        row.sum_ns > 0 ? double(row.communication_ns) / double(row.sum_ns) : 0;
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
      if (row.span_ns > longest) {
        longest = row.span_ns;
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
      s.parts = part_side_from_trace(s.trace.parts, kernel_table_steps(s.table), t.path);
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

}  // namespace tprobe::core
