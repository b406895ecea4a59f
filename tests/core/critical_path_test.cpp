// The critical path of a trace (critical_path.hpp; docs/kernels.md, "Critical path"): hand-made
// Kineto traces whose path is worked out by hand below — a launch-bound chain, a device-bound
// chain behind a stream sync, a side-stream copy a cudaStreamWaitEvent makes the compute stream
// wait for (with the record's correlation and stream, and found by thread as torch 2.11 writes
// it), a stream and a context sync on two streams, nesting and untraced gaps, autograd's worker
// thread joined and forked — and the invariants every path keeps, on those and on broken input
// (a sync naming no call, clock skew, rows overlapping on a stream, partly overlapping ops).
#include "tprobe/core/trace/stats/critical_path.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"

namespace tprobe::core {
namespace {

constexpr int64_t kUs = 1000;  // the traces are written in µs, the figures are ns

struct Trace {
  Json events = Json::array();

  void x(const std::string& cat, const std::string& name, int64_t tid, int64_t ts, int64_t dur,
         Json args = Json::object()) {
    Json e = {{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 1},
              {"tid", tid}, {"ts", ts},   {"dur", dur}};
    if (!args.empty()) e["args"] = args;
    events.push_back(e);
  }
  void step(int64_t n, int64_t ts, int64_t end, int64_t tid = 1) {
    x("user_annotation", "ProfilerStep#" + std::to_string(n), tid, ts, end - ts);
  }
  void op(const std::string& name, int64_t ts, int64_t end, int64_t tid = 1) {
    x("cpu_op", name, tid, ts, end - ts);
  }
  void range(const std::string& name, int64_t ts, int64_t end, int64_t tid = 1) {
    x("user_annotation", name, tid, ts, end - ts);
  }
  void call(const std::string& name, int64_t corr, int64_t ts, int64_t end, int64_t tid = 1) {
    x("cuda_runtime", name, tid, ts, end - ts, {{"correlation", corr}});
  }
  void row(const std::string& cat, const std::string& name, int64_t corr, int64_t stream,
           int64_t ts, int64_t end) {
    events.push_back({{"ph", "X"},
                      {"cat", cat},
                      {"name", name},
                      {"pid", 0},
                      {"tid", stream},
                      {"ts", ts},
                      {"dur", end - ts},
                      {"args", {{"correlation", corr}, {"device", 0}, {"stream", stream}}}});
  }
  void kernel(const std::string& name, int64_t corr, int64_t stream, int64_t ts, int64_t end) {
    row("kernel", name, corr, stream, ts, end);
  }
  // A cuda_sync event as torch.profiler writes it with enable_cuda_sync_events.
  void sync(const std::string& name, int64_t corr, int64_t stream, int64_t ts, int64_t end,
            int64_t record_corr = -1, int64_t wait_stream = -1) {
    Json args = {{"cuda_sync_kind", name}, {"stream", stream},   {"correlation", corr},
                 {"device", 0},            {"context", 1},       {"wait_on_stream", wait_stream},
                 {"wait_on_cuda_event_record_corr_id", record_corr}};
    events.push_back({{"ph", "X"}, {"cat", "cuda_sync"}, {"name", name}, {"pid", 0},
                      {"tid", stream < 0 ? 1 : stream}, {"ts", ts}, {"dur", end - ts},
                      {"args", args}});
  }
  std::string text() const { return Json{{"traceEvents", events}}.dump(); }
};

CriticalPath path_of(const Trace& t, const KernelTableOptions& options = {}) {
  return read_trace_buffer(t.text(), "t.json", options).summary.critical_path;
}

const PathHostOp* host_op(const CriticalPath& p, const std::string& name) {
  for (const PathHostOp& o : p.host_ops)
    if (o.name == name) return &o;
  return nullptr;
}
int64_t op_ns(const CriticalPath& p, const std::string& name) {
  const PathHostOp* o = host_op(p, name);
  return o ? o->ns : 0;
}
const PathShares& phase(const CriticalPath& p, const std::string& name) {
  for (const PathPhase& ph : p.phases)
    if (ph.phase == name) return ph.shares;
  static const PathShares none;
  return none;
}

// What every path keeps, whatever the trace: its segments add up, by kind, by phase, by step,
// by host event and by kernel, and the evidence says the same.
void expect_invariants(const CriticalPath& p) {
  ASSERT_TRUE(p.available) << p.why_not;
  const PathShares& s = p.total;
  EXPECT_EQ(p.length_ns, s.host_ns() + s.device_ns + s.delay_ns());
  EXPECT_EQ(p.length_ns + p.outside_path_ns, p.window_end_ns - p.window_start_ns);
  EXPECT_GE(p.outside_path_ns, 0);
  EXPECT_LE(s.runtime_ns, s.host_event_ns);
  EXPECT_LE(s.copy_ns, s.device_ns);
  PathShares phases, steps = p.outside_steps;
  for (const PathPhase& ph : p.phases) phases.add(ph.shares);
  for (const PathStep& st : p.steps) steps.add(st.shares);
  for (const PathShares* x : {&phases, &steps}) {
    EXPECT_EQ(x->host_event_ns, s.host_event_ns);
    EXPECT_EQ(x->runtime_ns, s.runtime_ns);
    EXPECT_EQ(x->host_untraced_ns, s.host_untraced_ns);
    EXPECT_EQ(x->device_ns, s.device_ns);
    EXPECT_EQ(x->copy_ns, s.copy_ns);
    EXPECT_EQ(x->delay_ns(), s.delay_ns());
  }
  int64_t ops = 0, runtime = 0, kernels = 0;
  for (const PathHostOp& o : p.host_ops) {
    ops += o.ns;
    if (o.kind == "runtime") runtime += o.ns;
    EXPECT_GT(o.events, 0) << o.name;
  }
  for (const PathKernel& k : p.kernels) kernels += k.ns;
  EXPECT_EQ(ops, s.host_event_ns);
  EXPECT_EQ(runtime, s.runtime_ns);
  EXPECT_EQ(kernels, s.device_ns);
  const PathEdges& e = p.edges;
  EXPECT_EQ(p.path_nodes,
            1 + e.thread + e.join + e.fork + e.row + e.launch + e.stream + e.stream_wait + e.sync);
  const Json j = Json::parse(to_json(p).dump());
  EXPECT_EQ(j["length_ns"].get<int64_t>(), p.length_ns);
  const double sum = j["host_ratio"].get<double>() + j["device_ratio"].get<double>() +
                     j["delay_ratio"].get<double>();
  EXPECT_NEAR(sum, 1.0, 1e-12);
  for (const char* key : {"host_ratio", "device_ratio", "delay_ratio"}) {
    EXPECT_GE(j[key].get<double>(), 0.0);
    EXPECT_LE(j[key].get<double>(), 1.0);
  }
  EXPECT_FALSE(critical_path_tables(p).empty());
  // The evidence reads back into the same path, and writes the same bytes again.
  EXPECT_EQ(to_json(critical_path_from_json(j, "k.json results.trace.critical_path")), j);
}

// One thread launches two short kernels and waits for them at the end; the kernels are done long
// before the host needs them, so every nanosecond of the step is the host's: launch-bound.
//   ProfilerStep#1 [0, 100]: aten::mm [10, 30] (launch [15, 20] -> k1 [22, 25]),
//   aten::add [40, 60] (launch [45, 50] -> k2 [50, 54]), cudaStreamSynchronize [80, 90].
TEST(CriticalPath, LaunchBoundChainIsAllHost) {
  Trace t;
  t.step(1, 0, 100);
  t.op("aten::mm", 10, 30);
  t.call("cudaLaunchKernel", 1, 15, 20);
  t.op("aten::add", 40, 60);
  t.call("cudaLaunchKernel", 2, 45, 50);
  t.call("cudaStreamSynchronize", 3, 80, 90);
  t.kernel("k1", 1, 7, 22, 25);
  t.kernel("k2", 2, 7, 50, 54);
  const CriticalPath p = path_of(t);
  expect_invariants(p);
  EXPECT_EQ(p.window_start_ns, 0);
  EXPECT_EQ(p.window_end_ns, 100 * kUs);
  EXPECT_EQ(p.length_ns, 100 * kUs);
  EXPECT_EQ(p.total.host_event_ns, 100 * kUs);
  EXPECT_EQ(p.total.host_untraced_ns, 0);
  EXPECT_EQ(p.total.runtime_ns, 20 * kUs);  // the sync call (k2 ended before it began) + 2 launches
  EXPECT_EQ(p.total.device_ns, 0);
  EXPECT_EQ(p.total.delay_ns(), 0);
  EXPECT_STREQ(p.total.bound(), "host");
  // Self time on the path: the step's gaps between its children, each op's own time.
  EXPECT_EQ(op_ns(p, "ProfilerStep#1"), 50 * kUs);
  EXPECT_EQ(op_ns(p, "aten::mm"), 15 * kUs);
  EXPECT_EQ(op_ns(p, "aten::add"), 15 * kUs);
  EXPECT_EQ(op_ns(p, "cudaLaunchKernel"), 10 * kUs);
  EXPECT_EQ(host_op(p, "cudaLaunchKernel")->events, 2);
  EXPECT_EQ(op_ns(p, "cudaStreamSynchronize"), 10 * kUs);
  EXPECT_EQ(p.edges.thread, 11);
  EXPECT_EQ(p.path_nodes, 12);
  // The blocking call had no cuda_sync event: its stream is the thread's last launch's.
  EXPECT_EQ(p.graph.inferred_syncs, 1);
  EXPECT_EQ(p.graph.sync_edges, 1);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].shares.host_ns(), 100 * kUs);
  EXPECT_EQ(phase(p, "forward").host_ns(), 100 * kUs);
}

