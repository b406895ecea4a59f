// The torch.profiler trace reader: device rows only, steps, phases, the key_averages() double
// count, health, gzip, and broken traces (each a clear tprobe::Error, never a crash).
#include "tprobe/core/trace/read/trace_reader.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/rng.hpp"
#include "support/gzip_text.hpp"

namespace tprobe::core {
namespace {

// A Kineto-shaped trace, written by hand: one forward mm, one backward mm on autograd's thread,
// one optimizer kernel, a memcpy, the ProfilerStep annotations on host and device, flows.
// Every device time below is an exact number of ns so the expectations are by hand.
std::string small_trace() {
  return R"J({
  "schemaVersion": 1,
  "deviceProperties": [
    {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109782016, "computeMajor": 9,
     "computeMinor": 0, "numSms": 132}
  ],
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1764576000000000000,
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 9, "tid": 1,
   "ts": 100.000, "dur": 900.000, "args": {"External id": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 1, "ts": 110.000,
   "dur": 20.000, "args": {"External id": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 1,
   "ts": 112.500, "dur": 3.000, "args": {"External id": 2, "cbid": 211, "correlation": 50}},
  {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "pid": 0,
   "tid": 7, "ts": 120.250, "dur": 10.125,
   "args": {"External id": 2, "device": 0, "stream": 7, "correlation": 50, "grid": [1, 2, 3],
            "block": [128, 1, 1], "registers per thread": 90, "shared memory": 1024}},
  {"ph": "s", "id": 50, "pid": 9, "tid": 1, "ts": 112.500, "cat": "ac2g", "name": "ac2g"},
  {"ph": "f", "id": 50, "pid": 0, "tid": 7, "ts": 120.250, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0",
   "pid": 9, "tid": 2, "ts": 200.000, "dur": 50.000, "args": {"External id": 3}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 2, "ts": 205.000,
   "dur": 20.000, "args": {"External id": 4}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 2,
   "ts": 206.000, "dur": 3.000, "args": {"External id": 4, "cbid": 211, "correlation": 51}},
  {"ph": "X", "cat": "kernel", "name": "fmha_cutlassB_bf16_aligned_64x64_k128_sm80", "pid": 0,
   "tid": 7, "ts": 230.000, "dur": 40.000,
   "args": {"External id": 4, "device": 0, "stream": 7, "correlation": 51}},
  {"ph": "X", "cat": "cpu_op", "name": "Optimizer.step#AdamW.step", "pid": 9, "tid": 1,
   "ts": 400.000, "dur": 100.000, "args": {"External id": 5}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 1,
   "ts": 410.000, "dur": 3.000, "args": {"External id": 5, "cbid": 211, "correlation": 52}},
  {"ph": "X", "cat": "kernel", "name": "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<int>(int)",
   "pid": 0, "tid": 8, "ts": 420.000, "dur": 5.000,
   "args": {"External id": 5, "device": 0, "stream": 8, "correlation": 52}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 8,
   "ts": 500.000, "dur": 2.000, "args": {"device": 0, "stream": 8, "correlation": 53, "bytes": 4096}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#4", "pid": 0, "tid": 7,
   "ts": 120.249, "dur": 400.000, "args": {"External id": 1}},
  {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 1100.000}
  ],
  "WARNING": ["CUPTI: some warning text"],
  "traceName": "test.json"
})J";
}

std::string gzip_bytes(const std::string& text) { return testing_support::gzip_text(text); }

