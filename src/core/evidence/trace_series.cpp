// The time series' evidence (trace_series.hpp): the folded series' objects and the rules.
#include "tprobe/core/evidence/trace_series.hpp"

namespace tprobe::core {

namespace evidence_detail {

namespace jr = json_read;

Json other_queue_json(const DeviceSeries& d) {
  if (d.other_streams <= 0) return nullptr;
  Json q = evidence::to_json(d.other_queue);
  q.erase("stream");
  q["streams"] = d.other_streams;
  return q;
}
void read_other_queue(DeviceSeries& d, const Json& v, const std::string& w, const char* key) {
  if (v.is_null()) return;
  const std::string at = w + "." + key;
  if (!v.is_object()) fail("{}: must be an object or null", at);
  Json q = v;
  d.other_streams = jr::integer(q, "streams", at, 1);
  q.erase("streams");
  q["stream"] = -1;
  d.other_queue = evidence::from_json<QueueSeries>(q, at);
}

Json other_copy_json(const DeviceSeries& d) {
  if (d.other_copies <= 0) return nullptr;
  Json c = evidence::to_json(d.other_copy);
  c.erase("name");
  c["kinds"] = d.other_copies;
  return c;
}
void read_other_copy(DeviceSeries& d, const Json& v, const std::string& w, const char* key) {
  if (v.is_null()) return;
  const std::string at = w + "." + key;
  if (!v.is_object()) fail("{}: must be an object or null", at);
  Json c = v;
  d.other_copies = jr::integer(c, "kinds", at, 1);
  c.erase("kinds");
  c["name"] = "other";
  d.other_copy = evidence::from_json<CopySeries>(c, at);
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
  if (d.end_ns < d.start_ns) fail("{}: end_ns ({}) is before start_ns ({})", where, d.end_ns, d.start_ns);
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