// The same host work with long kernels: the host waits in cudaStreamSynchronize (a cuda_sync
// event names its stream) for k2, which queued behind k1, which started 10 µs after its launch.
//   end(step) 200 <- end(sync) 190 [step 10] <- end(k2) 180 [sync 10] <- start(k2) 102 [device 78]
//   <- end(k1) 100 [queue 2] <- start(k1) 25 [device 75] <- launch start 15 [launch delay 10]
//   <- start(mm) 10 [mm 5] <- start(step) 0 [step 10].
TEST(CriticalPath, DeviceBoundChainGoesThroughTheSyncAndTheStream) {
  Trace t;
  t.step(1, 0, 200);
  t.op("aten::mm", 10, 30);
  t.call("cudaLaunchKernel", 1, 15, 20);
  t.op("aten::add", 40, 60);
  t.call("cudaLaunchKernel", 2, 45, 50);
  t.call("cudaStreamSynchronize", 3, 70, 190);
  t.sync("Stream Sync", 3, 7, 71, 189);
  t.kernel("ampere_sgemm_128x64_tn", 1, 7, 25, 100);
  t.kernel("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor>()", 2, 7,
           102, 180);
  const CriticalPath p = path_of(t);
  expect_invariants(p);
  EXPECT_EQ(p.length_ns, 200 * kUs);
  EXPECT_EQ(p.total.host_event_ns, 25 * kUs);
  EXPECT_EQ(p.total.device_ns, 153 * kUs);
  EXPECT_EQ(p.total.launch_delay_ns, 10 * kUs);
  EXPECT_EQ(p.total.queue_ns, 2 * kUs);
  EXPECT_EQ(p.total.sync_ns, 10 * kUs);
  EXPECT_EQ(p.total.wait_ns, 0);
  EXPECT_STREQ(p.total.bound(), "device");
  EXPECT_EQ(op_ns(p, "ProfilerStep#1"), 20 * kUs);
  EXPECT_EQ(op_ns(p, "aten::mm"), 5 * kUs);
  EXPECT_EQ(op_ns(p, "aten::add"), 0);  // launched ahead: off the path
  EXPECT_EQ(p.edges.thread, 3);
  EXPECT_EQ(p.edges.sync, 1);
  EXPECT_EQ(p.edges.row, 2);
  EXPECT_EQ(p.edges.stream, 1);
  EXPECT_EQ(p.edges.launch, 1);
  EXPECT_EQ(p.path_nodes, 9);
  EXPECT_EQ(p.graph.stream_syncs, 1);
  EXPECT_EQ(p.graph.inferred_syncs, 0);
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].family, "at::native::vectorized_elementwise_kernel");
  EXPECT_EQ(p.kernels[0].ns, 78 * kUs);
  EXPECT_EQ(p.kernels[1].family, "ampere_sgemm_128x64_tn");
  EXPECT_EQ(p.kernels[1].category, KernelCategory::kDenseGemm);
  EXPECT_EQ(p.kernels[1].ns, 75 * kUs);
  EXPECT_EQ(p.kernels[1].rows, 1);
}

