// The critical path of a traced step: the chain of host and device work, linked by what the
// trace records of their dependencies (CPU op nesting and order, launch -> kernel, stream order,
// CUDA synchronisation), that sets the step's length. docs/kernels.md, "Critical path", defines
// the graph and every figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"

namespace tprobe::core {

class SectionBuilder;

// A stretch of the window as the path spends it, in integer nanoseconds. Every segment of the
// path is exactly one of the kinds below, so host_ns + device_ns + delay_ns is the stretch's
// length on the path.
struct PathShares {
  int64_t host_event_ns = 0;     // a host thread inside a recorded event (op, range, runtime call)
  int64_t runtime_ns = 0;        //   of which inside cuda_runtime / cuda_driver calls
  int64_t host_untraced_ns = 0;  // a host thread outside every recorded event, or handing over
  int64_t device_ns = 0;         // a device row running
  int64_t copy_ns = 0;           //   of which memcpy / memset rows
  int64_t launch_delay_ns = 0;   // launch call start -> the row's start
  int64_t queue_ns = 0;          // the previous row on the stream's end -> the row's start
  int64_t wait_ns = 0;           // a cross-stream wait's source row's end -> the row's start
  int64_t sync_ns = 0;           // the synchronised row's end -> the blocking call's end

  int64_t host_ns() const { return host_event_ns + host_untraced_ns; }
  int64_t delay_ns() const { return launch_delay_ns + queue_ns + wait_ns + sync_ns; }
  int64_t total_ns() const { return host_ns() + device_ns + delay_ns(); }
  // "host" (launch-bound: the host's own work), "device" or "delay" (launch and queue latency,
  // waits): the largest of the three, ties in that order; "none" for an empty stretch.
  const char* bound() const;
  void add(const PathShares& o);
};

// One ProfilerStep's stretch of the window.
struct PathStep {
  int64_t step = 0;
  int64_t start_ns = 0, end_ns = 0;
  PathShares shares;
};

// One phase's segments (the phase of the event each segment belongs to).
struct PathPhase {
  std::string phase;  // forward, backward, optimizer, unknown
  PathShares shares;
};

// A host event name by the host time it holds on the path (its self time there).
struct PathHostOp {
  std::string name;
  std::string kind;    // op, annotation, runtime
  int64_t ns = 0;
  int64_t events = 0;  // distinct events holding time on the path
};

// A kernel family (memcpy / memset rows by their name) by the device time it runs on the path.
struct PathKernel {
  std::string family;
  KernelCategory category = KernelCategory::kOther;
  int64_t ns = 0;
  int64_t rows = 0;  // distinct rows holding time on the path
};

// Steps of the walk by the kind of edge taken (each counted once, zero-length ones too).
struct PathEdges {
  int64_t thread = 0;       // the previous node on the same host thread
  int64_t join = 0;         // a host event's end <- another thread's work that ended inside it
  int64_t fork = 0;         // a thread's top-level event's start <- another thread's last node
  int64_t row = 0;          // a row's end <- its start
  int64_t launch = 0;       // a row's start <- its launch call's start
  int64_t stream = 0;       // a row's start <- the previous row's end on its stream
  int64_t stream_wait = 0;  // a row's start <- the end of the row a cudaStreamWaitEvent named
  int64_t sync = 0;         // a blocking call's end <- the end of the row it waited for
};

// What the graph was built from, and what could not be linked.
struct PathGraph {
  int64_t host_events = 0;
  int64_t threads = 0;
  int64_t device_rows = 0;
  int64_t streams = 0;
  int64_t rows_with_launch = 0;
  int64_t syncs = 0;               // cuda_sync events
  int64_t stream_syncs = 0, context_syncs = 0, event_syncs = 0, stream_wait_events = 0;
  int64_t other_syncs = 0;         // a cuda_sync name it does not know (not used)
  int64_t event_queries = 0;       // "Event Sync" of a cudaEventQuery: it does not wait
  int64_t sync_edges = 0;          // blocking calls linked to the row they waited for
  int64_t wait_edges = 0;          // cudaStreamWaitEvent linked source row -> waiting row
  int64_t inferred_syncs = 0;      // of sync_edges: blocking calls with no cuda_sync event
  int64_t record_by_thread = 0;    // event waits whose cudaEventRecord was found by thread
  int64_t unresolved_syncs = 0;    // no call, no record, or nothing launched before them
  int64_t skewed_edges = 0;        // at nodes on the path: a predecessor later than the node
};

struct CriticalPath {
  bool available = false;  // false: nothing to build a path from (why_not says what)
  std::string why_not;

  int64_t window_start_ns = 0, window_end_ns = 0;
  int64_t first_node_ns = 0, last_node_ns = 0;  // where the walk stopped and where it began
  int64_t length_ns = 0;        // the path's segments, added up (inside the window)
  int64_t outside_path_ns = 0;  // window - length: before the walk's stop or after its start
  int64_t path_nodes = 0;
  PathShares total;
  PathEdges edges;
  std::vector<PathStep> steps;  // ascending step
  PathShares outside_steps;     // segments in no ProfilerStep
  std::vector<PathPhase> phases;        // forward, backward, optimizer, unknown (all four)
  std::vector<PathHostOp> host_ops;     // by ns descending, then name
  std::vector<PathKernel> kernels;      // by ns descending, then family
  PathGraph graph;
};

// results.trace.critical_path, and its reader (one tprobe::Error line naming `where` and the
// field when the object is damaged; the sums written beside their parts are checked).
Json to_json(const CriticalPath& p);
CriticalPath critical_path_from_json(const Json& j, const std::string& where);
// Its tables for the text output (empty when not available: the why is one line instead).
// `top` rows at most in the host-op and kernel tables (<= 0: all).
std::vector<Table> critical_path_tables(const CriticalPath& p, int top = 25);
// The report's figure (host / device / delay on the path, whole, per step and per phase) and
// its host-event and kernel tables, from the evidence under `base`.
void critical_path_figures(SectionBuilder& c, const std::string& base);

}  // namespace tprobe::core
