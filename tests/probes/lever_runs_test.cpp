// `levers`' orchestration (engine/lever_runs) on a fake engine: the analysis takes the engine as
// a parameter (engine::Access), so its whole run — the baseline, every lever, the best
// combination, a refusal as a row — is checked here with no libtorch. The fake's step time is a
// product of one factor per knob, so a row can only show the time of the configuration the sweep
// was handed: a lever whose knobs were lost or swapped on the way down, or a sweep's points read
// back in the wrong order, gives a row whose time is not its own configuration's.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/median.hpp"
#include "tprobe/core/cost/levers.hpp"
#include "tprobe/runs/lever_runs.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {
namespace {

using namespace engine;  // the engine's request and result types

constexpr const char* kRefusal = "the fake engine has no naive CE";

double fake_step_s(const core::StepConfig& c, const StepPoint& p) {
  double t = 1e-4 * static_cast<double>(p.real_tokens());
  if (c.norm == core::NormKind::kFused) t *= 0.8;
  if (c.lora_dtype == core::LoraDtype::kModel) t *= 0.9;
  if (c.checkpointing == core::Checkpointing::kOff) t *= 0.7;
  if (c.checkpointing == core::Checkpointing::kNonReentrant) t *= 1.1;
  if (c.ce == core::CeForm::kChunked) t *= 1.2;
  return t;
}

std::vector<core::StepConfig> g_sweeps;  // the configuration of every run_profile call, in order

ProfileReport fake_run_profile(const ProfileRequest& request,
                               const std::function<void(const PointResult&)>& on_point) {
  g_sweeps.push_back(request.spec.config);
  if (request.spec.config.ce == core::CeForm::kNaive) fail_usage("{}", kRefusal);
  ProfileReport rep;
  rep.config = request.spec.config;
  for (const StepPoint& p : request.spec.points) {
    PointResult r;
    r.point = p;
    // Three repeats of one value: no noise, so every difference is a verdict.
    r.step_s.assign(3, fake_step_s(request.spec.config, p));
    if (on_point) on_point(r);
    rep.steps.points.push_back(r);
  }
  return rep;
}

const Engine& fake_engine() {
  static const Engine table = [] {
    Engine t;
    t.version = kEngineVersion;
    t.run_profile = &fake_run_profile;
    return t;
  }();
  return table;
}

LeversOptions cpu_options() {
  LeversOptions o;
  o.step.device = "cpu";
  o.step.widths = {32, 64};
  o.step.repeats = 3;
  return o;
}

StepPoint point_of(const core::LeverRow& r) {
  StepPoint p;
  p.batch = r.batch;
  p.width = r.width;
  p.lengths = r.lengths;
  return p;
}

TEST(LeverRuns, EveryRowIsTheSweepOfItsOwnConfigurationOnAFakeEngine) {
  g_sweeps.clear();
  std::vector<std::string> streamed;
  const core::LeversReport rep = analyze_levers(
      &fake_engine, cpu_options(), [] { return false; },
      [&](const core::LeverRow& r) { streamed.push_back(r.lever); });

  ASSERT_FALSE(rep.rows.empty());
  EXPECT_EQ(streamed.size(), rep.rows.size());  // every row streamed as it was measured
  std::set<std::string> levers;
  int measured = 0, refused = 0;
  for (const core::LeverRow& r : rep.rows) {
    SCOPED_TRACE(r.lever + " " + r.setting + " " + std::to_string(r.batch) + "x" +
                 std::to_string(r.width));
    levers.insert(r.lever);
    if (r.config.ce == core::CeForm::kNaive) {
      ++refused;
      EXPECT_EQ(r.outcome, "refused");
      EXPECT_NE(r.message.find(kRefusal), std::string::npos) << r.message;
      continue;
    }
    ASSERT_EQ(r.outcome, "ok") << r.message;
    ++measured;
    EXPECT_DOUBLE_EQ(core::median(r.timing.samples_s), fake_step_s(r.config, point_of(r)));
  }
  // Not vacuous: the baseline, the levers the fake makes faster and slower, the refused one and
  // the best combination all ran.
  EXPECT_GT(measured, 8);
  EXPECT_GT(refused, 0);
  for (const char* l : {"baseline", "norm", "lora-dtype", "checkpointing", "ce", "best"}) {
    EXPECT_TRUE(levers.count(l)) << l;
  }
  // One sweep per configuration: the baseline, each lever's settings, the best.
  std::set<std::string> configs;
  for (const core::LeverRow& r : rep.rows) configs.insert(r.lever + "/" + r.setting);
  EXPECT_EQ(g_sweeps.size(), configs.size());

  // The best combines exactly the settings faster at every point they ran (the slower
  // non-reentrant checkpointing and chunked CE, the refused naive CE and the levers the fake leaves
  // equal are not in it); its rows' times were checked above as the product of their factors.
  ASSERT_TRUE(rep.best.has_value());
  const std::set<std::string> from(rep.best_from.begin(), rep.best_from.end());
  EXPECT_EQ(from, (std::set<std::string>{"--norm fused", "--lora-dtype model",
                                         "--checkpointing off"}));
  EXPECT_EQ(rep.best->norm, core::NormKind::kFused);
  EXPECT_EQ(rep.best->lora_dtype, core::LoraDtype::kModel);
  EXPECT_EQ(rep.best->checkpointing, core::Checkpointing::kOff);
  EXPECT_EQ(rep.best->ce, rep.baseline.ce);
}

TEST(LeverRuns, OnlyTheLeversAskedForAreSweptAndARunWithoutAnEngineIsRefused) {
  LeversOptions o = cpu_options();
  o.levers = {"norm"};
  g_sweeps.clear();
  const core::LeversReport rep = analyze_levers(&fake_engine, o, [] { return false; },
                                                [](const core::LeverRow&) {});
  std::set<std::string> levers;
  for (const core::LeverRow& r : rep.rows) levers.insert(r.lever);
  EXPECT_TRUE(levers.count("baseline"));
  EXPECT_TRUE(levers.count("norm"));
  EXPECT_FALSE(levers.count("ce"));  // --levers norm: no other lever's sweep
  for (const core::StepConfig& c : g_sweeps) EXPECT_NE(c.ce, core::CeForm::kNaive);

  LeversRequest none;
  EXPECT_THROW(run_levers(none), Error);
}

}  // namespace
}  // namespace tprobe::runs