// A host-to-device copy on a side stream (13) that the compute stream (7) waits for through
// cudaEventRecord + cudaStreamWaitEvent; the host then waits for the compute kernel.
//   end(step) 300 <- end(sync) 210 [step 90] <- end(kernel) 200 [sync 10] <- start(kernel) 125
//   [device 75] <- end(copy) 120 [wait 5] <- start(copy) 20 [device 100, a copy] <- the copy's
//   call start 10 [launch delay 10] <- start(step) 0 [step 10].
Trace stream_wait_trace(bool wait_event, bool record_args) {
  Trace t;
  t.step(1, 0, 300);
  t.call("cudaMemcpyAsync", 1, 10, 15);
  t.call("cudaEventRecord", 2, 16, 18);
  t.call("cudaStreamWaitEvent", 3, 20, 22);
  if (wait_event) {
    // torch 2.11 writes -1 for the record's correlation and stream; older traces name them.
    t.sync("Stream Wait Event", 3, 7, 20, 21, record_args ? 2 : -1, record_args ? 13 : -1);
  }
  t.call("cudaLaunchKernel", 4, 30, 35);
  t.call("cudaStreamSynchronize", 5, 40, 210);
  t.sync("Stream Sync", 5, 7, 41, 209);
  t.row("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 1, 13, 20, 120);
  t.kernel("k", 4, 7, 125, 200);
  return t;
}

TEST(CriticalPath, StreamWaitEventMakesTheComputeStreamWaitForTheSideStreamCopy) {
  for (const bool record_args : {true, false}) {
    SCOPED_TRACE(record_args ? "record named by the event" : "record found by thread");
    const CriticalPath p = path_of(stream_wait_trace(true, record_args));
    expect_invariants(p);
    EXPECT_EQ(p.length_ns, 300 * kUs);
    EXPECT_EQ(p.total.host_event_ns, 100 * kUs);
    EXPECT_EQ(p.total.device_ns, 175 * kUs);
    EXPECT_EQ(p.total.copy_ns, 100 * kUs);
    EXPECT_EQ(p.total.wait_ns, 5 * kUs);
    EXPECT_EQ(p.total.launch_delay_ns, 10 * kUs);
    EXPECT_EQ(p.total.sync_ns, 10 * kUs);
    EXPECT_EQ(p.edges.stream_wait, 1);
    EXPECT_EQ(p.graph.wait_edges, 1);
    EXPECT_EQ(p.graph.stream_wait_events, 1);
    EXPECT_EQ(p.graph.record_by_thread, record_args ? 0 : 1);
    ASSERT_EQ(p.kernels.size(), 2u);
    EXPECT_EQ(p.kernels[0].family, "Memcpy HtoD (Pinned -> Device)");
    EXPECT_EQ(p.kernels[0].category, KernelCategory::kMemcpyMemset);
  }
  // Without the wait event nothing links the streams: the kernel waits for its own launch, and
  // the host's time before it is on the path instead of the copy.
  const CriticalPath p = path_of(stream_wait_trace(false, false));
  expect_invariants(p);
  EXPECT_EQ(p.edges.stream_wait, 0);
  EXPECT_EQ(p.total.copy_ns, 0);
  EXPECT_EQ(p.total.launch_delay_ns, 95 * kUs);  // call at 30, kernel at 125
  EXPECT_EQ(p.total.device_ns, 75 * kUs);
  EXPECT_EQ(p.total.host_ns(), 120 * kUs);
}

// Two streams: a stream sync waits for its own stream only, a context sync for every stream.
//   k_a (stream 7) [20, 100], k_b (stream 13) [30, 150], k_c (stream 7) [130, 140];
//   cudaStreamSynchronize(7) [20, 110], cudaDeviceSynchronize [125, 160].
Trace two_stream_trace(int64_t step_end) {
  Trace t;
  t.step(1, 0, step_end);
  t.call("cudaLaunchKernel", 1, 10, 12);
  t.call("cudaLaunchKernel", 2, 14, 16);
  t.call("cudaStreamSynchronize", 3, 20, 110);
  t.sync("Stream Sync", 3, 7, 21, 109);
  if (step_end > 160) {
    t.call("cudaLaunchKernel", 4, 120, 122);
    t.call("cudaDeviceSynchronize", 5, 125, 160);
    t.sync("Context Sync", 5, -1, 126, 159);
    t.kernel("k_c", 4, 7, 130, 140);
  }
  t.kernel("k_a", 1, 7, 20, 100);
  t.kernel("k_b", 2, 13, 30, 150);
  return t;
}

TEST(CriticalPath, ContextSyncWaitsForEveryStream) {
  // end(step) 400 <- end(device sync) 160 [step 240] <- end(k_b) 150 [sync 10] <- start(k_b) 30
  // [device 120] <- launch b 14 [launch 16] <- end(launch a) 12 [step 2] <- start 10 [runtime 2]
  // <- start(step) 0 [step 10].
  const CriticalPath p = path_of(two_stream_trace(400));
  expect_invariants(p);
  EXPECT_EQ(p.total.host_event_ns, 254 * kUs);
  EXPECT_EQ(p.total.runtime_ns, 2 * kUs);
  EXPECT_EQ(p.total.device_ns, 120 * kUs);
  EXPECT_EQ(p.total.launch_delay_ns, 16 * kUs);
  EXPECT_EQ(p.total.sync_ns, 10 * kUs);
  EXPECT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].family, "k_b");
  EXPECT_EQ(p.graph.context_syncs, 1);
  EXPECT_EQ(p.graph.stream_syncs, 1);
  EXPECT_EQ(p.graph.sync_edges, 2);
}

