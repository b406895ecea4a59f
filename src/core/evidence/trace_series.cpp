// The time series' evidence (trace_series.hpp): the folded series' objects and the rules.
#include "tprobe/core/evidence/trace_series.hpp"

namespace tprobe::core {

namespace evidence_detail {

namespace jr = json_read;

namespace {

// A folded series: the series' own object with its count (`count_key`) in place of the key that
// names one series (`own_key`); null where nothing was folded.
template <typename T>
Json folded_series_json(const T& series, int64_t count, const char* own_key,
                        const char* count_key) {
  if (count <= 0) return nullptr;
  Json j = evidence::to_json(series);
  j.erase(own_key);
  j[count_key] = count;
  return j;
}
template <typename T>
void read_folded_series(const Json& v, const std::string& at, const char* own_key,
                        const Json& own_value, const char* count_key, int64_t& count,
                        T& series) {
  if (v.is_null()) return;
  if (!v.is_object()) fail("{}: must be an object or null", at);
  Json j = v;
  count = jr::integer(j, count_key, at, 1);
  j.erase(count_key);
  j[own_key] = own_value;
  series = evidence::from_json<T>(j, at);
}

}  // namespace

Json other_queue_json(const DeviceSeries& d) {
  return folded_series_json(d.other_queue, d.other_streams, "stream", "streams");
}
void read_other_queue(DeviceSeries& d, const Json& v, const std::string& w, const char* key) {
  read_folded_series(v, w + "." + key, "stream", Json(-1), "streams", d.other_streams,
                     d.other_queue);
}
Json other_copy_json(const DeviceSeries& d) {
  return folded_series_json(d.other_copy, d.other_copies, "name", "kinds");
}
void read_other_copy(DeviceSeries& d, const Json& v, const std::string& w, const char* key) {
  read_folded_series(v, w + "." + key, "name", Json("other"), "kinds", d.other_copies,
                     d.other_copy);
}

}  // namespace evidence_detail

namespace {

void queue_buckets(const QueueSeries& q, std::size_t n, const std::string& w) {
  if (q.max_length.size() != n || q.mean_length.size() != n)
    fail("{}: {} buckets expected in max_length and mean_length", w, n);
}
void copy_buckets(const CopySeries& c, std::size_t n, const std::string& w) {
  if (c.bytes.size() != n || c.bytes_per_s.size() != n)
    fail("{}: {} buckets expected in bytes and bytes_per_s", w, n);
}

}  // namespace

void evidence_check(const DeviceSeries& d, const std::string& where) {
  if (d.end_ns < d.start_ns)
    fail("{}: end_ns ({}) is before start_ns ({})", where, d.end_ns, d.start_ns);
  if (d.queues.size() > static_cast<std::size_t>(TraceSeries::kMaxStreams))
    fail("{}: {} queue series, more than max_streams", where, d.queues.size());
  if (d.copies.size() > static_cast<std::size_t>(TraceSeries::kMaxCopies))
    fail("{}: {} copy series, more than max_copy_kinds", where, d.copies.size());
  const auto n = static_cast<std::size_t>(d.buckets);
  for (std::size_t k = 0; k < d.queues.size(); ++k)
    queue_buckets(d.queues[k], n, where + ".queue_length[" + std::to_string(k) + "]");
  for (std::size_t k = 0; k < d.copies.size(); ++k)
    copy_buckets(d.copies[k], n, where + ".copy_bandwidth[" + std::to_string(k) + "]");
  if (d.other_streams > 0) queue_buckets(d.other_queue, n, where + ".queue_length_other_streams");
  if (d.other_copies > 0) copy_buckets(d.other_copy, n, where + ".copy_bandwidth_other_kinds");
}

void evidence_check(const TraceSeries& s, const std::string& where) {
  if (s.devices.size() > static_cast<std::size_t>(TraceSeries::kMaxDevices))
    fail("{}: {} devices, more than max_devices", where, s.devices.size());
}

}  // namespace tprobe::core
