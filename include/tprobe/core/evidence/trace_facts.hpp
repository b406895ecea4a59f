// A trace's own facts as the kernels command's evidence holds them (results.trace: source, events,
// categories, the device properties, the ProfilerStep ranges, the health counts and the
// key_averages() trap; docs/kernels.md "Evidence"), each field declared once
// (core/evidence/fields.hpp); core/trace/read fills them, trace/compare writes and reads them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/device_activity.hpp"
#include "tprobe/core/evidence/fields.hpp"
#include "tprobe/core/evidence/kernel_table.hpp"
#include "tprobe/core/evidence/kernel_trace.hpp"

namespace tprobe::core {

// One ProfilerStep#N of a trace: the range the readers place events in.
struct TraceStepRange {
  int64_t step = 0;  // N of ProfilerStep#N
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// What a careful reader of this trace should know before trusting its table.
struct TraceHealth {
  int64_t zero_duration = 0;      // device rows with dur == 0
  int64_t negative_duration = 0;  // device rows with dur < 0 (kept out of the table)
  int64_t stream_overlaps = 0;    // consecutive device rows on one stream that overlap
  int64_t stream_overlap_ns = 0;
  int64_t out_of_range = 0;           // device rows outside the host events' span (±1 s)
  int64_t past_trace_end = 0;         // device rows ending after the last host event ended
  int64_t unmatched_begin = 0;        // "B" events with no "E": the trace ended mid-event
  int64_t skipped_events = 0;  // events without "ph"; device, host-op, python_function or fwdbwd
                               // events missing ts, dur, name or id, or with an impossible
                               // duration (left out)
  int64_t bad_launch_durations = 0;   // launch calls with dur < 0 or > a day (kept without it)
  std::vector<std::string> messages;  // Kineto warnings / INFO records, as written (first 20)
};

struct TraceFacts {
  std::string source;  // path or the buffer's label
  bool gzip = false;
  int64_t uncompressed_bytes = 0;
  int64_t events = 0;                         // traceEvents entries
  std::map<std::string, int64_t> categories;  // "cat" -> count, as spelled in the trace
  int64_t base_time_ns = 0;                   // baseTimeNanoseconds, 0 if absent
  std::vector<DeviceProperties> devices;      // deviceProperties
  std::vector<TraceStepRange> steps;          // ProfilerStep#N ranges, ascending N
  int64_t rank = -1, world_size = -1;         // distributedInfo, -1 if absent
  std::string schema_version;                 // schemaVersion, as written
  TraceHealth health;
  DoubleCount double_count;
};

// A step ends at or after its start; no category counts more events than the trace holds.
void evidence_check(const TraceStepRange& r, const std::string& where);
void evidence_check(const TraceFacts& f, const std::string& where);

inline auto evidence_fields(const TraceStepRange*) {
  using evidence::derived;
  using evidence::field;
  using R = TraceStepRange;
  return std::make_tuple(
      field("step", &R::step, "", "N of ProfilerStep#N").at_least(0),
      field("start_ns", &R::start_ns, "ns", "its start"),
      field("end_ns", &R::end_ns, "ns", "its end"),
      derived<R>("duration_ns", +[](const R& r) { return Json(r.end_ns - r.start_ns); }, "integer",
                 "ns", "end_ns - start_ns"));
}
constexpr auto evidence_fields(const TraceHealth*) {
  using evidence::field;
  using H = TraceHealth;
  return std::make_tuple(
      field("zero_duration", &H::zero_duration, "", "device rows with dur 0").at_least(0),
      field("negative_duration", &H::negative_duration, "", "with dur < 0 (left out)").at_least(0),
      field("stream_overlaps", &H::stream_overlaps, "", "consecutive rows of a stream overlapping")
          .at_least(0),
      field("stream_overlap_ns", &H::stream_overlap_ns, "ns", "their overlap").at_least(0),
      field("out_of_range", &H::out_of_range, "", "rows outside the host events' span (±1 s)")
          .at_least(0),
      field("past_trace_end", &H::past_trace_end, "", "rows ending after the last host event")
          .at_least(0),
      field("unmatched_begin", &H::unmatched_begin, "", "B events with no E").at_least(0),
      field("skipped_events", &H::skipped_events, "",
            "events left out, a field missing or impossible")
          .at_least(0),
      field("bad_launch_durations", &H::bad_launch_durations, "", "launch calls kept without dur")
          .at_least(0),
      field("messages", &H::messages, "", "Kineto's warnings, as written (first 20)"));
}
inline auto evidence_fields(const TraceFacts*) {
  using evidence::field;
  using F = TraceFacts;
  return std::make_tuple(
      field("source", &F::source, "", "the path read"),
      field("gzip", &F::gzip, "", "it was gzip"),
      field("uncompressed_bytes", &F::uncompressed_bytes, "B", "its JSON's size").at_least(0),
      field("events", &F::events, "", "traceEvents entries").at_least(0),
      field("categories", &F::categories, "", "cat: count, as spelled in the trace").at_least(0),
      field("schema_version", &F::schema_version, "", "schemaVersion, as written"),
      field("base_time_ns", &F::base_time_ns, "ns", "baseTimeNanoseconds; 0 if absent"),
      field("rank", &F::rank, "", "distributedInfo's rank; -1 if absent").at_least(-1),
      field("world_size", &F::world_size, "", "its world size; -1 if absent").at_least(-1),
      field("device_properties", &F::devices, "", "deviceProperties"),
      field("profiler_steps", &F::steps, "", "ProfilerStep#N ranges, ascending N"),
      field("health", &F::health, "", "what to know before trusting the table"),
      field("key_averages_trap", &F::double_count, "", "what key_averages() would sum"));
}

}  // namespace tprobe::core
