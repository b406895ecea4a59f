// End-to-end: `tprobe kernels` on a real torch.profiler trace from the H200 (tests/fixtures/traces/
// hf-sdpa-2x256.json.gz, benchmarks/hf_profile_trace.py), its derived per-rank traces, and
// broken inputs.
#include <gtest/gtest.h>

#include <cstdlib>

#include <sys/stat.h>

#include <map>
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
  // Evidence kept gzipped reads as it is (issue 35: it was "not valid JSON … \x1f").
  ASSERT_EQ(std::system(("gzip -c '" + dir + "/s4.json' > '" + dir + "/s4.json.gz'").c_str()), 0);
  RunResult gz =
      run_tprobe({"kernels", kTrace, dir + "/s4.json.gz", "--json", dir + "/dgz.json"});
  ASSERT_EQ(gz.exit_code, 0) << gz.err;
  const json rgz = json::parse(read_text(dir + "/dgz.json"))["results"];
  EXPECT_EQ(rgz["b"]["kind"], "evidence");
  EXPECT_EQ(rgz["diff"]["delta_sum_ns"], res["diff"]["delta_sum_ns"]);
  // An execution trace starts with "schema" too: named, not read as broken evidence.
  write_text(dir + "/et.json",
             R"({"schema": "1.0.2-chakra.0.0.4", "pid": 7, "nodes": [{"id": 1, "name": "x"}]})");
  RunResult et = run_tprobe({"kernels", dir + "/et.json"});
  EXPECT_EQ(et.exit_code, 1);
  EXPECT_NE(et.err.find("is a PyTorch execution trace (ExecutionTraceObserver's graph of 'nodes', "
                        "schema '1.0.2-chakra.0.0.4')"),
            std::string::npos)
      << et.err;
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
  EXPECT_NE(r.err.find("a CPU-only trace (1 cpu_op events, no CUDA runtime or device activity)"),
            std::string::npos)
      << r.err;
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

