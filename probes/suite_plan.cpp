// The main job's decisions (suite_plan.hpp): pure functions over what the suite found.
#include "probes/suite_plan.hpp"

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"

namespace tprobe::probes {

const char* suite_device_name(SuiteDevice device) {
  return device == SuiteDevice::kCuda ? "cuda" : "cpu";
}

SuiteDeviceChoice choose_suite_device(const std::string& requested, bool cuda_build,
                                      const std::function<CudaProbe()>& query) {
  SuiteDeviceChoice c;
  c.requested = requested;
  if (requested == "cpu") {
    c.device = SuiteDevice::kCpu;
    c.why = "--device cpu";
    return c;
  }
  if (requested != "auto" && requested != "cuda") {
    fail_usage("--device {}: expected auto, cpu or cuda", requested);
  }
  if (!cuda_build) {
    if (requested == "cuda") {
      fail_usage("--device cuda: this tprobe was built against a libtorch without CUDA");
    }
    c.device = SuiteDevice::kCpu;
    c.why = "auto: this tprobe was built against a libtorch without CUDA";
    return c;
  }
  const CudaProbe found = query ? query() : CudaProbe{false, "not asked"};
  if (found.usable) {
    c.device = SuiteDevice::kCuda;
    c.why = fmt::format("{}: CUDA device usable ({})", requested, found.detail);
    return c;
  }
  if (requested == "cuda") fail_usage("--device cuda: no usable CUDA device: {}", found.detail);
  c.device = SuiteDevice::kCpu;
  c.why = fmt::format("auto: no usable CUDA device ({})", found.detail);
  return c;
}

std::vector<SuiteStep> suite_plan(const std::vector<SuiteStep>& steps, SuiteDevice device) {
  std::vector<SuiteStep> plan = steps;
  if (device != SuiteDevice::kCuda) return plan;
  for (SuiteStep& s : plan) {
    if (!s.cuda_args.empty()) s.args = s.cuda_args;
  }
  return plan;
}

FixturesChoice find_fixtures(const std::string& given, const std::string& exe,
                             const std::string& source_fixtures,
                             const std::function<bool(const std::string&)>& is_dir) {
  FixturesChoice c;
  if (!given.empty()) {
    c.path = given;
    c.source = "--fixtures";
    c.looked_at = {given};
    return c;
  }
  // <prefix>/bin/tprobe -> <prefix>/share/tprobe/fixtures.
  std::string installed;
  const std::size_t bin = exe.rfind('/');
  if (bin != std::string::npos) {
    const std::string bindir = exe.substr(0, bin);
    const std::size_t up = bindir.rfind('/');
    // "/tprobe": the root is its own parent; "bin/tprobe": the current folder.
    const std::string prefix = up != std::string::npos ? bindir.substr(0, up)
                               : bindir.empty()        ? ""
                                                       : ".";
    installed = prefix + "/share/tprobe/fixtures";
  }
  const std::pair<std::string, const char*> candidates[] = {{installed, "installed"},
                                                            {source_fixtures, "source tree"}};
  for (const auto& [path, source] : candidates) {
    if (path.empty()) continue;
    c.looked_at.push_back(path);
    if (is_dir(path)) {
      c.path = path;
      c.source = source;
      return c;
    }
  }
  c.source = "none";
  return c;
}

}  // namespace tprobe::probes
