// A trace's memory (trace_memory.hpp): hand-made traces of a few [memory] events whose every
// figure is worked out by hand below — the timeline, the peak, the frees of memory allocated
// before the trace, what was resident, the bytes alive at the peak and where each was allocated
// (forward embedding, the backward of a layer's projection through its fwdbwd flow, a thread
// with no op: untagged); the negative controls (no module events: every alive byte untagged; no
// flows: the backward allocation unlinked); the downsampled timeline; broken events.
#include "tprobe/core/trace/stats/trace_memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <set>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/evidence/fields.hpp"
#include "tprobe/core/trace/stats/trace_memory_report.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"

namespace tprobe::core {
namespace {

constexpr int kMain = 1, kAutograd = 2, kOther = 3;

struct Trace {
  Json events = Json::array();

  void x(const char* cat, int tid, const std::string& name, double ts, double end) {
    events.push_back({{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 1}, {"tid", tid},
                      {"ts", ts}, {"dur", end - ts}});
  }
  void flow(bool start, int64_t id, int tid, double ts) {
    Json f = {{"ph", start ? "s" : "f"}, {"id", id}, {"pid", 1}, {"tid", tid}, {"ts", ts},
              {"cat", "fwdbwd"}, {"name", "fwdbwd"}};
    if (!start) f["bp"] = "e";
    events.push_back(f);
  }
  // One launch and its kernel: every trace needs a device row.
  void kernel(int tid, double ts) {
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"},
                      {"pid", 1}, {"tid", tid}, {"ts", ts}, {"dur", 0.5},
                      {"args", {{"correlation", 1}}}});
    events.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"pid", 0}, {"tid", 7},
                      {"ts", ts + 1}, {"dur", 1},
                      {"args", {{"correlation", 1}, {"device", 0}, {"stream", 7}}}});
  }
  void mem(int tid, double ts, uint64_t addr, int64_t bytes, int64_t allocated, int64_t reserved,
           int type = 1, int id = 0) {
    events.push_back({{"ph", "i"}, {"cat", "cpu_instant_event"}, {"s", "t"}, {"name", "[memory]"},
                      {"pid", 1}, {"tid", tid}, {"ts", ts},
                      {"args", {{"Total Reserved", reserved}, {"Total Allocated", allocated},
                                {"Bytes", bytes}, {"Device Id", id}, {"Device Type", type},
                                {"Addr", addr}, {"finished", false}, {"Ev Idx", 0}}}});
  }
  std::string text() const { return Json{{"traceEvents", events}}.dump(); }
};