TEST(CriticalPath, StreamSyncWaitsForItsOwnStreamOnly) {
  // Step 1 only (k_b ends past it): end(step) 115 <- end(stream sync) 110 [step 5] <- end(k_a)
  // 100 [sync 10] <- start(k_a) 20 [device 80] <- launch a 10 [launch 10] <- start(step) 0.
  KernelTableOptions one;
  one.steps = {1};
  Trace t = two_stream_trace(115);
  t.step(2, 200, 300);  // a second step, so that step 1 alone is a selection
  t.call("cudaLaunchKernel", 9, 210, 212);
  t.kernel("k_late", 9, 7, 220, 230);
  const CriticalPath p = path_of(t, one);
  expect_invariants(p);
  EXPECT_EQ(p.window_start_ns, 0);
  EXPECT_EQ(p.window_end_ns, 115 * kUs);
  EXPECT_EQ(p.total.device_ns, 80 * kUs);
  EXPECT_EQ(p.total.sync_ns, 10 * kUs);
  EXPECT_EQ(p.total.launch_delay_ns, 10 * kUs);
  EXPECT_EQ(p.total.host_event_ns, 15 * kUs);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].family, "k_a");
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].step, 1);
}

// Nesting and gaps on one thread without a step range: the gap between two top-level ops is
// untraced host time, and an op's self time is the time between its children.
//   aten::linear [0, 10] { aten::t [1, 2] }, gap [10, 20], aten::mm [20, 30] { launch [22, 24] }
//   -> k [25, 27].
TEST(CriticalPath, NestingGivesSelfTimeAndGapsAreUntraced) {
  Trace t;
  t.op("aten::linear", 0, 10);
  t.op("aten::t", 1, 2);
  t.op("aten::mm", 20, 30);
  t.call("cudaLaunchKernel", 1, 22, 24);
  t.kernel("k", 1, 7, 25, 27);
  const CriticalPath p = path_of(t);
  expect_invariants(p);
  EXPECT_EQ(p.length_ns, 30 * kUs);
  EXPECT_EQ(op_ns(p, "aten::linear"), 9 * kUs);
  EXPECT_EQ(op_ns(p, "aten::t"), 1 * kUs);
  EXPECT_EQ(op_ns(p, "aten::mm"), 8 * kUs);
  EXPECT_EQ(op_ns(p, "cudaLaunchKernel"), 2 * kUs);
  EXPECT_EQ(p.total.host_untraced_ns, 10 * kUs);
  EXPECT_EQ(p.total.device_ns, 0);
  EXPECT_TRUE(p.steps.empty());
  EXPECT_EQ(p.outside_steps.total_ns(), 30 * kUs);
}