// The launch-bound statistics against a plain-Python computation of the same definitions
// (docs/kernels.md) on the committed trace. The numbers below were printed by
//   python3 tests/support/trace_stats_reference.py tests/fixtures/traces/hf-sdpa-2x256.json.gz
// (json + decimal only, no tprobe code) and are exact: counts and integer-ns sums.
TEST(KernelsCli, LaunchBoundStatisticsEqualAPlainPythonComputation) {
  const std::string path = make_temp_dir() + "/k.json";
  RunResult r = run_tprobe({"kernels", kTrace, "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json res = json::parse(read_text(path))["results"];
  const json& tr = res["trace"];
  ASSERT_EQ(tr["idle_split"].size(), 1u);
  const json& idle = tr["idle_split"][0];
  EXPECT_EQ(idle["idle_ns"], 510793264);
  EXPECT_EQ(idle["idle_ns"], res["kernel_table"]["totals"]["idle_ns"]);
  EXPECT_EQ(idle["gaps"], 14066);
  EXPECT_EQ(idle["host_wait_ns"], 383396495);
  EXPECT_EQ(idle["kernel_wait_ns"], 127396769);
  EXPECT_EQ(idle["unlaunched_ns"], 0);
  EXPECT_EQ(idle["host_wait_gaps"], 13379);
  const json& l = tr["launches"];
  EXPECT_EQ(l["kernels"], 13563);
  EXPECT_EQ(l["with_launch"], 13563);
  EXPECT_EQ(l["launch_duration_unknown"], 0);
  auto same = [](const json& d, std::vector<int64_t> v) {
    EXPECT_EQ(d["count"], v[0]);
    EXPECT_EQ(d["sum_ns"], v[1]);
    EXPECT_EQ(d["min_ns"], v[2]);
    EXPECT_EQ(d["p50_ns"], v[3]);
    EXPECT_EQ(d["p90_ns"], v[4]);
    EXPECT_EQ(d["p99_ns"], v[5]);
    EXPECT_EQ(d["max_ns"], v[6]);
  };
  same(l["launch_call"], {13563, 100055045, 3483, 6773, 9358, 22263, 88730});
  same(l["launch_delay"], {13563, 125818850, 5670, 8600, 10850, 23678, 224513});
  EXPECT_EQ(l["negative_delay"], 0);
  EXPECT_EQ(l["shorter_than_launch"], 13262);
  EXPECT_EQ(l["shorter_than_launch_ns"], 30267147);
  ASSERT_EQ(tr["queue_length"].size(), 1u);
  const json& q = tr["queue_length"][0];
  EXPECT_EQ(q["device"], 0);
  EXPECT_EQ(q["stream"], 7);
  EXPECT_EQ(q["rows"], 14067);
  EXPECT_EQ(q["unlaunched_rows"], 0);
  EXPECT_EQ(q["window_start_ns"], 5256582187089413);
  EXPECT_EQ(q["window_end_ns"], 5256582733145989);
  EXPECT_EQ(q["max_length"], 10);
  EXPECT_EQ(q["time_at_length_ns"], json::array({383396495, 157999915, 4261584, 100322, 81150,
                                                 38153, 42419, 71263, 29516, 20681, 15078}));
  std::map<std::string, json> copies;
  for (const json& c : tr["copies"]) copies[c["name"]] = c;
  ASSERT_EQ(copies.size(), 3u);
  auto copy = [&](const char* name, int64_t count, int64_t bytes, int64_t ns) {
    const json& c = copies[name];
    EXPECT_EQ(c["count"], count) << name;
    EXPECT_EQ(c["rows_with_bytes"], count) << name;
    EXPECT_EQ(c["bytes"], bytes) << name;
    EXPECT_EQ(c["total_ns"], ns) << name;
  };
  copy("Memcpy DtoD (Device -> Device)", 453, 369008640, 495351);
  copy("Memcpy DtoH (Device -> Pinned)", 6, 6, 9472);
  copy("Memset (Device)", 45, 180, 35165);
  const json& h = tr["host_ops"];
  EXPECT_EQ(h["ops"], 57054);
  EXPECT_EQ(h["top_level_ops"], 945);
  EXPECT_EQ(h["rows_in_op"], 14067);
  EXPECT_EQ(h["rows_outside_op"], 0);
  EXPECT_EQ(h["by_name"].size(), 194u);
  std::map<std::string, json> ops;
  for (const json& o : h["by_name"]) ops[o["name"]] = o;
  EXPECT_EQ(ops["aten::mm"]["calls"], 1413);
  EXPECT_EQ(ops["aten::mm"]["top_level_calls"], 0);
  EXPECT_EQ(ops["aten::copy_"]["calls"], 3204);
  EXPECT_EQ(ops["aten::_grouped_mm"]["calls"], 108);
  EXPECT_EQ(ops["aten::linear"]["calls"], 777);
  EXPECT_EQ(ops["aten::linear"]["top_level_calls"], 3);
  EXPECT_EQ(ops["aten::linear"]["device_rows"], 3);
  EXPECT_EQ(ops["aten::linear"]["device_ns"], 29792);
  for (const char* title : {"Idle time split", "Kernel launches", "Launch cost by kernel",
                            "Queue length per stream", "Memcpy / memset bandwidth", "Host ops"}) {
    EXPECT_NE(r.out.find(title), std::string::npos) << title;
  }
  // The architecture table says it leaves the copies out (its shares do not add to 100 %).
  EXPECT_NE(r.out.find("left out: memcpy/memset rows"), std::string::npos);
  // The double-count diagnostic names the annotation ranges this trace holds.
  bool named = false;
  const json doc = json::parse(read_text(path));
  for (const json& d : doc["status"]["diagnostics"]) {
    if (d["code"] == "key_averages_double_count")
      named = d["message"].get<std::string>().find("ProfilerStep#2") != std::string::npos;
  }
  EXPECT_TRUE(named);
}

// A trace with no gpu_user_annotation ranges: nothing may speak of ProfilerStep ranges.
TEST(KernelsCli, DiagnosticsMentionOnlyWhatTheTraceHolds) {
  const std::string dir = make_temp_dir();
  write_text(dir + "/t.json", R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 9,
     "args": {"External id": 5}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2,
     "dur": 1, "args": {"correlation": 3, "External id": 5}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 3,
     "args": {"correlation": 3, "External id": 5, "device": 0, "stream": 7}}]})");
  RunResult r = run_tprobe({"kernels", dir + "/t.json", "--json", dir + "/e.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("ProfilerStep"), std::string::npos) << r.out;
  EXPECT_EQ(read_text(dir + "/e.json").find("ProfilerStep"), std::string::npos);
  // A device selection that holds nothing names what the trace does hold.
  RunResult none = run_tprobe({"kernels", dir + "/t.json", "--device-id", "3"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("none of the trace's 1 device row(s) (on device 0)"), std::string::npos)
      << none.err;
  EXPECT_EQ(none.err.find("ProfilerActivity.CUDA"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace tprobe::testing

namespace tprobe::testing {
namespace {

// tests/fixtures/traces/parts-small.json, hand-made (module events, one fwdbwd flow, the
// optimizer): kernel k of correlation k lasts k µs, and its place is worked out by hand:
// 1 forward sliding attention_proj (layer 0), 2 forward sliding attention_core (the SDPA wrapper),
// 3 forward sliding experts, 4 loss loss_head (lm_head), 5 backward sliding attention_proj
// (its backward op's fwdbwd flow names the q_proj mm), 6 untagged (a backward op without a
// flow), 7 optimizer.
TEST(KernelsCli, PartsOfAHandMadeTraceWithModuleEvents) {
  const std::string fixture = std::string(TPROBE_FIXTURES_DIR) + "/traces/parts-small.json";
  const std::string dir = make_temp_dir();
  RunResult r = run_tprobe(
      {"kernels", fixture, "--model", "gemma4-tiny", "--json", dir + "/p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("by phase and part"), std::string::npos) << r.out;
  const json res = json::parse(read_text(dir + "/p.json"))["results"];
  std::map<std::string, int64_t> got;
  for (const auto& row : res["by_phase_part"]) {
    const std::string key = row["phase"].get<std::string>() + "/" +
                            row["layer_kind"].get<std::string>() + "/" +
                            row["part"].get<std::string>();
    got[key] += std::llround(row["kernel_s"].get<double>() * 1e9);
  }
  const std::map<std::string, int64_t> want = {
      {"forward/sliding/attention_proj", 1000}, {"forward/sliding/attention_core", 2000},
      {"forward/sliding/experts", 3000},        {"loss/-/loss_head", 4000},
      {"backward/sliding/attention_proj", 5000}, {"untagged/-/untagged", 6000},
      {"optimizer/-/other", 7000}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(res["attribution"]["rows"], 7);
  EXPECT_EQ(res["attribution"]["linked_rows"], 1);
  EXPECT_EQ(res["attribution"]["untagged_unlinked_rows"], 1);
  EXPECT_EQ(res["attribution"]["kernel_ns"], res["kernel_table"]["totals"]["sum_ns"]);
  EXPECT_EQ(res["by_layer"].size(), 1u);
  EXPECT_EQ(res["parts"]["model"], "gemma4-tiny");
  EXPECT_EQ(res["parts_steps"], 1);
  // Two of --config / --checkpoint / --model are a usage error.
  EXPECT_EQ(run_tprobe({"kernels", fixture, "--model", "gemma4-tiny", "--config", fixture})
                .exit_code,
            2);

  // The part-level diff: the trace against its own evidence moves nothing.
  RunResult d = run_tprobe({"kernels", fixture, dir + "/p.json", "--model", "gemma4-tiny", "--json",
                            dir + "/d.json"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("Parts compared"), std::string::npos);
  const json diff = json::parse(read_text(dir + "/d.json"))["results"]["part_diff"];
  ASSERT_TRUE(diff["available"].get<bool>());
  EXPECT_EQ(diff["rows"].size(), 7u);
  for (const auto& row : diff["rows"]) EXPECT_EQ(row["delta_ns_per_step"], 0) << row.dump();
}

// Each rank of a directory gets the phase × part attribution a single trace gets: two ranks,
// each the hand-made parts-small.json (its cells worked out by hand above), the model's layer
// kinds passed through, one parts table per rank in the text.
TEST(KernelsCli, PerRankDirectoryGivesEveryRankItsPhasePartRows) {
  const std::string fixture = std::string(TPROBE_FIXTURES_DIR) + "/traces/parts-small.json";
  const std::string dir = make_temp_dir();
  const std::string ranks = dir + "/ranks";
  ASSERT_EQ(::mkdir(ranks.c_str(), 0755), 0);
  write_text(ranks + "/a.json", read_text(fixture));
  write_text(ranks + "/b.json", read_text(fixture));
  RunResult r = run_tprobe({"kernels", ranks, "--model", "gemma4-tiny", "--json", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank 0: where the trace's device time went"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: where the trace's device time went"), std::string::npos) << r.out;
  const json res = json::parse(read_text(dir + "/r.json"))["results"];
  EXPECT_EQ(res["mode"], "ranks");
  ASSERT_EQ(res["ranks"].size(), 2u);
  const std::map<std::string, int64_t> want = {
      {"forward/sliding/attention_proj", 1000}, {"forward/sliding/attention_core", 2000},
      {"forward/sliding/experts", 3000},        {"loss/-/loss_head", 4000},
      {"backward/sliding/attention_proj", 5000}, {"untagged/-/untagged", 6000},
      {"optimizer/-/other", 7000}};
  for (const json& rank : res["ranks"]) {
    ASSERT_TRUE(rank["by_phase_part"].is_array()) << rank.dump().substr(0, 400);
    std::map<std::string, int64_t> got;
    for (const auto& row : rank["by_phase_part"]) {
      got[row["phase"].get<std::string>() + "/" + row["layer_kind"].get<std::string>() + "/" +
          row["part"].get<std::string>()] += std::llround(row["kernel_s"].get<double>() * 1e9);
    }
    EXPECT_EQ(got, want) << rank["path"];
    EXPECT_EQ(rank["parts"]["model"], "gemma4-tiny");
    EXPECT_EQ(rank["attribution"]["rows"], 7);
    EXPECT_EQ(rank["parts_steps"], 1);
  }
  // Without a model the kinds are unknown in every rank, and the untagged warning (6 of 28 us)
  // is said per rank.
  RunResult u = run_tprobe({"kernels", ranks, "--json", dir + "/u.json"});
  ASSERT_EQ(u.exit_code, 0) << u.err;
  const json doc = json::parse(read_text(dir + "/u.json"));
  for (const json& rank : doc["results"]["ranks"]) {
    for (const auto& row : rank["by_phase_part"]) EXPECT_EQ(row["layer_kind"], "-");
  }
  int warned = 0;
  for (const auto& d : doc["status"]["diagnostics"]) {
    if (d["code"] == "trace_parts_untagged" &&
        d["message"].get<std::string>().rfind("rank ", 0) == 0)
      ++warned;
  }
  EXPECT_EQ(warned, 2);
}

// The real H200 trace was recorded without with_stack: one line says what to add, the phase
// split stays, exit 0.
TEST(KernelsCli, ATraceWithoutModuleEventsSaysWhichFlagToAdd) {
  const std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"kernels", kTrace, "--json", dir + "/k.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("torch.profiler.profile(..., with_stack=True)"), std::string::npos);
  const json res = json::parse(read_text(dir + "/k.json"))["results"];
  EXPECT_TRUE(res["by_phase_part"].is_null());
  EXPECT_FALSE(res["parts"]["module_events"].get<bool>());
  EXPECT_FALSE(res["kernel_table"]["phases"].empty());
  bool diag = false;
  const json doc = json::parse(read_text(dir + "/k.json"));  // held: the loop reads inside it
  for (const auto& d : doc["status"]["diagnostics"]) diag |= d["code"] == "trace_no_module_events";
  EXPECT_TRUE(diag);
}

// --parts off: the same trace read with its module events checked and counted but not kept — the
// kernel table and its totals unchanged, no phase × part rows, and the output says it was turned
// off (not that the trace lacks module events).
TEST(KernelsCli, PartsOffKeepsTheKernelTableAndSaysItWasTurnedOff) {
  const std::string fixture = std::string(TPROBE_FIXTURES_DIR) + "/traces/parts-small.json";
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_tprobe({"kernels", fixture, "--json", dir + "/on.json"}).exit_code, 0);
  RunResult r = run_tprobe({"kernels", fixture, "--parts", "off", "--json", dir + "/off.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("turned off (--parts off)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("with_stack=True"), std::string::npos) << r.out;
  const json on = json::parse(read_text(dir + "/on.json"));
  const json off = json::parse(read_text(dir + "/off.json"));
  EXPECT_FALSE(on["results"]["by_phase_part"].is_null());
  EXPECT_TRUE(off["results"]["by_phase_part"].is_null());
  EXPECT_TRUE(off["results"]["parts"]["attribution_off"].get<bool>());
  EXPECT_FALSE(on["results"]["parts"]["attribution_off"].get<bool>());
  EXPECT_EQ(off["results"]["kernel_table"]["totals"], on["results"]["kernel_table"]["totals"]);
  EXPECT_EQ(off["results"]["parts"]["python_events"], on["results"]["parts"]["python_events"]);
  bool diag = false;
  for (const auto& d : off["status"]["diagnostics"]) diag |= d["code"] == "trace_parts_off";
  EXPECT_TRUE(diag);
  EXPECT_EQ(run_tprobe({"kernels", fixture, "--parts", "maybe"}).exit_code, 2);
}

}  // namespace
}  // namespace tprobe::testing
