// End-to-end `tprobe levers` on the CPU (gemma4-tiny, random weights): the baseline and every
// lever either measured or refused with its reason, each verdict re-derived here from the
// repeats the evidence holds; and profile's evidence naming the faithful baseline.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

std::vector<std::string> levers_args(const std::string& json_path) {
  return {"levers", "--device", "cpu",   "--model", "gemma4-tiny", "--dtype",      "fp32",
          "--rank", "4",        "--alpha", "8",     "--widths",    "16",           "--ce-chunk",
          "16",     "--repeats", "3",     "--pad-fraction", "0.5", "--json", json_path};
}

std::pair<double, double> range(const json& samples) {
  double lo = 1e300, hi = -1e300;
  for (const auto& s : samples) {
    lo = std::min(lo, s.get<double>());
    hi = std::max(hi, s.get<double>());
  }
  return {lo, hi};
}

TEST(LeversCli, EveryLeverIsMeasuredOrRefusedAndEachVerdictFollowsFromTheRepeats) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/levers.json";
  RunResult r = run_tprobe(levers_args(path));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("How to pull each lever"), std::string::npos) << r.out;
  const json ev = json::parse(read_text(path));
  EXPECT_EQ(ev["schema"]["name"], "tprobe.levers");
  const json& res = ev["results"];
  EXPECT_NE(res["baseline"]["reproduces"].get<std::string>().find("PEFT"), std::string::npos);
  EXPECT_EQ(res["baseline"]["knobs"]["lora_dtype"], "fp32");
  EXPECT_EQ(res["baseline"]["knobs"]["moe"], "loop");  // grouped_mm needs CUDA: resolved
  // Trainer's AdamW ends every configuration's step; the optimizer is no lever of its own.
  EXPECT_EQ(res["baseline"]["knobs"]["optimizer"], "adamw");
  for (const auto& row : res["rows"]) {
    EXPECT_EQ(row["setting"].get<std::string>().find("--optimizer"), std::string::npos) << row.dump();
  }

  std::set<std::string> levers_seen;
  std::map<std::string, const json*> baseline_at;  // width/padded -> row
  for (const auto& row : res["rows"]) {
    const std::string key = std::to_string(row["width"].get<int64_t>()) +
                            (row["lengths"].empty() ? "" : "p");
    if (row["lever"] == "baseline") {
      ASSERT_EQ(row["outcome"], "ok") << row.dump();
      baseline_at[key] = &row;
    }
  }
  ASSERT_EQ(baseline_at.size(), 2u);  // 2x16 and the half-padded 2x16
  for (const auto& row : res["rows"]) {
    const std::string lever = row["lever"];
    levers_seen.insert(lever);
    if (lever == "baseline") continue;
    if (row["outcome"] != "ok") {
      // A refusal says why: the engine's reason (a path, kernel or libtorch this build lacks).
      EXPECT_FALSE(row["message"].get<std::string>().empty()) << row.dump();
      EXPECT_TRUE(row["vs_baseline"].is_null());
      continue;
    }
    ASSERT_EQ(row["samples_s"].size(), 3u) << row.dump();
    const std::string key = std::to_string(row["width"].get<int64_t>()) +
                            (row["lengths"].empty() ? "" : "p");
    ASSERT_TRUE(baseline_at.count(key)) << row.dump();
    const json& b = *baseline_at[key];
    // The batch lever is compared for the same tokens: scaled by baseline batch / its batch.
    const double scale = b["batch"].get<double>() / row["batch"].get<double>();
    auto [blo, bhi] = range(b["samples_s"]);
    auto [lo, hi] = range(row["samples_s"]);
    lo *= scale;
    hi *= scale;
    const bool overlap = lo <= bhi && blo <= hi;
    const double delta = row["median_s"].get<double>() * scale - b["median_s"].get<double>();
    const std::string want = overlap ? "inside the noise" : delta < 0 ? "faster" : "slower";
    EXPECT_EQ(row["vs_baseline"]["verdict"], want) << row.dump();
    EXPECT_EQ(row["vs_baseline"]["inside_noise"], overlap);
  }
  for (const char* l : {"attention", "norm", "lora-dtype", "moe", "checkpointing", "ce", "packing",
                        "batch"}) {
    EXPECT_TRUE(levers_seen.count(l)) << l << " has no row";
  }
  // The CPU has no grouped GEMM: the MoE lever is a refusal that says so.
  bool moe_refused = false;
  for (const auto& row : res["rows"]) {
    if (row["lever"] == "moe" && row["outcome"] == "refused" &&
        row["message"].get<std::string>().find("CUDA") != std::string::npos) {
      moe_refused = true;
    }
  }
  EXPECT_TRUE(moe_refused);
  // Packing runs only at the padded point.
  for (const auto& row : res["rows"]) {
    if (row["lever"] == "packing") {
      EXPECT_FALSE(row["lengths"].empty()) << row.dump();
    }
  }
}