std::string error_of(const std::string& bytes, const KernelTableOptions& o = {}) {
  try {
    read_trace_buffer(bytes, "t.json", o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TraceReader, DeviceRowsOnly) {
  const TraceResult r = read_trace_buffer(small_trace(), "t.json");
  // kernels 10.125 + 40 + 5 us, memcpy 2 us; not the cpu_op, runtime or annotation rows.
  EXPECT_EQ(r.table.totals.events, 4);
  EXPECT_EQ(r.table.totals.sum_ns, 10125 + 40000 + 5000 + 2000);
  EXPECT_EQ(r.table.totals.start_ns, 120250);
  EXPECT_EQ(r.table.totals.end_ns, 502000);
  EXPECT_EQ(r.summary.events, 16);
  EXPECT_EQ(r.summary.categories.at("kernel"), 3);
  EXPECT_EQ(r.summary.categories.at("gpu_memcpy"), 1);
}

TEST(TraceReader, MetadataDevicesAndSteps) {
  const TraceResult r = read_trace_buffer(small_trace(), "t.json");
  const TraceSummary& s = r.summary;
  EXPECT_EQ(s.base_time_ns, 1764576000000000000LL);
  EXPECT_EQ(s.schema_version, "1");
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.world_size, 2);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].name, "NVIDIA H200");
  EXPECT_EQ(s.devices[0].sm(), 90);
  EXPECT_EQ(s.devices[0].multiprocessors, 132);
  EXPECT_EQ(s.devices[0].total_memory_bytes, 150109782016LL);
  ASSERT_EQ(s.steps.size(), 1u);
  EXPECT_EQ(s.steps[0].step, 4);
  EXPECT_EQ(s.steps[0].start_ns, 100000);
  EXPECT_EQ(s.steps[0].end_ns, 1000000);
  ASSERT_EQ(s.health.messages.size(), 1u);
  EXPECT_EQ(s.health.messages[0], "WARNING: CUPTI: some warning text");
  // The memcpy at 500 us was launched by nobody the trace shows: it falls in step 4 by its own
  // start; all four rows are in step 4.
  ASSERT_EQ(r.table.steps.size(), 1u);
  EXPECT_EQ(r.table.steps[0].step, 4);
}

TEST(TraceReader, KeyAveragesStyleSumCountsEveryLinkedKernelTwice) {
  const TraceResult r = read_trace_buffer(small_trace(), "t.json");
  const DoubleCount& d = r.summary.double_count;
  EXPECT_EQ(d.device_rows_ns, r.table.totals.sum_ns);
  EXPECT_EQ(d.host_attributed_ns, 10125 + 40000 + 5000);  // the memcpy has no External id
  EXPECT_EQ(d.linked_rows, 3);
  EXPECT_EQ(d.unlinked_rows, 1);
  EXPECT_EQ(d.op_and_kernel_ns(), 2 * (10125 + 40000 + 5000) + 2000);
  EXPECT_EQ(d.annotation_ns, 400000);
  EXPECT_EQ(d.annotations, 1);
  EXPECT_EQ(d.key_averages_style_ns(), 2 * (10125 + 40000 + 5000) + 2000 + 400000);
  EXPECT_EQ(d.flows, 2);
}

TEST(TraceReader, ForwardBackwardOptimizerFromTheLaunchingThread) {
  const TraceResult r = read_trace_buffer(small_trace(), "t.json");
  std::map<std::string, int64_t> by;
  for (const PhaseRow& p : r.table.phases) by[p.phase] = p.total_ns;
  EXPECT_EQ(by["forward"], 10125);
  EXPECT_EQ(by["backward"], 40000);
  EXPECT_EQ(by["optimizer"], 5000);
  EXPECT_EQ(by[""], 2000);  // the memcpy: no launch in the trace
}

TEST(TraceReader, ArchitectureAgainstDeviceProperties) {
  const TraceResult r = read_trace_buffer(small_trace(), "t.json");
  EXPECT_EQ(r.table.architecture.device_sm, 90);
  EXPECT_EQ(r.table.architecture.older_kernels, 1);
  EXPECT_EQ(r.table.architecture.older_ns, 40000);
}

TEST(TraceReader, NamesDemangled) {
  std::string t = small_trace();
  const std::string from = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n";
  t.replace(t.find(from), from.size(), "_ZN2at6native18elementwise_kernelILi128ELi2EEEvi");
  const TraceResult r = read_trace_buffer(t, "t.json");
  bool found = false;
  for (const KernelRow& k : r.table.kernels) {
    found |= k.name == "void at::native::elementwise_kernel<128, 2>(int)";
  }
  EXPECT_TRUE(found);
}

