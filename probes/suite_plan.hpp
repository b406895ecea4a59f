// The main job's decisions as pure functions (tprobe suite, docs/suite.md): which device the
// steps are planned for, the steps' argument lists on that device, and which fixtures folder the
// steps read. No I/O here: the caller hands in what it found, so the tests can plan a GPU run on
// a machine without one (tests/probes/suite_plan_test.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "probes/probe.hpp"

namespace tprobe::probes {

enum class SuiteDevice { kCpu, kCuda };

// "cpu" / "cuda".
const char* suite_device_name(SuiteDevice device);

// What the suite found about CUDA: whether this build's libtorch has it at all, and (asked only
// when it has) whether a device is usable, with the device's name or the reason it is not.
struct CudaProbe {
  bool usable = false;
  std::string detail;  // the device's name when usable, else why not
};

struct SuiteDeviceChoice {
  SuiteDevice device = SuiteDevice::kCpu;
  std::string requested;  // auto | cpu | cuda
  std::string why;        // one line: how the choice was made
};

// --device auto|cpu|cuda → the device the steps are planned for. `query` is called only when
// the answer depends on it (auto or cuda in a CUDA build), so a CPU build never loads libtorch to
// decide. auto: cuda when a device is usable, else cpu (saying why); cuda without a usable device
// (or in a build without CUDA) is a UsageError naming the reason; anything else is a UsageError.
SuiteDeviceChoice choose_suite_device(const std::string& requested, bool cuda_build,
                                      const std::function<CudaProbe()>& query);

// The steps as they run on `device`: each step with `args` replaced by its `cuda_args` when the
// device is CUDA and the step has them; every other field unchanged, the order kept.
std::vector<SuiteStep> suite_plan(const std::vector<SuiteStep>& steps, SuiteDevice device);

// Where the steps' fixtures come from. Search order: `given` (--fixtures) when not empty, used
// even when it does not exist (its steps are then skipped naming it); else the installed data
// folder `<bindir>/../share/tprobe/fixtures` of `exe` (this binary's path); else the source
// tree's `source_fixtures` compiled in. The first of the last two that `is_dir` is taken.
struct FixturesChoice {
  std::string path;                    // empty: none found
  std::string source;                  // "--fixtures", "installed", "source tree" or "none"
  std::vector<std::string> looked_at;  // every place considered, in order
};
FixturesChoice find_fixtures(const std::string& given, const std::string& exe,
                             const std::string& source_fixtures,
                             const std::function<bool(const std::string&)>& is_dir);

}  // namespace tprobe::probes