// The hand-made step. CUDA device 0, 1,000 bytes allocated before the trace:
//   ts  thread    event                    Total Allocated  reserved
//   10  main      alloc A 0x100 +100       1,100            2,048
//   20  main      alloc B 0x200 +50        1,150            2,048   (in the embedding)
//   25  main      free  P 0x900 -30        1,120            2,048   (allocated before the trace)
//   30  main      free  A -100             1,020            2,048
//   35  other     alloc D 0x400 +5         1,025            2,048   (a thread with no op)
//   40  autograd  alloc C 0x300 +200       1,225 = peak     4,096   (in MmBackward0, flow 7)
//   50  main      free  B -50              1,175            4,096
//   60  main      free  Q 0x901 -20        1,155            4,096   (allocated before the trace)
//   70  autograd  free  C -200               955            4,096
// and on the CPU one allocation of 8 bytes at ts 16 in the embedding. Written out of time order
// (C before A's free), as Kineto's threads interleave.
Trace make(bool modules, bool flows) {
  Trace t;
  t.x("user_annotation", kMain, "ProfilerStep#5", 0, 80);
  if (modules) {
    t.x("python_function", kMain, "nn.Module: Gemma4ForCausalLM_0", 1, 79);
    t.x("python_function", kMain, "nn.Module: Gemma4TextModel_0", 5, 60);
    t.x("python_function", kMain, "nn.Module: Gemma4TextScaledWordEmbedding_0", 15, 22);
    t.x("python_function", kMain, "nn.Module: Gemma4TextDecoderLayer_0", 31, 39);
    t.x("python_function", kMain, "nn.Module: Gemma4TextAttention_0", 32, 38);
    t.x("python_function", kMain, "nn.Module: Linear_0", 33, 37);
  }
  t.x("cpu_op", kMain, "aten::embedding", 19, 21);
  t.kernel(kMain, 19.5);
  t.x("cpu_op", kMain, "aten::mm", 34, 36);
  if (flows) t.flow(true, 7, kMain, 34);
  t.x("cpu_op", kAutograd, "autograd::engine::evaluate_function: MmBackward0", 38, 45);
  t.x("cpu_op", kAutograd, "MmBackward0", 39, 44);
  if (flows) t.flow(false, 7, kAutograd, 39);
  t.mem(kMain, 10, 0x100, 100, 1100, 2048);
  t.mem(kMain, 20, 0x200, 50, 1150, 2048);
  t.mem(kMain, 16, 0x10, 8, 8, 0, 0, -1);  // the CPU
  t.mem(kMain, 25, 0x900, -30, 1120, 2048);
  t.mem(kAutograd, 40, 0x300, 200, 1225, 4096);
  t.mem(kMain, 30, 0x100, -100, 1020, 2048);
  t.mem(kOther, 35, 0x400, 5, 1025, 2048);
  t.mem(kMain, 50, 0x200, -50, 1175, 4096);
  t.mem(kMain, 60, 0x901, -20, 1155, 4096);
  t.mem(kAutograd, 70, 0x300, -200, 955, 4096);
  return t;
}

TraceMemory read(const Trace& t, const TracePartsOptions& parts = {}) {
  return read_trace_buffer(t.text(), "t.json", {}, parts).summary.memory;
}

std::map<std::string, int64_t> cells(const MemoryDevice& d) {
  std::map<std::string, int64_t> out;
  for (const MemoryPartRow& r : d.by_phase_part)
    out[r.phase + "/" + r.layer_kind + "/" + r.part] += r.bytes;
  return out;
}

