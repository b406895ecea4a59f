// `profile --trace-out`'s writer (core/trace/trace_export): valid JSON whatever the kernel names
// hold, gzip by the name, and read back by tprobe's own trace reader into the same kernel table and
// the same phase × part rows as the records it was written from.
#include "tprobe/core/trace/export/trace_export.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "support/gzip_text.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/report/report.hpp"
#include "tprobe/core/trace/stats/kernel_table.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"

namespace tprobe::core {
namespace {

KernelRecord row(const std::string& name, int64_t start, int64_t end, int64_t stream,
                 const std::string& phase, const std::string& part, int32_t layer,
                 const std::string& kind, int64_t corr) {
  KernelRecord r;
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  r.stream = stream;
  r.correlation_id = corr;
  r.phase = phase;
  r.part = part;
  r.layer = layer;
  r.layer_kind = kind;
  r.grid = {{4, 1, 1}};
  r.block = {{128, 1, 1}};
  return r;
}

// A step's rows on two streams, one memcpy, an untagged row, launches on some, and names a JSON
// writer must escape.
std::vector<KernelRecord> step_rows() {
  std::vector<KernelRecord> v;
  v.push_back(row("void gemm<\"quoted\">(float\\*)", 1001, 2501, 7, "forward", "attention_proj", 0,
                  "sliding", 11));
  v.push_back(row("tab\there\nnewline\x01" "ctl", 2600, 3333, 7, "forward", "attention_core", 0,
                  "sliding", 12));
  v.push_back(row("experts_kernel", 3400, 9001, 7, "forward", "experts", 1, "full", 13));
  v.push_back(row("side_stream", 3500, 4100, 13, "backward", "experts", 1, "full", 14));
  v.push_back(row("glue", 9100, 9200, 7, "untagged", "untagged", -1, "-", 15));
  v.push_back(row("loss", 9300, 9999, 7, "loss", "loss_head", -1, "-", 16));
  KernelRecord m = row("Memcpy HtoD (Pageable -> Device)", 10000, 10500, 7, "backward", "other", -1,
                       "-", 17);
  m.kind = ActivityKind::kMemcpy;
  m.bytes = 4096;
  v.push_back(m);
  for (size_t i = 0; i < 3; ++i) {
    v[i].launch_start_ns = 900 + static_cast<int64_t>(i) * 10;
    v[i].launch_end_ns = v[i].launch_start_ns + 7;
    v[i].launch_thread = 4242;
  }
  return v;
}

std::string text_of(const ChromeTrace& t) { return t.bytes; }

TEST(TraceExport, WritesValidJsonWithEveryNameAsRecorded) {
  const std::vector<KernelRecord> rows = step_rows();
  ChromeTraceInput in;
  in.records = &rows;
  in.memory_note = "none here";
  const ChromeTrace t = chrome_trace(in, false);
  const nlohmann::json doc = nlohmann::json::parse(text_of(t));  // throws on invalid JSON
  std::multiset<std::string> names;
  int64_t rows_seen = 0, runtime = 0, flows = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "kernel" || cat == "gpu_memcpy") {
      names.insert(e["name"].get<std::string>());
      ++rows_seen;
      EXPECT_TRUE(e["args"].contains("tprobe_phase")) << e.dump();
    }
    if (cat == "cuda_runtime") ++runtime;
    if (cat == "ac2g") ++flows;
  }
  for (const auto& r : rows) EXPECT_EQ(names.count(r.name), 1u) << r.name;
  EXPECT_EQ(rows_seen, 7);
  EXPECT_EQ(t.device_rows, 7);
  EXPECT_EQ(runtime, 3);  // only the rows whose launch call was timed
  EXPECT_EQ(t.host_launches, 3);
  EXPECT_EQ(flows, 6);  // an "s" and an "f" per launch
  EXPECT_EQ(t.events, static_cast<int64_t>(doc["traceEvents"].size()));
  EXPECT_EQ(doc["tprobe"]["memory_note"], "none here");
  EXPECT_EQ(t.memory_samples, 0);
}

TEST(TraceExport, InvalidUtf8InANameIsReplacedNotRefused) {
  std::vector<KernelRecord> rows = {row(std::string("bad\xff\xfe") + "name", 0, 10, 7, "forward",
                                        "other", -1, "-", 1)};
  ChromeTraceInput in;
  in.records = &rows;
  const ChromeTrace t = chrome_trace(in, false);
  const auto doc = nlohmann::json::parse(t.bytes);
  bool found = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("cat", "") == "kernel") {
      found = true;
      EXPECT_EQ(e["name"].get<std::string>().rfind("bad", 0), 0u);
    }
  }
  EXPECT_TRUE(found);
}

TEST(TraceExport, GzipByNameAndTheSameTextInside) {
  EXPECT_TRUE(wants_gzip("x.json.gz"));
  EXPECT_FALSE(wants_gzip("x.json"));
  EXPECT_FALSE(wants_gzip("x.gzip"));
  const std::vector<KernelRecord> rows = step_rows();
  ChromeTraceInput in;
  in.records = &rows;
  const ChromeTrace plain = chrome_trace(in, false);
  const ChromeTrace gz = chrome_trace(in, true);
  ASSERT_GE(gz.bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz.bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz.bytes[1]), 0x8b);
  EXPECT_NE(static_cast<unsigned char>(plain.bytes[0]), 0x1f);
  EXPECT_EQ(testing_support::gunzip_text(gz.bytes), plain.bytes);
  EXPECT_EQ(gz.events, plain.events);
}

