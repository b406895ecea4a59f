// A trace's memory (trace_memory.hpp): the hint and the custom fields' writers and readers.
#include "tprobe/core/evidence/trace_memory.hpp"

#include "tprobe/core/base/json_read.hpp"

namespace tprobe::core {

std::string trace_memory_hint(bool parts) {
  return std::string("recorded without memory events; record with torch.profiler.profile(..., "
                     "profile_memory=True) for the memory timeline and the peak") +
         (parts ? " (and with_stack=True for its bytes by part)" : "");
}

void set_alive_shares(MemoryDevice& d) {
  for (MemoryPartRow& r : d.by_phase_part)
    r.share_ratio = evidence::ratio(r.bytes, d.alive_at_peak_bytes);
}

namespace evidence_detail {

namespace jr = json_read;

Json memory_peak_json(const MemoryDevice& d) {
  Json peak = evidence::to_json(d.peak);
  peak["index"] = d.peak_index;
  peak["step"] = d.peak_step;
  return peak;
}
void read_memory_peak(MemoryDevice& d, const Json& v, const std::string& w, const char* key) {
  const std::string at = w + "." + key;
  d.peak = evidence::from_json<MemoryPoint>(v, at);
  d.peak_index = jr::integer(v, "index", at, 0);
  d.peak_step = jr::integer(v, "step", at, -1);
}

Json memory_timeline_json(const MemoryDevice& d) {
  Json ts = Json::array(), alloc = Json::array(), reserved = Json::array();
  for (const MemoryPoint& p : d.timeline) {
    ts.push_back(p.ts_ns);
    alloc.push_back(p.allocated_bytes);
    reserved.push_back(p.reserved_bytes);
  }
  return {{"events", d.events},
          {"points", d.timeline.size()},
          {"ts_ns", ts},
          {"allocated_bytes", alloc},
          {"reserved_bytes", reserved}};
}
void read_memory_timeline(MemoryDevice& d, const Json& v, const std::string& w, const char* key) {
  const std::string tw = w + "." + key;
  if (!v.is_object()) fail("{}: must be an object", tw);
  const std::vector<int64_t> ts = jr::integers(v, "ts_ns", tw);
  const std::vector<int64_t> alloc = jr::integers(v, "allocated_bytes", tw, 0);
  const std::vector<int64_t> reserved = jr::integers(v, "reserved_bytes", tw, 0);
  if (alloc.size() != ts.size() || reserved.size() != ts.size())
    fail("{}: ts_ns, allocated_bytes and reserved_bytes differ in length", tw);
  if (ts.size() > static_cast<std::size_t>(kMemoryTimelinePoints))
    fail("{}: {} points, above {}", tw, ts.size(), kMemoryTimelinePoints);
  for (std::size_t i = 0; i < ts.size(); ++i) d.timeline.push_back({ts[i], alloc[i], reserved[i]});
}

Json memory_hint_json(const TraceMemory& m) {
  return m.events > 0 ? Json(nullptr) : Json(trace_memory_hint(!m.attribution_off));
}
// The hint names with_stack=True unless the attribution was turned off: the one field that
// records it, and only where there are no events (the reader checks the rest by rewriting).
void read_memory_hint(TraceMemory& m, const Json& v, const std::string& w, const char* key) {
  if (!v.is_null() && !v.is_string()) fail("{}: field '{}' must be a string or null", w, key);
  m.attribution_off = v.is_string() && v.get<std::string>() == trace_memory_hint(false);
}

// The counts a device's events bound, beyond each field's type and sign.
void check_memory_counts(const MemoryDevice& d, const std::string& w) {
  const struct {
    const char* key;
    int64_t value, most;
  } bounds[] = {{"allocations", d.allocations, d.events},
                {"frees", d.frees, d.events},
                {"zero_byte_events", d.zero_byte_events, d.events},
                {"unmatched_frees", d.unmatched_frees, d.frees},
                {"duplicate_allocations", d.duplicate_allocations, d.allocations},
                {"size_mismatched_frees", d.size_mismatched_frees, d.frees},
                {"total_mismatches", d.total_mismatches, d.events},
                {"never_freed_allocations", d.never_freed_allocations, d.allocations},
                {"alive_at_peak.untagged_bytes", d.untagged_bytes, d.alive_at_peak_bytes}};
  for (const auto& b : bounds)
    if (b.value > b.most) fail("{}: field '{}' = {} is above {}", w, b.key, b.value, b.most);
}

Json memory_devices_json(const TraceMemory& m) { return evidence::to_json(m.devices); }
void read_memory_devices(TraceMemory& m, const Json& v, const std::string& w, const char* key) {
  if (!v.is_array()) fail("{}: field '{}' must be a list", w, key);
  for (std::size_t i = 0; i < v.size(); ++i) {
    m.devices.push_back(evidence::from_json<MemoryDevice>(v[i], jr::at(w, key, i)));
    check_memory_counts(m.devices.back(), jr::at(w, key, i));
  }
}

}  // namespace evidence_detail

}  // namespace tprobe::core