TEST(TraceMemory, HandWorkedTimelinePeakResidentAndAliveBytes) {
  const TraceMemory m = read(make(true, true));
  EXPECT_EQ(m.events, 10);
  EXPECT_EQ(m.skipped_events, 0);
  ASSERT_EQ(m.devices.size(), 2u);
  const MemoryDevice& d = m.devices[0];  // the accelerator first
  EXPECT_EQ(d.label, "cuda:0");
  EXPECT_EQ(d.events, 9);
  EXPECT_EQ(d.allocations, 4);
  EXPECT_EQ(d.frees, 5);
  EXPECT_EQ(d.allocated_bytes_total, 355);
  EXPECT_EQ(d.freed_bytes_total, 400);
  EXPECT_EQ(d.bytes_sum, -45);
  EXPECT_EQ(d.first.ts_ns, 10000);
  EXPECT_EQ(d.first.allocated_bytes, 1100);
  EXPECT_EQ(d.first.reserved_bytes, 2048);
  EXPECT_EQ(d.last.ts_ns, 70000);
  EXPECT_EQ(d.last.allocated_bytes, 955);
  EXPECT_EQ(d.peak.ts_ns, 40000);
  EXPECT_EQ(d.peak.allocated_bytes, 1225);
  EXPECT_EQ(d.peak.reserved_bytes, 4096);
  EXPECT_EQ(d.peak_index, 5);
  EXPECT_EQ(d.peak_step, 5);
  EXPECT_EQ(d.peak_reserved.reserved_bytes, 4096);
  EXPECT_EQ(d.peak_reserved.ts_ns, 40000);
  EXPECT_EQ(d.unmatched_frees, 2);  // P and Q
  EXPECT_EQ(d.unmatched_free_bytes, 50);
  EXPECT_EQ(d.total_mismatches, 0);
  EXPECT_EQ(d.duplicate_allocations, 0);
  EXPECT_EQ(d.never_freed_allocations, 1);  // D
  EXPECT_EQ(d.never_freed_bytes, 5);
  EXPECT_EQ(d.resident_before_trace_bytes, 1000);
  EXPECT_EQ(d.pre_trace_freed_before_peak_bytes, 30);  // P; Q is freed after the peak
  EXPECT_EQ(d.resident_at_peak_bytes, 970);
  EXPECT_EQ(d.alive_at_peak_allocations, 3);  // B, D, C (A was freed at 30)
  EXPECT_EQ(d.alive_at_peak_bytes, 255);
  EXPECT_EQ(d.unexplained_at_peak_bytes, 0);  // 970 + 255 = 1,225
  // Where each alive allocation was made.
  EXPECT_TRUE(d.attributed);
  const std::map<std::string, int64_t> want = {{"forward/-/embedding", 50},
                                               {"backward/-/attention_proj", 200},
                                               {"untagged/-/untagged", 5}};
  EXPECT_EQ(cells(d), want);
  EXPECT_EQ(d.untagged_bytes, 5);
  EXPECT_EQ(d.untagged_no_module_bytes, 5);
  EXPECT_EQ(d.untagged_unlinked_bytes, 0);
  EXPECT_EQ(d.untagged_no_module_events_bytes, 0);
  ASSERT_EQ(d.by_layer.size(), 1u);
  EXPECT_EQ(d.by_layer[0].layer, 0);
  EXPECT_EQ(d.by_layer[0].bytes, 200);
  EXPECT_EQ(d.by_layer[0].bytes_by_phase.at("backward"), 200);
  // Every event is a timeline point (fewer than 400).
  ASSERT_EQ(d.timeline.size(), 9u);
  EXPECT_EQ(d.timeline[5].ts_ns, 40000);
  EXPECT_EQ(d.timeline[5].allocated_bytes, 1225);
  const MemoryDevice& cpu = m.devices[1];
  EXPECT_EQ(cpu.label, "cpu");
  EXPECT_EQ(cpu.device_id, -1);
  EXPECT_EQ(cpu.peak.allocated_bytes, 8);
  EXPECT_EQ(cpu.resident_before_trace_bytes, 0);
  EXPECT_EQ(cpu.alive_at_peak_bytes, 8);
  EXPECT_EQ(cells(cpu), (std::map<std::string, int64_t>{{"forward/-/embedding", 8}}));
}

TEST(TraceMemory, LayerKindsComeFromTheConfig) {
  TracePartsOptions parts;
  parts.layer_types = {LayerType::kSliding};
  parts.model = "test";
  const TraceMemory m = read(make(true, true), parts);
  EXPECT_EQ(cells(m.devices[0]).at("backward/sliding/attention_proj"), 200);
  EXPECT_EQ(m.devices[0].by_layer.at(0).layer_kind, "sliding");
}

// Negative control: the same events with no module events — nothing to place them with. The
// figures stay; every alive byte is untagged, none is guessed.
TEST(TraceMemory, WithoutModuleEventsEveryAliveByteIsUntagged) {
  const TraceMemory m = read(make(false, false));
  const MemoryDevice& d = m.devices.at(0);
  EXPECT_EQ(d.peak.allocated_bytes, 1225);
  EXPECT_EQ(d.alive_at_peak_bytes, 255);
  EXPECT_FALSE(d.attributed);
  EXPECT_EQ(d.untagged_bytes, 255);
  EXPECT_EQ(d.untagged_allocations, 3);
  EXPECT_EQ(d.untagged_no_module_events_bytes, 255);
  EXPECT_EQ(cells(d), (std::map<std::string, int64_t>{{"untagged/-/untagged", 255}}));
  EXPECT_TRUE(d.by_layer.empty());
  EXPECT_NE(m.not_attributed_why.find("no module events"), std::string::npos);
  const Json j = to_json(m);
  EXPECT_EQ(j["devices"][0]["alive_at_peak"]["untagged_share_ratio"], 1.0);
  EXPECT_EQ(j["devices"][0]["alive_at_peak"]["attributed"], false);
  // Turned off: the same, saying so.
  TracePartsOptions off;
  off.attribute = false;
  const TraceMemory o = read(make(true, true), off);
  EXPECT_EQ(o.devices.at(0).untagged_no_module_events_bytes, 255);
  EXPECT_NE(o.not_attributed_why.find("--parts off"), std::string::npos);
}

