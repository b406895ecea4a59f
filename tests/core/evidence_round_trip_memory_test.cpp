// Evidence read back by its own code (issue 34, item 2), for the pieces of `profile`'s results that
// core writes: the memory model (its fit, edges and edge checks: `profile --gpu-memory`) and the
// quadratic-share check. Each is made by the real analysis, written by to_json, read by its
// from_json and written again, which must give the same JSON; broken inputs are one tprobe::Error
// naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "support/error_of.hpp"
#include "tprobe/core/cost/memory_fit.hpp"
#include "tprobe/core/cost/step_shares.hpp"

namespace tprobe::core {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Peaks from known coefficients, with a deterministic wobble so that the fit has residuals.
MemoryFitPoint point(int64_t b, int64_t w, int i, bool oom = false) {
  const double tokens = double(b) * double(w);
  const double peak = 30 * kGiB + 2.0e5 * tokens + 6.0 * tokens * double(w);
  const double wobble = (i % 2 ? 1 : -1) * 1.0e6 * (1 + i % 3);
  MemoryFitPoint p{b, w, static_cast<int64_t>(peak + wobble),
                   static_cast<int64_t>(peak + wobble + 2 * kGiB), oom};
  if (oom) p.peak_allocated_bytes = p.peak_reserved_bytes = 0;
  return p;
}

std::vector<MemoryFitPoint> sweep() {
  std::vector<MemoryFitPoint> out;
  int i = 0;
  for (int64_t b : {1, 2, 4}) {
    for (int64_t w : {1024, 2048, 4096}) out.push_back(point(b, w, i++));
  }
  out.push_back(point(4, 16384, i++, /*oom=*/true));
  return out;
}

Json round_trip(const MemoryFit& f) {
  return to_json(memory_fit_from_json(to_json(f), "m.json results.memory_fit.fit"));
}

TEST(MemoryFitFromJson, RoundTripsAFitItsRefusalAndAnExactFit) {
  const MemoryFit fit = fit_memory(sweep(), /*reserved=*/false);
  ASSERT_TRUE(fit.ok) << fit.why_not;
  ASSERT_TRUE(fit.c2_test.testable);
  ASSERT_EQ(fit.excluded_oom, 1);
  EXPECT_EQ(round_trip(fit), to_json(fit));
  const MemoryFit reserved = fit_memory(sweep(), /*reserved=*/true);
  EXPECT_EQ(round_trip(reserved), to_json(reserved));
  // Three points: exact, untestable c2, no residual spread.
  const MemoryFit exact =
      fit_memory({point(1, 1024, 0), point(2, 2048, 1), point(1, 4096, 2)}, false);
  ASSERT_TRUE(exact.ok) << exact.why_not;
  ASSERT_TRUE(exact.exact);
  EXPECT_EQ(round_trip(exact), to_json(exact));
  // One width: collinear, refused; the refusal reads back with its points.
  const MemoryFit refused =
      fit_memory({point(1, 2048, 0), point(2, 2048, 1), point(4, 2048, 2)}, false);
  ASSERT_FALSE(refused.ok);
  EXPECT_EQ(round_trip(refused), to_json(refused));
  // The struct, not only the JSON: the coefficients and the residuals come back exactly.
  const MemoryFit back = memory_fit_from_json(to_json(fit), "m");
  EXPECT_EQ(back.c2, fit.c2);
  EXPECT_EQ(back.residuals_bytes, fit.residuals_bytes);
  EXPECT_EQ(back.fitted_indices, fit.fitted_indices);
  EXPECT_EQ(back.oom_points.size(), 1u);
  EXPECT_EQ(back.c2_test.p_value, fit.c2_test.p_value);
}

TEST(MemoryFitFromJson, RoundTripsEdgesAndTheirChecks) {
  const MemoryFit fit = fit_memory(sweep(), false);
  ASSERT_TRUE(fit.ok) << fit.why_not;
  MemoryEdgeRequest req;
  req.gpu_memory_bytes = 80 * kGiB;
  req.reserve_bytes = 2 * kGiB;
  const MemoryEdge by_width = largest_width(fit, 2, req);
  const MemoryEdge by_batch = largest_batch(fit, 4096, req);
  req.gpu_memory_bytes = 10 * kGiB;  // below c0: nothing fits
  const MemoryEdge nothing = largest_width(fit, 2, req);
  ASSERT_TRUE(nothing.fits_nothing);
  for (const MemoryEdge& e : {by_width, by_batch, nothing}) {
    EXPECT_EQ(to_json(memory_edge_from_json(to_json(e), "e")), to_json(e)) << e.axis;
  }
  const bool wide = by_width.axis == "width";
  ASSERT_TRUE(wide);
  const MemoryFitPoint at_edge = point(2, by_width.width, 0);
  const MemoryFitPoint past = point(2, by_width.width + by_width.step, 0, /*oom=*/true);
  const MemoryEdgeCheck held = check_edge(by_width, at_edge, past, 78 * kGiB);
  const MemoryEdgeCheck over =
      check_edge(by_width, point(2, by_width.width, 0, true), past, 78 * kGiB);
  for (const MemoryEdgeCheck& c : {held, over}) {
    EXPECT_EQ(to_json(memory_edge_check_from_json(to_json(c), "c")), to_json(c)) << c.verdict;
  }
}

TEST(MemoryFitFromJson, BrokenFitsNameTheField) {
  const Json good = to_json(fit_memory(sweep(), false));
  auto broken = [&](const std::function<void(Json&)>& edit) {
    Json j = good;
    edit(j);
    return j;
  };
  EXPECT_ERROR_NAMES(memory_fit_from_json(Json::array(), "m"), "m must be an object");
  EXPECT_ERROR_NAMES(memory_fit_from_json(broken([](Json& j) { j.erase("c1_bytes_per_token"); }),
                                          "m"),
                     "c1_bytes_per_token");
  EXPECT_ERROR_NAMES(
      memory_fit_from_json(broken([](Json& j) { j["c0_bytes"] = nullptr; }), "m"), "c0_bytes");
  EXPECT_ERROR_NAMES(
      memory_fit_from_json(broken([](Json& j) { j["why_not"] = "no"; }), "m"), "why_not");
  EXPECT_ERROR_NAMES(
      memory_fit_from_json(broken([](Json& j) { j["peak"] = "resident"; }), "m"), "peak");
  EXPECT_ERROR_NAMES(
      memory_fit_from_json(broken([](Json& j) { j["points"] = -1; }), "m"), "points");
  EXPECT_ERROR_NAMES(memory_fit_from_json(
                         broken([](Json& j) { j["fitted"][0]["width"] = int64_t{1} << 40; }), "m"),
                     "m fitted[0]");
  EXPECT_ERROR_NAMES(memory_fit_from_json(broken([](Json& j) {
                       j["fitted"][1]["predicted_bytes"] =
                           j["fitted"][1]["predicted_bytes"].get<double>() + 1.0;
                     }),
                                          "m"),
                     "predicted_bytes");
  EXPECT_ERROR_NAMES(
      memory_fit_from_json(broken([](Json& j) { j["fitted"].erase(0); }), "m"), "fitted rows");
  EXPECT_ERROR_NAMES(
      memory_fit_from_json(broken([](Json& j) { j["c2_test"] = nullptr; }), "m"), "c2_test");
  EXPECT_ERROR_NAMES(
      memory_fit_from_json(broken([](Json& j) { j["c2_test"]["p_value"] = 1.5; }), "m"),
      "p_value");
  EXPECT_ERROR_NAMES(
      memory_fit_from_json(broken([](Json& j) { j["c2_test"]["significant"] = nullptr; }), "m"),
      "significant");
  EXPECT_ERROR_NAMES(memory_edge_from_json(Json{{"axis", "depth"}}, "e"), "axis");
  const MemoryEdge e =
      largest_width(fit_memory(sweep(), false), 2, MemoryEdgeRequest{80 * kGiB, 2 * kGiB});
  Json check = to_json(
      check_edge(e, point(2, e.width, 0), point(2, e.width + e.step, 0, true), 78 * kGiB));
  check["edge"]["peak_reserved_bytes"] = -5;
  EXPECT_ERROR_NAMES(memory_edge_check_from_json(check, "c"), "c.edge");
}

ShareCheck share_check() {
  ShareCheckInput in;
  in.widths = {2048, 4096, 8192, 16384};
  in.repeats = {1, 1, 1, 1};
  PartSeries q{"full/attention_core", true, {}};
  PartSeries l{"sliding/experts", false, {}};
  for (double w : in.widths) {
    q.seconds.push_back(2e-8 * w * w + 1e-5 * w);
    l.seconds.push_back(3e-4 * w + 1e-9 * w * w);
  }
  for (size_t i = 0; i < in.widths.size(); ++i)
    in.step_s.push_back(q.seconds[i] + l.seconds[i] + 0.01);
  in.parts = {q, l};
  return check_quadratic_shares(in);
}

TEST(ShareCheckFromJson, RoundTripsACheckAndARefusal) {
  const ShareCheck c = share_check();
  ASSERT_TRUE(c.determined) << c.refusal;
  EXPECT_EQ(to_json(share_check_from_json(to_json(c), "s")), to_json(c));
  const ShareCheck back = share_check_from_json(to_json(c), "s");
  ASSERT_EQ(back.rows.size(), c.rows.size());
  EXPECT_EQ(back.rows[2].terms.size(), c.rows[2].terms.size());
  EXPECT_EQ(back.rows[2].difference, c.rows[2].difference);
  ShareCheckInput few;
  few.widths = {1024};
  few.repeats = {1};
  few.step_s = {1.0};
  few.parts = {{"full/attention_core", true, {0.5}}};
  const ShareCheck refused = check_quadratic_shares(few);
  ASSERT_FALSE(refused.determined);
  EXPECT_EQ(to_json(share_check_from_json(to_json(refused), "s")), to_json(refused));
}

TEST(ShareCheckFromJson, BrokenChecksNameTheField) {
  const Json good = to_json(share_check());
  Json j = good;
  j["model"] = "ABD";
  EXPECT_ERROR_NAMES(share_check_from_json(j, "s"), "model");
  j = good;
  j["rows"][1]["within_threshold"] = !j["rows"][1]["within_threshold"].get<bool>();
  EXPECT_ERROR_NAMES(share_check_from_json(j, "s"), "s rows[1].within_threshold");
  j = good;
  j["rows"][0]["terms"][0].erase("share_ratio");
  EXPECT_ERROR_NAMES(share_check_from_json(j, "s"), "share_ratio");
  j = good;
  j["refusal"] = "";
  EXPECT_ERROR_NAMES(share_check_from_json(j, "s"), "refusal");
  j = good;
  j["threshold_ratio"] = "5 %";
  EXPECT_ERROR_NAMES(share_check_from_json(j, "s"), "threshold_ratio");
}

}  // namespace
}  // namespace tprobe::core
