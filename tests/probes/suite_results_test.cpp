// The suite's results read back by their own code (issue 34, item 2): every shape of a step row
// survives to_json -> suite_results_from_json -> to_json, and a damaged file is one tprobe::Error
// naming the field.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "probes/probe.hpp"
#include "probes/suite_plan.hpp"
#include "support/error_of.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::probes {
namespace {

using core::Json;

// A suite run as `tprobe suite --skip levers` writes it on the CPU, stopped by no signal: a step
// skipped by --skip, one for want of its fixtures, one that ran, one that said no as expected,
// one that failed, and the report.
SuiteResults hand_results() {
  SuiteResults r;
  r.out = "out";
  r.device = choose_suite_device("auto", false, [] { return CudaProbe{}; });
  r.fixtures = {"/src/tests/fixtures", "source tree",
                {"/usr/share/tprobe/fixtures", "/src/tests/fixtures"}};
  std::vector<SuiteStep> steps;
  for (const ProbeInfo& p : all_probes())
    steps.insert(steps.end(), p.suite_steps.begin(), p.suite_steps.end());
  for (const SuiteStep& s : suite_plan(steps, r.device.device)) r.plan.push_back({s.name, s.args});

  SuiteStepResult skip;
  skip.kind = SuiteRowKind::kNotStarted;
  skip.name = "levers";
  skip.state = "skipped";
  skip.message = "--skip";
  SuiteStepResult missing = skip;
  missing.name = "parity";
  missing.message = "skipped: /src/tests/fixtures/adapters not found (the source tree fixtures)";
  SuiteStepResult ok;
  ok.name = "env";
  ok.state = "ok";
  ok.wall_time_s = 0.25;
  ok.argv = {"env", "--json", "out/env.json"};
  ok.evidence = "out/env.json";
  ok.log = "out/logs/env.txt";
  SuiteStepResult no = ok;
  no.name = "lora-gate-no";
  no.state = "no";
  no.exit_code = 3;
  no.expected_exit_code = 3;
  no.evidence = "out/lora-gate-no.json";
  no.why = "a rank-8 adapter against a rank-16 gate: the gate says no";
  SuiteStepResult failed = ok;
  failed.name = "kernels";
  failed.state = "failed";
  failed.exit_code = 1;
  failed.evidence.reset();
  SuiteStepResult report;
  report.kind = SuiteRowKind::kReport;
  report.name = "report";
  report.state = "ok";
  report.wall_time_s = 1.5;
  report.html = "out/report.html";
  report.markdown = "out/report.md";
  r.steps = {skip, missing, ok, no, failed, report};
  r.failed = 1;
  r.skipped = 2;
  return r;
}

std::set<std::string> keys(const Json& row) {
  std::set<std::string> out;
  for (auto it = row.begin(); it != row.end(); ++it) out.insert(it.key());
  return out;
}

using testing_support::error_of;

TEST(SuiteResults, ToJsonOfTheReadBackIsTheSameDocument) {
  const SuiteResults r = hand_results();
  const Json j = to_json(r);
  const SuiteResults back = suite_results_from_json(j, "s.json results");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(to_json(suite_results_from_json(Json::parse(j.dump()), "s.json results")), j);

  EXPECT_EQ(back.out, "out");
  EXPECT_EQ(back.failed, 1);
  EXPECT_EQ(back.said_no, 0);
  EXPECT_EQ(back.skipped, 2);
  EXPECT_EQ(back.device.device, SuiteDevice::kCpu);
  EXPECT_EQ(back.device.requested, "auto");
  EXPECT_EQ(back.device.why, r.device.why);
  EXPECT_EQ(back.fixtures.path, "/src/tests/fixtures");
  EXPECT_EQ(back.fixtures.looked_at, r.fixtures.looked_at);
  ASSERT_EQ(back.plan.size(), r.plan.size());
  ASSERT_FALSE(back.plan.empty());
  EXPECT_EQ(back.plan[0].args, r.plan[0].args);
  ASSERT_EQ(back.steps.size(), 6u);
  EXPECT_EQ(back.steps[0].kind, SuiteRowKind::kNotStarted);
  EXPECT_EQ(back.steps[1].message, r.steps[1].message);
  EXPECT_EQ(back.steps[2].kind, SuiteRowKind::kRan);
  EXPECT_EQ(back.steps[2].evidence, std::optional<std::string>("out/env.json"));
  EXPECT_EQ(back.steps[3].why, r.steps[3].why);
  EXPECT_EQ(back.steps[3].expected_exit_code, 3);
  EXPECT_EQ(back.steps[4].evidence, std::nullopt);
  EXPECT_EQ(back.steps[5].kind, SuiteRowKind::kReport);
  EXPECT_EQ(back.steps[5].html, "out/report.html");
  EXPECT_EQ(back.steps[5].wall_time_s, 1.5);

  // Each shape writes the fields the suite always wrote, and no more.
  EXPECT_EQ(keys(j["steps"][0]), (std::set<std::string>{"name", "state", "message"}));
  EXPECT_EQ(keys(j["steps"][2]),
            (std::set<std::string>{"name", "state", "exit_code", "expected_exit_code",
                                   "wall_time_s", "argv", "evidence", "log"}));
  EXPECT_TRUE(j["steps"][3].contains("why"));
  EXPECT_TRUE(j["steps"][4]["evidence"].is_null());
  EXPECT_EQ(keys(j["steps"][5]), (std::set<std::string>{"name", "state", "exit_code",
                                                        "wall_time_s", "html", "markdown"}));
  EXPECT_EQ(keys(j), (std::set<std::string>{"out", "steps", "failed", "said_no", "skipped",
                                            "device", "fixtures", "fixtures_source",
                                            "fixtures_looked_at", "plan"}));

  // No fixtures found: written as null, read back as none.
  SuiteResults none = r;
  none.fixtures = {"", "none", {"/usr/share/tprobe/fixtures"}};
  const Json n = to_json(none);
  EXPECT_TRUE(n["fixtures"].is_null());
  EXPECT_EQ(suite_results_from_json(n, "s.json results").fixtures.path, "");
  EXPECT_EQ(to_json(suite_results_from_json(n, "s.json results")), n);
}

TEST(SuiteResults, ABrokenFileIsOneErrorNamingTheField) {
  const Json good = to_json(hand_results());
  auto read = [](const Json& j) {
    return error_of([&] { suite_results_from_json(j, "s.json results"); });
  };
  ASSERT_EQ(read(good), "");
  Json j = good;
  j["steps"][2].erase("argv");  // missing
  EXPECT_EQ(read(j), "s.json results steps[2]: missing field 'argv'");
  j = good;
  j["steps"][2]["state"] = "maybe";  // not a state of a step that ran
  EXPECT_EQ(read(j), "s.json results steps[2]: field 'state' must be one of ok, no, failed, "
                     "interrupted, got \"maybe\"");
  j = good;
  j["steps"][5]["state"] = "no";  // the report never says no
  EXPECT_NE(read(j).find("steps[5]: field 'state' must be one of ok, failed"), std::string::npos)
      << read(j);
  j = good;
  j["steps"][3]["exit_code"] = "3";  // wrong type
  EXPECT_NE(read(j).find("steps[3]: field 'exit_code' must be an integer"), std::string::npos)
      << read(j);
  j = good;
  j["failed"] = 7;  // out of range: more than the six rows
  EXPECT_NE(read(j).find("s.json results: field 'failed' must be an integer in 0..6"),
            std::string::npos)
      << read(j);
  j = good;
  j["device"]["resolved"] = "tpu";
  EXPECT_NE(read(j).find("s.json results.device: field 'resolved' must be one of cpu, cuda"),
            std::string::npos)
      << read(j);
  j = good;
  j["plan"][0]["args"] = "env";
  EXPECT_NE(read(j).find("s.json results plan[0]: field 'args' must be an array"),
            std::string::npos)
      << read(j);
  j = good;
  j["steps"][0]["message"] = 5;
  EXPECT_NE(read(j).find("steps[0]: field 'message' must be a string"), std::string::npos)
      << read(j);
}

}  // namespace
}  // namespace tprobe::probes
