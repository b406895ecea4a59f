// profile's measured points read back by profile's own reader, without libtorch: hand-made
// PointResults (ok, oom, error, padded, with and without a memory step) survive point_to_json ->
// point_from_json -> point_to_json, damaged points are one tprobe::Error naming the field, and
// scaling-fit --profile takes the ok repeats of the unpadded points (read_profile_points_evidence).
// tests/model/step_runner_test.cpp round-trips a real CPU sweep's points.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "probes/scaling_fit_probe.hpp"
#include "support/error_of.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/cost/scaling_fit.hpp"
#include "tprobe/runs/step_report.hpp"

namespace tprobe::runs {
namespace {

using namespace engine;  // the engine's request and result types

using core::Json;
using testing_support::error_of;

const std::string kFixtures = TPROBE_FIXTURES_DIR;
const std::string kPointWhere = "p.json point";

PointResult ok_point(int64_t batch, int64_t width) {
  PointResult r;
  r.point = {batch, width, {}};
  r.step_s = {0.5, 0.52, 0.51};
  r.forward_s = {0.2, 0.21, 0.2};
  r.loss_s = {0.01, 0.01, 0.012};
  r.backward_s = {0.28, 0.3, 0.29};
  r.planned_floor_bytes = 1.25e9;
  r.loss_value = 11.75;
  r.loss_targets = batch * width - batch;
  r.attn_sliding = "sdpa(bool_mask,padding,repeat_kv)";
  r.attn_full = "sdpa";
  r.moe = "loop";
  return r;
}

core::StepMemory hand_memory(bool totals_known) {
  core::StepMemory m;
  m.device = "cuda:0";
  m.totals_known = totals_known;
  m.events = 120;
  m.start_allocated = 1000;
  m.end_allocated = 1100;
  m.peak_allocated = 5000;
  m.peak_event = 61;
  m.peak_t_ns = 123456;
  m.reserved_at_peak = totals_known ? 8192 : -1;
  m.peak_reserved = totals_known ? 8192 : -1;
  m.peak_phase = "backward";
  m.peak_part = "attention_core";
  m.peak_layer_kind = "sliding";
  m.peak_layer = 3;
  m.untagged_bytes_at_peak = 16;
  m.alive_at_peak = {{"forward", "dense_mlp", "full", 1, 2048, 4}, {"untagged", "untagged", "", -1,
                                                                    16, 1}};
  m.items = {{"weights", "base weights", 900, true, ""},
             {"activations", "saved activations", 4100, true, "the checkpoints' inputs"},
             {"reserved_slack", "reserved, not allocated", 3192, false, ""}};
  core::MemorySample s;
  s.event = -1;
  s.allocated = 1000;
  s.reserved = totals_known ? 4096 : -1;
  s.by_slot[0] = 1000;
  core::MemorySample t = s;
  t.event = 61;
  t.t_ns = 123456;
  t.allocated = 5000;
  t.by_slot[3] = 4000;
  m.timeline = {s, t};
  return m;
}

std::vector<PointResult> hand_points() {
  std::vector<PointResult> out;
  out.push_back(ok_point(2, 2048));  // no memory measured (the CPU)

  PointResult mem = ok_point(2, 4096);  // CUDA: peaks, a traced step, a memory step
  mem.memory_measured = true;
  mem.peak_allocated_bytes = 5000;
  mem.peak_reserved_bytes = 8192;
  mem.traced = true;
  mem.traced_step_s = 0.55;
  mem.trace_priming_step_s = 0.9;
  mem.memory = hand_memory(true);
  mem.memory_step_s = 0.6;
  mem.memory_step_peak_allocated_bytes = 5000;
  mem.inert_adapters = 1;
  mem.optimizer_s = {0.03, 0.031, 0.03};  // --optimizer adamw: its step timed
  out.push_back(mem);

  PointResult no_totals = ok_point(1, 1024);  // a memory step without the allocator's totals
  no_totals.memory = hand_memory(false);
  no_totals.memory_step_s = 0.3;
  no_totals.traced = true;
  no_totals.traced_step_s = 0.0;
  no_totals.trace_message = "the trace lost 3 records";
  out.push_back(no_totals);

  PointResult oom;
  oom.point = {2, 32768, {}};
  oom.outcome = PointOutcome::kOom;
  oom.message = "CUDA out of memory";
  oom.oom_tried_bytes = int64_t{1} << 31;
  oom.planned_floor_bytes = 2e11;
  oom.refused_before_running = true;
  oom.memory_message = "not recorded: the point did not run";
  out.push_back(oom);

  PointResult err;
  err.point = {4, 512, {}};
  err.outcome = PointOutcome::kError;
  err.message = "shape mismatch";
  out.push_back(err);

  PointResult diverged = ok_point(2, 1024);  // a loss that is not finite is written as null
  diverged.loss_value = std::numeric_limits<double>::quiet_NaN();
  out.push_back(diverged);

  PointResult padded = ok_point(2, 4096);
  padded.point.lengths = {4096, 1000};
  padded.loss_targets = 4095 + 999;
  out.push_back(padded);
  return out;
}

TEST(ProfilePoints, HandMadePointsRoundTrip) {
  for (const PointResult& p : hand_points()) {
    const Json first = point_to_json(p);
    EXPECT_EQ(point_to_json(point_from_json(first, kPointWhere)).dump(), first.dump());
  }
  // The whole points part of profile's results: unpadded under points, padded under
  // padded_points, and whatever profile adds beside a point (its costs) not in the way.
  StepReport rep;
  rep.points = hand_points();
  Json results = to_json(rep);
  results["points"][0]["intended_flops"] = 1.5e12;
  std::vector<PointResult> back = profile_points_from_json(results, "p.json results");
  ASSERT_EQ(back.size(), rep.points.size());
  EXPECT_TRUE(back.back().point.padded());
  rep.points = back;
  Json again = to_json(rep);
  again["points"][0]["intended_flops"] = 1.5e12;
  EXPECT_EQ(again.dump(), results.dump());
  EXPECT_TRUE(std::isnan(back[5].loss_value));

  // The weights' allocation: null where no allocator was asked (the CPU), not "0 B"; a measured
  // one, 0 included, reads back as written, and a negative number is refused.
  EXPECT_TRUE(results["weights_allocated_bytes"].is_null());
  EXPECT_EQ(core::evidence::from_json<core::StepFigures>(results, "p").weights_allocated_bytes, -1);
  for (int64_t bytes : {int64_t{0}, int64_t{50874595840}}) {
    rep.weights_allocated_bytes = bytes;
    const Json measured = to_json(rep);
    EXPECT_EQ(measured["weights_allocated_bytes"], bytes);
    EXPECT_EQ(core::evidence::from_json<core::StepFigures>(measured, "p").weights_allocated_bytes,
              bytes);
  }
  Json negative = results;
  negative["weights_allocated_bytes"] = -1;
  EXPECT_THROW(core::evidence::from_json<core::StepFigures>(negative, "p"), Error);
}

// What `mutate` makes of a written ok point with a memory step, read back: the error message.
std::string broken(const std::function<void(Json&)>& mutate) {
  Json j = point_to_json(hand_points()[1]);
  mutate(j);
  return error_of([&] { point_from_json(j, kPointWhere); });
}

using testing_support::names;

TEST(ProfilePoints, BrokenPointsNameTheField) {
  EXPECT_TRUE(names(broken([](Json& j) { j.erase("batch"); }), "missing field 'batch'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["width"] = "wide"; }), "field 'width'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["batch"] = 0; }), "field 'batch'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["outcome"] = "fine"; }), "field 'outcome'"));
  EXPECT_TRUE(names(broken([](Json& j) { j.erase("samples_s"); }), "missing field 'samples_s'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["samples_s"][1] = "x"; }), "samples_s"));
  EXPECT_TRUE(names(broken([](Json& j) { j["lengths"] = Json::array({1}); }), "field 'lengths'"));
  EXPECT_TRUE(
      names(broken([](Json& j) { j["lengths"] = Json::array({1, 5000}); }), "lengths[1]"));
  EXPECT_TRUE(names(broken([](Json& j) { j["padded"] = true; }), "field 'padded'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["real_tokens"] = 3; }), "field 'real_tokens'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["padded_tokens"] = 3; }), "field 'padded_tokens'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["step"] = nullptr; }), "field 'step'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["oom_tried_bytes"] = -1; }), "field 'oom_tried_bytes'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["peak_reserved_bytes"] = nullptr; }),
                    "field 'peak_reserved_bytes'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["traced"] = 1; }), "field 'traced'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["traced_step_s"] = nullptr; }),
                    "field 'traced_step_s'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["trace_priming_step_s"] = -1.0; }),
                    "field 'trace_priming_step_s'"));
  EXPECT_TRUE(names(broken([](Json& j) { j.erase("memory_message"); }),
                    "missing field 'memory_message'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["memory"]["items_sum_bytes"] = 7; }),
                    "p.json point.memory: field 'items_sum_bytes'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["memory"]["peak_at"]["layer"] = "x"; }),
                    "p.json point.memory.peak_at: field 'layer'"));
  EXPECT_TRUE(names(
      broken([](Json& j) { j["memory"]["timeline"]["samples"][1]["by_slot"] = Json::array({1}); }),
      "field 'by_slot'"));
  EXPECT_TRUE(
      names(broken([](Json& j) { j["memory"]["allocator_peak_allocated_bytes"] = nullptr; }),
            "field 'allocator_peak_allocated_bytes'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["memory"].erase("step_s"); }), "missing field 'step_s'"));
  // The optimizer's series (issue 44): one sample per timed step, and its stats with it.
  EXPECT_TRUE(names(broken([](Json& j) { j["optimizer_samples_s"] = Json::array({0.1}); }),
                    "field 'optimizer_samples_s' has 1 samples"));
  EXPECT_TRUE(names(broken([](Json& j) { j["optimizer"] = nullptr; }), "field 'optimizer'"));
  EXPECT_TRUE(names(broken([](Json& j) { j.erase("optimizer"); }), "missing field 'optimizer'"));
  EXPECT_TRUE(names(broken([](Json& j) { j["optimizer_samples_s"][0] = "x"; }),
                    "optimizer_samples_s"));
  // Negative control: a point written before --optimizer (neither field) reads, with no
  // optimizer step timed.
  Json older = point_to_json(hand_points()[1]);
  older.erase("optimizer_samples_s");
  older.erase("optimizer");
  EXPECT_TRUE(point_from_json(older, kPointWhere).optimizer_s.empty());
  EXPECT_TRUE(names(error_of([] { point_from_json(Json::array(), kPointWhere); }), kPointWhere));

  // A loss on a point that did not run; a padded point filed under points.
  Json oom = point_to_json(hand_points()[3]);
  oom["loss_value"] = 1.0;
  EXPECT_TRUE(names(error_of([&] { point_from_json(oom, kPointWhere); }), "field 'loss_value'"));
  StepReport rep;
  rep.points = {hand_points()[6]};
  Json results = to_json(rep);
  std::swap(results["points"], results["padded_points"]);
  EXPECT_TRUE(names(error_of([&] { profile_points_from_json(results, "p.json results"); }),
                    "p.json results points[0]"));
  EXPECT_TRUE(names(error_of([] { profile_points_from_json(Json::object(), "p.json results"); }),
                    "missing field 'points'"));
}

// ---- what scaling-fit --profile takes ----

TEST(ProfilePoints, ScalingFitReadsEveryRepeatOfOkPoints) {
  std::vector<std::string> skipped;
  auto p = probes::read_profile_points_evidence(kFixtures + "/profile_points.json", &skipped);
  ASSERT_EQ(p.size(), 7u);  // 3 + 2 + 1 samples at batch 2, 1 at batch 1; the OOM point skipped
  EXPECT_EQ(p[0].width, 2048);
  EXPECT_EQ(p[0].batch, 2);
  EXPECT_EQ(p[0].origin, kFixtures + "/profile_points.json results.points[0].samples_s[0]");
  EXPECT_EQ(p[6].batch, 1);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("results.points[3] (batch 2, width 32768): oom: CUDA out of memory"),
            std::string::npos)
      << skipped[0];
  std::vector<std::string> dropped;
  core::select_batch(p, 2, &dropped);
  auto m = core::median_per_width(p);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].seconds, 1.777);
  EXPECT_EQ(m[1].seconds, 0.5 * (11.570 + 11.575));
}

