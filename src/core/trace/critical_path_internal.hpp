// The trace reader's hand-over to the critical path (internal to tprobe_core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/trace/critical_path.hpp"
#include "tprobe/core/trace/kernel_record.hpp"
#include "trace/trace_events_internal.hpp"

namespace tprobe::core::detail {

// The phase of a host event or device row, as the kernel table's phase split has it: inside an
// Optimizer.* range, inside a backward op (or on a thread that only runs backward work), else
// forward.
enum class CpPhase : uint8_t { kUnknown, kForward, kBackward, kOptimizer };

enum class CpHostKind : uint8_t {
  kOp,          // a cpu_op ("Operator" in older traces)
  kAnnotation,  // a user_annotation (record_function, ProfilerStep#N, Optimizer.step#...)
  kRuntime,     // a cuda_runtime / cuda_driver call
};

// One host interval on one thread, with its time as written (integer ns, end = ts + dur).
struct CpHostEvent {
  int64_t tid = 0;
  int64_t start_ns = 0, end_ns = 0;
  int64_t correlation = 0;  // kRuntime: the call's correlation (0 for the others)
  uint32_t name_id = 0;     // into CriticalPathInput::host_names
  CpHostKind kind = CpHostKind::kOp;
  CpPhase phase = CpPhase::kUnknown;
};

// One selected device row (kernel, memcpy or memset).
struct CpDeviceRow {
  int64_t start_ns = 0, end_ns = 0;
  int32_t device = 0;
  int64_t stream = 0;
  int64_t correlation = 0;
  int64_t launch = -1;   // index into CriticalPathInput::host of its runtime call, -1 without one
  uint32_t name_id = 0;  // into CriticalPathInput::row_names (demangled kernel names)
  ActivityKind kind = ActivityKind::kKernel;
  CpPhase phase = CpPhase::kUnknown;
};

struct CriticalPathInput {
  std::vector<CpHostEvent> host;  // every host interval of the trace, in file order
  std::vector<CpDeviceRow> rows;  // the table's selection, in file order
  std::vector<SyncEvent> syncs;   // every cuda_sync event, in file order
  const std::vector<std::string>* host_names = nullptr;
  const std::vector<std::string>* row_names = nullptr;
  // The selection's window: from the first selected ProfilerStep's start to the last one's end;
  // without steps (or with every step) the whole trace.
  int64_t window_start_ns = 0, window_end_ns = 0;
  std::vector<int64_t> steps;  // the selected ProfilerStep numbers (empty: none in the trace)
};

CriticalPath analyze_critical_path(const CriticalPathInput& in);

}  // namespace tprobe::core::detail
