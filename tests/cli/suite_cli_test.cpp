// End-to-end `tprobe suite`: every probe into one folder, the report next to them, one progress
// line per probe, and a summary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>

#include "run_tprobe.hpp"
#include "tprobe/config.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

TEST(SuiteCli, RunsEveryProbeIntoOneFolderWithTheReport) {
  const std::string out = make_temp_dir() + "/out";
  // --device cpu: on a GPU host --device auto would plan the 26B-A4B steps (minutes; the plan
  // itself is SuitePlan's), and this test is about the folder, not the device.
  RunResult r = run_tprobe({"suite", "--out", out, "--fixtures", TPROBE_FIXTURES_DIR, "--device",
                            "cpu", "--json", out + "-suite.json"});
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
  EXPECT_EQ(j["results"]["device"]["resolved"], "cpu");
  EXPECT_EQ(j["results"]["device"]["why"], "--device cpu");
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

// Runs the test's child processes in `dir` until the end of the scope.
class InDirectory {
 public:
  explicit InDirectory(const std::string& dir) {
    char buf[4096];
    if (::getcwd(buf, sizeof buf) != nullptr) before_ = buf;
    entered_ = ::chdir(dir.c_str()) == 0;
  }
  ~InDirectory() {
    // Back where the test started; nothing to do in a destructor if that folder is gone.
    if (!before_.empty() && ::chdir(before_.c_str()) != 0) before_.clear();
  }
  InDirectory(const InDirectory&) = delete;
  InDirectory& operator=(const InDirectory&) = delete;
  bool entered() const { return entered_; }

 private:
  std::string before_;
  bool entered_ = false;
};

// The steps that read fixtures (parity, kernels, lora-gate, lora-gate-trap) find them without
// --fixtures from a working directory outside the repository: the source tree's, compiled in.
TEST(SuiteCli, FindsItsFixturesFromAnyWorkingDirectory) {
  const std::string cwd = make_temp_dir();
  InDirectory in(cwd);
  ASSERT_TRUE(in.entered());
  RunResult r = run_tprobe({"suite", "--out", "out", "--quiet", "--json", "suite.json", "--skip",
                            "env,profile,levers,mask,mask-padded,inspect,flops"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(read_text(cwd + "/suite.json"));
  const auto& res = j["results"];
  EXPECT_EQ(res["fixtures"], TPROBE_FIXTURES_DIR);
  EXPECT_EQ(res["fixtures_source"], "source tree");
  EXPECT_EQ(res["device"]["requested"], "auto");
  if (!TPROBE_HAS_TORCH_CUDA) {
    EXPECT_EQ(res["device"]["resolved"], "cpu");
    EXPECT_EQ(res["device"]["why"], "auto: this tprobe was built against a libtorch without CUDA");
  }
  std::set<std::string> ran;
  for (const auto& s : res["steps"]) {
    if (s["state"] == "ok" || s["state"] == "no") ran.insert(s["name"].get<std::string>());
  }
  for (const char* step : {"parity", "kernels", "lora-gate", "lora-gate-trap"}) {
    EXPECT_TRUE(ran.count(step)) << step << " did not run\n" << r.out;
    EXPECT_TRUE(file_exists(cwd + "/out/" + step + ".json")) << step;
  }
  // The plan names every step's arguments, the fixtures in them resolved.
  bool parity_planned = false;
  for (const auto& p : res["plan"]) {
    if (p["name"] != "parity") continue;
    parity_planned = true;
    EXPECT_EQ(p["args"][2], std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf");
  }
  EXPECT_TRUE(parity_planned);
  EXPECT_NE(r.out.find("fixtures " + std::string(TPROBE_FIXTURES_DIR) + " (source tree)"),
            std::string::npos)
      << r.out;
}

TEST(SuiteCli, AnEmptyFixturesPathIsAUsageError) {
  const std::string out = make_temp_dir() + "/out";
  RunResult r = run_tprobe({"suite", "--out", out, "--fixtures", ""});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--fixtures: the path is empty"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(out));
}

TEST(SuiteCli, DeviceCudaWithoutCudaIsRefusedBeforeTheFolderIsTouched) {
  // A CUDA build may have a device, and would then run the whole suite on it.
  if (TPROBE_HAS_TORCH_CUDA) GTEST_SKIP() << "a CUDA build: tested by SuitePlan/SuiteDevice";
  const std::string out = make_temp_dir() + "/out";
  RunResult r = run_tprobe({"suite", "--out", out, "--device", "cuda"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--device cuda"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(out));
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
