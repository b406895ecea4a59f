// The main job's decisions, without a GPU (probes/suite_plan.hpp): the device --device picks, the
// steps' arguments on each device — the GPU plan checked here on the CPU — and where the fixtures
// come from.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "probes/probe.hpp"
#include "probes/suite_plan.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::probes {
namespace {

using Args = std::vector<std::string>;

std::vector<SuiteStep> registry_steps() {
  std::vector<SuiteStep> all;
  for (const ProbeInfo& p : all_probes())
    all.insert(all.end(), p.suite_steps.begin(), p.suite_steps.end());
  return all;
}

std::map<std::string, Args> args_by_name(const std::vector<SuiteStep>& plan) {
  std::map<std::string, Args> m;
  for (const SuiteStep& s : plan) m[s.name] = s.args;
  return m;
}

TEST(SuitePlan, TheCpuPlanIsTodaysSteps) {
  const auto steps = registry_steps();
  const auto cpu = suite_plan(steps, SuiteDevice::kCpu);
  ASSERT_EQ(cpu.size(), steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(cpu[i].name, steps[i].name);
    EXPECT_EQ(cpu[i].args, steps[i].args) << steps[i].name;
  }
  const auto by = args_by_name(cpu);
  EXPECT_EQ(by.at("profile"),
            (Args{"profile", "--device", "cpu", "--model", "gemma4-tiny", "--dtype", "fp32",
                  "--widths", "32,64,96,128", "--pad-fraction", "0.5", "--rank", "8", "--alpha",
                  "16", "--ce-chunk", "256"}));
  EXPECT_EQ(by.at("levers"),
            (Args{"levers", "--device", "cpu", "--model", "gemma4-tiny", "--dtype", "fp32",
                  "--widths", "48", "--pad-fraction", "0.5", "--rank", "8", "--ce-chunk",
                  "256", "--repeats", "3"}));
}

TEST(SuitePlan, TheCudaPlanRunsThe26BShapesInProfileAndLeversAndNothingElseChanges) {
  const auto steps = registry_steps();
  const auto cpu = args_by_name(suite_plan(steps, SuiteDevice::kCpu));
  const auto cuda_plan = suite_plan(steps, SuiteDevice::kCuda);
  ASSERT_EQ(cuda_plan.size(), steps.size());
  const auto cuda = args_by_name(cuda_plan);
  EXPECT_EQ(cuda.at("profile"),
            (Args{"profile", "--device", "cuda", "--model", "gemma4-26b-a4b", "--random-init",
                  "--widths", "2048,4096", "--repeats", "2"}));
  EXPECT_EQ(cuda.at("levers"),
            (Args{"levers", "--device", "cuda", "--model", "gemma4-26b-a4b", "--random-init",
                  "--widths", "2048", "--pad-fraction", "0.5", "--repeats", "3"}));
  // profile on CUDA keeps its kernel table: --trace is not turned off.
  const Args& p = cuda.at("profile");
  EXPECT_EQ(std::find(p.begin(), p.end(), "--trace"), p.end());
  for (const auto& [name, args] : cuda) {
    if (name == "profile" || name == "levers") continue;
    EXPECT_EQ(args, cpu.at(name)) << name << " differs between the CPU and the CUDA plan";
  }
  // Every other field of a step is kept, in order.
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(cuda_plan[i].name, steps[i].name);
    EXPECT_EQ(cuda_plan[i].needs, steps[i].needs);
    EXPECT_EQ(cuda_plan[i].expect_no, steps[i].expect_no);
  }
}

TEST(SuitePlan, AStepWithoutCudaArgumentsRunsItsOwnEverywhere) {
  const std::vector<SuiteStep> steps = {{"a", {"env"}},
                                        {"b", {"x", "1"}, "", false, "", {"x", "2"}}};
  EXPECT_EQ(suite_plan(steps, SuiteDevice::kCuda)[0].args, Args{"env"});
  EXPECT_EQ(suite_plan(steps, SuiteDevice::kCuda)[1].args, (Args{"x", "2"}));
  EXPECT_EQ(suite_plan(steps, SuiteDevice::kCpu)[1].args, (Args{"x", "1"}));
}