// Autograd's worker thread (2: backward ranges, no ProfilerStep) runs the backward while the
// main thread (1) waits in a gap of its step; the main thread's next node joins the worker's last
// event, and the worker's first event forks from the main thread's last node.
TEST(CriticalPath, WorkerThreadIsJoinedAndForked) {
  Trace t;
  t.step(1, 0, 100);
  t.op("aten::ones_like", 5, 10);
  t.range("Optimizer.step#SGD.step", 70, 90);
  t.call("cudaLaunchKernel", 2, 75, 77);
  t.op("autograd::engine::evaluate_function: MulBackward0", 15, 40, 2);
  t.op("MulBackward0", 16, 39, 2);
  t.call("cudaLaunchKernel", 1, 20, 22, 2);
  t.op("autograd::engine::evaluate_function: AddBackward0", 45, 60, 2);
  t.kernel("k1", 1, 7, 25, 30);
  t.kernel("k2", 2, 7, 80, 82);
  const CriticalPath p = path_of(t);
  expect_invariants(p);
  EXPECT_EQ(p.edges.join, 1);
  EXPECT_EQ(p.edges.fork, 1);
  EXPECT_EQ(p.total.host_event_ns, 90 * kUs);
  EXPECT_EQ(p.total.host_untraced_ns, 10 * kUs);  // the fork [10, 15], no event on 2 [40, 45]
  EXPECT_EQ(op_ns(p, "ProfilerStep#1"), 25 * kUs);  // [0, 5], [60, 70] after the join, [90, 100]
  EXPECT_EQ(op_ns(p, "MulBackward0"), 21 * kUs);
  EXPECT_EQ(op_ns(p, "autograd::engine::evaluate_function: AddBackward0"), 15 * kUs);
  EXPECT_EQ(op_ns(p, "Optimizer.step#SGD.step"), 18 * kUs);
  EXPECT_EQ(phase(p, "backward").total_ns(), 50 * kUs);
  EXPECT_EQ(phase(p, "optimizer").total_ns(), 20 * kUs);
  EXPECT_EQ(phase(p, "forward").total_ns(), 30 * kUs);
  EXPECT_STREQ(phase(p, "backward").bound(), "host");
}

