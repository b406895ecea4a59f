// End-to-end: `tprobe kernels` on a real torch.profiler trace from the H200 (tests/fixtures/traces/
// hf-sdpa-2x256.json.gz, benchmarks/hf_profile_trace.py), its derived per-rank traces, and
// broken inputs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kDir = std::string(TPROBE_FIXTURES_DIR) + "/traces";
const std::string kTrace = kDir + "/hf-sdpa-2x256.json.gz";

// Numbers torch.profiler itself reported in the same session (hf-sdpa-2x256.sums.json), not
// computed by tprobe: the sum of every key_averages() row's self_device_time_total, and the
// sum of the kernel/memcpy/memset durations read from the exported file by Python.
json sums() { return json::parse(read_text(kDir + "/hf-sdpa-2x256.sums.json")); }

TEST(KernelsCli, RealTraceTotalEqualsTheKernelEventsAndExposesTheDoubleCount) {
  const std::string path = make_temp_dir() + "/k.json";
  RunResult r = run_tprobe({"kernels", kTrace, "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json doc = json::parse(read_text(path));
  const json& res = doc["results"];
  const json s = sums();
  const double device_us = s["file_device_sum_us"].get<double>();
  const double key_averages_us = s["key_averages_self_device_sum_us"].get<double>();
  const double cpu_rows_us = s["key_averages_self_device_sum_cpu_rows_us"].get<double>();
  const int64_t total_ns = res["kernel_table"]["totals"]["sum_ns"].get<int64_t>();
  // tprobe's total is the sum of the device rows (to the nanosecond the trace is written in).
  EXPECT_NEAR(double(total_ns) * 1e-3, device_us, 0.001 * s["file_device_count"].get<double>());
  EXPECT_EQ(res["kernel_table"]["totals"]["events"], s["file_device_count"]);
  // Summing key_averages() counts each kernel twice: once as its own row, once in its op...
  const json& trap = res["trace"]["key_averages_trap"];
  EXPECT_NEAR(trap["op_and_kernel_ratio"].get<double>(), 2.0, 0.01);
  EXPECT_NEAR(double(trap["host_attributed_ns"].get<int64_t>()) * 1e-3, cpu_rows_us,
              0.001 * cpu_rows_us);
  // ...and the ProfilerStep#N ranges on the device come on top: torch's own sum, reproduced.
  EXPECT_NEAR(double(trap["key_averages_style_ns"].get<int64_t>()) * 1e-3, key_averages_us,
              1e-4 * key_averages_us);
  EXPECT_GT(key_averages_us / device_us, 2.0);
  EXPECT_NE(r.out.find("NOT a total"), std::string::npos);
}

TEST(KernelsCli, RealTraceStepsPhasesAndArchitecture) {
  const std::string path = make_temp_dir() + "/k.json";
  RunResult r = run_tprobe({"kernels", kTrace, "--skip-first", "1", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json res = json::parse(read_text(path))["results"];
  const json& t = res["kernel_table"];
  EXPECT_EQ(t["selection"]["steps_present"], json::array({2, 3, 4}));
  EXPECT_EQ(t["selection"]["steps_selected"], json::array({3, 4}));
  ASSERT_EQ(t["steps"].size(), 2u);
  std::map<std::string, int64_t> phase;
  for (const json& p : t["phases"]) phase[p["phase"]] = p["total_ns"];
  EXPECT_GT(phase["backward"], phase["forward"]);  // recompute + backward of every layer
  EXPECT_GT(phase["forward"], 0);
  EXPECT_GT(phase["optimizer"], 0);
  EXPECT_EQ(t["architecture"]["device_sm"], 90);
  EXPECT_GT(t["architecture"]["older_kernels"].get<int>(), 0);  // fmha_cutlass*_sm80 among them
  bool fmha_sm80 = false;
  for (const json& k : t["kernels"]) {
    if (k["name"].get<std::string>().rfind("fmha_cutlass", 0) == 0) {
      fmha_sm80 |= k["architecture_sm"] == 80 && k["category"] == "attention";
    }
  }
  EXPECT_TRUE(fmha_sm80);
}

TEST(KernelsCli, DiffOfATraceAgainstEvidence) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_tprobe({"kernels", kTrace, "--step", "4", "--json", dir + "/s4.json"}).exit_code,
            0);
  RunResult r = run_tprobe({"kernels", kTrace, dir + "/s4.json", "--json", dir + "/d.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json res = json::parse(read_text(dir + "/d.json"))["results"];
  EXPECT_EQ(res["mode"], "diff");
  EXPECT_EQ(res["b"]["kind"], "evidence");
  const int64_t a = res["a"]["kernel_table"]["totals"]["sum_ns"];
  const int64_t b = res["b"]["kernel_table"]["totals"]["sum_ns"];
  EXPECT_EQ(res["diff"]["delta_sum_ns"], b - a);
  EXPECT_LT(b, a);  // one step of three
  EXPECT_NE(r.out.find("By kernel family"), std::string::npos);
  // Selection options with an evidence input are a usage error.
  EXPECT_EQ(run_tprobe({"kernels", dir + "/s4.json", "--step", "4"}).exit_code, 2);
}

TEST(KernelsCli, PerRankDirectory) {
  const std::string path = make_temp_dir() + "/r.json";
  RunResult r = run_tprobe({"kernels", kDir + "/ranks", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json res = json::parse(read_text(path))["results"];
  EXPECT_EQ(res["mode"], "ranks");
  ASSERT_EQ(res["rank_summary"].size(), 2u);
  // Rank 1's time is stretched by 1.1 (scripts/derive_rank_traces.py): it is the slowest.
  EXPECT_EQ(res["slowest_rank"], 1);
  for (const json& row : res["rank_summary"]) {
    // 72 overlapped all-reduces of 20 us and one exposed one of 150 us, in every rank.
    EXPECT_EQ(row["communication_ns"], 72 * 20000 + 150000);
    EXPECT_GE(row["exposed_communication_ns"].get<int64_t>(), 150000);
    EXPECT_GT(row["overlap_ns"].get<int64_t>(), 0);
    EXPECT_GT(row["communication_share_ratio"].get<double>(), 0.0);
  }
  const double s0 = res["rank_summary"][0]["span_ns"], s1 = res["rank_summary"][1]["span_ns"];
  EXPECT_NEAR(s1 / s0, 1.1, 0.02);
}

TEST(KernelsCli, EmptyKernelSetIsExitOneWithoutEvidence) {
  const std::string dir = make_temp_dir();
  write_text(
      dir + "/host.json",
      R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]})");
  RunResult r = run_tprobe({"kernels", dir + "/host.json", "--json", dir + "/e.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no device activity"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir + "/e.json"));
}

TEST(KernelsCli, BadInputs) {
  const std::string dir = make_temp_dir();
  write_text(dir + "/cut.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel", "na)");
  RunResult r = run_tprobe({"kernels", dir + "/cut.json", "--json", dir + "/e.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not valid JSON at byte 50"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir + "/e.json"));
  EXPECT_EQ(run_tprobe({"kernels", dir + "/missing.json"}).exit_code, 1);
  EXPECT_EQ(run_tprobe({"kernels", kTrace, "--step", "9"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"kernels"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"kernels", kTrace, kTrace, kTrace}).exit_code, 2);
}

}  // namespace
}  // namespace tprobe::testing