TEST(SuiteDevice, AutoIsCudaOnlyWhenTheModuleReportsAUsableDevice) {
  int asked = 0;
  auto usable = [&] {
    ++asked;
    return CudaProbe{true, "NVIDIA H200"};
  };
  auto none = [&] {
    ++asked;
    return CudaProbe{false, "no CUDA device visible"};
  };
  SuiteDeviceChoice c = choose_suite_device("auto", true, usable);
  EXPECT_EQ(c.device, SuiteDevice::kCuda);
  EXPECT_EQ(c.why, "auto: CUDA device usable (NVIDIA H200)");
  c = choose_suite_device("auto", true, none);
  EXPECT_EQ(c.device, SuiteDevice::kCpu);
  EXPECT_EQ(c.why, "auto: no usable CUDA device (no CUDA device visible)");
  EXPECT_EQ(asked, 2);
  // A build without CUDA never asks (the CPU build does not load libtorch to decide).
  c = choose_suite_device("auto", false, usable);
  EXPECT_EQ(c.device, SuiteDevice::kCpu);
  EXPECT_EQ(asked, 2);
  c = choose_suite_device("cpu", true, usable);
  EXPECT_EQ(c.device, SuiteDevice::kCpu);
  EXPECT_EQ(c.requested, "cpu");
  EXPECT_EQ(asked, 2);
  c = choose_suite_device("cuda", true, usable);
  EXPECT_EQ(c.device, SuiteDevice::kCuda);
  EXPECT_EQ(std::string(suite_device_name(c.device)), "cuda");
}

TEST(SuiteDevice, CudaWithoutADeviceOrABadValueIsAUsageError) {
  auto none = [] { return CudaProbe{false, "no CUDA driver installed"}; };
  try {
    choose_suite_device("cuda", true, none);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA driver installed"), std::string::npos);
  }
  EXPECT_THROW(choose_suite_device("cuda", false, none), UsageError);
  EXPECT_THROW(choose_suite_device("gpu", true, none), UsageError);
}

TEST(SuiteFixtures, GivenThenInstalledThenTheSourceTree) {
  std::set<std::string> dirs;
  auto is_dir = [&](const std::string& p) { return dirs.count(p) > 0; };
  // --fixtures wins, even when it does not exist (its steps then say so).
  FixturesChoice f = find_fixtures("/mine", "/p/bin/tprobe", "/src/tests/fixtures", is_dir);
  EXPECT_EQ(f.path, "/mine");
  EXPECT_EQ(f.source, "--fixtures");
  // Nothing exists: every place is named.
  f = find_fixtures("", "/p/bin/tprobe", "/src/tests/fixtures", is_dir);
  EXPECT_EQ(f.path, "");
  EXPECT_EQ(f.source, "none");
  EXPECT_EQ(f.looked_at, (Args{"/p/share/tprobe/fixtures", "/src/tests/fixtures"}));
  dirs.insert("/src/tests/fixtures");
  f = find_fixtures("", "/p/bin/tprobe", "/src/tests/fixtures", is_dir);
  EXPECT_EQ(f.path, "/src/tests/fixtures");
  EXPECT_EQ(f.source, "source tree");
  dirs.insert("/p/share/tprobe/fixtures");
  f = find_fixtures("", "/p/bin/tprobe", "/src/tests/fixtures", is_dir);
  EXPECT_EQ(f.path, "/p/share/tprobe/fixtures");
  EXPECT_EQ(f.source, "installed");
  EXPECT_EQ(f.looked_at, Args{"/p/share/tprobe/fixtures"});
  // A binary at the root: its prefix is the root itself.
  f = find_fixtures("", "/tprobe", "", is_dir);
  EXPECT_EQ(f.looked_at, Args{"/share/tprobe/fixtures"});
  f = find_fixtures("", "/bin/tprobe", "", is_dir);
  EXPECT_EQ(f.looked_at, Args{"/share/tprobe/fixtures"});
}

}  // namespace
}  // namespace tprobe::probes