// The error of reading profile evidence whose results are `results`.
std::string profile_error(const Json& results) {
  const std::string path = ::testing::TempDir() + "/tprobe_profile_points.json";
  Json doc = {{"schema", {{"name", "tprobe.profile"}, {"version", 1}}}, {"results", results}};
  std::ofstream(path) << doc.dump();
  return error_of([&] { probes::read_profile_points_evidence(path, nullptr); });
}

TEST(ProfilePoints, ScalingFitBrokenInputs) {
  StepReport rep;
  rep.points = {ok_point(2, 8)};
  const Json good = to_json(rep);
  EXPECT_EQ(profile_error(good), "");
  Json r = good;
  r["points"][0]["samples_s"] = Json::array();
  r["points"][0]["step"] = nullptr;
  EXPECT_TRUE(names(profile_error(r), "results.points[0].samples_s is empty"));
  r = good;
  r["points"][0]["samples_s"][1] = 2e6;  // a number, but no step time
  EXPECT_TRUE(names(profile_error(r), "results.points[0].samples_s[1] is not a step time"));
  r = good;
  r["points"][0]["batch"] = 0;
  EXPECT_TRUE(names(profile_error(r), "results points[0]: field 'batch'"));
  EXPECT_TRUE(names(profile_error(Json::object()), "missing field 'points'"));
  EXPECT_TRUE(names(profile_error(Json::array()), "results"));
  // Evidence of another probe is refused by name.
  EXPECT_NE(error_of([] {
              probes::read_profile_points_evidence(kFixtures + "/padding_widths.json", nullptr);
            }),
            "");
}

}  // namespace
}  // namespace tprobe::runs
