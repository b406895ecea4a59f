// A trace's memory, from the `[memory]` instant events torch.profiler writes with
// `profile_memory=True` (one per allocation or free: Addr, Bytes — negative for a free —, Total
// Allocated and Total Reserved after it, Device Type and Id): per device the timeline of allocated
// and reserved bytes, the peak, and the bytes alive at the peak by phase × part × layer, each
// allocation placed by the rule that places a kernel's launch (trace_parts.hpp). An allocation
// the rule cannot place stays untagged, counted by reason, never guessed. docs/kernels.md,
// "Memory", defines every figure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

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

// The one line said when a trace has no [memory] events (`parts`: it also says with_stack=True
// gives their bytes by part; not when the attribution was turned off).
std::string trace_memory_hint(bool parts = true);

}  // namespace tprobe::core
