// Interrupted runs through the binary: SIGINT/SIGTERM during a long probe writes the evidence
// gathered so far with outcome "interrupted" and exits 128 + signal; SIGKILL at any moment never
// leaves a partial evidence file (docs/evidence.md, "Interrupted runs").
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

// A bucket sweep of 400 sizes x 8 seeds over the embedded corpus: tens of seconds uninterrupted,
// a few milliseconds per size, so a signal is seen quickly.
std::vector<std::string> long_bucket(const std::string& json_path) {
  std::string sweep;
  for (int i = 0; i < 400; ++i) sweep += (i ? "," : "") + std::to_string(64 + 16 * i);
  return {"bucket", "--sweep", sweep, "--seeds", "8", "--json", json_path};
}

TEST(InterruptCli, SigintDuringABucketSweepWritesWhatWasMeasured) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/bucket.json";
  RunResult r = run_tprobe_signalled(long_bucket(path), 1.0, SIGINT);
  ASSERT_EQ(r.exit_code, 130) << r.out << r.err;
  ASSERT_TRUE(file_exists(path)) << r.err;
  json doc = json::parse(read_text(path));
  EXPECT_EQ(doc["status"]["outcome"], "interrupted");
  EXPECT_TRUE(doc["results"]["interrupted"].get<bool>());
  const auto measured = doc["results"]["sweep_sizes_measured"].get<int64_t>();
  EXPECT_LT(measured, 400);
  EXPECT_EQ(doc["results"]["sweep"].size(), static_cast<size_t>(measured));
  bool diagnosed = false;
  for (const auto& d : doc["status"]["diagnostics"]) diagnosed |= d["code"] == "interrupted";
  EXPECT_TRUE(diagnosed);
  EXPECT_NE(r.out.find("INTERRUPTED"), std::string::npos) << r.out;
}

TEST(InterruptCli, SigtermGives143AndTheSameEvidence) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/bucket.json";
  RunResult r = run_tprobe_signalled(long_bucket(path), 1.0, SIGTERM);
  ASSERT_EQ(r.exit_code, 143) << r.out << r.err;
  json doc = json::parse(read_text(path));
  EXPECT_EQ(doc["status"]["outcome"], "interrupted");
}

TEST(InterruptCli, ProfileSweepStopsBetweenPoints) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/profile.json";
  // Twenty points on the tiny model: several seconds; the signal comes after the first ones (or
  // before any, while libtorch loads: then none were measured, which is also the truth).
  std::vector<std::string> args = {"profile", "--device", "cpu",    "--model",   "gemma4-tiny",
                                   "--dtype", "fp32",     "--rank", "4",         "--ce-chunk",
                                   "16",      "--repeats", "3",     "--trace",   "off",
                                   "--json",  path,       "--widths"};
  std::string widths;
  for (int i = 0; i < 20; ++i) widths += (i ? "," : "") + std::to_string(64 + 32 * i);
  args.push_back(widths);
  RunResult r = run_tprobe_signalled(args, 2.0, SIGINT);
  ASSERT_EQ(r.exit_code, 130) << r.out << r.err;
  json doc = json::parse(read_text(path));
  EXPECT_EQ(doc["status"]["outcome"], "interrupted");
  // A slow start (libtorch loading, a busy machine) can take the signal before the sweep began:
  // then nothing was measured and results is empty, which is also the truth.
  if (!doc["results"].empty()) {
    EXPECT_TRUE(doc["results"]["interrupted"].get<bool>());
    EXPECT_LT(doc["results"]["points"].size(), 20u);
    for (const auto& p : doc["results"]["points"]) EXPECT_EQ(p["outcome"], "ok");
  }
}

TEST(InterruptCli, SuitePassesTheSignalOnAndMarksWhatDidNotRun) {
  const std::string dir = make_temp_dir();
  const std::string out = dir + "/out";
  const std::string path = dir + "/suite.json";
  RunResult r = run_tprobe_signalled(
      {"suite", "--out", out, "--fixtures", TPROBE_FIXTURES_DIR, "--json", path}, 1.5, SIGTERM);
  ASSERT_EQ(r.exit_code, 143) << r.out << r.err;
  json doc = json::parse(read_text(path));
  EXPECT_EQ(doc["status"]["outcome"], "interrupted");
  int not_run = 0;
  for (const auto& s : doc["results"]["steps"]) {
    if (s["state"] == "not_run") ++not_run;
    // Whatever a step wrote is a whole evidence file.
    if (s.contains("evidence") && s["evidence"].is_string() &&
        file_exists(s["evidence"].get<std::string>())) {
      EXPECT_NO_THROW(json::parse(read_text(s["evidence"].get<std::string>()))) << s.dump();
    }
  }
  EXPECT_GT(not_run, 0) << doc["results"]["steps"].dump();
  EXPECT_FALSE(file_exists(out + "/report.html"));
}

TEST(InterruptCli, KilledAtRandomMomentsNeverLeavesAPartialEvidenceFile) {
  const std::string dir = make_temp_dir();
  // 400,000 records: padding reads, analyses and writes for a few hundred milliseconds, so
  // kills drawn from [0, 0.8] s land while it starts, reads, writes, and after it ended.
  std::string data;
  for (int64_t i = 0; i < 400000; ++i) data += std::to_string(1 + (i * 7919) % 16384) + "\n";
  const std::string dataset = dir + "/lengths.txt";
  write_text(dataset, data);
  std::mt19937 rng(20261201);
  std::uniform_real_distribution<double> when(0.0, 0.8);
  for (int i = 0; i < 12; ++i) {
    const std::string path = dir + "/padding-" + std::to_string(i) + ".json";
    RunResult r = run_tprobe_signalled({"padding", "--dataset", dataset, "--json", path},
                                       when(rng), SIGKILL);
    if (file_exists(path)) {
      EXPECT_NO_THROW(json::parse(read_text(path))) << "partial evidence after kill " << i;
    } else {
      EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
    }
  }
}

}  // namespace
}  // namespace tprobe::testing