// A blocking call on the worker thread waits for its row as on any other thread.
//   end(step) 100 <- end(evaluate_function) 40 [the join; step 60] <- end(sync) 38 [2]
//   <- end(k) 35 [sync 3] <- start(k) 25 [device 10] <- launch 20 [launch 5] <- start(eval) 15
//   [5] <- fork from end(ones_like) 10 [untraced 5] <- start(ones_like) 5 [5] <- start(step) 0.
TEST(CriticalPath, SyncOnTheWorkerThreadWaitsForItsRow) {
  Trace t;
  t.step(1, 0, 100);
  t.op("aten::ones_like", 5, 10);
  t.op("autograd::engine::evaluate_function: MulBackward0", 15, 40, 2);
  t.call("cudaLaunchKernel", 1, 20, 22, 2);
  t.call("cudaStreamSynchronize", 2, 30, 38, 2);
  t.sync("Stream Sync", 2, 7, 30, 38);
  t.kernel("k", 1, 7, 25, 35);
  const CriticalPath p = path_of(t);
  expect_invariants(p);
  EXPECT_EQ(p.edges.sync, 1);
  EXPECT_EQ(p.edges.join, 1);
  EXPECT_EQ(p.edges.fork, 1);
  EXPECT_EQ(p.total.device_ns, 10 * kUs);
  EXPECT_EQ(p.total.sync_ns, 3 * kUs);
  EXPECT_EQ(p.total.launch_delay_ns, 5 * kUs);
  EXPECT_EQ(p.total.host_untraced_ns, 5 * kUs);
  EXPECT_EQ(op_ns(p, "ProfilerStep#1"), 65 * kUs);
  EXPECT_EQ(phase(p, "backward").total_ns(), 30 * kUs);
}

// A kernel with no launch call in the trace links nothing: the path says why instead.
TEST(CriticalPath, NoLaunchesSaysWhy) {
  Trace t;
  t.op("aten::mm", 0, 10);
  t.kernel("k", 1, 7, 2, 5);
  const CriticalPath p = path_of(t);
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.why_not.find("launch"), std::string::npos) << p.why_not;
  const Json j = to_json(p);
  EXPECT_FALSE(j["available"].get<bool>());
  EXPECT_EQ(j["why_not"], p.why_not);
  ASSERT_EQ(critical_path_tables(p).size(), 1u);
  EXPECT_NE(critical_path_tables(p)[0].render().find("not computed"), std::string::npos);
}

