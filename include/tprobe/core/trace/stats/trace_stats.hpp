// The launch-bound questions a torch.profiler trace answers, beside its kernel table: the device's
// idle time split into host wait and kernel wait, kernel-launch statistics, queue length per
// stream, memcpy/memset bandwidth per copy kind, and the host-op census (dispatches per cpu_op
// name, device rows per top-level op). HolisticTraceAnalysis's features, computed exactly in
// integer nanoseconds over the same selection as the table. docs/kernels.md defines every figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/trace/record/kernel_record.hpp"

namespace tprobe::core {

// Nearest-rank percentiles of a set of integer durations: pN is the value at 1-based rank
// ceil(N/100 * count) of the sorted values. All 0 when count is 0.
struct Distribution {
  int64_t count = 0;
  int64_t sum_ns = 0;
  int64_t min_ns = 0, p50_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;
  double mean_ns = 0;
};
// Sorts `values` in place.
Distribution distribution_of(std::vector<int64_t>& values);

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

}  // namespace tprobe::core