TEST(TraceReader, GzipBufferAndFileGiveTheSameTable) {
  const std::string plain = small_trace();
  const std::string gz = gzip_bytes(plain);
  const TraceResult a = read_trace_buffer(plain, "a");
  const TraceResult b = read_trace_buffer(gz, "b");
  EXPECT_FALSE(a.summary.gzip);
  EXPECT_TRUE(b.summary.gzip);
  EXPECT_EQ(b.summary.uncompressed_bytes, static_cast<int64_t>(plain.size()));
  EXPECT_EQ(a.table.totals.sum_ns, b.table.totals.sum_ns);
  const std::string dir = testing_support::temp_dir();
  const std::string path = dir + "/t.json.gz";
  std::ofstream(path, std::ios::binary) << gz;
  const TraceResult c = read_trace_file(path);
  EXPECT_TRUE(c.summary.gzip);
  EXPECT_EQ(c.table.totals.sum_ns, a.table.totals.sum_ns);
  std::remove(path.c_str());
}

TEST(TraceReader, StepOptionsSelect) {
  KernelTableOptions o;
  o.steps = {4};
  EXPECT_EQ(read_trace_buffer(small_trace(), "t", o).table.totals.events, 4);
  o.steps = {5};
  EXPECT_THROW(read_trace_buffer(small_trace(), "t", o), UsageError);
}

TEST(TraceReader, OlderSpellingsAndIntegerTimes) {
  // PyTorch 1.x: "Kernel", "Runtime", "Operator"; integer microseconds; a bare event array.
  const std::string t = R"J([
    {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
     "args": {"External id": 7}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 11,
     "dur": 1, "args": {"correlation": 3, "external id": 7}},
    {"ph": "X", "cat": "Kernel", "name": "add_kernel", "pid": 0, "tid": "stream 7", "ts": 20,
     "dur": 3, "args": {"correlation": 3, "External id": 7, "device": 0, "stream": 7}},
    {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 30,
     "dur": 1, "args": {"device": 0, "stream": 7}}
  ])J";
  const TraceResult r = read_trace_buffer(t, "old.json");
EXPECT_EQ(r.table.totals.events, 2);
EXPECT_EQ(r.table.totals.sum_ns, 4000);
EXPECT_EQ(r.summary.double_count.host_attributed_ns, 3000);
}

TEST(TraceReader, FractionalNanosecondsRoundExactly) {
  // Kineto writes ts with three decimals; longer fractions round half up; the text is parsed,
  // not a double, so a large ts keeps its last digit.
  const std::string t = R"J({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 123456789012.3456,
     "dur": 1.0004}]})J";
  const TraceResult r = read_trace_buffer(t, "t");
  EXPECT_EQ(r.table.totals.start_ns, 123456789012346LL);
  EXPECT_EQ(r.table.totals.sum_ns, 1000);
}

// Any time int64 nanoseconds hold, with or without baseTimeNanoseconds: epoch microseconds with
// nanosecond decimals, integers, exponents, the int64 limits; one past them is refused by name.
std::string one_kernel(const std::string& ts, const std::string& dur, const std::string& top = "") {
  return R"({)" + top + R"("traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0,
    "tid": 7, "ts": )" + ts + R"(, "dur": )" + dur + "}]}";
}