// Broken input is counted, never fatal: a sync naming no call, a kernel starting before its
// launch call (clock skew), a sync whose row ends after the call, rows overlapping on a stream,
// partly overlapping ops, a cuda_sync event with a negative duration, an unknown sync name.
TEST(CriticalPath, BrokenInputIsCountedAndThePathStillAddsUp) {
  Trace t;
  t.step(1, 0, 100);
  t.op("aten::a", 10, 30);
  t.op("aten::b", 20, 40);  // partly overlaps aten::a
  t.call("cudaLaunchKernel", 1, 12, 14);
  t.call("cudaLaunchKernel", 2, 50, 52);
  t.call("cudaStreamSynchronize", 3, 60, 70);
  t.sync("Stream Sync", 3, 7, 60, 70);
  t.sync("Stream Sync", 99, 7, 61, 62);   // names no call
  t.sync("Mystery Sync", 3, 7, 61, 62);   // a name it does not know
  t.x("cuda_sync", "Stream Sync", 7, 63, -5, {{"correlation", 3}, {"stream", 7}});
  t.kernel("k1", 1, 7, 11, 45);  // starts before its launch call (12)
  t.kernel("k2", 2, 7, 44, 80);  // overlaps k1 on stream 7, ends after the sync call (70)
  const CriticalPath p = path_of(t);
  expect_invariants(p);
  EXPECT_EQ(p.graph.unresolved_syncs, 1);
  EXPECT_EQ(p.graph.other_syncs, 1);
  EXPECT_EQ(p.graph.syncs, 3);  // the negative-duration one is left out by the reader
  EXPECT_GE(p.graph.skewed_edges, 1);  // the sync's row ends after the call
  EXPECT_EQ(p.length_ns, 100 * kUs);
}

