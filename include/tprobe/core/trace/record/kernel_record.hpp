// One device activity (kernel, memcpy, memset) in tprobe's own terms, and the facts about the
// device it ran on. Both the torch.profiler trace reader and the CUPTI source produce these, so
// every kernel-table computation is testable without a GPU (docs/ARCHITECTURE.md: the profiling
// seam; docs/kernels.md: the table built from them).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tprobe/core/evidence/device_activity.hpp"
#include "tprobe/core/evidence/trace_facts.hpp"

namespace tprobe::core {


struct KernelRecord {
  ActivityKind kind = ActivityKind::kKernel;
  std::string name;      // demangled where the source knows how; whole, never shortened
  int64_t start_ns = 0;  // relative to the session (or trace) start
  int64_t end_ns = 0;
  int32_t device = 0;
  int64_t stream = 0;
  int64_t correlation_id = 0;  // links the launch on the host to this activity
  std::array<int32_t, 3> grid{{0, 0, 0}};
  std::array<int32_t, 3> block{{0, 0, 0}};
  int32_t registers_per_thread = 0;
  int64_t shared_memory_bytes = 0;  // static + dynamic
  int64_t bytes = 0;                // memcpy / memset size
  // Where it came from, when the source can tell: "forward", "backward", "optimizer", ... (empty
  // if unknown), and a finer tag such as "sliding_attention" or "experts" (tprobe's own step).
  std::string phase;
  std::string part;
  int32_t layer = -1;      // decoder layer index where the source knows it (tprobe's own step)
  std::string layer_kind;  // "sliding", "full", "-" or empty
  int64_t step = -1;  // profiler step the activity belongs to, -1 if none
  // The host call that launched it, where the source recorded it (the CUPTI source's launch
  // callbacks; tprobe's raw trace): its start and end on start_ns's clock (-1: not recorded) and
  // the OS thread that made it.
  int64_t launch_start_ns = -1;
  int64_t launch_end_ns = -1;
  int64_t launch_thread = 0;
  int64_t duration_ns() const { return end_ns - start_ns; }
};
}  // namespace tprobe::core