TEST(TraceReader, AnyTimeInt64NanosecondsHold) {
  auto start = [](const std::string& t) { return read_trace_buffer(t, "t").table.totals.start_ns; };
  EXPECT_EQ(start(one_kernel("1712195495519689.047", "2.5")), 1712195495519689047LL);
  EXPECT_EQ(start(one_kernel("1712195495519689.047", "2.5", R"("baseTimeNanoseconds": 1712195000000000000, )")),
            1712195495519689047LL);
  EXPECT_EQ(read_trace_buffer(one_kernel("1712195495519689.047", "2.5"), "t").table.totals.sum_ns, 2500);
  EXPECT_EQ(start(one_kernel("1712195495519689", "1")), 1712195495519689000LL);
  EXPECT_EQ(start(one_kernel("1.712195495519689047e15", "1")), 1712195495519689047LL);
  EXPECT_EQ(start(one_kernel("17121954955196890.47e-1", "1")), 1712195495519689047LL);
  EXPECT_EQ(start(one_kernel("0.0000001e3", "1")), 0);
  EXPECT_EQ(start(one_kernel("0.0005", "1")), 1);  // half a nanosecond rounds up
  EXPECT_EQ(start(one_kernel("-0.0005", "1")), -1);
  EXPECT_EQ(start(one_kernel("9223372036854775.807", "0")), INT64_MAX);
  EXPECT_EQ(start(one_kernel("9223372036854775.8074", "0")), INT64_MAX);
  EXPECT_EQ(start(one_kernel("-9223372036854775.807", "0")), -INT64_MAX);
  for (const char* bad : {"9223372036854775.808", "9223372036854775.8075", "-9223372036854775.808",
                          "9223372036854776", "1e16"}) {
    EXPECT_NE(error_of(one_kernel(bad, "1")).find("that int64 nanoseconds can hold"),
              std::string::npos)
        << bad << ": " << error_of(one_kernel(bad, "1"));
  }
  EXPECT_EQ(start(one_kernel("1e-100000000", "1")), 0);
  // A start int64 holds whose end it does not, and rows further apart than int64 ns span.
  EXPECT_NE(error_of(one_kernel("9223372036854775.000", "1")).find("ends past what int64"),
            std::string::npos);
  const std::string apart = R"({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": -9000000000000000, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 9000000000000000, "dur": 1}]})";
  EXPECT_NE(error_of(apart).find("more than int64 nanoseconds hold"), std::string::npos)
      << error_of(apart);
  // A host op whose end passes int64 is held at the limit, not wrapped.
  const std::string host = R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 9223372036854775,
     "dur": 9223372036854775},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 9223372036854774, "dur": 1}]})";
  EXPECT_EQ(read_trace_buffer(host, "t").summary.health.out_of_range, 0);
}

// The launch-bound statistics on a trace worked by hand (times in us): two kernels and a memcpy
// launched from inside cpu_ops, one kernel without a launch; docs/kernels.md defines each figure.
std::string launch_trace(const std::string& extra_args = "", const std::string& launch_dur = "5") {
  return R"J({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
  {"ph": "X", "cat": "cpu_op", "name": "second", "pid": 1, "tid": 1, "ts": 200, "dur": 50},
  {"ph": "X", "cat": "user_annotation", "name": "not an op", "pid": 1, "tid": 1, "ts": 0, "dur": 900},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12,
   "dur": )J" + launch_dur + R"J(, "args": {"correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "A", "pid": 0, "tid": 7, "ts": 20, "dur": 10,
   "args": {"device": 0, "stream": 7, "correlation": 1)J" + extra_args + R"J(}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 40,
   "dur": 2, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "B", "pid": 0, "tid": 7, "ts": 45, "dur": 1,
   "args": {"device": 0, "stream": 7, "correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 210,
   "dur": 3, "args": {"correlation": 3}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 8,
   "ts": 220, "dur": 4, "args": {"device": 0, "stream": 8, "correlation": 3, "bytes": 4000}},
  {"ph": "X", "cat": "kernel", "name": "C", "pid": 0, "tid": 7, "ts": 300, "dur": 5,
   "args": {"device": 0, "stream": 7}}
  ]})J";
}