// Negative control: modules but no fwdbwd flows — the backward allocation is unlinked.
TEST(TraceMemory, WithoutFlowsTheBackwardAllocationIsUnlinked) {
  const MemoryDevice d = read(make(true, false)).devices.at(0);
  EXPECT_EQ(cells(d), (std::map<std::string, int64_t>{{"forward/-/embedding", 50},
                                                      {"untagged/-/untagged", 205}}));
  EXPECT_EQ(d.untagged_unlinked_bytes, 200);
  EXPECT_EQ(d.untagged_no_module_bytes, 5);
}

// An allocation by an op outside every module (the harness) is part other, by its op.
TEST(TraceMemory, AllocationsOutsideTheModelAreFiledByTheirOp) {
  Trace t = make(true, true);
  // Before the model's first module: the harness builds its inputs.
  t.x("cpu_op", kMain, "aten::ones_like", 0.2, 0.8);
  t.mem(kMain, 0.5, 0x500, 16, 1016, 2048);
  for (Json& e : t.events) {  // the later totals move up by 16
    if (e["name"] == "[memory]" && e["args"]["Device Type"] == 1 && e["ts"].get<double>() > 0.5)
      e["args"]["Total Allocated"] = e["args"]["Total Allocated"].get<int64_t>() + 16;
  }
  const MemoryDevice d = read(t).devices.at(0);
  EXPECT_EQ(d.total_mismatches, 0);
  EXPECT_EQ(d.resident_before_trace_bytes, 1000);
  EXPECT_EQ(d.peak.allocated_bytes, 1241);
  EXPECT_EQ(d.alive_at_peak_bytes, 271);
  EXPECT_EQ(cells(d).at("forward/-/other"), 16);
  ASSERT_EQ(d.outside_model.size(), 1u);
  EXPECT_EQ(d.outside_model[0].op, "aten::ones_like");
  EXPECT_EQ(d.outside_model[0].bytes, 16);
  EXPECT_EQ(d.outside_model_bytes, 16);
}

TEST(TraceMemory, AddressReuseDuplicatesAndMismatchedTotalsAreCounted) {
  Trace t;
  t.kernel(kMain, 1);
  t.mem(kMain, 1, 0xA, 10, 10, 64);
  t.mem(kMain, 2, 0xA, -10, 0, 64);
  t.mem(kMain, 3, 0xA, 20, 20, 64);   // the address again: a new allocation
  t.mem(kMain, 4, 0xA, 30, 50, 64);   // again, not freed in between: a duplicate
  t.mem(kMain, 5, 0xA, -30, 20, 64);  // closes the latest (30)
  t.mem(kMain, 6, 0xB, 7, 99, 64);    // Total Allocated should be 27: a mismatch
  t.mem(kMain, 7, 0xA, -25, 74, 64);  // closes the 20 with another size
  const MemoryDevice d = read(t).devices.at(0);
  EXPECT_EQ(d.duplicate_allocations, 1);
  EXPECT_EQ(d.size_mismatched_frees, 1);
  EXPECT_EQ(d.total_mismatches, 1);
  EXPECT_EQ(d.unmatched_frees, 0);
  EXPECT_EQ(d.peak.allocated_bytes, 99);
  EXPECT_EQ(d.peak_index, 5);
  // Alive at the peak (index 5): the 20 at ts 3 (freed at 7) and the 7 at ts 6.
  EXPECT_EQ(d.alive_at_peak_bytes, 27);
  EXPECT_EQ(d.resident_at_peak_bytes, 0);
  EXPECT_EQ(d.unexplained_at_peak_bytes, 72);  // 99 - 0 - 27: the totals do not agree
}