// A cuda_sync event the reader cannot use, one fault at a time, on a launch-bound step whose
// stream sync waits for a kernel (the sync's 10 µs return is on the path when it is linked):
// without a usable duration it is left out and counted in health.skipped_events, and the blocking
// call's target is inferred from its name; a correlation that is not an integer names no call
// (unresolved, the call inferred); a wait field that is not an id is read as absent; a device
// outside 0..2^31-1, a stream or a time that is not a number are one-line errors.
TEST(CriticalPath, BrokenCudaSyncEventsAreLeftOutCountedOrRefused) {
  auto trace_with = [](const std::function<void(Json&)>& damage) {
    Trace t;
    t.step(1, 0, 300);
    t.call("cudaLaunchKernel", 4, 30, 35);
    t.call("cudaStreamSynchronize", 5, 40, 210);
    t.kernel("k", 4, 7, 125, 200);
    t.sync("Stream Sync", 5, 7, 41, 209);
    damage(t.events.back());
    return t;
  };
  struct Case {
    const char* what;
    std::function<void(Json&)> damage;
    int64_t syncs, skipped, unresolved, inferred;
  };
  const std::vector<Case> kept = {
      {"intact", [](Json&) {}, 1, 0, 0, 0},
      {"no dur", [](Json& e) { e.erase("dur"); }, 0, 1, 0, 1},
      {"negative dur", [](Json& e) { e["dur"] = -3; }, 0, 1, 0, 1},
      {"dur over a day", [](Json& e) { e["dur"] = int64_t{100'000'000'000}; }, 0, 1, 0, 1},
      {"correlation a string", [](Json& e) { e["args"]["correlation"] = "5"; }, 1, 0, 1, 1},
      {"correlation 5.5", [](Json& e) { e["args"]["correlation"] = 5.5; }, 1, 0, 1, 1},
      {"args an array", [](Json& e) { e["args"] = Json::array({1, 2}); }, 1, 0, 1, 1},
      {"wait_on_stream 1.5", [](Json& e) { e["args"]["wait_on_stream"] = 1.5; }, 1, 0, 0, 0},
      {"record correlation 2^70",
       [](Json& e) { e["args"]["wait_on_cuda_event_record_corr_id"] = 1180591620717411303424.0; },
       1, 0, 0, 0},
  };
  for (const Case& c : kept) {
    SCOPED_TRACE(c.what);
    const TraceResult r = read_trace_buffer(trace_with(c.damage).text(), "t.json");
    const CriticalPath& p = r.summary.critical_path;
    expect_invariants(p);
    EXPECT_EQ(p.graph.syncs, c.syncs);
    EXPECT_EQ(r.summary.health.skipped_events, c.skipped);
    EXPECT_EQ(p.graph.unresolved_syncs, c.unresolved);
    EXPECT_EQ(p.graph.inferred_syncs, c.inferred);
    EXPECT_EQ(p.graph.sync_edges, 1);  // linked by the event or by the call's name
    EXPECT_EQ(p.total.sync_ns, 10 * kUs);
  }
  const std::vector<std::pair<std::function<void(Json&)>, std::string>> refused = {
      {[](Json& e) { e["args"]["device"] = int64_t{1} << 40; },
       "traceEvents[4] ('cuda_sync' event 'Stream Sync') is on device 1099511627776"},
      {[](Json& e) { e["args"]["stream"] = 7.5; },
       "traceEvents[4] field 'args.stream' has value 7.5"},
      {[](Json& e) { e["ts"] = "x"; }, "traceEvents[4] field 'ts' is the string \"x\""},
      {[](Json& e) { e["ts"] = "12"; }, "traceEvents[4] field 'ts' is the string \"12\""},
  };
  for (const auto& [damage, says] : refused) {
    try {
      read_trace_buffer(trace_with(damage).text(), "t.json");
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("t.json: " + says), std::string::npos) << e.what();
    }
  }
}

// The evidence keys docs/kernels.md lists.
TEST(CriticalPath, EvidenceKeys) {
  const CriticalPath p = path_of(stream_wait_trace(true, true));
  const Json j = to_json(p);
  for (const char* key :
       {"available", "why_not", "window_start_ns", "window_end_ns", "window_ns", "first_node_ns",
        "last_node_ns", "length_ns", "outside_path_ns", "path_nodes", "host_ns", "host_event_ns",
        "runtime_ns", "host_untraced_ns", "device_ns", "copy_ns", "delay_ns", "launch_delay_ns",
        "queue_ns", "wait_ns", "sync_ns", "host_ratio", "device_ratio", "delay_ratio", "bound",
        "edges_on_path", "by_step", "outside_steps", "by_phase", "host_ops", "kernels", "graph"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["by_step"][0]["duration_ns"].get<int64_t>(), 300 * kUs);
  EXPECT_EQ(j["by_phase"].size(), 4u);
  EXPECT_EQ(j["bound"], "device");
  EXPECT_EQ(j["kernels"][0]["category"], "memcpy_memset");
}

// The reader refuses a damaged object with one line naming the field: wrong types, a negative
// time, sums that disagree with their parts, an unknown kernel category; an unavailable path
// reads back with its reason.
TEST(CriticalPath, EvidenceReaderRefusesDamagedObjects) {
  const Json good = to_json(path_of(stream_wait_trace(true, true)));
  auto refused = [&](const std::function<void(Json&)>& damage, const std::string& says) {
    Json j = good;
    damage(j);
    try {
      critical_path_from_json(j, "k.json results.trace.critical_path");
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused([](Json& j) { j["length_ns"] = "12"; }, "length_ns");
  refused([](Json& j) { j["device_ns"] = -1; }, "device_ns");
  refused([](Json& j) { j["host_ns"] = j["host_ns"].get<int64_t>() + 1; }, "field 'host_ns'");
  refused([](Json& j) { j["by_step"][0]["delay_ns"] = -5; }, "by_step[0]: field 'delay_ns'");
  refused([](Json& j) { j["bound"] = "host"; }, "field 'bound'");
  refused([](Json& j) { j["copy_ns"] = j["device_ns"].get<int64_t>() + 1; }, "copy_ns");
  refused([](Json& j) { j["kernels"][0]["share_ratio"] = 0.5; }, "kernels[0]: share_ratio");
  refused([](Json& j) { j["why_not"] = "a reason"; }, "why_not is not null");
  refused([](Json& j) { j["length_ns"] = j["length_ns"].get<int64_t>() + 1; },
          "length_ns is not the sum");
  refused([](Json& j) { j["by_step"][0].erase("queue_ns"); }, "by_step[0]");
  refused([](Json& j) { j["kernels"][0]["category"] = "warp_magic"; }, "warp_magic");
  refused([](Json& j) { j["graph"]["syncs"] = 1.5; }, "graph");
  refused([](Json& j) { j = Json::array(); }, "must be an object");

  EXPECT_EQ(to_json(critical_path_from_json(good, "k.json")), good);

  CriticalPath none;
  none.why_not = "no device rows";
  const Json nj = to_json(none);
  EXPECT_FALSE(nj.contains("length_ns"));  // the path's figures only where it was computed
  const CriticalPath back = critical_path_from_json(nj, "k.json");
  EXPECT_FALSE(back.available);
  EXPECT_EQ(back.why_not, "no device rows");
  Json no_reason = nj;
  no_reason["why_not"] = nullptr;
  EXPECT_THROW(critical_path_from_json(no_reason, "k.json"), Error);

  // docs/kernels.md lists every field as core/evidence/critical_path.hpp declares it.
  std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/kernels.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  for (const evidence::FieldDoc& d : evidence::field_docs<CriticalPath>("trace.critical_path."))
    EXPECT_NE(doc.find(evidence::field_rows({d})), std::string::npos) << d.path;
}

}  // namespace
}  // namespace tprobe::core