TEST(TraceReader, LaunchBoundStatisticsByHand) {
  const TraceResult r = read_trace_buffer(launch_trace(), "t");
  const TraceStats& st = r.summary.stats;
  // Gaps: 30..45 (B launched at 40: 10 host + 5 kernel wait), 46..220 (the memcpy launched at
  // 210: 164 + 10), 224..300 (C has no launch: 76). Their sum is the table's idle time.
  ASSERT_EQ(st.idle.size(), 1u);
  EXPECT_EQ(st.idle[0].idle_ns, r.table.totals.idle_ns);
  EXPECT_EQ(st.idle[0].idle_ns, 265000);
  EXPECT_EQ(st.idle[0].gaps, 3);
  EXPECT_EQ(st.idle[0].host_wait_ns, 174000);
  EXPECT_EQ(st.idle[0].kernel_wait_ns, 15000);
  EXPECT_EQ(st.idle[0].unlaunched_ns, 76000);
  EXPECT_EQ(st.idle[0].host_wait_gaps, 2);
  // Launches: kernels A (call 5, delay 8) and B (call 2, delay 5; runs 1 < 2); C has none.
  const LaunchStats& l = st.launch;
  EXPECT_EQ(l.kernels, 3);
  EXPECT_EQ(l.with_launch, 2);
  EXPECT_EQ(l.launch_call.count, 2);
  EXPECT_EQ(l.launch_call.sum_ns, 7000);
  EXPECT_EQ(l.launch_call.p50_ns, 2000);  // nearest rank ceil(0.5 * 2) = 1
  EXPECT_EQ(l.launch_call.p90_ns, 5000);
  EXPECT_EQ(l.launch_delay.sum_ns, 13000);
  EXPECT_EQ(l.launch_delay.min_ns, 5000);
  EXPECT_EQ(l.shorter_than_launch, 1);
  EXPECT_EQ(l.shorter_than_launch_ns, 1000);
  ASSERT_EQ(l.per_kernel.size(), 2u);
  EXPECT_EQ(l.per_kernel[0].name, "A");
  // Queues: stream 7 holds A over 12..30 and B over 40..46 (C, unlaunched, is left out).
  ASSERT_EQ(st.queues.size(), 2u);
  EXPECT_EQ(st.queues[0].stream, 7);
  EXPECT_EQ(st.queues[0].rows, 2);
  EXPECT_EQ(st.queues[0].unlaunched_rows, 1);
  EXPECT_EQ(st.queues[0].window_start_ns, 12000);
  EXPECT_EQ(st.queues[0].window_end_ns, 46000);
  EXPECT_EQ(st.queues[0].time_at_length_ns, (std::vector<int64_t>{10000, 24000}));
  EXPECT_EQ(st.queues[0].max_length, 1);
  EXPECT_NEAR(st.queues[0].mean_length, 24.0 / 34.0, 1e-12);
  // Copies: 4000 bytes in 4 us.
  ASSERT_EQ(st.copies.size(), 1u);
  EXPECT_EQ(st.copies[0].bytes, 4000);
  EXPECT_DOUBLE_EQ(st.copies[0].bytes_per_s, 1e9);
  // Host ops: outer and second are top-level, inner is not; the user annotation is no op.
  const HostOpCensus& h = st.host_ops;
  EXPECT_EQ(h.ops, 3);
  EXPECT_EQ(h.top_level_ops, 2);
  EXPECT_EQ(h.rows_in_op, 3);
  EXPECT_EQ(h.rows_outside_op, 1);
  std::map<std::string, HostOpRow> by;
  for (const HostOpRow& o : h.by_name) by[o.name] = o;
  EXPECT_EQ(by["outer"].device_rows, 2);
  EXPECT_EQ(by["outer"].device_ns, 11000);
  EXPECT_EQ(by["inner"].top_level_calls, 0);
  EXPECT_EQ(by["inner"].device_rows, 0);
  EXPECT_EQ(by["second"].device_rows, 1);
  EXPECT_EQ(by.count("not an op"), 0u);
}

// The fields the statistics read, broken: args.bytes must be a non-negative integer; a launch
// call's bad duration is counted and the launch kept without it.
TEST(TraceReader, LaunchBoundFieldsBroken) {
  for (const char* bad : {R"(, "bytes": -1)", R"(, "bytes": 1.5)", R"(, "bytes": "4096")",
                          R"(, "bytes": 1e3)", R"(, "bytes": 18446744073709551615)"}) {
    EXPECT_NE(error_of(launch_trace(bad)).find("args.bytes"), std::string::npos)
        << bad << ": " << error_of(launch_trace(bad));
  }
  // bytes on a kernel row is read and checked, but only copies count it: still one copy row.
  EXPECT_EQ(read_trace_buffer(launch_trace(R"(, "bytes": 0)"), "t").summary.stats.copies.size(),
            1u);
  for (const char* dur : {"-1", "100000000000"}) {
    const TraceResult r = read_trace_buffer(launch_trace("", dur), "t");
    EXPECT_EQ(r.summary.health.bad_launch_durations, 1) << dur;
    EXPECT_EQ(r.summary.stats.launch.with_launch, 2) << dur;
    EXPECT_EQ(r.summary.stats.launch.launch_duration_unknown, 1) << dur;
    EXPECT_EQ(r.summary.stats.launch.launch_call.count, 1) << dur;
  }
  EXPECT_NE(error_of(launch_trace("", "\"x\"")).find("traceEvents[4] field 'dur' is the string"),
            std::string::npos);
}