// Every row inside its part's slice, and the slices of one track never overlap.
TEST(TraceExport, EachRowLiesInsideItsPartSlice) {
  const std::vector<KernelRecord> rows = step_rows();
  ChromeTraceInput in;
  in.records = &rows;
  const auto doc = nlohmann::json::parse(chrome_trace(in, false).bytes);
  struct Slice {
    double ts, end;
    std::string part;
  };
  std::map<int64_t, std::vector<Slice>> part_slices;  // tid -> slices
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("cat", "") != "tprobe_attribution") continue;
    const int64_t tid = e["tid"].get<int64_t>();
    if (tid % 4 != 3) continue;
    part_slices[tid].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>(),
                                e["args"]["part"].get<std::string>()});
  }
  for (const auto& [tid, v] : part_slices) {
    for (size_t i = 1; i < v.size(); ++i) EXPECT_LE(v[i - 1].end, v[i].ts + 1e-9) << tid;
  }
  for (const auto& r : rows) {
    const auto& v = part_slices[r.stream * 4 + 3];
    bool inside = false;
    for (const auto& s : v) {
      inside |= s.part == r.part && s.ts <= r.start_ns / 1000.0 + 1e-9 &&
                r.end_ns / 1000.0 <= s.end + 1e-9;
    }
    EXPECT_TRUE(inside) << r.name;
  }
}

TEST(TraceExport, MemoryCountersFromTheTimeline) {
  const std::vector<KernelRecord> rows = step_rows();
  std::vector<MemorySample> mem(3);
  for (int i = 0; i < 3; ++i) {
    mem[i].t_ns = 1000 * i;
    mem[i].allocated = 100 * (i + 1);
    mem[i].reserved = i == 1 ? -1 : 1000;
  }
  ChromeTraceInput in;
  in.records = &rows;
  in.memory = &mem;
  const ChromeTrace t = chrome_trace(in, false);
  const auto doc = nlohmann::json::parse(t.bytes);
  int allocated = 0, reserved = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "C") continue;
    EXPECT_EQ(e["pid"], kTraceMemoryPid);
    if (e["name"] == "allocated") ++allocated;
    if (e["name"] == "reserved") ++reserved;
  }
  EXPECT_EQ(allocated, 3);
  EXPECT_EQ(reserved, 2);  // the sample without a reserved total has none
  EXPECT_EQ(t.memory_samples, 5);
  EXPECT_TRUE(doc["tprobe"]["memory_note"].is_null());
}

// The reader takes the trace back: the same kernel table totals and the same phase × part rows
// as the records (the parts as written, no module rule).
TEST(TraceExport, ReadBackGivesTheSameTableAndParts) {
  const std::vector<KernelRecord> rows = step_rows();
  ChromeTraceInput in;
  in.records = &rows;
  for (bool gz : {false, true}) {
    const ChromeTrace t = chrome_trace(in, gz);
    const TraceResult back = read_trace_buffer(t.bytes, "t.json");
    const KernelTable want = build_kernel_table(rows, {});
    EXPECT_EQ(back.table.totals.events, want.totals.events);
    EXPECT_EQ(back.table.totals.sum_ns, want.totals.sum_ns);
    EXPECT_EQ(back.table.totals.union_busy_ns, want.totals.union_busy_ns);
    const TraceParts& p = back.summary.parts;
    EXPECT_TRUE(p.recorded_tags);
    EXPECT_TRUE(p.has_breakdown());
    EXPECT_EQ(p.counts.recorded, 7);
    EXPECT_EQ(to_json(p.breakdown)["rows"], to_json(break_down(rows))["rows"]);
    EXPECT_EQ(to_json(p.breakdown)["layers"], to_json(break_down(rows))["layers"]);
  }
  // Negative control: one row dropped reads back as a different table and different parts.
  std::vector<KernelRecord> fewer = rows;
  fewer.erase(fewer.begin() + 2);
  ChromeTraceInput in2;
  in2.records = &fewer;
  const TraceResult back2 = read_trace_buffer(chrome_trace(in2, false).bytes, "t2.json");
  EXPECT_NE(back2.table.totals.sum_ns, build_kernel_table(rows, {}).totals.sum_ns);
  EXPECT_NE(to_json(back2.summary.parts.breakdown)["rows"], to_json(break_down(rows))["rows"]);
}

