// `profile --trace-out` end to end on the CPU: a recorded raw trace of the tiny model's CUDA step
// replayed, written as a Chrome / Kineto trace, and `kernels` reading it back with the same kernel
// table totals and the same phase × part rows as profile's own evidence (the two evidence files
// compared, no number written here); a trace with one kernel dropped must differ; the memory
// counters are there where the result has memory samples; the report links the file.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"
#include "support/gzip_text.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kRawTrace = std::string(TPROBE_FIXTURES_DIR) + "/raw_trace_tiny_cuda.json.gz";

std::vector<std::string> profile_args(const std::string& dir) {
  return {"profile", "--device", "cpu",  "--model",    "gemma4-tiny", "--dtype",        "fp32",
          "--rank",  "4",        "--alpha", "8",       "--widths",    "16",             "--ce-chunk",
          "16",      "--repeats", "1",      "--replay-trace", kRawTrace, "--trace-out",
          dir + "/step.json.gz", "--json", dir + "/profile.json"};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

TEST(TraceOutCli, KernelsReadsTheTraceBackWithProfilesTableAndParts) {
  const std::string dir = make_temp_dir();
  RunResult p = run_tprobe(profile_args(dir));
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  const json prof = json::parse(read_text(dir + "/profile.json"));
  const json& res = prof["results"];
  ASSERT_TRUE(res["kernel_table"].is_object()) << res["kernel_trace_status"];

  // The file is gzip, and the evidence says what it holds.
  const std::string gz = read_text(dir + "/step.json.gz");
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  const json& to = res["trace_out"];
  ASSERT_TRUE(to.is_object());
  EXPECT_EQ(to["bytes"].get<int64_t>(), static_cast<int64_t>(gz.size()));
  EXPECT_EQ(to["link"], "step.json.gz");  // beside the evidence
  EXPECT_EQ(to["point"]["width"], res["kernel_table_point"]["width"]);
  const json trace = json::parse(testing_support::gunzip_text(gz));
  EXPECT_EQ(to["events"].get<size_t>(), trace["traceEvents"].size());
  int64_t rows = 0, counters = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") ++rows;
    if (e.value("ph", "") == "C" && e["name"] == "allocated") ++counters;
  }
  EXPECT_EQ(rows, res["points"][0]["kernel_trace"]["records"].get<int64_t>());
  EXPECT_EQ(to["device_rows"].get<int64_t>(), rows);
  // The memory step's samples are counter tracks wherever the result has samples.
  const json& mem = res["points"][0]["memory"];
  ASSERT_TRUE(mem.is_object()) << res["points"][0]["memory_message"];
  ASSERT_FALSE(mem["timeline"]["samples"].empty());
  EXPECT_EQ(counters, static_cast<int64_t>(mem["timeline"]["samples"].size()));
  EXPECT_GT(to["memory_samples"].get<int64_t>(), 0);

  // kernels reads it back: the same totals and the same parts as profile's table point.
  RunResult k = run_tprobe({"kernels", dir + "/step.json.gz", "--json", dir + "/kernels.json"});
  ASSERT_EQ(k.exit_code, 0) << k.out << k.err;
  const json kr = json::parse(read_text(dir + "/kernels.json"))["results"];
  const json& want = res["kernel_table"]["totals"];
  const json& got = kr["kernel_table"]["totals"];
  EXPECT_EQ(got["sum_ns"], want["sum_ns"]);
  EXPECT_EQ(got["events"], want["events"]);
  EXPECT_TRUE(kr["parts"]["recorded_tags"].get<bool>());
  const json& profile_parts = res["points"][0]["kernel_trace"]["by_phase_part"];
  ASSERT_FALSE(profile_parts.empty());
  EXPECT_EQ(kr["by_phase_part"], profile_parts);
  EXPECT_EQ(kr["by_layer"], res["points"][0]["kernel_trace"]["by_layer"]);

  // Negative control: the same trace with one kernel dropped reads back different.
  json fewer = trace;
  auto& ev = fewer["traceEvents"];
  for (auto it = ev.begin(); it != ev.end(); ++it) {
    if (it->value("cat", "") == "kernel") {
      ev.erase(it);
      break;
    }
  }
  write_bytes(dir + "/fewer.json.gz", testing_support::gzip_text(fewer.dump()));
  RunResult k2 = run_tprobe({"kernels", dir + "/fewer.json.gz", "--json", dir + "/fewer.json"});
  ASSERT_EQ(k2.exit_code, 0) << k2.out << k2.err;
  const json kr2 = json::parse(read_text(dir + "/fewer.json"))["results"];
  EXPECT_EQ(kr2["kernel_table"]["totals"]["events"].get<int64_t>(), want["events"].get<int64_t>() - 1);
  EXPECT_NE(kr2["kernel_table"]["totals"]["sum_ns"], want["sum_ns"]);
  EXPECT_NE(kr2["by_phase_part"], profile_parts);

  // The report links the trace, relative to the evidence's folder.
  RunResult r = run_tprobe({"report", dir + "/profile.json", "--html", dir + "/report.html",
                            "--markdown", dir + "/report.md"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(read_text(dir + "/report.html").find("<a href=\"step.json.gz\">"), std::string::npos);
}

TEST(TraceOutCli, WithoutATracedStepItIsAUsageError) {
  const std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"profile", "--device", "cpu", "--widths", "16", "--trace-out",
                            dir + "/t.json", "--json", dir + "/p.json"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--trace-out: no step is traced on the cpu"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir + "/t.json"));
  RunResult off = run_tprobe({"profile", "--device", "cpu", "--widths", "16", "--trace", "off",
                              "--replay-trace", kRawTrace, "--trace-out", dir + "/t.json"});
  EXPECT_EQ(off.exit_code, 2) << off.out << off.err;
  EXPECT_NE(off.err.find("--trace-out needs --trace on"), std::string::npos) << off.err;
}

}  // namespace
}  // namespace tprobe::testing
