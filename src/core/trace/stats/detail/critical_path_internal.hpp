// The trace reader's hand-over to the critical path (internal to tprobe_core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/trace/stats/critical_path.hpp"
#include "tprobe/core/trace/record/kernel_record.hpp"
#include "trace/record/detail/trace_events_internal.hpp"
#include "trace/stats/detail/trace_stats_internal.hpp"

namespace tprobe::core::detail {

// The phase of a host event or device row, as the kernel table's phase split has it: inside an
// Optimizer.* range, inside a backward op (or on a thread that only runs backward work), else
// forward. The reader gives each row its launch's; the pass finds each host event's.
enum class CpPhase : uint8_t { kUnknown, kForward, kBackward, kOptimizer };

enum class CpHostKind : uint8_t {
  kOp,          // a cpu_op ("Operator" in older traces)
  kAnnotation,  // a user_annotation (record_function, ProfilerStep#N, Optimizer.step#...)
  kRuntime,     // a cuda_runtime / cuda_driver call
};

// An Optimizer.* range (optimizer) or an autograd::engine::evaluate_function range: what gives a
// host event its phase.
struct CpRange {
  int64_t tid = 0;
  int64_t start_ns = 0, end_ns = 0;
  bool optimizer = false;
};

// A ProfilerStep's host range (the widest over the threads that carry it).
struct CpStep {
  int64_t step = 0;
  int64_t start_ns = 0, end_ns = 0;
};

// The events are read where the reader already keeps them, never copied: on the 181 MB trace a
// copy of its 320k host events cost about 5 % of the read, mostly in page faults
// (docs/benchmarks.md, "The critical path's read cost").
struct CriticalPathInput {
  // The host events: ops, then ranges, then calls make one index space (critical_path.cpp).
  const std::vector<StatOp>* ops = nullptr;         // cpu_ops (the launch statistics' copy)
  const std::vector<UserRange>* ranges = nullptr;   // user annotations, in file order
  const std::vector<RuntimeCall>* calls = nullptr;  // by (correlation, ts); dur_ns -1: no interval
  const std::vector<std::string>* host_names = nullptr;
  // The selected device rows (the launch statistics' copy: StatRow::launch indexes `calls`) and
  // each one's phase.
  const std::vector<StatRow>* rows = nullptr;
  std::vector<CpPhase> row_phase;
  const std::vector<std::string>* row_names = nullptr;
  std::vector<SyncEvent> syncs;  // every cuda_sync event, in file order
  // The selection's window: from the first selected ProfilerStep's start to the last one's end;
  // without steps (or with every step) the whole trace.
  int64_t window_start_ns = 0, window_end_ns = 0;
  // The ranges of the steps the window holds (every step present when the window is the whole
  // trace): the path's breakdown per step.
  std::vector<CpStep> step_ranges;
  // Autograd's worker threads (backward work, no ProfilerStep), ascending: the threads that hand
  // the step back to the thread that called backward().
  std::vector<int64_t> worker_tids;
  std::vector<CpRange> phase_ranges;  // the host events' phases (worker threads: backward)
};

CriticalPath analyze_critical_path(const CriticalPathInput& in);

}  // namespace tprobe::core::detail
