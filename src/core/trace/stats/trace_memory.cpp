// A trace's [memory] events: per device the timeline, the peak and the bytes alive at the peak,
// placed by phase × part × layer with the part attribution's rule (trace_memory.hpp).
#include "tprobe/core/trace/stats/trace_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "tprobe/core/base/error.hpp"
#include "trace/stats/detail/trace_memory_internal.hpp"

namespace tprobe::core {

namespace detail {
namespace {

std::string device_label(int32_t type, int32_t id) {
  const char* name = nullptr;
  switch (type) {  // c10::DeviceType
    case 0:
      name = "cpu";
      break;
    case 1:
      name = "cuda";
      break;
    case 6:
      name = "hip";
      break;
    case 12:
      name = "xpu";
      break;
    case 13:
      name = "mps";
      break;
    case 20:
      name = "privateuse1";
      break;
    default:
      break;
  }
  const std::string n = name ? name : fmt::format("device type {}", type);
  return id >= 0 ? fmt::format("{}:{}", n, id) : n;
}

int64_t add_or_fail(int64_t a, int64_t b, const std::string& label, const char* what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    fail("{}: the [memory] events' {} add up past what int64 bytes hold (values near 2^63 are "
         "not byte counts)",
         label, what);
  }
  return r;
}

// The step whose host range holds ts (the last one starting at or before it), -1 outside.
int64_t step_at(const std::vector<TraceStepRange>& steps, int64_t ts) {
  auto it = std::upper_bound(steps.begin(), steps.end(), ts,
                             [](int64_t t, const TraceStepRange& r) { return t < r.start_ns; });
  if (it == steps.begin()) return -1;
  --it;
  return ts <= it->end_ns ? it->step : -1;
}

__extension__ typedef __int128 Wide;  // exact bucket arithmetic over any int64 time span

MemoryPoint point_of(const MemEvent& e) { return {e.ts_ns, e.total_allocated, e.total_reserved}; }

// The first and last events, and per equal time bucket between them the event with the largest
// Total Allocated (the first of equals): kMemoryTimelinePoints points at most, the peak among them.
std::vector<MemoryPoint> downsample(const MemEvent* ev, std::size_t n) {
  std::vector<MemoryPoint> out;
  if (n <= static_cast<std::size_t>(kMemoryTimelinePoints)) {
    for (std::size_t i = 0; i < n; ++i) out.push_back(point_of(ev[i]));
    return out;
  }
  constexpr int64_t kBuckets = kMemoryTimelinePoints - 2;
  const Wide t0 = ev[0].ts_ns;
  const Wide width = static_cast<Wide>(ev[n - 1].ts_ns) - t0 + 1;
  out.push_back(point_of(ev[0]));
  int64_t bucket = -1;
  std::size_t best = 0;
  for (std::size_t i = 1; i + 1 < n; ++i) {
    const int64_t b =
        static_cast<int64_t>((static_cast<Wide>(ev[i].ts_ns) - t0) * kBuckets / width);
    if (b != bucket) {
      if (bucket >= 0) out.push_back(point_of(ev[best]));
      bucket = b;
      best = i;
    } else if (ev[i].total_allocated > ev[best].total_allocated) {
      best = i;
    }
  }
  if (bucket >= 0) out.push_back(point_of(ev[best]));
  out.push_back(point_of(ev[n - 1]));
  return out;
}

}  // namespace

void analyze_memory(std::vector<MemEvent>& events, const std::vector<TraceStepRange>& steps,
                    const std::string& label, TraceMemory& out, std::vector<PartsPoint>& points,
                    std::vector<MemoryAlive>& alive) {
  points.clear();
  alive.clear();
  out.events = static_cast<int64_t>(events.size());
  // By device (accelerators first, the CPU last), then time; ties keep the file's order.
  auto device_rank = [](const MemEvent& e) {
    return std::make_tuple(e.device_type == 0 ? 1 : 0, e.device_type, e.device_id);
  };
  std::stable_sort(events.begin(), events.end(), [&](const MemEvent& a, const MemEvent& b) {
    const auto ra = device_rank(a), rb = device_rank(b);
    if (ra != rb) return ra < rb;
    return a.ts_ns < b.ts_ns;
  });
  std::unordered_map<uint64_t, int32_t> open_top;  // address -> latest open allocation
  std::vector<int32_t> below;  // the allocation open at the same address before this one
  std::vector<int32_t> freed_at;  // allocation -> the event that frees it, -1: never
  for (std::size_t begin = 0; begin < events.size();) {
    std::size_t end = begin;
    while (end < events.size() && device_rank(events[end]) == device_rank(events[begin])) ++end;
    const MemEvent* ev = events.data() + begin;
    const std::size_t n = end - begin;
    MemoryDevice d;
    d.device_type = ev[0].device_type;
    d.device_id = ev[0].device_id;
    d.label = device_label(d.device_type, d.device_id);
    d.events = static_cast<int64_t>(n);
    d.first = point_of(ev[0]);
    d.last = point_of(ev[n - 1]);
    std::size_t peak = 0, peak_reserved = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const MemEvent& e = ev[i];
      if (e.total_allocated > ev[peak].total_allocated) peak = i;
      if (e.total_reserved > ev[peak_reserved].total_reserved) peak_reserved = i;
      d.bytes_sum = add_or_fail(d.bytes_sum, e.bytes, label, "Bytes");
      if (i > 0) {
        int64_t expect = 0;
        if (__builtin_add_overflow(ev[i - 1].total_allocated, e.bytes, &expect) ||
            expect != e.total_allocated)
          ++d.total_mismatches;
      }
    }
    d.peak = point_of(ev[peak]);
    d.peak_index = static_cast<int64_t>(peak);
    d.peak_step = step_at(steps, ev[peak].ts_ns);
    d.peak_reserved = point_of(ev[peak_reserved]);
    {
      int64_t r = 0;
      if (__builtin_sub_overflow(ev[0].total_allocated, ev[0].bytes, &r))
        fail("{}: the first [memory] event of {} has Total Allocated {} and Bytes {}: no byte "
             "count before it",
             label, d.label, ev[0].total_allocated, ev[0].bytes);
      d.resident_before_trace_bytes = r;
    }
    // Each free closes the latest open allocation at its address; one with none open frees what
    // was allocated before the trace began.
    open_top.clear();
    below.assign(n, -1);
    freed_at.assign(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      const MemEvent& e = ev[i];
      const int32_t k = static_cast<int32_t>(i);
      if (e.bytes > 0) {
        ++d.allocations;
        d.allocated_bytes_total = add_or_fail(d.allocated_bytes_total, e.bytes, label, "allocations");
        auto it = open_top.find(e.addr);
        if (it != open_top.end()) {
          ++d.duplicate_allocations;
          below[i] = it->second;
          it->second = k;
        } else {
          open_top.emplace(e.addr, k);
        }
      } else if (e.bytes < 0) {
        ++d.frees;
        // bytes < 0 and > INT64_MIN (the reader refuses INT64_MIN): the negation holds.
        d.freed_bytes_total = add_or_fail(d.freed_bytes_total, -e.bytes, label, "frees");
        auto it = open_top.find(e.addr);
        if (it == open_top.end()) {
          ++d.unmatched_frees;
          d.unmatched_free_bytes = add_or_fail(d.unmatched_free_bytes, -e.bytes, label, "frees");
          if (i <= peak) {
            d.pre_trace_freed_before_peak_bytes =
                add_or_fail(d.pre_trace_freed_before_peak_bytes, -e.bytes, label, "frees");
          }
          continue;
        }
        const int32_t a = it->second;
        freed_at[static_cast<std::size_t>(a)] = k;
        if (ev[a].bytes != -e.bytes) ++d.size_mismatched_frees;
        if (below[static_cast<std::size_t>(a)] >= 0) {
          it->second = below[static_cast<std::size_t>(a)];
        } else {
          open_top.erase(it);
        }
      } else {
        ++d.zero_byte_events;
      }
    }
    const std::size_t device = out.devices.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (ev[i].bytes <= 0) continue;
      if (freed_at[i] < 0) {
        ++d.never_freed_allocations;
        d.never_freed_bytes = add_or_fail(d.never_freed_bytes, ev[i].bytes, label, "allocations");
      }
      if (i <= peak && (freed_at[i] < 0 || static_cast<std::size_t>(freed_at[i]) > peak)) {
        ++d.alive_at_peak_allocations;
        d.alive_at_peak_bytes = add_or_fail(d.alive_at_peak_bytes, ev[i].bytes, label, "allocations");
        points.push_back({ev[i].tid, ev[i].ts_ns});
        alive.push_back({device, ev[i].bytes});
      }
    }
    int64_t resident = 0, unexplained = 0;
    if (__builtin_sub_overflow(d.resident_before_trace_bytes, d.pre_trace_freed_before_peak_bytes,
                               &resident) ||
        __builtin_sub_overflow(d.peak.allocated_bytes, resident, &unexplained) ||
        __builtin_sub_overflow(unexplained, d.alive_at_peak_bytes, &unexplained)) {
      fail("{}: the [memory] events of {} give byte counts past what int64 holds", label, d.label);
    }
    d.resident_at_peak_bytes = resident;
    d.unexplained_at_peak_bytes = unexplained;
    d.timeline = downsample(ev, n);
    out.devices.push_back(std::move(d));
    begin = end;
  }
}

