// End-to-end: `tprobe kernels` on the real HF + PEFT traces recorded with profile_memory=True on
// the H200 (tests/fixtures/traces/hf-sdpa-memory*-2x256.json.gz, reentrant and non-reentrant
// checkpointing): the memory figures against a plain-Python pass over the same events
// (benchmarks/kernels_memory_check.py, json + decimal only), the bytes alive at the peak by part,
// a trace without memory events, broken events, and the report's memory timeline.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kDir = std::string(TPROBE_FIXTURES_DIR) + "/traces";
const std::string kReentrant = kDir + "/hf-sdpa-memory-2x256.json.gz";
const std::string kNonReentrant = kDir + "/hf-sdpa-memory-nonreentrant-2x256.json.gz";
const std::string kChecker = std::string(TPROBE_SOURCE_DIR) + "/benchmarks/kernels_memory_check.py";

int shell(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool have_python() { return shell("python3 -c 'import json, decimal, gzip' >/dev/null 2>&1") == 0; }

bool has_diagnostic(const json& doc, const std::string& code) {
  for (const json& d : doc["status"]["diagnostics"]) {
    if (d["code"] == code) return true;
  }
  return false;
}

struct Checked {
  json evidence;  // results.memory
  json python;    // the checker's figures, per device "TYPE:ID"
  std::string out;
};

// tprobe's evidence and the checker's own figures for one fixture; the checker compares every
// figure itself too (exit 0: equal).
Checked check(const std::string& trace) {
  Checked c;
  const std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"kernels", trace, "--json", dir + "/k.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  c.out = r.out;
  c.evidence = json::parse(read_text(dir + "/k.json"))["results"]["memory"];
  const int rc = shell("python3 " + kChecker + " " + trace + " " + dir + "/k.json --json " + dir +
                       "/py.json > " + dir + "/py.txt 2>&1");
  EXPECT_EQ(rc, 0) << read_text(dir + "/py.txt");
  c.python = json::parse(read_text(dir + "/py.json"));
  return c;
}

// Every byte figure of one device, tprobe's against Python's, exactly.
void expect_same_figures(const json& t, const json& p) {
  for (const char* k :
       {"events", "allocations", "frees", "zero_byte_events", "allocated_bytes_total",
        "freed_bytes_total", "bytes_sum", "unmatched_frees", "unmatched_free_bytes",
        "duplicate_allocations", "size_mismatched_frees", "total_mismatches",
        "never_freed_allocations", "never_freed_bytes", "resident_before_trace_bytes"}) {
    EXPECT_EQ(t[k], p[k]) << k;
  }
  for (const char* k : {"first", "last", "peak_reserved"}) EXPECT_EQ(t[k], p[k]) << k;
  for (const char* k : {"ts_ns", "allocated_bytes", "reserved_bytes", "index", "step"})
    EXPECT_EQ(t["peak"][k], p["peak"][k]) << "peak." << k;
  for (const char* k :
       {"allocations", "bytes", "resident_bytes", "pre_trace_freed_bytes", "unexplained_bytes"})
    EXPECT_EQ(t["alive_at_peak"][k], p["alive_at_peak"][k]) << "alive_at_peak." << k;
  ASSERT_EQ(t["timeline"]["ts_ns"].size(), p["timeline"].size());
  for (std::size_t i = 0; i < p["timeline"].size(); ++i) {
    EXPECT_EQ(t["timeline"]["ts_ns"][i], p["timeline"][i]["ts_ns"]) << i;
    EXPECT_EQ(t["timeline"]["allocated_bytes"][i], p["timeline"][i]["allocated_bytes"]) << i;
    EXPECT_EQ(t["timeline"]["reserved_bytes"][i], p["timeline"][i]["reserved_bytes"]) << i;
  }
  // tprobe's split by part adds up to the alive bytes Python found.
  int64_t sum = 0;
  for (const json& r : t["alive_at_peak"]["by_phase_part"]) sum += r["bytes"].get<int64_t>();
  EXPECT_EQ(sum, p["alive_at_peak"]["bytes"]);
}

std::map<std::string, int64_t> by_part(const json& device) {
  std::map<std::string, int64_t> out;
  for (const json& r : device["alive_at_peak"]["by_phase_part"]) {
    out[r["phase"].get<std::string>() + "/" + r["part"].get<std::string>()] +=
        r["bytes"].get<int64_t>();
  }
  return out;
}

// Reentrant checkpointing. The numbers below were printed by
//   python3 benchmarks/kernels_memory_check.py tests/fixtures/traces/hf-sdpa-memory-2x256.json.gz
TEST(KernelsMemoryCli, ReentrantTraceEqualsAPlainPythonPass) {
  if (!have_python()) GTEST_SKIP() << "python3 is not installed: the Python check is skipped";
  const Checked c = check(kReentrant);
  ASSERT_EQ(c.evidence["available"], true);
  EXPECT_EQ(c.evidence["events"], 9652);
  EXPECT_EQ(c.evidence["skipped_events"], 0);
  ASSERT_EQ(c.evidence["devices"].size(), 2u);
  const json& cuda = c.evidence["devices"][0];
  EXPECT_EQ(cuda["device"], "cuda:0");
  expect_same_figures(cuda, c.python["devices"]["1:0"]);
  expect_same_figures(c.evidence["devices"][1], c.python["devices"]["0:-1"]);
  EXPECT_EQ(cuda["events"], 8562);
  EXPECT_EQ(cuda["first"]["allocated_bytes"], 170717184);
  EXPECT_EQ(cuda["peak"]["allocated_bytes"], 236065792);
  EXPECT_EQ(cuda["peak"]["ts_ns"], 5432995256518647);
  EXPECT_EQ(cuda["peak"]["step"], 2);
  EXPECT_EQ(cuda["last"]["allocated_bytes"], 170192896);
  EXPECT_EQ(cuda["unmatched_frees"], 17);
  EXPECT_EQ(cuda["unmatched_free_bytes"], 6097408);
  EXPECT_EQ(cuda["alive_at_peak"]["bytes"], 65872896);
  EXPECT_EQ(cuda["alive_at_peak"]["allocations"], 26);
  EXPECT_EQ(cuda["alive_at_peak"]["resident_bytes"], 170192896);
  EXPECT_EQ(cuda["alive_at_peak"]["unexplained_bytes"], 0);
  EXPECT_EQ(cuda["total_mismatches"], 0);
  EXPECT_LE(cuda["timeline"]["points"].get<int>(), 400);
  // By part: every alive byte placed (the trace has module events and flows).
  EXPECT_EQ(cuda["alive_at_peak"]["attributed"], true);
  EXPECT_EQ(cuda["alive_at_peak"]["untagged_bytes"], 0);
  for (const char* s : {"Memory: torch.profiler's [memory] events", "bytes alive at the cuda:0 peak",
                        "resident before the trace"})
    EXPECT_NE(c.out.find(s), std::string::npos) << s;
}

// Non-reentrant checkpointing (use_reentrant=False): the same figures, the same check.
TEST(KernelsMemoryCli, NonReentrantTraceEqualsAPlainPythonPass) {
  if (!have_python()) GTEST_SKIP() << "python3 is not installed: the Python check is skipped";
  const Checked c = check(kNonReentrant);
  ASSERT_EQ(c.evidence["devices"].size(), 2u);
  const json& cuda = c.evidence["devices"][0];
  expect_same_figures(cuda, c.python["devices"]["1:0"]);
  expect_same_figures(c.evidence["devices"][1], c.python["devices"]["0:-1"]);
  EXPECT_EQ(cuda["peak"]["allocated_bytes"], 231017472);
  EXPECT_EQ(cuda["alive_at_peak"]["bytes"], 65872896);
  EXPECT_EQ(cuda["alive_at_peak"]["resident_bytes"], 165144576);
  EXPECT_EQ(cuda["unmatched_frees"], 3);
  EXPECT_EQ(cuda["alive_at_peak"]["untagged_bytes"], 0);
}

// With --parts off the figures stay and every alive byte is untagged, saying why: the negative
// control on the real trace.
TEST(KernelsMemoryCli, PartsOffLeavesTheAliveBytesUntagged) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_tprobe({"kernels", kReentrant, "--json", dir + "/on.json"}).exit_code, 0);
  RunResult r = run_tprobe({"kernels", kReentrant, "--parts", "off", "--json", dir + "/off.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json on = json::parse(read_text(dir + "/on.json"))["results"]["memory"]["devices"][0];
  const json off = json::parse(read_text(dir + "/off.json"))["results"]["memory"]["devices"][0];
  EXPECT_EQ(off["peak"], on["peak"]);
  EXPECT_EQ(off["alive_at_peak"]["bytes"], on["alive_at_peak"]["bytes"]);
  EXPECT_EQ(off["alive_at_peak"]["attributed"], false);
  EXPECT_EQ(off["alive_at_peak"]["untagged_bytes"], off["alive_at_peak"]["bytes"]);
  EXPECT_EQ(off["alive_at_peak"]["untagged_no_module_events_bytes"], off["alive_at_peak"]["bytes"]);
  EXPECT_EQ(by_part(off), (std::map<std::string, int64_t>{
                              {"untagged/untagged", off["alive_at_peak"]["bytes"].get<int64_t>()}}));
  EXPECT_NE(r.out.find("turned off (--parts off)"), std::string::npos);
}

TEST(KernelsMemoryCli, ATraceWithoutMemoryEventsSaysHowToRecordOne) {
  const std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"kernels", kDir + "/hf-sdpa-2x256.json.gz", "--json", dir + "/k.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("recorded without memory events; record with torch.profiler.profile(..., "
                       "profile_memory=True)"),
            std::string::npos)
      << r.out;
  const json doc = json::parse(read_text(dir + "/k.json"));
  EXPECT_EQ(doc["results"]["memory"]["available"], false);
  EXPECT_TRUE(doc["results"]["memory"]["devices"].empty());
  EXPECT_TRUE(has_diagnostic(doc, "trace_no_memory_events"));
  // A trace with memory events has no such diagnostic.
  RunResult m = run_tprobe({"kernels", kReentrant, "--json", dir + "/m.json"});
  ASSERT_EQ(m.exit_code, 0);
  EXPECT_FALSE(has_diagnostic(json::parse(read_text(dir + "/m.json")), "trace_no_memory_events"));
}

