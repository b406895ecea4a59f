// A trace's two time series as the kernels command's evidence holds them
// (results.trace.time_series, docs/kernels.md "Time series"), each field declared once
// (core/evidence/fields.hpp), with the rules between them (every series one value a bucket, the
// caps) as evidence_check; core/trace/stats's trace_series fills and draws them.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"

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

namespace evidence_detail {
// The folded streams' queue (`streams` in place of `stream`) and the folded copy kinds' series
// (`kinds` in place of `name`): null where nothing was folded.
Json other_queue_json(const DeviceSeries& d);
void read_other_queue(DeviceSeries& d, const Json& v, const std::string& w, const char* key);
Json other_copy_json(const DeviceSeries& d);
void read_other_copy(DeviceSeries& d, const Json& v, const std::string& w, const char* key);
}  // namespace evidence_detail

// A device's span in order, every series `buckets` values long, no more series than the caps.
void evidence_check(const DeviceSeries& d, const std::string& where);
void evidence_check(const TraceSeries& s, const std::string& where);

constexpr auto evidence_fields(const QueueSeries*) {
  using evidence::field;
  using Q = QueueSeries;
  return std::make_tuple(
      field("stream", &Q::stream, "", "the stream"),
      field("device_ns", &Q::device_ns, "ns", "its rows' device time (the rank)").at_least(0),
      field("max_length", &Q::max_length, "", "per bucket: the largest length held").at_least(0),
      field("mean_length", &Q::mean_length, "", "per bucket: time-weighted"));
}
constexpr auto evidence_fields(const CopySeries*) {
  using evidence::field;
  using C = CopySeries;
  return std::make_tuple(field("name", &C::name, "", "the copy kind, as the trace writes it"),
                         field("rows", &C::rows, "", "rows with a byte count").at_least(0),
                         field("bytes", &C::bytes, "B", "per bucket: each row's bytes spread"),
                         field("bytes_per_s", &C::bytes_per_s, "B/s",
                               "per bucket: bytes over the bucket's time"));
}
inline auto evidence_fields(const DeviceSeries*) {
  using evidence::custom;
  using evidence::field;
  using D = DeviceSeries;
  namespace d = evidence_detail;
  return std::make_tuple(
      field("device", &D::device, "", "the device's index").at_least(0),
      field("device_ns", &D::device_ns, "ns", "its rows' device time (the rank)").at_least(0),
      field("start_ns", &D::start_ns, "ns", "its first queued row"),
      field("end_ns", &D::end_ns, "ns", "its last row's end"),
      field("bucket_ns", &D::bucket_ns, "ns", "a bucket's time").at_least(1),
      field("buckets", &D::buckets, "", "buckets (the last may be shorter)")
          .at_least(1)
          .at_most(TraceSeries::kMaxBuckets),
      field("queue_length", &D::queues, "", "per stream: the 16 with the most time"),
      custom<D>("queue_length_other_streams", d::other_queue_json, d::read_other_queue,
                "object or null", "", "the other streams' summed queue, with their count"),
      field("copy_bandwidth", &D::copies, "", "per copy kind: the 16 with the most bytes"),
      custom<D>("copy_bandwidth_other_kinds", d::other_copy_json, d::read_other_copy,
                "object or null", "", "the other kinds' summed series, with their count"));
}
inline auto evidence_fields(const TraceSeries*) {
  using evidence::derived;
  using evidence::field;
  using evidence::group;
  using S = TraceSeries;
  return std::make_tuple(
      derived<S>("max_buckets", +[](const S&) { return Json(S::kMaxBuckets); }, "integer", "",
                 "a device's most buckets"),
      derived<S>("max_devices", +[](const S&) { return Json(S::kMaxDevices); }, "integer", "",
                 "devices drawn"),
      derived<S>("max_streams", +[](const S&) { return Json(S::kMaxStreams); }, "integer", "",
                 "queue series a device"),
      derived<S>("max_copy_kinds", +[](const S&) { return Json(S::kMaxCopies); }, "integer", "",
                 "copy series a device"),
      field("devices", &S::devices, "", "the 16 devices with the most time, ascending"),
      group<S>("other_devices", "the devices past the 16",
               field("devices", &S::other_devices, "", "their count").at_least(0),
               field("device_ns", &S::other_devices_ns, "ns", "their rows' time").at_least(0)));
}

}  // namespace tprobe::core
