// The main job's decisions (suite_plan.hpp): pure functions over what the suite found.
#include "probes/suite_plan.hpp"

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"

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

core::Json to_json(const SuiteResults& r) {
  core::Json rows = core::Json::array();
  for (const SuiteStepResult& s : r.steps) {
    core::Json row = {{"name", s.name}, {"state", s.state}};
    if (s.kind == SuiteRowKind::kNotStarted) {
      row["message"] = s.message;
    } else if (s.kind == SuiteRowKind::kReport) {
      row["exit_code"] = s.exit_code;
      row["wall_time_s"] = s.wall_time_s;
      row["html"] = s.html;
      row["markdown"] = s.markdown;
    } else {
      row["exit_code"] = s.exit_code;
      row["expected_exit_code"] = s.expected_exit_code;
      row["wall_time_s"] = s.wall_time_s;
      row["argv"] = s.argv;
      row["evidence"] = core::json_or_null(s.evidence);
      row["log"] = s.log;
      if (!s.why.empty()) row["why"] = s.why;
    }
    rows.push_back(std::move(row));
  }
  core::Json plan = core::Json::array();
  for (const SuitePlannedStep& p : r.plan) plan.push_back({{"name", p.name}, {"args", p.args}});
  return {{"out", r.out},
          {"steps", std::move(rows)},
          {"failed", r.failed},
          {"said_no", r.said_no},
          {"skipped", r.skipped},
          {"device", {{"requested", r.device.requested},
                      {"resolved", suite_device_name(r.device.device)},
                      {"why", r.device.why}}},
          {"fixtures", r.fixtures.path.empty() ? core::Json(nullptr) : core::Json(r.fixtures.path)},
          {"fixtures_source", r.fixtures.source},
          {"fixtures_looked_at", r.fixtures.looked_at},
          {"plan", std::move(plan)}};
}

namespace {

namespace jr = core::json_read;

// A string field that must be one of `allowed` (a row's state for its shape, the device).
std::string one_of(const core::Json& obj, const char* key, const std::string& w,
                   std::initializer_list<const char*> allowed) {
  const std::string v = jr::string(obj, key, w);
  for (const char* a : allowed) {
    if (v == a) return v;
  }
  fail("{}: field '{}' must be one of {}, got \"{}\"", w, key, fmt::join(allowed, ", "), v);
}

SuiteStepResult step_result_from_json(const core::Json& row, const std::string& w) {
  SuiteStepResult s;
  s.name = jr::string(row, "name", w);
  const std::string state = jr::string(row, "state", w);
  if (state == "not_run" || state == "skipped") {
    s.kind = SuiteRowKind::kNotStarted;
    s.state = state;
    s.message = jr::string(row, "message", w);
    return s;
  }
  constexpr int64_t kMaxExit = 255 + 128;  // an exit status, or 128 + a signal
  if (jr::optional(row, "html") != nullptr) {
    s.kind = SuiteRowKind::kReport;
    s.state = one_of(row, "state", w, {"ok", "failed"});
    s.exit_code = jr::integer(row, "exit_code", w, 0, kMaxExit);
    s.wall_time_s = jr::number(row, "wall_time_s", w);
    s.html = jr::string(row, "html", w);
    s.markdown = jr::string(row, "markdown", w);
    return s;
  }
  s.kind = SuiteRowKind::kRan;
  s.state = one_of(row, "state", w, {"ok", "no", "failed", "interrupted"});
  s.exit_code = jr::integer(row, "exit_code", w, 0, kMaxExit);
  s.expected_exit_code = jr::integer(row, "expected_exit_code", w, 0, kMaxExit);
  s.wall_time_s = jr::number(row, "wall_time_s", w);
  s.argv = jr::strings(row, "argv", w);
  s.evidence = jr::nullable_string(row, "evidence", w);
  s.log = jr::string(row, "log", w);
  // Written only when the step has one.
  if (jr::optional(row, "why") != nullptr) s.why = jr::string(row, "why", w);
  return s;
}

}  // namespace

SuiteResults suite_results_from_json(const core::Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  SuiteResults r;
  r.out = jr::string(j, "out", where);
  const core::Json& steps = jr::array(j, "steps", where);
  for (std::size_t i = 0; i < steps.size(); ++i)
    r.steps.push_back(step_result_from_json(steps[i], jr::at(where, "steps", i)));
  r.failed = jr::integer(j, "failed", where, 0, static_cast<int64_t>(steps.size()));
  r.said_no = jr::integer(j, "said_no", where, 0, static_cast<int64_t>(steps.size()));
  r.skipped = jr::integer(j, "skipped", where, 0, static_cast<int64_t>(steps.size()));
  const core::Json& d = jr::object(j, "device", where);
  const std::string dw = where + ".device";
  r.device.requested = jr::string(d, "requested", dw);
  r.device.device =
      one_of(d, "resolved", dw, {"cpu", "cuda"}) == "cuda" ? SuiteDevice::kCuda : SuiteDevice::kCpu;
  r.device.why = jr::string(d, "why", dw);
  r.fixtures.path = jr::nullable_string(j, "fixtures", where).value_or("");
  r.fixtures.source = jr::string(j, "fixtures_source", where);
  r.fixtures.looked_at = jr::strings(j, "fixtures_looked_at", where);
  const core::Json& plan = jr::array(j, "plan", where);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const std::string w = jr::at(where, "plan", i);
    r.plan.push_back({jr::string(plan[i], "name", w), jr::strings(plan[i], "args", w)});
  }
  return r;
}

}  // namespace tprobe::probes
