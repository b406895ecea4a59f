// The launch-bound statistics of a trace as the kernels command's evidence holds them
// (results.trace: streams, idle_split, launches, queue_length, copies, host_ops and the other_*
// objects; docs/kernels.md "Launch-bound statistics"), each field declared once
// (core/evidence/fields.hpp) with the rules that tie the fields of one object together
// (evidence_check). core/trace/stats's trace_stats fills them, trace_stats_report shows them.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/device_activity.hpp"
#include "tprobe/core/evidence/fields.hpp"

namespace tprobe::core {

// Nearest-rank percentiles of a set of integer durations: pN is the value at 1-based rank
// ceil(N/100 * count) of the sorted values. All 0 when count is 0.
struct Distribution {
  int64_t count = 0;
  int64_t sum_ns = 0;
  int64_t min_ns = 0, p50_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;
  double mean_ns = 0;
};

// One device's idle time (span - union busy, as in the kernel table), gap by gap. A gap runs from
// the end of a busy stretch to the start s of the next; the row starting it (the one launched
// first, among rows starting at s) was launched at L (its launch call's start):
//   host wait   = the part of the gap before L: the host had not asked for the work yet;
//   kernel wait = the part from L on: the work was asked for and the device still idle
//                 (launch latency, a wait on another stream or event);
//   unlaunched  = gaps whose next row has no launch in the trace.
// host_wait_ns + kernel_wait_ns + unlaunched_ns == idle_ns exactly.
struct IdleSplit {
  int32_t device = 0;
  int64_t idle_ns = 0;
  int64_t gaps = 0;
  int64_t host_wait_ns = 0;
  int64_t kernel_wait_ns = 0;
  int64_t unlaunched_ns = 0;
  int64_t host_wait_gaps = 0;  // gaps with some host wait
};

// Per kernel name, over its rows that have a launch.
struct LaunchKernelRow {
  std::string name;
  int64_t launches = 0;
  int64_t launch_ns = 0;         // sum of launch-call durations (launches with one)
  int64_t delay_ns = 0;          // sum of kernel start - launch call start
  int64_t shorter_than_launch = 0;
  int64_t device_ns = 0;         // sum of these rows' durations
};

// Kernel rows only (memcpy and memset rows are left out: their calls are copies, not launches).
struct LaunchStats {
  int64_t kernels = 0;               // kernel rows in the selection
  int64_t with_launch = 0;           // with a cuda_runtime/cuda_driver event of their correlation
  int64_t launch_duration_unknown = 0;  // of those, launch event without a usable dur
  Distribution launch_call;          // CPU launch-call duration, per kernel
  Distribution launch_delay;         // kernel start - launch call start
  int64_t negative_delay = 0;        // kernel starting before its launch call (clock skew)
  int64_t shorter_than_launch = 0;   // kernel duration < its launch call's duration
  int64_t shorter_than_launch_ns = 0;  // their device time
  std::vector<LaunchKernelRow> per_kernel;  // by launch_ns descending, then name
};

// Outstanding work on one stream: a row is queued from its launch call's start (or its own start,
// should the clocks put the launch later) until it ends. Rows without a launch are not counted.
struct QueueRow {
  int32_t device = 0;
  int64_t stream = 0;
  int64_t rows = 0;               // rows with a launch
  int64_t unlaunched_rows = 0;
  int64_t window_start_ns = 0;    // first queued .. last end
  int64_t window_end_ns = 0;
  int64_t max_length = 0;         // largest length held for a positive time
  double mean_length = 0;         // time-weighted over the window
  std::vector<int64_t> time_at_length_ns;  // [n] = time with exactly n outstanding; sums to window
};

// Memcpy and memset rows per name as the source wrote it ("Memcpy HtoD (Pinned -> Device)").
struct CopyRow {
  std::string name;
  ActivityKind kind = ActivityKind::kMemcpy;
  int64_t count = 0;
  int64_t rows_with_bytes = 0;
  int64_t bytes = 0;     // over rows_with_bytes
  int64_t total_ns = 0;  // over rows_with_bytes
  double bytes_per_s = 0;  // bytes / total_ns; 0 when total_ns is 0
};

// cpu_op events ("Operator" in older traces; not user_annotation). An op is top-level when no
// other cpu_op on its thread contains it (starts at or before it and ends at or after it; of two
// with the same interval the one written first contains the other). A device row belongs to the
// top-level op on its launch's thread whose interval holds the launch call's start (inclusive).
struct HostOpRow {
  std::string name;
  int64_t calls = 0;            // at any depth
  int64_t top_level_calls = 0;
  int64_t device_rows = 0;      // rows launched inside its top-level calls
  int64_t device_ns = 0;
};
struct HostOpCensus {
  int64_t ops = 0;              // cpu_op events in the selection
  int64_t top_level_ops = 0;
  int64_t rows_in_op = 0;       // device rows attributed to a top-level op
  int64_t rows_outside_op = 0;  // no launch, or a launch inside no cpu_op
  std::vector<HostOpRow> by_name;  // by calls descending, then top_level_calls, then name
};

// Device time per stream: its rows by kind, their sum, the stream's busy time (its rows' union)
// and the part of it another stream of the same device was busy too, over the selection.
struct StreamRow {
  int32_t device = 0;
  int64_t stream = 0;
  int64_t rows = 0, kernels = 0, memcpys = 0, memsets = 0;
  int64_t kernel_ns = 0, memcpy_ns = 0, memset_ns = 0;
  int64_t sum_ns = 0;         // kernel_ns + memcpy_ns + memset_ns
  int64_t busy_ns = 0;        // the union of its rows' intervals (< sum_ns when they overlap)
  int64_t concurrent_ns = 0;  // of busy_ns: while another stream of the device was busy
  int64_t first_start_ns = 0, last_end_ns = 0;
  double sum_share_ratio = 0;   // sum_ns / the device's sum over all its streams
  double busy_span_ratio = 0;   // busy_ns / the device's span (first start .. last end)
};

// The rows folded past the caps (TraceStats::kMaxStreamRows, kMaxDeviceRows): how many, and
// their summed counts and times. Written to the evidence only when something was folded.
struct OtherStreams {
  int64_t streams = 0;
  int64_t rows = 0, kernels = 0, memcpys = 0, memsets = 0;
  int64_t kernel_ns = 0, memcpy_ns = 0, memset_ns = 0, sum_ns = 0, busy_ns = 0;
};
struct OtherIdle {
  int64_t devices = 0;
  int64_t idle_ns = 0, gaps = 0, host_wait_ns = 0, kernel_wait_ns = 0, unlaunched_ns = 0;
  int64_t host_wait_gaps = 0;
};
struct OtherQueues {
  int64_t queues = 0;
  int64_t rows = 0, unlaunched_rows = 0;
  int64_t max_length = 0;  // the largest of theirs
};

struct TraceStats {
  // The same caps as the time series' (TraceSeries::kMaxStreams, kMaxDevices): a trace with
  // thousands of streams or devices keeps its evidence smaller than itself.
  static constexpr int64_t kMaxStreamRows = 16;
  static constexpr int64_t kMaxDeviceRows = 16;
  // The kMaxStreamRows (device, stream) pairs with the most device time (sum_ns; ties: the
  // smaller pair), ascending (device, stream); the rest in other_streams.
  std::vector<StreamRow> streams;
  OtherStreams other_streams;
  // The kMaxDeviceRows devices with the most device time (ties: the smaller index), ascending
  // device; the rest in other_idle.
  std::vector<IdleSplit> idle;
  OtherIdle other_idle;
  LaunchStats launch;
  // The queue rows of the streams kept in `streams`, ascending (device, stream); the rest in
  // other_queues.
  std::vector<QueueRow> queues;
  OtherQueues other_queues;
  std::vector<CopyRow> copies;   // by total_ns descending, then name
  HostOpCensus host_ops;
};

namespace evidence_detail {
Json other_streams_json(const TraceStats& s);
void read_other_streams(TraceStats& s, const Json& v, const std::string& w, const char* key);
Json other_idle_json(const TraceStats& s);
void read_other_idle(TraceStats& s, const Json& v, const std::string& w, const char* key);
Json other_queues_json(const TraceStats& s);
void read_other_queues(TraceStats& s, const Json& v, const std::string& w, const char* key);
}  // namespace evidence_detail

// The rules between one object's fields (a part not above its whole, parts summing to it), checked
// by the reader after the fields: an Error naming `where`.
void evidence_check(const Distribution& d, const std::string& where);
void evidence_check(const IdleSplit& s, const std::string& where);
void evidence_check(const OtherIdle& s, const std::string& where);
void evidence_check(const OtherStreams& s, const std::string& where);
void evidence_check(const OtherQueues& s, const std::string& where);
void evidence_check(const LaunchKernelRow& r, const std::string& where);
void evidence_check(const LaunchStats& s, const std::string& where);
void evidence_check(const QueueRow& q, const std::string& where);
void evidence_check(const CopyRow& c, const std::string& where);
void evidence_check(const HostOpRow& r, const std::string& where);
void evidence_check(const HostOpCensus& h, const std::string& where);
void evidence_check(const StreamRow& s, const std::string& where);

constexpr auto evidence_fields(const Distribution*) {
  using evidence::field;
  using D = Distribution;
  return std::make_tuple(field("count", &D::count, "", "values").at_least(0),
                         field("sum_ns", &D::sum_ns, "ns", "their sum"),
                         field("mean_ns", &D::mean_ns, "ns", "their mean"),
                         field("min_ns", &D::min_ns, "ns", "the smallest"),
                         field("p50_ns", &D::p50_ns, "ns", "nearest-rank 50th percentile"),
                         field("p90_ns", &D::p90_ns, "ns", "90th"),
                         field("p99_ns", &D::p99_ns, "ns", "99th"),
                         field("max_ns", &D::max_ns, "ns", "the largest"));
}
constexpr auto evidence_fields(const StreamRow*) {
  using evidence::field;
  using S = StreamRow;
  return std::make_tuple(
      field("device", &S::device, "", "the device's index").at_least(0),
      field("stream", &S::stream, "", "the stream, as the trace names it"),
      field("rows", &S::rows, "", "device rows").at_least(0),
      field("kernels", &S::kernels, "", "of them kernels").at_least(0),
      field("memcpys", &S::memcpys, "", "memcpys").at_least(0),
      field("memsets", &S::memsets, "", "memsets").at_least(0),
      field("kernel_ns", &S::kernel_ns, "ns", "the kernels' time").at_least(0),
      field("memcpy_ns", &S::memcpy_ns, "ns", "the memcpys'").at_least(0),
      field("memset_ns", &S::memset_ns, "ns", "the memsets'").at_least(0),
      field("sum_ns", &S::sum_ns, "ns", "the three summed").at_least(0),
      field("busy_ns", &S::busy_ns, "ns", "the union of its rows").at_least(0),
      field("concurrent_ns", &S::concurrent_ns, "ns", "of busy_ns, with another stream busy")
          .at_least(0),
      field("first_start_ns", &S::first_start_ns, "ns", "its first row's start"),
      field("last_end_ns", &S::last_end_ns, "ns", "its last row's end"),
      field("sum_share_ratio", &S::sum_share_ratio, "", "of the device's sum"),
      field("busy_span_ratio", &S::busy_span_ratio, "", "busy_ns over the device's span"));
}
inline auto evidence_fields(const IdleSplit*) {
  using evidence::derived;
  using evidence::field;
  using I = IdleSplit;
  return std::make_tuple(
      field("device", &I::device, "", "the device's index").at_least(0),
      field("idle_ns", &I::idle_ns, "ns", "span minus busy").at_least(0),
      field("gaps", &I::gaps, "", "idle gaps").at_least(0),
      field("host_wait_ns", &I::host_wait_ns, "ns", "before the next row's launch").at_least(0),
      field("kernel_wait_ns", &I::kernel_wait_ns, "ns", "from that launch on").at_least(0),
      field("unlaunched_ns", &I::unlaunched_ns, "ns", "before a row with no launch").at_least(0),
      field("host_wait_gaps", &I::host_wait_gaps, "", "gaps with some host wait").at_least(0),
      derived<I>("host_wait_ratio",
                 +[](const I& s) {
                   return Json(evidence::ratio(s.host_wait_ns, s.idle_ns));
                 },
                 "number", "", "host_wait_ns over idle_ns"),
      derived<I>("kernel_wait_ratio",
                 +[](const I& s) {
                   return Json(evidence::ratio(s.kernel_wait_ns, s.idle_ns));
                 },
                 "number", "", "kernel_wait_ns over idle_ns"));
}
constexpr auto evidence_fields(const LaunchKernelRow*) {
  using evidence::field;
  using R = LaunchKernelRow;
  return std::make_tuple(
      field("name", &R::name, "", "the kernel's name"),
      field("launches", &R::launches, "", "its rows with a launch").at_least(0),
      field("launch_ns", &R::launch_ns, "ns", "their launch calls' time").at_least(0),
      field("delay_ns", &R::delay_ns, "ns", "start minus launch call start, summed"),
      field("shorter_than_launch", &R::shorter_than_launch, "", "rows shorter than their call")
          .at_least(0),
      field("device_ns", &R::device_ns, "ns", "the rows' time").at_least(0));
}
constexpr auto evidence_fields(const LaunchStats*) {
  using evidence::field;
  using L = LaunchStats;
  return std::make_tuple(
      field("kernels", &L::kernels, "", "kernel rows in the selection").at_least(0),
      field("with_launch", &L::with_launch, "", "with a launch call").at_least(0),
      field("launch_duration_unknown", &L::launch_duration_unknown, "",
            "of those, a call without a usable duration")
          .at_least(0),
      field("launch_call", &L::launch_call, "", "the launch call's duration, per kernel"),
      field("launch_delay", &L::launch_delay, "", "kernel start minus launch call start"),
      field("negative_delay", &L::negative_delay, "", "kernels starting before their call")
          .at_least(0),
      field("shorter_than_launch", &L::shorter_than_launch, "", "kernels shorter than their call")
          .at_least(0),
      field("shorter_than_launch_ns", &L::shorter_than_launch_ns, "ns", "their device time")
          .at_least(0),
      field("per_kernel", &L::per_kernel, "", "by launch_ns descending, then name"));
}
constexpr auto evidence_fields(const QueueRow*) {
  using evidence::field;
  using Q = QueueRow;
  return std::make_tuple(
      field("device", &Q::device, "", "the device's index").at_least(0),
      field("stream", &Q::stream, "", "the stream"),
      field("rows", &Q::rows, "", "rows with a launch").at_least(0),
      field("unlaunched_rows", &Q::unlaunched_rows, "", "rows without one").at_least(0),
      field("window_start_ns", &Q::window_start_ns, "ns", "the first queued"),
      field("window_end_ns", &Q::window_end_ns, "ns", "the last end"),
      field("max_length", &Q::max_length, "", "the largest length held for a positive time")
          .at_least(0),
      field("mean_length", &Q::mean_length, "", "time-weighted over the window"),
      field("time_at_length_ns", &Q::time_at_length_ns, "ns",
            "[n]: time with n outstanding; sums to the window")
          .at_least(0));
}
inline auto evidence_fields(const CopyRow*) {
  using evidence::custom;
  using evidence::field;
  using C = CopyRow;
  return std::make_tuple(
      field("name", &C::name, "", "as the trace wrote it"),
      custom<C>("kind", +[](const C& c) { return Json(to_string(c.kind)); },
                +[](C& c, const Json& v, const std::string& w, const char* key) {
                  for (ActivityKind a : {ActivityKind::kMemcpy, ActivityKind::kMemset})
                    if (v == to_string(a)) return void(c.kind = a);
                  fail("{}: field '{}' is {}, not memcpy or memset", w, key, v.dump());
                },
                "string", "", "memcpy or memset"),
      field("count", &C::count, "", "rows").at_least(0),
      field("rows_with_bytes", &C::rows_with_bytes, "", "of them with a byte count").at_least(0),
      field("bytes", &C::bytes, "B", "over rows_with_bytes").at_least(0),
      field("total_ns", &C::total_ns, "ns", "over rows_with_bytes").at_least(0),
      field("bytes_per_s", &C::bytes_per_s, "B/s", "bytes over total_ns; 0 when it is 0"));
}
constexpr auto evidence_fields(const HostOpRow*) {
  using evidence::field;
  using R = HostOpRow;
  return std::make_tuple(
      field("name", &R::name, "", "the cpu_op's name"),
      field("calls", &R::calls, "", "at any depth").at_least(0),
      field("top_level_calls", &R::top_level_calls, "", "inside no other cpu_op").at_least(0),
      field("device_rows", &R::device_rows, "", "launched inside its top-level calls").at_least(0),
      field("device_ns", &R::device_ns, "ns", "their time").at_least(0));
}
constexpr auto evidence_fields(const HostOpCensus*) {
  using evidence::field;
  using H = HostOpCensus;
  return std::make_tuple(
      field("ops", &H::ops, "", "cpu_op events in the selection").at_least(0),
      field("top_level_ops", &H::top_level_ops, "", "of them top-level").at_least(0),
      field("rows_in_op", &H::rows_in_op, "", "device rows placed in a top-level op").at_least(0),
      field("rows_outside_op", &H::rows_outside_op, "", "no launch, or a launch in no op")
          .at_least(0),
      field("by_name", &H::by_name, "", "by calls descending, then top-level calls, then name"));
}
constexpr auto evidence_fields(const OtherStreams*) {
  using evidence::field;
  using O = OtherStreams;
  return std::make_tuple(field("streams", &O::streams, "", "streams folded").at_least(1),
                         field("rows", &O::rows, "", "their rows").at_least(0),
                         field("kernels", &O::kernels, "", "kernels").at_least(0),
                         field("memcpys", &O::memcpys, "", "memcpys").at_least(0),
                         field("memsets", &O::memsets, "", "memsets").at_least(0),
                         field("kernel_ns", &O::kernel_ns, "ns", "the kernels' time").at_least(0),
                         field("memcpy_ns", &O::memcpy_ns, "ns", "the memcpys'").at_least(0),
                         field("memset_ns", &O::memset_ns, "ns", "the memsets'").at_least(0),
                         field("sum_ns", &O::sum_ns, "ns", "the three summed").at_least(0),
                         field("busy_ns", &O::busy_ns, "ns", "their streams' busy time")
                             .at_least(0));
}
constexpr auto evidence_fields(const OtherIdle*) {
  using evidence::field;
  using O = OtherIdle;
  return std::make_tuple(
      field("devices", &O::devices, "", "devices folded").at_least(1),
      field("idle_ns", &O::idle_ns, "ns", "their idle time").at_least(0),
      field("gaps", &O::gaps, "", "their gaps").at_least(0),
      field("host_wait_ns", &O::host_wait_ns, "ns", "host wait").at_least(0),
      field("kernel_wait_ns", &O::kernel_wait_ns, "ns", "kernel wait").at_least(0),
      field("unlaunched_ns", &O::unlaunched_ns, "ns", "before rows with no launch").at_least(0),
      field("host_wait_gaps", &O::host_wait_gaps, "", "gaps with some host wait").at_least(0));
}
constexpr auto evidence_fields(const OtherQueues*) {
  using evidence::field;
  using O = OtherQueues;
  return std::make_tuple(field("queues", &O::queues, "", "queues folded").at_least(1),
                         field("rows", &O::rows, "", "their rows with a launch").at_least(0),
                         field("unlaunched_rows", &O::unlaunched_rows, "", "without one")
                             .at_least(0),
                         field("max_length", &O::max_length, "", "the largest of theirs")
                             .at_least(0));
}
inline auto evidence_fields(const TraceStats*) {
  using evidence::custom;
  using evidence::field;
  using T = TraceStats;
  namespace d = evidence_detail;
  return std::make_tuple(
      field("streams", &T::streams, "", "per (device, stream): the 16 with the most time"),
      field("idle_split", &T::idle, "", "per device: the 16 with the most time"),
      field("launches", &T::launch, "", "kernel rows and their launch calls"),
      field("queue_length", &T::queues, "", "per stream kept in streams[]"),
      field("copies", &T::copies, "", "memcpy and memset rows per name, by total_ns"),
      field("host_ops", &T::host_ops, "", "the cpu_op census"),
      custom<T>("other_streams", d::other_streams_json, d::read_other_streams, "object", "",
                "the streams past the 16, summed; absent if none")
          .omitted_if_null(),
      custom<T>("other_idle_split", d::other_idle_json, d::read_other_idle, "object", "",
                "the devices past the 16, summed; absent if none")
          .omitted_if_null(),
      custom<T>("other_queue_length", d::other_queues_json, d::read_other_queues, "object", "",
                "the queues past the 16, summed; absent if none")
          .omitted_if_null());
}

}  // namespace tprobe::core