// A string where a trace has a number (issue 46: "ts": "12" was read as 12 µs) is one line naming
// the event and the field, for the times and for the ids a row is placed and linked by. The
// negative controls: the same values as numbers are read, and pid / tid may be strings (Chrome's
// "Spans", Kineto's "" on its window markers).
TEST(TraceReader, AStringWhereANumberBelongsIsRefused) {
  for (const char* quoted : {"\"12\"", "\"1712195495519689.047\"", "\"1.\"", "\"\"", "\"x\""}) {
    const std::string ts = error_of(one_kernel(quoted, "1"));
    EXPECT_NE(ts.find("t.json: traceEvents[0] field 'ts' is the string"), std::string::npos)
        << quoted << ": " << ts;
    EXPECT_EQ(ts.find('\n'), std::string::npos) << ts;
    EXPECT_NE(error_of(one_kernel("12", quoted)).find("traceEvents[0] field 'dur' is the string"),
              std::string::npos)
        << quoted;
  }
  EXPECT_EQ(error_of(one_kernel("12", "1")), "");
  for (const char* field : {"device", "stream"}) {
    const std::string args = std::string(", \"") + field + "\": \"0\"";
    EXPECT_NE(error_of(launch_trace(args))
                  .find(std::string("traceEvents[5] field 'args.") + field + "' is the string \"0\""),
              std::string::npos)
        << field << ": " << error_of(launch_trace(args));
    EXPECT_EQ(error_of(launch_trace(std::string(", \"") + field + "\": 0")), "") << field;
  }
  const std::string named = R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k",
    "pid": "GPU 0", "tid": "stream 7", "ts": 1, "dur": 1}]})";
  EXPECT_EQ(error_of(named), "");
  // A string correlation or External id links nothing, as documented: still read.
  EXPECT_EQ(error_of(launch_trace(R"(, "correlation": "1")")), "");
  EXPECT_EQ(error_of(launch_trace(R"(, "External id": "1")")), "");
}

// JSON ends where the document ends (issue 46, item 6): a NUL byte or a second document after it,
// plain or gzipped, read from a buffer or a file, is refused naming the byte; white space after
// the document is not (the negative control).
TEST(TraceReader, NothingButWhiteSpaceAfterTheDocument) {
  const std::string doc = one_kernel("1", "1");
  for (const std::string& tail : {std::string(1, '\0'), std::string("\0{}", 3), std::string(" {}"),
                                  std::string("\n") + doc, std::string("x")}) {
    const std::string e = error_of(doc + tail);
    EXPECT_NE(e.find("more data after the end of the JSON document"), std::string::npos)
        << testing::PrintToString(tail) << ": " << e;
    EXPECT_NE(error_of(gzip_bytes(doc + tail)).find("more data after the end"), std::string::npos);
    const std::string path = testing_support::temp_dir() + "/tail.json";
    std::ofstream(path, std::ios::binary) << doc + tail;
    try {
      read_trace_file(path);
      ADD_FAILURE() << "accepted a tail from a file";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("more data after the end"), std::string::npos);
    }
  }
  // A NUL inside the document, between tokens or in a string, is refused too.
  const std::string inside("{\0\"traceEvents\": []}", 19);
  EXPECT_NE(error_of(inside).find("byte 2"), std::string::npos) << error_of(inside);
  std::string in_name = doc;
  in_name.replace(in_name.find("\"k\""), 3, std::string("\"k\0\"", 4));
  EXPECT_NE(error_of(in_name).find("control character"), std::string::npos) << error_of(in_name);
  for (const char* ws : {"\n", "\r\n", " \t \n\n"}) {
    EXPECT_EQ(error_of(doc + ws), "") << ws;
    EXPECT_EQ(error_of(gzip_bytes(doc + ws)), "");
  }
}

