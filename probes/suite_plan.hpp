// The main job's decisions as pure functions (tprobe suite, docs/suite.md): which device the
// steps are planned for, the steps' argument lists on that device, and which fixtures folder the
// steps read. No I/O here: the caller hands in what it found, so the tests can plan a GPU run on
// a machine without one (tests/probes/suite_plan_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
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

// ---- the suite's evidence results ----

// One row of results.steps, in one of three shapes: a step that never started (why in message),
// a step that ran, and the report run after the steps. The JSON holds no kind: a row with state
// not_run or skipped never started, one with an "html" field is the report's.
enum class SuiteRowKind { kNotStarted, kRan, kReport };
struct SuiteStepResult {
  SuiteRowKind kind = SuiteRowKind::kRan;
  std::string name;
  // kNotStarted: not_run | skipped; kRan: ok | no | failed | interrupted; kReport: ok | failed
  std::string state;
  std::string message;  // kNotStarted
  int64_t exit_code = 0;  // kRan, kReport
  int64_t expected_exit_code = 0;  // kRan
  double wall_time_s = 0;  // kRan, kReport
  std::vector<std::string> argv;        // kRan
  std::optional<std::string> evidence;  // kRan: none when the step failed
  std::string log;                      // kRan
  std::string why;                      // kRan: the step's why; "" is not written
  std::string html, markdown;           // kReport
};

struct SuitePlannedStep {
  std::string name;
  std::vector<std::string> args;  // as resolved for this run
};

// What `tprobe suite` writes as its results: the folder, each step's row, the counts, and what
// was decided before any step ran (device, fixtures, the plan).
struct SuiteResults {
  std::string out;
  std::vector<SuiteStepResult> steps;
  int64_t failed = 0, said_no = 0, skipped = 0;
  SuiteDeviceChoice device;
  FixturesChoice fixtures;  // a path of "" is written as null
  std::vector<SuitePlannedStep> plan;
};
core::Json to_json(const SuiteResults& results);
// The reverse of to_json; `where` names the object ("s.json results").
SuiteResults suite_results_from_json(const core::Json& results, const std::string& where);

}  // namespace tprobe::probes