// A row's recorded attribution is checked like any other field: a word outside the vocabulary,
// or a field missing, refuses the trace in one line; a valid one is taken.
TEST(TraceExport, RecordedAttributionOutsideTheVocabularyIsRefused) {
  auto trace = [](const std::string& args) {
    return std::string(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, )"
                       R"("tid": 7, "ts": 1.5, "dur": 2, "args": {"stream": 7, )") +
           args + "}}]}";
  };
  const std::string ok =
      R"("tprobe_phase": "forward", "tprobe_part": "experts", "tprobe_layer": 2, )"
      R"("tprobe_layer_kind": "full")";
  EXPECT_NO_THROW(read_trace_buffer(trace(ok), "ok.json"));
  const std::pair<std::string, std::string> bad[] = {
      {R"("tprobe_phase": "sideways", "tprobe_part": "experts", "tprobe_layer": 2, )"
       R"("tprobe_layer_kind": "full")",
       "args.tprobe_phase \"sideways\": not a phase"},
      {R"("tprobe_phase": "forward", "tprobe_part": "exp\"erts", "tprobe_layer": 2, )"
       R"("tprobe_layer_kind": "full")",
       "args.tprobe_part"},
      {R"("tprobe_phase": "forward", "tprobe_part": "experts", "tprobe_layer": 2.5, )"
       R"("tprobe_layer_kind": "full")",
       "args.tprobe_layer 2.5: not a layer index"},
      {R"("tprobe_phase": "forward", "tprobe_part": "experts", "tprobe_layer": "2", )"
       R"("tprobe_layer_kind": "full")",
       "args.tprobe_layer \"2\""},
      {R"("tprobe_phase": "forward", "tprobe_part": "experts", "tprobe_layer": 2, )"
       R"("tprobe_layer_kind": "wide")",
       "not a layer kind"},
      {R"("tprobe_phase": "forward", "tprobe_part": "experts", "tprobe_layer": 2)",
       "without args.tprobe_layer_kind"},
      {R"("tprobe_phase": "untagged", "tprobe_part": "experts", "tprobe_layer": -1, )"
       R"("tprobe_layer_kind": "-")",
       "both \"untagged\" or neither"},
  };
  for (const auto& [args, want] : bad) {
    try {
      read_trace_buffer(trace(args), "bad.json");
      ADD_FAILURE() << "accepted: " << args;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(want), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

TEST(StepTraceLaunchTimes, RawTraceCarriesLaunchTimesIntoTheRecords) {
  RawTrace raw;
  KernelRecord r = row("k", 100, 200, 7, "", "", -1, "", 5);
  raw.records.push_back(r);
  StepTag tag;
  tag.phase = StepPhase::kForward;
  tag.part = StepPart::kExperts;
  raw.tags.push_back(tag);
  LaunchContext c;
  c.tag = 1;
  c.host_start_ns = 50;
  c.host_end_ns = 60;
  c.host_thread = 99;
  raw.launches[5] = c;
  const RawTrace back = parse_raw_trace(to_json(raw).dump(), "raw.json");
  ASSERT_EQ(back.launches.size(), 1u);
  EXPECT_EQ(back.launches.at(5).host_start_ns, 50);
  EXPECT_EQ(back.launches.at(5).host_end_ns, 60);
  EXPECT_EQ(back.launches.at(5).host_thread, 99);
  std::vector<KernelRecord> recs = back.records;
  attribute(back, recs);
  EXPECT_EQ(recs[0].launch_start_ns, 50);
  EXPECT_EQ(recs[0].launch_end_ns, 60);
  EXPECT_EQ(recs[0].launch_thread, 99);
  // A launch without times (raw traces recorded before) reads as not recorded.
  raw.launches[5].host_start_ns = -1;
  const RawTrace old = parse_raw_trace(to_json(raw).dump(), "old.json");
  EXPECT_EQ(old.launches.at(5).host_start_ns, -1);
  // Half of the times is refused; an end before the start too.
  Json j = to_json(raw);
  j["launches"][0]["host_start_ns"] = 5;
  EXPECT_THROW(parse_raw_trace(j.dump(), "half.json"), Error);
  j["launches"][0]["host_end_ns"] = 4;
  j["launches"][0]["host_thread"] = 1;
  EXPECT_THROW(parse_raw_trace(j.dump(), "backwards.json"), Error);
  j["launches"][0]["host_end_ns"] = 6;
  EXPECT_NO_THROW(parse_raw_trace(j.dump(), "fine.json"));
}

}  // namespace
}  // namespace tprobe::core

namespace tprobe::core {
namespace {

// The report links a fact only to a path: a link from evidence with a scheme stays text.
TEST(ReportFactLink, OnlyAPathBecomesALink) {
  Report rep;
  ReportSection s;
  s.id = "sec-profile";
  s.probe = "profile";
  s.facts.push_back({"trace", "step.json.gz", "results.trace_out.link", false, "step.json.gz"});
  s.facts.push_back({"evil", "click", "results.trace_out.link", false, "javascript:alert(1)"});
  s.facts.push_back({"plain", "no link", "results.x", false, ""});
  rep.sections.push_back(s);
  const std::string html = render_html(rep);
  EXPECT_NE(html.find("<a href=\"step.json.gz\">step.json.gz</a>"), std::string::npos);
  EXPECT_EQ(html.find("javascript:"), std::string::npos);
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("[step.json.gz](step.json.gz)"), std::string::npos);
  EXPECT_EQ(md.find("javascript:"), std::string::npos);
}

}  // namespace
}  // namespace tprobe::core
