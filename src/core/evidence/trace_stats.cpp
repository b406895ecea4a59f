// The launch-bound statistics' evidence (trace_stats.hpp): the folded rows' objects and the rules
// between each object's fields.
#include "tprobe/core/evidence/trace_stats.hpp"

namespace tprobe::core {

namespace {

// `part` of `whole` not above it, both named in the message.
void not_above(int64_t part, int64_t whole, const std::string& where, const char* part_key,
               const char* whole_key) {
  if (part > whole) fail("{}: {} ({}) is above {} ({})", where, part_key, part, whole_key, whole);
}

template <typename S>
void idle_parts(const S& s, const std::string& where) {
  not_above(s.host_wait_ns, s.idle_ns, where, "host_wait_ns", "idle_ns");
  not_above(s.kernel_wait_ns, s.idle_ns, where, "kernel_wait_ns", "idle_ns");
  not_above(s.unlaunched_ns, s.idle_ns, where, "unlaunched_ns", "idle_ns");
  not_above(s.host_wait_gaps, s.gaps, where, "host_wait_gaps", "gaps");
  if (s.host_wait_ns + s.kernel_wait_ns + s.unlaunched_ns != s.idle_ns)
    fail("{}: host_wait_ns + kernel_wait_ns + unlaunched_ns is not idle_ns", where);
}

// A folded object: null where nothing was folded (its count is 0).
template <typename O>
Json folded_json(const O& o, int64_t count) {
  return count > 0 ? evidence::to_json(o) : Json(nullptr);
}

}  // namespace

namespace evidence_detail {

Json other_streams_json(const TraceStats& s) {
  return folded_json(s.other_streams, s.other_streams.streams);
}
void read_other_streams(TraceStats& s, const Json& v, const std::string& w, const char* key) {
  s.other_streams = evidence::from_json<OtherStreams>(v, w + "." + key);
}
Json other_idle_json(const TraceStats& s) {
  return folded_json(s.other_idle, s.other_idle.devices);
}
void read_other_idle(TraceStats& s, const Json& v, const std::string& w, const char* key) {
  s.other_idle = evidence::from_json<OtherIdle>(v, w + "." + key);
}
Json other_queues_json(const TraceStats& s) {
  return folded_json(s.other_queues, s.other_queues.queues);
}
void read_other_queues(TraceStats& s, const Json& v, const std::string& w, const char* key) {
  s.other_queues = evidence::from_json<OtherQueues>(v, w + "." + key);
}

}  // namespace evidence_detail

void evidence_check(const Distribution& d, const std::string& where) {
  not_above(d.min_ns, d.p50_ns, where, "min_ns", "p50_ns");
  not_above(d.p50_ns, d.p90_ns, where, "p50_ns", "p90_ns");
  not_above(d.p90_ns, d.p99_ns, where, "p90_ns", "p99_ns");
  not_above(d.p99_ns, d.max_ns, where, "p99_ns", "max_ns");
}
void evidence_check(const IdleSplit& s, const std::string& where) { idle_parts(s, where); }
void evidence_check(const OtherIdle& s, const std::string& where) { idle_parts(s, where); }
void evidence_check(const OtherStreams& s, const std::string& where) {
  not_above(s.kernels, s.rows, where, "kernels", "rows");
  not_above(s.memcpys, s.rows, where, "memcpys", "rows");
  not_above(s.memsets, s.rows, where, "memsets", "rows");
}
void evidence_check(const OtherQueues& s, const std::string& where) {
  not_above(s.max_length, s.rows, where, "max_length", "rows");
}
void evidence_check(const LaunchKernelRow& r, const std::string& where) {
  not_above(r.shorter_than_launch, r.launches, where, "shorter_than_launch", "launches");
}
void evidence_check(const LaunchStats& s, const std::string& where) {
  not_above(s.with_launch, s.kernels, where, "with_launch", "kernels");
  not_above(s.launch_duration_unknown, s.with_launch, where, "launch_duration_unknown",
            "with_launch");
  not_above(s.negative_delay, s.with_launch, where, "negative_delay", "with_launch");
  not_above(s.shorter_than_launch, s.with_launch, where, "shorter_than_launch", "with_launch");
}
void evidence_check(const QueueRow& q, const std::string& where) {
  not_above(q.window_start_ns, q.window_end_ns, where, "window_start_ns", "window_end_ns");
  not_above(q.max_length, q.rows, where, "max_length", "rows");
  int64_t total = 0;
  for (int64_t t : q.time_at_length_ns) {
    if (__builtin_add_overflow(total, t, &total)) fail("{}.time_at_length_ns: too large", where);
  }
  if (!q.time_at_length_ns.empty() && total != q.window_end_ns - q.window_start_ns)
    fail("{}.time_at_length_ns: does not sum to the window", where);
}
void evidence_check(const CopyRow& c, const std::string& where) {
  not_above(c.rows_with_bytes, c.count, where, "rows_with_bytes", "count");
}
void evidence_check(const HostOpRow& r, const std::string& where) {
  not_above(r.top_level_calls, r.calls, where, "top_level_calls", "calls");
}
void evidence_check(const HostOpCensus& h, const std::string& where) {
  not_above(h.top_level_ops, h.ops, where, "top_level_ops", "ops");
}
void evidence_check(const StreamRow& s, const std::string& where) {
  not_above(s.concurrent_ns, s.busy_ns, where, "concurrent_ns", "busy_ns");
}

}  // namespace tprobe::core