void attribute_memory(TraceMemory& memory, const std::vector<MemoryAlive>& alive,
                      const std::vector<PointPlace>* placed, const std::string& why) {
  const bool ran = placed != nullptr;
  if (ran && placed->size() != alive.size())
    fail("internal: {} placements for {} alive allocations", placed->size(), alive.size());
  memory.not_attributed_why = ran ? "" : why;
  struct Cell {
    std::map<std::tuple<int, int, int, std::string, std::string, std::string>, MemoryPartRow> rows;
    std::map<int32_t, MemoryLayerRow> layers;
    std::map<std::pair<std::string, std::string>, MemoryOutsideRow> outside;
  };
  std::vector<Cell> cells(memory.devices.size());
  for (std::size_t i = 0; i < alive.size(); ++i) {
    MemoryDevice& d = memory.devices[alive[i].device];
    Cell& c = cells[alive[i].device];
    const int64_t bytes = alive[i].bytes;
    const PointPlace* p = ran ? &(*placed)[i] : nullptr;
    if (p == nullptr || !p->tagged) {
      ++d.untagged_allocations;
      d.untagged_bytes += bytes;
      int64_t& by_reason = p == nullptr                      ? d.untagged_no_module_events_bytes
                           : p->why == PlaceWhy::kUnlinked ? d.untagged_unlinked_bytes
                           // an unplaced module names no part either
                           : p->why == PlaceWhy::kNoPart || p->why == PlaceWhy::kUnplaced
                               ? d.untagged_no_part_bytes
                                                           : d.untagged_no_module_bytes;
      by_reason += bytes;
      MemoryPartRow& r = c.rows[{100, 2, 100, "untagged", "-", "untagged"}];
      r.phase = "untagged";
      r.layer_kind = "-";
      r.part = "untagged";
      r.bytes += bytes;
      ++r.allocations;
      continue;
    }
    const StepTag& t = p->tag;
    const std::string phase = to_string(t.phase), kind = layer_kind_name(t.layer_kind),
                      part = to_string(t.part);
    MemoryPartRow& r =
        c.rows[{phase_rank(phase), layer_kind_rank(kind), part_rank(part), phase, kind, part}];
    r.phase = phase;
    r.layer_kind = kind;
    r.part = part;
    r.bytes += bytes;
    ++r.allocations;
    if (t.layer >= 0) {
      MemoryLayerRow& l = c.layers[t.layer];
      l.layer = t.layer;
      l.layer_kind = kind;
      l.bytes += bytes;
      ++l.allocations;
      l.bytes_by_phase[phase] += bytes;
    }
    if (!p->outside_op.empty()) {
      MemoryOutsideRow& o = c.outside[{p->outside_op, phase}];
      o.op = p->outside_op;
      o.phase = phase;
      o.bytes += bytes;
      ++o.allocations;
      d.outside_model_bytes += bytes;
    }
  }
  for (std::size_t k = 0; k < memory.devices.size(); ++k) {
    MemoryDevice& d = memory.devices[k];
    d.attributed = ran;
    for (auto& [key, r] : cells[k].rows) d.by_phase_part.push_back(std::move(r));
    set_alive_shares(d);
    for (auto& [key, l] : cells[k].layers) d.by_layer.push_back(std::move(l));
    for (auto& [key, o] : cells[k].outside) d.outside_model.push_back(std::move(o));
    std::stable_sort(d.outside_model.begin(), d.outside_model.end(),
                     [](const MemoryOutsideRow& a, const MemoryOutsideRow& b) {
                       return a.bytes > b.bytes;
                     });
  }
}

}  // namespace detail
}  // namespace tprobe::core