// Broken [memory] events: counted with a warning naming the first; byte sums past int64: exit 1
// with one line, no evidence.
TEST(KernelsMemoryCli, BrokenMemoryEventsAreAWarningOrOneLineError) {
  const std::string dir = make_temp_dir();
  const std::string kernel =
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1,"dur":1,"args":{"correlation":1}},
         {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":2,"dur":1,"args":{"correlation":1,"device":0,"stream":7}})";
  auto mem = [](const std::string& bytes, const std::string& total) {
    return R"({"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":3,"args":{"Addr":16,"Bytes":)" +
           bytes + R"(,"Total Allocated":)" + total +
           R"(,"Total Reserved":0,"Device Type":1,"Device Id":0}})";
  };
  write_text(dir + "/bad.json", "{\"traceEvents\": [" + kernel + "," + mem("10", "10") + "," +
                                    mem("\"ten\"", "20") + "]}");
  RunResult r = run_tprobe({"kernels", dir + "/bad.json", "--json", dir + "/bad-e.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(read_text(dir + "/bad-e.json"));
  EXPECT_TRUE(has_diagnostic(doc, "trace_memory_skipped_events"));
  EXPECT_EQ(doc["results"]["memory"]["skipped_events"], 1);
  EXPECT_NE(doc["results"]["memory"]["first_skipped"].get<std::string>().find(
                "traceEvents[3]: args.Bytes is \"ten\""),
            std::string::npos);
  write_text(dir + "/huge.json", "{\"traceEvents\": [" + kernel + "," +
                                     mem("9223372036854775807", "9223372036854775807") + "," +
                                     mem("9223372036854775807", "9223372036854775807") + "]}");
  RunResult h = run_tprobe({"kernels", dir + "/huge.json", "--json", dir + "/huge-e.json"});
  EXPECT_EQ(h.exit_code, 1);
  EXPECT_NE(h.err.find("add up past what int64 bytes hold"), std::string::npos) << h.err;
  EXPECT_FALSE(file_exists(dir + "/huge-e.json"));
}

// The report draws each device's timeline, with the peak marked, from the kernels evidence.
TEST(KernelsMemoryCli, ReportDrawsTheMemoryTimeline) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_tprobe({"kernels", kReentrant, "--json", dir + "/kernels.json"}).exit_code, 0);
  RunResult r = run_tprobe({"report", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string html = read_text(dir + "/report.html");
  for (const char* id : {"fig-kernels-memory-timeline-cuda0", "fig-kernels-memory-timeline-cpu",
                         "fig-kernels-memory-at-peak-cuda0"}) {
    EXPECT_NE(html.find("<figure id=\"" + std::string(id) + "\">"), std::string::npos) << id;
  }
  EXPECT_NE(html.find("Memory timeline, cuda:0"), std::string::npos);
  EXPECT_NE(html.find("peak 225.13 MiB (step 2)"), std::string::npos);
  EXPECT_NE(html.find("results.memory.devices[0].timeline.allocated_bytes"), std::string::npos);
  // Headless Chromium parses the page: the timeline's two lines and its peak marker are drawn.
  const char* browser = ::access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium"
                        : ::access("/usr/bin/chromium-browser", X_OK) == 0
                            ? "/usr/bin/chromium-browser"
                            : nullptr;
  if (browser != nullptr) {
    const std::string cmd =
        std::string("timeout 180 ") + browser +
        " --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions"
        " --allow-file-access-from-files --disable-background-networking --virtual-time-budget=2000"
        " --user-data-dir=" + dir + "/profile --dump-dom file://" + dir + "/report.html > " + dir +
        "/dom.html 2> " + dir + "/chromium.txt";
    ASSERT_EQ(shell(cmd), 0) << read_text(dir + "/chromium.txt");
    const std::string dom = read_text(dir + "/dom.html");
    const std::size_t at = dom.find("<figure id=\"fig-kernels-memory-timeline-cuda0\">");
    ASSERT_NE(at, std::string::npos);
    const std::string fig = dom.substr(at, dom.find("</figure>", at) - at);
    std::size_t lines = 0;
    for (std::size_t p = fig.find("<polyline class=\"series line\""); p != std::string::npos;
         p = fig.find("<polyline class=\"series line\"", p + 1))
      ++lines;
    EXPECT_EQ(lines, 2u);  // allocated and reserved
    EXPECT_NE(fig.find("class=\"marker\""), std::string::npos);
  }
  // Without memory events the section says how to record them.
  const std::string plain = make_temp_dir();
  ASSERT_EQ(run_tprobe({"kernels", kDir + "/hf-sdpa-2x256.json.gz", "--json",
                        plain + "/kernels.json"})
                .exit_code,
            0);
  ASSERT_EQ(run_tprobe({"report", plain}).exit_code, 0);
  const std::string page = read_text(plain + "/report.html");
  EXPECT_EQ(page.find("fig-kernels-memory-timeline"), std::string::npos);
  EXPECT_NE(page.find("recorded without memory events"), std::string::npos);
}

}  // namespace
}  // namespace tprobe::testing