TEST(TraceMemory, TimelineKeepsEachBucketsLargestPointAndTheExactPeak) {
  Trace t;
  t.kernel(kMain, 1);
  // 1,000 events 1 µs apart in 500 pairs: an allocation of k % 7 + 1 bytes at its own address,
  // then its free (Total Allocated back to 0); pair 306 allocates 5,000 bytes — the peak, event
  // 612 at 712 µs.
  for (int k = 0; k < 500; ++k) {
    const int64_t b = k == 306 ? 5000 : k % 7 + 1;
    t.mem(kMain, 100 + 2 * k, 0x1000 + static_cast<uint64_t>(k), b, b, 1 << 20);
    t.mem(kMain, 101 + 2 * k, 0x1000 + static_cast<uint64_t>(k), -b, 0, 1 << 20);
  }
  const MemoryDevice d = read(t).devices.at(0);
  EXPECT_EQ(d.events, 1000);
  EXPECT_EQ(d.peak.ts_ns, 712000);
  EXPECT_EQ(d.peak.allocated_bytes, 5000);
  EXPECT_EQ(d.total_mismatches, 0);
  // 998 interior events over 398 buckets of 999,001 / 398 ns: every bucket holds two or three
  // events, so all 398 are drawn, with the first and last events: 400 points.
  ASSERT_EQ(d.timeline.size(), 400u);
  EXPECT_EQ(d.timeline.front().ts_ns, 100000);
  EXPECT_EQ(d.timeline.back().ts_ns, 1099000);
  bool peak_kept = false;
  for (std::size_t i = 1; i < d.timeline.size(); ++i) {
    EXPECT_LT(d.timeline[i - 1].ts_ns, d.timeline[i].ts_ns);
    peak_kept |= d.timeline[i].ts_ns == d.peak.ts_ns &&
                 d.timeline[i].allocated_bytes == d.peak.allocated_bytes;
  }
  EXPECT_TRUE(peak_kept);
  // A bucket's point is its largest Total Allocated: always an allocation's (even event), never
  // the free after it (0).
  for (std::size_t i = 1; i + 1 < d.timeline.size(); ++i) {
    const int64_t k = (d.timeline[i].ts_ns - 100000) / 1000;  // the event's index
    EXPECT_EQ(k % 2, 0) << "bucket point " << i << " is event " << k << ", a free";
    EXPECT_GT(d.timeline[i].allocated_bytes, 0);
  }
  // Exactly 400 events: all kept.
  Trace u;
  u.kernel(kMain, 1);
  for (int i = 0; i < 400; ++i) u.mem(kMain, 10 + i, 0x100 + i, 1, i + 1, 64);
  EXPECT_EQ(read(u).devices.at(0).timeline.size(), 400u);
}