TEST(LeversCli, BadOptionsAreUsageErrors) {
  const std::string dir = make_temp_dir();
  auto args = levers_args(dir + "/x.json");
  args.insert(args.end(), {"--levers", "magic"});
  RunResult r = run_tprobe(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("magic"), std::string::npos) << r.err;
  r = run_tprobe({"levers", "--device", "cpu", "--model", "gemma4-tiny", "--widths", "16",
                  "--pad-fraction", "1.5"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // --optimizer takes the registry's values only (none and adamw run: ProfileCli's test).
  r = run_tprobe({"levers", "--device", "cpu", "--optimizer", "adam", "--json", dir + "/o.json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--optimizer"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir + "/o.json"));
}

TEST(LeversCli, ProfileEvidenceNamesTheFaithfulBaselineAndWhatDiffersFromIt) {
  const std::string dir = make_temp_dir();
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"profile", "--device", "cpu", "--model", "gemma4-tiny",
                                  "--dtype", "fp32", "--rank", "4", "--widths", "16",
                                  "--ce-chunk", "16", "--repeats", "1", "--trace", "off",
                                  "--json", dir + "/p.json"};
    a.insert(a.end(), extra.begin(), extra.end());
    RunResult r = run_tprobe(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(read_text(dir + "/p.json"))["results"];
  };
  json res = run({});
  const json& base = res["baseline"];
  EXPECT_NE(base["reproduces"].get<std::string>().find("transformers 5.17"), std::string::npos);
  EXPECT_EQ(base["ran"]["lora_dtype"], "fp32");  // the default now: PEFT's
  EXPECT_EQ(base["ran"]["moe"], res["provenance"]["moe_dispatch"]);
  // On a libtorch without sdpa the default path is eager, and that is the one difference.
  const bool eager = res["provenance"]["attn_path"] == "eager";
  EXPECT_EQ(base["differs"], eager ? "--attn eager" : "");
  EXPECT_EQ(base["at_baseline"], !eager);

  res = run({"--ce", "naive", "--lora-dtype", "model"});
  const std::string differs = res["baseline"]["differs"];
  EXPECT_NE(differs.find("--ce naive"), std::string::npos) << differs;
  EXPECT_NE(differs.find("--lora-dtype model"), std::string::npos) << differs;
  EXPECT_EQ(res["baseline"]["at_baseline"], false);
}

// The memory edge on the CPU: there is no caching allocator to cap, so every configuration's
// row says so (no batch is claimed); its options are checked before anything runs.
TEST(LeversCli, MemoryEdgeOnTheCpuSaysItIsNotMeasured) {
  const std::string dir = make_temp_dir();
  auto args = levers_args(dir + "/edge.json");
  args.insert(args.end(), {"--levers", "checkpointing", "--gpu-memory", "80", "--reserve", "3"});
  RunResult r = run_tprobe(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("What each lever does to the memory edge"), std::string::npos) << r.out;
  const json ev = json::parse(read_text(dir + "/edge.json"));
  const json& edge = ev["results"]["memory_edge"];
  ASSERT_TRUE(edge.is_object());
  EXPECT_EQ(edge["gpu_memory_gib"], 80.0);
  EXPECT_EQ(edge["cap_bytes"], int64_t{77} << 30);
  ASSERT_EQ(edge["rows"].size(), 2u);  // the baseline and checkpointing off (no padded-only row)
  for (const auto& row : edge["rows"]) {
    EXPECT_EQ(row["outcome"], "not measured") << row.dump();
    EXPECT_EQ(row["largest_batch"], 0);
    EXPECT_TRUE(row["probes"].empty());
    EXPECT_NE(row["message"].get<std::string>().find("no caching allocator"), std::string::npos);
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--reserve", "3"},
        std::vector<std::string>{"--gpu-memory", "8", "--reserve", "8"},
        std::vector<std::string>{"--gpu-memory", "-1"}}) {
    auto a = levers_args(dir + "/bad.json");
    a.insert(a.end(), bad.begin(), bad.end());
    RunResult b = run_tprobe(a);
    EXPECT_EQ(b.exit_code, 2) << bad[0] << b.err;
    EXPECT_FALSE(file_exists(dir + "/bad.json"));
  }
}

}  // namespace
}  // namespace tprobe::testing
