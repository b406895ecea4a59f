// A trace's memory as the kernels command's evidence holds it (results.memory, docs/kernels.md
// "Memory"), each field declared once (core/evidence/fields.hpp); core/trace/stats's trace_memory
// fills it (its header says what each figure is), trace_memory_report writes, reads and shows it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"

namespace tprobe::core {

// One point of a device's timeline: after the event at ts_ns.
struct MemoryPoint {
  int64_t ts_ns = 0;
  int64_t allocated_bytes = 0;  // Total Allocated
  int64_t reserved_bytes = 0;   // Total Reserved
};

// Bytes alive at the peak in one (phase, layer kind, part) cell; phase and part "untagged" for
// the allocations the rule could not place.
struct MemoryPartRow {
  std::string phase, layer_kind, part;
  int64_t bytes = 0;
  int64_t allocations = 0;
  double share_ratio = 0;  // of the device's alive_at_peak_bytes: set_alive_shares()
};

struct MemoryLayerRow {
  int32_t layer = 0;
  std::string layer_kind;
  int64_t bytes = 0;
  int64_t allocations = 0;
  std::map<std::string, int64_t> bytes_by_phase;
};

// Alive bytes allocated by one op outside the model's modules (part other, layer "-").
struct MemoryOutsideRow {
  std::string op, phase;
  int64_t bytes = 0;
  int64_t allocations = 0;
};

struct MemoryDevice {
  int32_t device_type = 0;  // c10::DeviceType as written: 0 CPU, 1 CUDA, ...
  int32_t device_id = -1;   // -1: the CPU's
  std::string label;        // "cuda:0", "cpu"
  int64_t events = 0;       // [memory] events of this device, kept
  int64_t allocations = 0, frees = 0, zero_byte_events = 0;
  int64_t allocated_bytes_total = 0;  // Σ Bytes > 0
  int64_t freed_bytes_total = 0;      // Σ -Bytes over Bytes < 0
  int64_t bytes_sum = 0;              // Σ Bytes: the net change over the trace
  MemoryPoint first, last;            // the device's first and last events (by ts)
  MemoryPoint peak;                   // the first event with the largest Total Allocated
  int64_t peak_index = 0;             // its position in ts order
  int64_t peak_step = -1;             // the ProfilerStep holding it (-1: outside every step)
  MemoryPoint peak_reserved;          // the first event with the largest Total Reserved
  // Frees of allocations made before the trace began (no allocation at that address before
  // them), and the bytes they free.
  int64_t unmatched_frees = 0, unmatched_free_bytes = 0;
  int64_t duplicate_allocations = 0;  // an address allocated again before it was freed
  int64_t size_mismatched_frees = 0;  // a free whose size is not its allocation's
  // Events whose Total Allocated is not the previous event's plus their Bytes.
  int64_t total_mismatches = 0;
  int64_t never_freed_allocations = 0, never_freed_bytes = 0;  // allocated in the trace, kept
  // Total Allocated before the first event (its Total Allocated minus its Bytes): what was
  // allocated before the trace began.
  int64_t resident_before_trace_bytes = 0;
  int64_t pre_trace_freed_before_peak_bytes = 0;  // unmatched frees up to the peak
  int64_t resident_at_peak_bytes = 0;  // resident_before_trace - pre_trace_freed_before_peak
  // Allocations at or before the peak whose free comes after it, or never.
  int64_t alive_at_peak_bytes = 0, alive_at_peak_allocations = 0;
  // peak - resident_at_peak - alive_at_peak: 0 when the allocator's totals agree with the events.
  int64_t unexplained_at_peak_bytes = 0;

  // The alive allocations by place. `attributed` false: the rule could not run (no module
  // events, or --parts off); every alive byte is then untagged (untagged_no_module_events_*).
  bool attributed = false;
  std::vector<MemoryPartRow> by_phase_part;  // phase order, layer kind, part; untagged last
  std::vector<MemoryLayerRow> by_layer;
  std::vector<MemoryOutsideRow> outside_model;  // by bytes, descending
  int64_t outside_model_bytes = 0;
  int64_t untagged_bytes = 0, untagged_allocations = 0;
  int64_t untagged_no_module_events_bytes = 0;  // the trace gave nothing to place them with
  int64_t untagged_no_module_bytes = 0;   // outside every module and backward op, no op holds it
  int64_t untagged_unlinked_bytes = 0;    // inside a backward op no fwdbwd flow links
  int64_t untagged_no_part_bytes = 0;     // inside modules none of which names a part