TEST(TraceReader, HealthCounts) {
  const std::string t = R"J({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::x", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 10, "dur": 20},
    {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 25, "dur": 10},
    {"ph": "X", "cat": "kernel", "name": "z", "pid": 0, "tid": 7, "ts": 40, "dur": 0},
    {"ph": "X", "cat": "kernel", "name": "n", "pid": 0, "tid": 7, "ts": 50, "dur": -3},
    {"ph": "X", "cat": "kernel", "name": "far", "pid": 0, "tid": 8, "ts": 5000000, "dur": 1},
    {"ph": "B", "cat": "cpu_op", "name": "open", "pid": 1, "tid": 1, "ts": 60},
    {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 1000}
  ]})J";
  const TraceResult r = read_trace_buffer(t, "t");
  const TraceHealth& h = r.summary.health;
  EXPECT_EQ(h.zero_duration, 1);
  EXPECT_EQ(h.negative_duration, 1);
  EXPECT_EQ(h.stream_overlaps, 1);  // b starts at 25 before a ends at 30
  EXPECT_EQ(h.stream_overlap_ns, 5000);
  EXPECT_EQ(h.out_of_range, 1);  // 'far' is 5 s after the host events
  EXPECT_EQ(h.past_trace_end, 1);
  EXPECT_EQ(h.unmatched_begin, 1);
  EXPECT_EQ(r.table.totals.events, 4);  // the negative one is left out
}

TEST(TraceReader, BrokenTracesAreClearErrors) {
  const std::string good = small_trace();
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("this is not json").find("not valid JSON at byte"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, good.size() / 2)).find("truncated"), std::string::npos);
  EXPECT_NE(error_of(R"({"schemaVersion": 1})").find("no 'traceEvents'"), std::string::npos);
  EXPECT_NE(error_of(R"({"traceEvents": []})").find("no device activity"), std::string::npos);
  EXPECT_NE(error_of(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1}]})")
                .find("traceEvents[0] ('kernel' event) has no 'dur'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1}]})")
                .find("no 'name'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1,
                          "dur": 1e30}]})")
                .find("'dur'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1,
                          "dur": 100000000000}]})")
                .find("more than a day"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "x",
                          "dur": 1}]})")
                .find("field 'ts' is the string \"x\""),
            std::string::npos);
  EXPECT_NE(error_of(good + "garbage").find("not valid JSON"), std::string::npos);
  // Only host rows: an error, never a 0 ms table.
  EXPECT_NE(error_of(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
                          "ts": 1, "dur": 1}]})")
                .find("ProfilerActivity.CUDA"),
            std::string::npos);
  // Trace kinds tprobe does not tabulate are named for what they are (issue 35).
  EXPECT_NE(error_of(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
                          "ts": 1, "dur": 1}]})")
                .find("a CPU-only trace (1 cpu_op events, no CUDA runtime or device activity)"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"traceEvents": [{"ph": "X", "cat": "cuda_profiler_range",
                          "name": "aten::mm", "ts": 1, "dur": 1,
                          "args": {"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 12}},
                         {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]})")
                .find("a CUPTI range-profiler trace (1 cuda_profiler_range events"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"pid": 1, "time": "2026-12-03",
                         "nodes": [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]"}]})")
                .find("a PyTorch execution trace"),
            std::string::npos);
}

