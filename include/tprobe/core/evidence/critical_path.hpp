// The critical path as the kernels command's evidence holds it (results.trace.critical_path,
// docs/kernels.md "Critical path"), each field declared once (core/evidence/fields.hpp): the sums
// and ratios written beside their parts are derived (a file whose sums disagree was edited), the
// path's figures exist only where it was computed (only_if), and the rules between fields are
// evidence_check. core/trace/stats's critical_path computes it and draws it.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"
#include "tprobe/core/evidence/kernel_table.hpp"

namespace tprobe::core {

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
  double share_ratio = 0;  // ns over the path's length: set_path_shares()
};

// A kernel family (memcpy / memset rows by their name) by the device time it runs on the path.
struct PathKernel {
  std::string family;
  KernelCategory category = KernelCategory::kOther;
  int64_t ns = 0;
  int64_t rows = 0;  // distinct rows holding time on the path
  double share_ratio = 0;  // ns over the path's length: set_path_shares()
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

// Sets each host op's and kernel's share_ratio from the path's length (the analysis does, and the
// reader checks what was written against it).
void set_path_shares(CriticalPath& p);

void evidence_check(const PathShares& s, const std::string& where);
void evidence_check(const PathStep& s, const std::string& where);
void evidence_check(const CriticalPath& p, const std::string& where);

inline auto evidence_fields(const PathShares*) {
  using evidence::derived;
  using evidence::field;
  using S = PathShares;
  using evidence::ratio;
  return std::make_tuple(
      derived<S>("host_ns", +[](const S& s) { return Json(s.host_ns()); }, "integer", "ns",
                 "host_event_ns + host_untraced_ns"),
      field("host_event_ns", &S::host_event_ns, "ns", "a host thread in a recorded event")
          .at_least(0),
      field("runtime_ns", &S::runtime_ns, "ns", "of which runtime / driver calls").at_least(0),
      field("host_untraced_ns", &S::host_untraced_ns, "ns", "outside every recorded event")
          .at_least(0),
      field("device_ns", &S::device_ns, "ns", "a device row running").at_least(0),
      field("copy_ns", &S::copy_ns, "ns", "of which memcpy / memset").at_least(0),
      derived<S>("delay_ns", +[](const S& s) { return Json(s.delay_ns()); }, "integer", "ns",
                 "launch_delay_ns + queue_ns + wait_ns + sync_ns"),
      field("launch_delay_ns", &S::launch_delay_ns, "ns", "launch call start to row start")
          .at_least(0),
      field("queue_ns", &S::queue_ns, "ns", "the stream's previous row end to row start")
          .at_least(0),
      field("wait_ns", &S::wait_ns, "ns", "cross-stream waits").at_least(0),
      field("sync_ns", &S::sync_ns, "ns", "row end to the blocking call's end").at_least(0),
      derived<S>("host_ratio",
                 +[](const S& s) { return Json(ratio(s.host_ns(), s.total_ns())); },
                 "number", "", "of the stretch"),
      derived<S>("device_ratio",
                 +[](const S& s) { return Json(ratio(s.device_ns, s.total_ns())); },
                 "number", "", "of the stretch"),
      derived<S>("delay_ratio",
                 +[](const S& s) { return Json(ratio(s.delay_ns(), s.total_ns())); },
                 "number", "", "of the stretch"),
      derived<S>("bound", +[](const S& s) { return Json(s.bound()); }, "string", "",
                 "host, device, delay (the largest) or none"));
}
inline auto evidence_fields(const PathStep*) {
  using evidence::derived;
  using evidence::field;
  using evidence::flat;
  using P = PathStep;
  return std::make_tuple(
      field("step", &P::step, "", "ProfilerStep#N's N"),
      field("start_ns", &P::start_ns, "ns", "its start"),
      field("end_ns", &P::end_ns, "ns", "its end"),
      derived<P>("duration_ns", +[](const P& p) { return Json(p.end_ns - p.start_ns); }, "integer",
                 "ns", "end_ns - start_ns"),
      flat(&P::shares));
}
inline auto evidence_fields(const PathPhase*) {
  using evidence::field;
  using evidence::flat;
  return std::make_tuple(
      field("phase", &PathPhase::phase, "", "forward, backward, optimizer, unknown"),
      flat(&PathPhase::shares));
}
constexpr auto evidence_fields(const PathHostOp*) {
  using evidence::field;
  using H = PathHostOp;
  return std::make_tuple(field("name", &H::name, "", "the host event's name"),
                         field("kind", &H::kind, "", "op, annotation or runtime"),
                         field("ns", &H::ns, "ns", "its self time on the path").at_least(0),
                         field("events", &H::events, "", "distinct events holding it").at_least(0),
                         field("share_ratio", &H::share_ratio, "", "of length_ns"));
}
inline auto evidence_fields(const PathKernel*) {
  using evidence::field;
  using K = PathKernel;
  return std::make_tuple(
      field("family", &K::family, "", "the kernel family (a copy's name as written)"),
      category_field<K, &K::category>(),
      field("ns", &K::ns, "ns", "its device time on the path").at_least(0),
      field("rows", &K::rows, "", "distinct rows holding it").at_least(0),
      field("share_ratio", &K::share_ratio, "", "of length_ns"));
}
constexpr auto evidence_fields(const PathEdges*) {
  using evidence::field;
  using E = PathEdges;
  return std::make_tuple(
      field("thread", &E::thread, "", "the previous node on the thread").at_least(0),
      field("join", &E::join, "", "another thread's work ending inside an event").at_least(0),
      field("fork", &E::fork, "", "another thread's last node before a top-level event")
          .at_least(0),
      field("row", &E::row, "", "a row's end from its start").at_least(0),
      field("launch", &E::launch, "", "a row's start from its launch call").at_least(0),
      field("stream", &E::stream, "", "the previous row on the stream").at_least(0),
      field("stream_wait", &E::stream_wait, "", "a cudaStreamWaitEvent's source row").at_least(0),
      field("sync", &E::sync, "", "a blocking call from the row it waited for").at_least(0));
}
constexpr auto evidence_fields(const PathGraph*) {
  using evidence::field;
  using G = PathGraph;
  return std::make_tuple(
      field("host_events", &G::host_events, "", "host events in the graph").at_least(0),
      field("threads", &G::threads, "", "host threads").at_least(0),
      field("device_rows", &G::device_rows, "", "device rows").at_least(0),
      field("streams", &G::streams, "", "streams").at_least(0),
      field("rows_with_launch", &G::rows_with_launch, "", "rows linked to a launch").at_least(0),
      field("syncs", &G::syncs, "", "cuda_sync events").at_least(0),
      field("stream_syncs", &G::stream_syncs, "", "of them stream syncs").at_least(0),
      field("context_syncs", &G::context_syncs, "", "context syncs").at_least(0),
      field("event_syncs", &G::event_syncs, "", "event syncs").at_least(0),
      field("stream_wait_events", &G::stream_wait_events, "", "stream waits").at_least(0),
      field("other_syncs", &G::other_syncs, "", "names it does not know").at_least(0),
      field("event_queries", &G::event_queries, "", "cudaEventQuery (no wait)").at_least(0),
      field("sync_edges", &G::sync_edges, "", "blocking calls linked to their row").at_least(0),
      field("wait_edges", &G::wait_edges, "", "stream waits linked to their row").at_least(0),
      field("inferred_syncs", &G::inferred_syncs, "", "of sync_edges: no cuda_sync event")
          .at_least(0),
      field("record_by_thread", &G::record_by_thread, "", "event records found by thread")
          .at_least(0),
      field("unresolved_syncs", &G::unresolved_syncs, "", "left unlinked").at_least(0),
      field("skewed_edges", &G::skewed_edges, "", "a predecessor later than its node")
          .at_least(0));
}
inline auto evidence_fields(const CriticalPath*) {
  using evidence::derived;
  using evidence::field;
  using evidence::flat;
  using evidence::only_if;
  using P = CriticalPath;
  return std::make_tuple(
      field("available", &P::available, "", "a path was computed"),
      field("why_not", &P::why_not, "", "why not; null where it was").or_null(),
      field("window_start_ns", &P::window_start_ns, "ns", "the selection's window"),
      field("window_end_ns", &P::window_end_ns, "ns", "its end"),
      derived<P>("window_ns", +[](const P& p) { return Json(p.window_end_ns - p.window_start_ns); },
                 "integer", "ns", "its length"),
      only_if<P>(
          +[](const P& p) { return p.available; },
          field("first_node_ns", &P::first_node_ns, "ns", "where the walk stopped"),
          field("last_node_ns", &P::last_node_ns, "ns", "where it began"),
          field("length_ns", &P::length_ns, "ns", "the path's segments, added up").at_least(0),
          field("outside_path_ns", &P::outside_path_ns, "ns", "window_ns - length_ns"),
          field("path_nodes", &P::path_nodes, "", "nodes on the path").at_least(0),
          flat(&P::total),
          field("edges_on_path", &P::edges, "", "the walk's steps by edge kind"),
          field("by_step", &P::steps, "", "per ProfilerStep, ascending"),
          field("outside_steps", &P::outside_steps, "", "segments in no step"),
          field("by_phase", &P::phases, "", "forward, backward, optimizer, unknown"),
          field("host_ops", &P::host_ops, "", "host events by ns descending"),
          field("kernels", &P::kernels, "", "kernel families by ns descending")),
      field("graph", &P::graph, "", "what the graph was built from"));
}

}  // namespace tprobe::core