// Broken [memory] events are left out and counted with the first one's reason; the rest of the
// trace reads. Nothing crashes (the build runs under ASan + UBSan).
TEST(TraceMemory, BrokenEventsAreCountedWithTheirReason) {
  struct Case {
    const char* what;
    Json args;
    const char* reason;
  };
  const Json ok = {{"Total Reserved", 64}, {"Total Allocated", 10}, {"Bytes", 10},
                   {"Device Id", 0},       {"Device Type", 1},      {"Addr", 16}};
  auto with = [&](const char* key, Json v) {
    Json a = ok;
    a[key] = std::move(v);
    return a;
  };
  auto without = [&](const char* key) {
    Json a = ok;
    a.erase(key);
    return a;
  };
  const std::vector<Case> cases = {
      {"non-numeric Bytes", with("Bytes", "abc"), "args.Bytes is \"abc\", not a byte count"},
      {"fractional Bytes", with("Bytes", 1.5), "args.Bytes is 1.5"},
      {"Bytes past int64", with("Bytes", Json::parse("18446744073709551615")),
       "args.Bytes is 18446744073709551615"},
      {"Bytes as a huge double", with("Bytes", 1e30), "args.Bytes is 1e+30"},
      {"Bytes at INT64_MIN", with("Bytes", std::numeric_limits<int64_t>::min()),
       "args.Bytes is -9223372036854775808"},
      {"negative Total Allocated", with("Total Allocated", -1), "args.Total Allocated is -1"},
      {"null Total Reserved", with("Total Reserved", nullptr), "no args.Total Reserved"},
      {"negative address", with("Addr", -5), "args.Addr is -5, not an address"},
      {"device type past int32", with("Device Type", int64_t{1} << 40), "args.Device Type is"},
      {"device id -2", with("Device Id", -2), "args.Device Id is -2"},
      {"no Bytes", without("Bytes"), "no args.Bytes"},
      {"no args", Json(), "no args.Addr"},
      {"Bytes as an object", with("Bytes", Json::object()), "no args.Bytes"},
  };
  for (const Case& c : cases) {
    Trace t;
    t.kernel(kMain, 1);
    t.mem(kMain, 1, 0x100, 10, 10, 64);
    Json bad = {{"ph", "i"}, {"cat", "cpu_instant_event"}, {"name", "[memory]"}, {"pid", 1},
                {"tid", 1}, {"ts", 2}};
    if (!c.args.is_null()) bad["args"] = c.args;
    t.events.push_back(bad);
    const TraceMemory m = read(t);
    EXPECT_EQ(m.events, 1) << c.what;
    EXPECT_EQ(m.skipped_events, 1) << c.what;
    EXPECT_NE(m.first_skipped.find("traceEvents[3]: "), std::string::npos) << m.first_skipped;
    EXPECT_NE(m.first_skipped.find(c.reason), std::string::npos)
        << c.what << ": " << m.first_skipped;
    EXPECT_EQ(m.first_skipped.find('\n'), std::string::npos);
  }
  // A [memory] event without ts.
  Trace t;
  t.kernel(kMain, 1);
  t.events.push_back({{"ph", "i"}, {"name", "[memory]"}, {"args", ok}});
  const TraceMemory m = read(t);
  EXPECT_EQ(m.skipped_events, 1);
  EXPECT_NE(m.first_skipped.find("no 'ts' field"), std::string::npos);
  EXPECT_TRUE(m.devices.empty());
  // All of them broken: the table says so instead of the hint.
  const std::vector<Table> tables = trace_memory_tables(m);
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_NE(tables[0].render().find("none of the trace's 1 [memory] event(s) could be read"),
            std::string::npos);
}

// A key written twice inside one event: the later value wins, as for every other field.
TEST(TraceMemory, AFieldWrittenTwiceTakesTheLaterValue) {
  Trace t;
  t.kernel(kMain, 1);
  std::string text = t.text();
  text.insert(text.rfind(']'),
              R"(,{"ph":"i","name":"[memory]","tid":1,"ts":5,"args":{"Addr":16,"Bytes":"x","Bytes":)"
              R"(64,"Total Allocated":64,"Total Reserved":0,"Device Type":1,"Device Id":0}})"
              R"(,{"ph":"i","name":"[memory]","tid":1,"ts":6,"args":{"Addr":16,"Bytes":-64,"Bytes":)"
              R"("y","Total Allocated":0,"Total Reserved":0,"Device Type":1,"Device Id":0}})");
  const TraceMemory m = read_trace_buffer(text, "t.json").summary.memory;
  EXPECT_EQ(m.events, 1);
  EXPECT_EQ(m.skipped_events, 1);
  EXPECT_NE(m.first_skipped.find("traceEvents[3]: args.Bytes is \"y\""), std::string::npos)
      << m.first_skipped;
  EXPECT_EQ(m.devices.at(0).peak.allocated_bytes, 64);
}

