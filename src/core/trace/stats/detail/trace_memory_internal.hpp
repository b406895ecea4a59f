// The trace reader's hand-over to the memory analysis (internal to tprobe_core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/trace/stats/trace_memory.hpp"
#include "tprobe/core/trace/record/kernel_record.hpp"
#include "trace/attribute/detail/trace_parts_internal.hpp"

namespace tprobe::core::detail {

// A kept [memory] event (every field present and an integer in range).
struct MemEvent {
  int64_t ts_ns = 0;
  int64_t tid = 0;
  uint64_t addr = 0;
  int64_t bytes = 0;  // > 0 allocation, < 0 free
  int64_t total_allocated = 0;
  int64_t total_reserved = 0;
  int32_t device_type = 0;
  int32_t device_id = -1;
};

// The first pass: every device's timeline, peak and the allocations alive at its peak, which
// come back as `points` (thread, time) with the device and bytes of each in `alive`, for the
// part attribution to place. `events` is reordered (by device, then time; ties in file order).
struct MemoryAlive {
  std::size_t device = 0;  // index into TraceMemory::devices
  int64_t bytes = 0;
};
void analyze_memory(std::vector<MemEvent>& events, const std::vector<TraceStepRange>& steps,
                    const std::string& label, TraceMemory& out, std::vector<PartsPoint>& points,
                    std::vector<MemoryAlive>& alive);

// The second: the alive bytes by place. `placed` is one per point, or null when the attribution
// could not run (`why`: no module events, or turned off) — every alive byte is then untagged.
void attribute_memory(TraceMemory& memory, const std::vector<MemoryAlive>& alive,
                      const std::vector<PointPlace>* placed, const std::string& why);

}  // namespace tprobe::core::detail
