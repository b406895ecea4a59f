// Two time series of a trace, as pictures for the report: the queue length per stream (rows
// launched and not finished) and the copy bandwidth per memcpy/memset kind, each over at most
// 400 equal time buckets per device. HolisticTraceAnalysis's get_queue_length_time_series and
// get_memory_bw_time_series, downsampled so every bucket keeps its extreme (the queue's maximum)
// and its exact total (time-weighted queue, bytes). docs/kernels.md, "Time series", defines them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"

namespace tprobe::core {

struct QueueSeries {
  int64_t stream = 0;   // -1 in DeviceSeries::other_queue
  int64_t device_ns = 0;  // the summed device time of its rows (what the streams are ranked by)
  std::vector<int64_t> max_length;   // per bucket: the largest length held for a positive time
  std::vector<double> mean_length;   // per bucket: time-weighted over the bucket
};

struct CopySeries {
  std::string name;  // as the source writes it ("Memcpy HtoD (Pinned -> Device)")
  int64_t rows = 0;  // rows with args.bytes
  std::vector<double> bytes;        // per bucket: each row's bytes spread evenly over its time
  std::vector<double> bytes_per_s;  // per bucket: bytes / the bucket's duration
};

struct DeviceSeries {
  int32_t device = 0;
  int64_t start_ns = 0;   // the device's first queued row (launch call or start)
  int64_t end_ns = 0;     // its last row's end
  int64_t bucket_ns = 0;  // ceil((end - start) / kMaxBuckets), at least 1
  int64_t buckets = 0;    // ceil((end - start) / bucket_ns); the last bucket may be shorter
  int64_t device_ns = 0;  // the summed device time of its rows (what the devices are ranked by)
  // Rows with a launch only: the kMaxStreams streams with the most device time (ties: the
  // smaller id), ascending stream; the other streams' rows in other_queue (their summed queue
  // length; present when other_streams > 0, its stream -1 and device_ns their total).
  std::vector<QueueSeries> queues;
  int64_t other_streams = 0;
  QueueSeries other_queue;
  // The kMaxCopies copy kinds with the most bytes (ties: by name), by name; the other kinds'
  // rows in other_copy (named "other", present when other_copies > 0).
  std::vector<CopySeries> copies;
  int64_t other_copies = 0;
  CopySeries other_copy;
};

struct TraceSeries {
  static constexpr int64_t kMaxBuckets = 400;
  static constexpr int64_t kMaxDevices = 16;
  static constexpr int64_t kMaxStreams = 16;
  static constexpr int64_t kMaxCopies = 16;
  // The kMaxDevices devices with the most device time (ties: the smaller index), ascending
  // device; the rest counted, with their rows' summed time, and drawn by no series.
  std::vector<DeviceSeries> devices;
  int64_t other_devices = 0;
  int64_t other_devices_ns = 0;
};

Json to_json(const TraceSeries& s);  // results.trace.time_series
TraceSeries trace_series_from_json(const Json& j, const std::string& where);
// The peak of each series (queue length per stream, bandwidth per copy kind) and when.
std::vector<Table> trace_series_tables(const TraceSeries& s);

class SectionBuilder;
// The report's two pictures per device of results.<base> ("trace.time_series").
void trace_series_figures(SectionBuilder& c, const std::string& base);

}  // namespace tprobe::core