TEST(TraceReader, TruncatedGzipIsAnError) {
  const std::string gz = gzip_bytes(small_trace());
  const std::string cut = gz.substr(0, gz.size() / 2);
  EXPECT_NE(error_of(cut).find("truncated"), std::string::npos) << error_of(cut);
  const std::string dir = testing_support::temp_dir();
  const std::string path = dir + "/cut.json.gz";
  std::ofstream(path, std::ios::binary) << cut;
  try {
    read_trace_file(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(TraceReader, MissingFileAndDirectoryAreErrors) {
  EXPECT_THROW(read_trace_file("/nonexistent/t.json"), Error);
  EXPECT_THROW(read_trace_file(testing_support::temp_dir()), Error);
  EXPECT_THROW(read_trace_directory(testing_support::temp_dir()), Error);  // holds nothing
}

TEST(TraceReader, DirectoryOfRanksSortedByDistributedInfo) {
  const std::string dir = testing_support::temp_dir();
  std::string r0 = small_trace();
  const std::string key = R"("rank": 1)";
  r0.replace(r0.find(key), key.size(), R"("rank": 0)");
  std::ofstream(dir + "/b.pt.trace.json") << r0;
  std::ofstream(dir + "/a.pt.trace.json.gz", std::ios::binary) << gzip_bytes(small_trace());
  std::ofstream(dir + "/notes.txt") << "ignored";
  const std::vector<RankTrace> ranks = read_trace_directory(dir);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].rank, 0);
  EXPECT_NE(ranks[0].path.find("b.pt.trace.json"), std::string::npos);
  EXPECT_EQ(ranks[1].rank, 1);
}

// Two files claiming one rank are refused, one line naming both and the rank (issue 46: they were
// renumbered by file name without a word). The negative controls: distinct ranks are read as
// written, and files without distributedInfo are numbered by file name (docs/kernels.md).
TEST(TraceReader, DirectoryWithARankTwiceIsRefused) {
  auto with_rank = [](const std::string& rank) {
    std::string t = small_trace();
    const std::string key = R"("rank": 1)";
    t.replace(t.find(key), key.size(), "\"rank\": " + rank);
    return t;
  };
  const std::string dir = testing_support::temp_dir();
  std::ofstream(dir + "/a.json") << with_rank("0");
  std::ofstream(dir + "/b.json.gz", std::ios::binary) << gzip_bytes(with_rank("2"));
  std::ofstream(dir + "/c.json") << with_rank("0");
  try {
    read_trace_directory(dir);
    FAIL() << "a rank twice accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'" + dir + "/a.json' and '" + dir + "/c.json' both claim rank 0"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  std::ofstream(dir + "/c.json") << with_rank("1");
  const std::vector<RankTrace> ranks = read_trace_directory(dir);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[0].rank, 0);
  EXPECT_EQ(ranks[1].rank, 1);
  EXPECT_NE(ranks[1].path.find("c.json"), std::string::npos);
  EXPECT_EQ(ranks[2].rank, 2);
  // Without distributedInfo: the file-name order.
  const std::string plain = testing_support::temp_dir();
  std::string none = small_trace();
  const std::string info = R"("distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},)";
  none.erase(none.find(info), info.size());
  std::ofstream(plain + "/x.json") << none;
  std::ofstream(plain + "/y.json") << none;
  const std::vector<RankTrace> numbered = read_trace_directory(plain);
  ASSERT_EQ(numbered.size(), 2u);
  EXPECT_EQ(numbered[0].rank, 0);
  EXPECT_NE(numbered[1].path.find("y.json"), std::string::npos);
  EXPECT_EQ(numbered[1].rank, 1);
}

// Random byte damage: the reader either reads the result or throws tprobe::Error.
TEST(TraceReader, RandomCorruptionNeverCrashes) {
  const std::string good = small_trace();
  const std::string gz = gzip_bytes(good);
  Rng rng(20261201);
  for (int round = 0; round < 400; ++round) {
    std::string bytes = (round % 2) ? gz : good;
    const int flips = 1 + static_cast<int>(rng.uniform(8));
    for (int f = 0; f < flips; ++f) {
      const std::size_t at = rng.uniform(bytes.size());
      bytes[at] = static_cast<char>(rng.uniform(256));
    }
    if (round % 5 == 0) bytes.resize(rng.uniform(bytes.size()));
    try {
      read_trace_buffer(bytes, "fuzz");
    } catch (const Error&) {
      // expected for most damage
    }
  }
}

}  // namespace
}  // namespace tprobe::core