  // At most kMemoryTimelinePoints points: the first and last events and, in equal time buckets
  // between them, each bucket's event with the largest Total Allocated (the peak is one of them).
  std::vector<MemoryPoint> timeline;
};

inline constexpr int kMemoryTimelinePoints = 400;

struct TraceMemory {
  int64_t events = 0;          // [memory] events kept
  int64_t skipped_events = 0;  // [memory] events left out (a field missing or not an integer)
  std::string first_skipped;   // what was wrong with the first of them
  std::string not_attributed_why;  // when the devices' alive bytes could not be placed
  bool attribution_off = false;    // --parts off: the hint does not ask for with_stack=True
  std::vector<MemoryDevice> devices;  // accelerators by (type, id), then the CPU
};

// Sets each by_phase_part row's share_ratio from the device's alive bytes (the analysis does,
// and the reader, so a written share that is not this one is refused by the rewrite).
void set_alive_shares(MemoryDevice& d);

// The one line said when a trace has no [memory] events (`parts`: it also says with_stack=True
// gives their bytes by part; not when the attribution was turned off).
std::string trace_memory_hint(bool parts = true);


namespace evidence_detail {
Json memory_peak_json(const MemoryDevice& d);
void read_memory_peak(MemoryDevice& d, const Json& v, const std::string& w, const char* key);
Json memory_timeline_json(const MemoryDevice& d);
void read_memory_timeline(MemoryDevice& d, const Json& v, const std::string& w, const char* key);
Json memory_hint_json(const TraceMemory& m);
void read_memory_hint(TraceMemory& m, const Json& v, const std::string& w, const char* key);
// The devices, each named "where devices[i]" (as the kernels evidence's other lists).
Json memory_devices_json(const TraceMemory& m);
void read_memory_devices(TraceMemory& m, const Json& v, const std::string& w, const char* key);
// A figure of the others that trace_memory_from_json checks by writing what was read again.
template <typename S>
void read_by_rewrite(S&, const Json&, const std::string&, const char*) {}
}  // namespace evidence_detail

constexpr auto evidence_fields(const MemoryPoint*) {
  using evidence::field;
  using P = MemoryPoint;
  return std::make_tuple(field("ts_ns", &P::ts_ns, "ns", "the event's time"),
                         field("allocated_bytes", &P::allocated_bytes, "B", "Total Allocated")
                             .at_least(0),
                         field("reserved_bytes", &P::reserved_bytes, "B", "Total Reserved")
                             .at_least(0));
}
constexpr auto evidence_fields(const MemoryPartRow*) {
  using evidence::field;
  using R = MemoryPartRow;
  return std::make_tuple(field("phase", &R::phase, "", "the step's phase (or untagged)"),
                         field("layer_kind", &R::layer_kind, "", "sliding, full or -"),
                         field("part", &R::part, "", "the model's part (or untagged)"),
                         field("bytes", &R::bytes, "B", "alive at the peak").at_least(0),
                         field("allocations", &R::allocations, "", "their count").at_least(0),
                         field("share_ratio", &R::share_ratio, "", "of the alive bytes"));
}
constexpr auto evidence_fields(const MemoryLayerRow*) {
  using evidence::field;
  using L = MemoryLayerRow;
  return std::make_tuple(
      field("layer", &L::layer, "", "the decoder layer").at_least(0),
      field("layer_kind", &L::layer_kind, "", "sliding or full"),
      field("bytes", &L::bytes, "B", "alive at the peak, parts summed").at_least(0),
      field("allocations", &L::allocations, "", "their count").at_least(0),
      field("bytes_by_phase", &L::bytes_by_phase, "B", "the bytes by phase").at_least(0));
}
constexpr auto evidence_fields(const MemoryOutsideRow*) {
  using evidence::field;
  using O = MemoryOutsideRow;
  return std::make_tuple(field("op", &O::op, "", "the op that allocated them"),
                         field("phase", &O::phase, "", "the step's phase"),
                         field("bytes", &O::bytes, "B", "alive at the peak").at_least(0),
                         field("allocations", &O::allocations, "", "their count").at_least(0));
}
inline auto evidence_fields(const MemoryDevice*) {
  using evidence::custom;
  using evidence::field;
  using evidence::group;
  using D = MemoryDevice;
  namespace d = evidence_detail;
  return std::make_tuple(
      field("device", &D::label, "", "cuda:0, cpu"),
      field("device_type", &D::device_type, "", "c10::DeviceType: 0 CPU, 1 CUDA").at_least(0),
      field("device_id", &D::device_id, "", "-1: the CPU's").at_least(-1),
      field("events", &D::events, "", "its [memory] events").at_least(0),
      field("allocations", &D::allocations, "", "events with Bytes > 0").at_least(0),
      field("frees", &D::frees, "", "events with Bytes < 0").at_least(0),
      field("zero_byte_events", &D::zero_byte_events, "", "events with Bytes 0").at_least(0),
      field("allocated_bytes_total", &D::allocated_bytes_total, "B", "allocated").at_least(0),
      field("freed_bytes_total", &D::freed_bytes_total, "B", "freed").at_least(0),
      field("bytes_sum", &D::bytes_sum, "B", "the net change over the trace"),
      field("first", &D::first, "", "the first event"),
      field("last", &D::last, "", "the last event"),
      custom<D>("peak", d::memory_peak_json, d::read_memory_peak, "object", "",
                "the first event with the largest Total Allocated, its index and step"),
      field("peak_reserved", &D::peak_reserved, "", "the first with the largest Total Reserved"),
      field("unmatched_frees", &D::unmatched_frees, "", "frees of memory older than the trace")
          .at_least(0),
      field("unmatched_free_bytes", &D::unmatched_free_bytes, "B", "what they free").at_least(0),
      field("duplicate_allocations", &D::duplicate_allocations, "",
            "an address allocated again before its free")
          .at_least(0),
      field("size_mismatched_frees", &D::size_mismatched_frees, "", "a free of another size")
          .at_least(0),
      field("total_mismatches", &D::total_mismatches, "",
            "events whose Total Allocated is not the previous one's plus their Bytes")
          .at_least(0),
      field("never_freed_allocations", &D::never_freed_allocations, "", "allocated, kept")
          .at_least(0),
      field("never_freed_bytes", &D::never_freed_bytes, "B", "their bytes").at_least(0),
      field("resident_before_trace_bytes", &D::resident_before_trace_bytes, "B",
            "allocated before the first event"),
      group<D>(
          "alive_at_peak", "the allocations alive at the peak, by place",
          field("allocations", &D::alive_at_peak_allocations, "", "alive at the peak").at_least(0),
          field("bytes", &D::alive_at_peak_bytes, "B", "their bytes").at_least(0),
          field("resident_bytes", &D::resident_at_peak_bytes, "B", "resident, less freed by it"),
          field("pre_trace_freed_bytes", &D::pre_trace_freed_before_peak_bytes, "B",
                "resident bytes freed by the peak")
              .at_least(0),
          field("unexplained_bytes", &D::unexplained_at_peak_bytes, "B",
                "peak less resident less alive"),
          field("attributed", &D::attributed, "", "placed by part"),
          custom<D>("tagged_bytes", +[](const D& x) {
                      return Json(x.alive_at_peak_bytes - x.untagged_bytes);
                    },
                    d::read_by_rewrite<D>, "integer", "B", "placed: bytes less untagged_bytes"),
          field("untagged_bytes", &D::untagged_bytes, "B", "not placed").at_least(0),
          field("untagged_allocations", &D::untagged_allocations, "", "their count").at_least(0),
          custom<D>("untagged_share_ratio", +[](const D& x) {
                      return Json(x.alive_at_peak_bytes > 0 ? double(x.untagged_bytes) /
                                                                  double(x.alive_at_peak_bytes)
                                                            : 0.0);
                    },
                    d::read_by_rewrite<D>, "number", "", "untagged_bytes over bytes"),
          field("untagged_no_module_events_bytes", &D::untagged_no_module_events_bytes, "B",
                "untagged: no module events")
              .at_least(0),
          field("untagged_no_module_bytes", &D::untagged_no_module_bytes, "B",
                "untagged: outside every module and op")
              .at_least(0),
          field("untagged_unlinked_bytes", &D::untagged_unlinked_bytes, "B",
                "untagged: a backward op without a flow")
              .at_least(0),
          field("untagged_no_part_bytes", &D::untagged_no_part_bytes, "B",
                "untagged: modules that name no part")
              .at_least(0),
          field("outside_model_bytes", &D::outside_model_bytes, "B", "allocated outside the model")
              .at_least(0),
          field("by_phase_part", &D::by_phase_part, "", "by phase × layer kind × part"),
          field("by_layer", &D::by_layer, "", "per decoder layer"),
          field("outside_model", &D::outside_model, "", "by op, outside the model's modules")),
      custom<D>("timeline", d::memory_timeline_json, d::read_memory_timeline, "object", "",
                "events, points and the ts_ns, allocated_bytes, reserved_bytes columns"));
}
inline auto evidence_fields(const TraceMemory*) {
  using evidence::custom;
  using evidence::derived;
  using evidence::field;
  using T = TraceMemory;
  return std::make_tuple(
      derived<T>("available", +[](const T& m) { return Json(m.events > 0); }, "boolean", "",
                 "the trace has [memory] events"),
      custom<T>("hint", evidence_detail::memory_hint_json, evidence_detail::read_memory_hint,
                "string or null", "", "how to record them, where it has none"),
      field("events", &T::events, "", "[memory] events kept").at_least(0),
      field("skipped_events", &T::skipped_events, "", "left out").at_least(0),
      field("first_skipped", &T::first_skipped, "", "why the first was").or_null(),
      field("not_attributed_why", &T::not_attributed_why, "", "why not placed by part").or_null(),
      derived<T>("timeline_max_points", +[](const T&) { return Json(kMemoryTimelinePoints); },
                 "integer", "", "a device timeline's most points"),
      custom<T>("devices", evidence_detail::memory_devices_json,
                evidence_detail::read_memory_devices, "[object]", "",
                "per device: memory.devices[] below"));
}

}  // namespace tprobe::core