// Byte counts whose sums pass int64: one line naming the file, never a wrapped number.
TEST(TraceMemory, SumsPastInt64AreAnError) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  Trace t;
  t.kernel(kMain, 1);
  t.mem(kMain, 1, 0x100, big, big, big);
  t.mem(kMain, 2, 0x200, big, big, big);
  try {
    read(t);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("t.json: the [memory] events' Bytes add up past"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
  // A first event whose Total Allocated minus Bytes wraps.
  Trace u;
  u.kernel(kMain, 1);
  u.mem(kMain, 1, 0x100, -big, big, 0);
  EXPECT_THROW(read(u), Error);
  // Large but summable values are read exactly.
  Trace w;
  w.kernel(kMain, 1);
  w.mem(kMain, 1, std::numeric_limits<uint64_t>::max(), int64_t{1} << 61, int64_t{1} << 61, 0);
  w.mem(kMain, 2, std::numeric_limits<uint64_t>::max(), -(int64_t{1} << 61), 0, 0);
  const MemoryDevice d = read(w).devices.at(0);
  EXPECT_EQ(d.peak.allocated_bytes, int64_t{1} << 61);
  EXPECT_EQ(d.alive_at_peak_bytes, int64_t{1} << 61);
  EXPECT_EQ(d.unmatched_frees, 0);
}

TEST(TraceMemory, WithoutMemoryEventsTheViewsSayHowToRecordThem) {
  Trace t;
  t.kernel(kMain, 1);
  const TraceMemory m = read(t);
  EXPECT_EQ(m.events, 0);
  EXPECT_TRUE(m.devices.empty());
  const Json j = to_json(m);
  EXPECT_EQ(j["available"], false);
  EXPECT_EQ(j["hint"], trace_memory_hint());
  const std::vector<Table> tables = trace_memory_tables(m);
  ASSERT_EQ(tables.size(), 1u);
  const std::string text = tables[0].render();
  EXPECT_NE(text.find("recorded without memory events"), std::string::npos);
  EXPECT_NE(text.find("profile_memory=True"), std::string::npos);
  EXPECT_NE(text.find("with_stack=True"), std::string::npos);
}

TEST(TraceMemory, EvidenceAndTablesOfTheHandMadeTrace) {
  const TraceMemory m = read(make(true, true));
  const Json j = to_json(m);
  EXPECT_EQ(j["available"], true);
  EXPECT_TRUE(j["hint"].is_null());
  const Json& d = j["devices"][0];
  EXPECT_EQ(d["device"], "cuda:0");
  EXPECT_EQ(d["peak"]["allocated_bytes"], 1225);
  EXPECT_EQ(d["peak"]["step"], 5);
  EXPECT_EQ(d["alive_at_peak"]["bytes"], 255);
  EXPECT_EQ(d["alive_at_peak"]["resident_bytes"], 970);
  EXPECT_EQ(d["alive_at_peak"]["tagged_bytes"], 250);
  EXPECT_EQ(d["timeline"]["points"], 9);
  EXPECT_EQ(d["timeline"]["ts_ns"].size(), 9u);
  int64_t sum = 0;
  for (const Json& r : d["alive_at_peak"]["by_phase_part"]) sum += r["bytes"].get<int64_t>();
  EXPECT_EQ(sum, 255);
  std::string text;
  for (const Table& t : trace_memory_tables(m)) text += t.render();
  for (const char* s : {"cuda:0", "1.20 KiB", "+30.0 µs", "resident before the trace",
                        "bytes alive at the cuda:0 peak", "attention_proj", "per decoder layer"}) {
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
  }
}

// The trace's memory declared in core/evidence/trace_memory.hpp: read back, it writes what was
// read; docs/kernels.md holds its field list as the tables give it (alive_at_peak, a group of the
// device's own members, and bytes_by_phase, a map, included); a field missing or of the wrong
// type is one line naming its path.
TEST(TraceMemoryFields, RoundTripDocsListAndBrokenInput) {
  const Json j = to_json(read(make(true, true)));
  ASSERT_FALSE(j["devices"][0]["alive_at_peak"]["by_layer"].empty());
  // Negative control: the evidence as written reads, and writes the same bytes again.
  EXPECT_EQ(to_json(trace_memory_from_json(j, "m")).dump(), j.dump());
  EXPECT_EQ(evidence::to_json(evidence::from_json<TraceMemory>(j, "m")).dump(), j.dump());
  std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/kernels.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  std::set<std::string> paths;
  for (const auto& docs : {evidence::field_docs<TraceMemory>("memory."),
                           evidence::field_docs<MemoryDevice>("memory.devices[].")}) {
    for (const evidence::FieldDoc& d : docs) {
      paths.insert(d.path);
      const std::string row = evidence::field_rows({d});
      EXPECT_NE(doc.find(row), std::string::npos) << "docs/kernels.md lacks the row:\n" << row;
    }
  }
  for (const char* p : {"memory.devices[].alive_at_peak", "memory.devices[].alive_at_peak.bytes",
                        "memory.devices[].alive_at_peak.by_phase_part[].share_ratio",
                        "memory.devices[].alive_at_peak.by_layer[].bytes_by_phase"})
    EXPECT_TRUE(paths.count(p)) << p;
  auto error_of = [&](const std::function<void(Json&)>& edit) {
    Json x = j;
    edit(x);
    try {
      trace_memory_from_json(x, "k.json memory");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::pair<std::function<void(Json&)>, const char*> broken[] = {
      {[](Json& x) { x["devices"][0]["alive_at_peak"].erase("untagged_bytes"); },
       "k.json memory devices[0].alive_at_peak: missing field 'untagged_bytes'"},
      {[](Json& x) { x["devices"][0]["alive_at_peak"] = 3; },
       "k.json memory devices[0].alive_at_peak: must be an object"},
      {[](Json& x) { x["devices"][0]["alive_at_peak"]["by_layer"][0]["bytes_by_phase"]["backward"] = "x"; },
       "k.json memory devices[0].alive_at_peak.by_layer[0].bytes_by_phase.backward"},
      {[](Json& x) { x["devices"][0]["alive_at_peak"]["by_phase_part"][0]["layer_kind"] = 1; },
       "k.json memory devices[0].alive_at_peak.by_phase_part[0]: field 'layer_kind'"},
      {[](Json& x) { x["devices"][0]["alive_at_peak"]["by_phase_part"][0]["share_ratio"] = 0.123; },
       "alive_at_peak.by_phase_part.0.share_ratio"},
      {[](Json& x) { x["devices"][0].erase("total_mismatches"); },
       "k.json memory devices[0]: missing field 'total_mismatches'"},
      {[](Json& x) { x["devices"][0]["peak"]["step"] = -2; }, "k.json memory devices[0].peak"},
      {[](Json& x) { x["devices"] = Json::object(); }, "k.json memory: field 'devices' must be a list"},
      {[](Json& x) { x["devices"][0]["frees"] = x["devices"][0]["events"].get<int64_t>() + 1; },
       "k.json memory devices[0]: field 'frees'"},
  };
  for (const auto& [edit, names] : broken) {
    const std::string e = error_of(edit);
    EXPECT_NE(e.find(names), std::string::npos) << names << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace tprobe::core
