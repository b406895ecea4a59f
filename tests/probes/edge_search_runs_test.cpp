// `profile --gpu-memory`'s edge search (runs/profile_analysis) on a fake engine: the fake runs the
// sweep's extra groups in rounds as the engine does (each group under its cap, `steps` steps per
// point), on a device whose peak is c0 + c1·tokens and grows by 1 GiB of fragmentation at the
// third step. So the memory model, fitted on the sweep's one-step peaks, overshoots; the search
// must find the edge that runs three steps, and the step past it, for both axes.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/runs/profile_analysis.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {
namespace {

using namespace engine;  // the engine's request and result types

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kC0 = 8 * kGiB;
constexpr int64_t kPerToken = int64_t{1} << 18;  // 256 KiB
constexpr int64_t kFragmentation = kGiB;         // from the third consecutive step on

int64_t fake_peak(const StepPoint& p, int64_t steps) {
  return kC0 + kPerToken * p.batch * p.width + (steps >= 3 ? kFragmentation : 0);
}

struct FakeState {
  std::vector<ExtraPoints> groups;  // every group asked for, in order
  int stop_after_extra = -1;        // the signal after this many extra points (-1: never)
  int extra_run = 0;
  DeviceMemory device;
};
FakeState g;

PointResult fake_point(const StepPoint& p, int64_t steps, int64_t cap) {
  PointResult r;
  r.point = p;
  r.memory_measured = true;
  const int64_t peak = fake_peak(p, steps);
  if (cap > 0 && peak > cap) {
    r.outcome = PointOutcome::kOom;
    r.message = "CUDA out of memory (fake)";
    r.wall_s = 0.05;
    return r;
  }
  r.step_s.assign(static_cast<size_t>(steps), 0.01);
  r.peak_allocated_bytes = peak;
  r.peak_reserved_bytes = peak;
  r.wall_s = 0.01 * static_cast<double>(steps);
  return r;
}

ProfileReport fake_run_profile(const ProfileRequest& request,
                               const std::function<void(const PointResult&)>& on_point) {
  ProfileReport rep;
  rep.config = request.spec.config;
  rep.config.attn = core::AttentionPath::kSdpa;  // resolved, as the engine does
  rep.steps.config = core::embedded_model("gemma4-tiny");
  rep.steps.device_resolved = "cuda:0";
  for (const StepPoint& p : request.spec.points) {
    // The sweep's points: one timed step's worth of memory (no cap, no fragmentation yet).
    PointResult r = fake_point(p, 1, 0);
    r.step_s.assign(3, 0.01);
    if (on_point) on_point(r);
    rep.steps.points.push_back(r);
    rep.traces.emplace_back();  // untraced, as with --trace off
  }
  // The engine's rounds (src/model/step_runner.cpp).
  for (int round = 0; request.spec.extra_points && !rep.steps.interrupted && round < kMaxExtraRounds;
       ++round) {
    std::vector<ExtraPoints> groups = request.spec.extra_points(rep.steps);
    if (groups.empty()) break;
    for (const ExtraPoints& group : groups) {
      g.groups.push_back(group);
      std::vector<PointResult> results;
      for (const StepPoint& p : group.points) {
        if (g.stop_after_extra >= 0 && g.extra_run >= g.stop_after_extra) {
          rep.steps.interrupted = true;
          break;
        }
        ++g.extra_run;
        PointResult r = fake_point(p, group.steps, group.memory_cap_bytes);
        r.extra = true;
        results.push_back(r);
      }
      rep.steps.extra.push_back(std::move(results));
      if (rep.steps.interrupted) break;
    }
  }
  return rep;
}

DeviceMemory fake_device_memory() { return g.device; }

const Engine& fake_engine() {
  static const Engine table = [] {
    Engine t;
    t.version = kEngineVersion;
    t.run_profile = &fake_run_profile;
    t.device_memory = &fake_device_memory;
    return t;
  }();
  return table;
}

ProfileOptions cuda_options() {
  g = FakeState{};
  ProfileOptions o;
  o.device = "cuda";
  o.random_init = true;
  o.widths = {1024, 2048, 3072, 4096};
  o.config.batch = 2;
  o.trace = "off";
  o.memory = "off";
  o.peak_tflops = 1;
  o.gpu_memory_gib = {40};
  o.edge_step = 1024;
  return o;
}

// The fake device's edge under `cap`, three steps: the largest multiple of `step` on the axis.
int64_t true_edge(int64_t cap, int64_t fixed, int64_t step) {
  const int64_t v = (cap - kC0 - kFragmentation) / (kPerToken * fixed);
  return v / step * step;
}

TEST(EdgeSearchRuns, FindsTheEdgeThatRunsThreeStepsOnBothAxes) {
  std::vector<std::string> progress;
  ProfileHooks hooks;
  hooks.on_progress = [&](const std::string& line) { progress.push_back(line); };
  const ProfileAnalysis a = analyze_profile(&fake_engine, cuda_options(), "", hooks);
  const MemoryFitReport& mf = a.memory_fit;
  ASSERT_TRUE(mf.fit.ok) << mf.fit.why_not;
  ASSERT_EQ(mf.budgets.size(), 1u);
  const MemoryBudget& b = mf.budgets[0];
  ASSERT_EQ(b.searches.size(), 2u);
  const core::EdgeSearchResult& w = b.searches[0];
  const core::EdgeSearchResult& n = b.searches[1];
  const int64_t cap = 40 * kGiB;
  EXPECT_EQ(w.request.axis, "width");
  EXPECT_EQ(w.status, "found") << w.note;
  EXPECT_EQ(w.edge, true_edge(cap, 2, 1024));
  EXPECT_EQ(w.past, w.edge + 1024);
  EXPECT_EQ(n.request.axis, "batch");
  EXPECT_EQ(n.request.width, 4096);
  EXPECT_EQ(n.status, "found") << n.note;
  EXPECT_EQ(n.edge, true_edge(cap, 4096, 1));
  EXPECT_EQ(n.past, n.edge + 1);
  // The model saw one-step peaks, so it overshoots by the fragmentation, and says by how much.
  ASSERT_TRUE(w.request.predicted && n.request.predicted);
  EXPECT_GT(*w.request.predicted, w.edge);
  EXPECT_EQ(*w.error_steps, (*w.request.predicted - w.edge) / 1024);
  EXPECT_EQ(*n.error_steps, *n.request.predicted - n.edge);
  EXPECT_GT(*n.error_steps, 0);
  // Every probe ran three steps under the budget's cap, one line of progress each.
  ASSERT_FALSE(g.groups.empty());
  for (const ExtraPoints& x : g.groups) {
    EXPECT_EQ(x.steps, core::kEdgeSearchSteps);
    EXPECT_EQ(x.memory_cap_bytes, cap);
  }
  EXPECT_EQ(progress.size(), w.probes.size() + n.probes.size());
  EXPECT_EQ(a.report.steps.extra.size(), g.groups.size());
  // The evidence reads back whole.
  const core::Json j = to_json(a);
  EXPECT_EQ(to_json(profile_analysis_from_json(j, "p")), j);
  EXPECT_EQ(j["memory_fit"]["edge_search"], "on");
  EXPECT_EQ(j["memory_fit"]["budgets"][0]["searches"][0]["edge"], w.edge);
}

TEST(EdgeSearchRuns, OffChecksThePredictedEdgesOnceOneStepEach) {
  ProfileOptions o = cuda_options();
  o.edge_search = "off";
  const ProfileAnalysis a = analyze_profile(&fake_engine, o, "", {});
  ASSERT_EQ(a.memory_fit.budgets.size(), 1u);
  EXPECT_TRUE(a.memory_fit.budgets[0].searches.empty());
  EXPECT_EQ(a.memory_fit.budgets[0].checks.size(), 2u);
  ASSERT_EQ(g.groups.size(), 1u);  // one round
  EXPECT_EQ(g.groups[0].steps, 1);
  const core::Json j = to_json(a);
  EXPECT_EQ(to_json(profile_analysis_from_json(j, "p")), j);
  core::Json bad = j;  // a search under edge_search off
  bad["memory_fit"]["budgets"][0]["searches"] = core::Json::array({core::Json::object()});
  EXPECT_THROW(profile_analysis_from_json(bad, "p"), Error);
}

TEST(EdgeSearchRuns, ASignalStopsTheSearchesAndTheyReadBack) {
  ProfileOptions o = cuda_options();
  g.stop_after_extra = 3;
  const ProfileAnalysis a = analyze_profile(&fake_engine, o, "", {});
  ASSERT_EQ(a.memory_fit.budgets.size(), 1u);
  int probes = 0, stopped = 0;
  for (const auto& s : a.memory_fit.budgets[0].searches) {
    stopped += s.status == "stopped" ? 1 : 0;
    probes += static_cast<int>(s.probes.size());
  }
  EXPECT_EQ(probes, 3);  // the third probe's round was cut short: its other probe never ran
  EXPECT_GE(stopped, 1);
  const core::Json j = to_json(a);
  EXPECT_EQ(to_json(profile_analysis_from_json(j, "p")), j);
}

TEST(EdgeSearchRuns, TheReserveReadOffTheDevice) {
  ProfileOptions o = cuda_options();
  o.gpu_memory_gib.clear();
  o.reserve_from_device = true;
  g.device.total_bytes = 80 * kGiB;
  g.device.free_bytes = 60 * kGiB;
  g.device.own_reserved_bytes = 2 * kGiB;  // tprobe's own: not a co-tenant's
  g.device.source = "cudaMemGetInfo on cuda:0 (fake)";
  const ProfileAnalysis a = analyze_profile(&fake_engine, o, "", {});
  ASSERT_EQ(a.memory_fit.budgets.size(), 1u);
  const MemoryBudget& b = a.memory_fit.budgets[0];
  EXPECT_EQ(b.gpu_memory_bytes, 80.0 * kGiB);
  EXPECT_EQ(b.reserve_bytes, 18.0 * kGiB);
  EXPECT_NE(b.gpu_memory_source.find("the device's total"), std::string::npos);
  EXPECT_NE(b.reserve_source.find("--reserve-from-device"), std::string::npos);
  ASSERT_TRUE(b.device);
  EXPECT_EQ(b.device->others_bytes, 18.0 * kGiB);
  for (const ExtraPoints& x : g.groups) EXPECT_EQ(x.memory_cap_bytes, 62 * kGiB);
  ASSERT_EQ(b.searches.size(), 2u);
  EXPECT_EQ(b.searches[0].edge, true_edge(62 * kGiB, 2, 1024));
  const core::Json j = to_json(a);
  EXPECT_EQ(to_json(profile_analysis_from_json(j, "p")), j);
  core::Json bad = j;
  bad["memory_fit"]["budgets"][0]["device_memory"]["others_bytes"] = 1.0;
  EXPECT_THROW(profile_analysis_from_json(bad, "p"), Error);
}

TEST(EdgeSearchRuns, TheReserveFromDeviceNeedsACudaDevice) {
  ProfileOptions o = cuda_options();
  o.reserve_from_device = true;
  g.device.unavailable = "libtorch 1.13.1 was built without CUDA";
  try {
    analyze_profile(&fake_engine, o, "", {});
    FAIL() << "no device, and no refusal";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--reserve-from-device needs a CUDA device"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(g.groups.empty());
  // With --reserve instead it runs; with both, or on the CPU, it is refused before anything runs.
  ProfileOptions with_reserve = cuda_options();
  with_reserve.reserve_gib = {2};
  EXPECT_EQ(analyze_profile(&fake_engine, with_reserve, "", {}).memory_fit.budgets.size(), 1u);
  o = cuda_options();
  o.reserve_from_device = true;
  o.reserve_gib = {2};
  EXPECT_THROW(analyze_profile(&fake_engine, o, "", {}), UsageError);
  o = cuda_options();
  o.reserve_from_device = true;
  o.device = "cpu";
  EXPECT_THROW(analyze_profile(&fake_engine, o, "", {}), UsageError);
}

}  // namespace
}  // namespace tprobe::runs
