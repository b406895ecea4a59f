// End-to-end `tprobe suite`: every probe into one folder, the report next to them, one progress
// line per probe, and a summary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

TEST(SuiteCli, RunsEveryProbeIntoOneFolderWithTheReport) {
  const std::string out = make_temp_dir() + "/out";
  RunResult r = run_tprobe(
      {"suite", "--out", out, "--fixtures", TPROBE_FIXTURES_DIR, "--json", out + "-suite.json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(read_text(out + "-suite.json"));
  const auto& steps = j["results"]["steps"];
  ASSERT_GE(steps.size(), 10u);
  std::size_t index = 0;
  for (const auto& s : steps) {
    ++index;
    const std::string name = s["name"];
    // One progress line per step: "[ i/N] name" (the index right-aligned in two columns).
    const std::string i = std::to_string(index);
    EXPECT_NE(r.out.find("[" + std::string(i.size() < 2 ? 1 : 0, ' ') + i + "/" +
                         std::to_string(steps.size()) + "] " + name),
              std::string::npos)
        << name << "\n"
        << r.out;
    if (name == "report") continue;
    EXPECT_EQ(s["exit_code"], s["expected_exit_code"]) << name << ": see " << s["log"];
    EXPECT_TRUE(file_exists(out + "/" + name + ".json")) << name;
    EXPECT_TRUE(file_exists(out + "/logs/" + name + ".txt")) << name;
  }
  EXPECT_TRUE(file_exists(out + "/report.html"));
  EXPECT_TRUE(file_exists(out + "/report.md"));
  EXPECT_NE(r.out.find("headlines"), std::string::npos);
  EXPECT_NE(r.out.find("0 failed, 0 skipped"), std::string::npos) << r.out;
  // Short: the probes' own tables are in the logs, not on the terminal.
  EXPECT_LT(r.out.size(), 4000u) << r.out;
}

TEST(SuiteCli, MissingFixturesAreSkippedNotFailed) {
  const std::string out = make_temp_dir() + "/out";
  // The measured steps are left out with --skip (RunsEveryProbeIntoOneFolderWithTheReport runs
  // them): this test is about the fixtures.
  RunResult r = run_tprobe({"suite", "--out", out, "--fixtures", "/nonexistent", "--quiet",
                            "--skip", "profile,levers,mask,mask-padded"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("skipped: /nonexistent/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("levers          skipped (--skip)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("inspect         ok"), std::string::npos) << r.out;
  EXPECT_TRUE(file_exists(out + "/report.html"));
  EXPECT_FALSE(file_exists(out + "/levers.json"));
}

TEST(SuiteCli, SkipNamesAStepOrIsAUsageError) {
  const std::string out = make_temp_dir() + "/out";
  RunResult r = run_tprobe({"suite", "--out", out, "--skip", "nosuchstep"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("nosuchstep"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(out));  // refused before the folder is made
}

}  // namespace
}  // namespace tprobe::testing
