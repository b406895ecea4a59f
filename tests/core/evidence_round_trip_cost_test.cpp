// Evidence read back by its own code (issue 34, item 2): for scaling-fit, inspect and kernels, a
// report made by the real analysis on a small input, written by to_json, read by its from_json and
// written again gives the same JSON; and broken results are one tprobe::Error naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>

#include "test_paths.hpp"
#include "support/error_of.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/cost/scaling_fit_report.hpp"
#include "tprobe/core/trace/stats/kernel_table_report.hpp"
#include "tprobe/core/trace/compare/kernels.hpp"

namespace tprobe::core {
namespace {

using testing_support::error_of;

// ---- scaling-fit ----

std::vector<FitPoint> curve_points(bool with_constant) {
  std::vector<FitPoint> out;
  int i = 0;
  for (double w : {1024.0, 2048.0, 4096.0, 4096.0, 8192.0, 16384.0}) {
    // A little deterministic noise so that the fit has error bars.
    const double noise = (i % 2 ? 1 : -1) * 0.003 * (1 + i);
    out.push_back({w, (with_constant ? 0.2 : 0) + 7e-4 * w + 9e-8 * w * w + noise, 2,
                   "p.csv:" + std::to_string(++i)});
  }
  return out;
}

ScalingFitInput fit_input(const std::string& model) {
  ScalingFitInput in;
  in.points = curve_points(true);
  in.points.push_back({4096, 3.5, 4, "p.csv:7"});  // another batch: dropped
  in.skipped = {"width 32768: oom"};
  in.batch = 2;
  in.model = model;
  in.at_widths = {3000, 32768};
  WidthDistribution d;
  d.path = "pad.json";
  d.probe = "padding";
  d.key = "micro_batch_widths";
  d.widths = {{1000, 3}, {5000, 2}};
  d.micro_batch = 2;
  in.widths = d;
  return in;
}

Json round_trip(const ScalingFitReport& r) {
  return to_json(scaling_fit_report_from_json(to_json(r), "t.json results"));
}

TEST(ScalingFitFromJson, RoundTripsEveryForm) {
  for (const char* model : {"A", "AB", "AC", "ABC", "auto"}) {
    const ScalingFitReport r = analyze_scaling(fit_input(model));
    const Json j = to_json(r);
    EXPECT_EQ(round_trip(r), j) << model;
    const ScalingFitReport back = scaling_fit_report_from_json(j, "t.json results");
    ASSERT_TRUE(back.fit.has_value()) << model;
    ASSERT_TRUE(r.fit.has_value()) << model;
    EXPECT_EQ(back.fit->model, r.fit->model) << model;
    EXPECT_EQ(back.fit->a.value, r.fit->a.value) << model;
    EXPECT_EQ(back.fit->b.std_error, r.fit->b.std_error) << model;
    EXPECT_EQ(back.batch, 2) << model;
    EXPECT_EQ(back.dropped, r.dropped) << model;
    ASSERT_EQ(back.fit->per_point.size(), r.fit->per_point.size()) << model;
    EXPECT_EQ(back.fit->per_point[1].loo_error_s, r.fit->per_point[1].loo_error_s) << model;
    EXPECT_EQ(back.fitted_points.back().origin, r.fitted_points.back().origin) << model;
    ASSERT_TRUE(back.weighted.has_value()) << model;
    EXPECT_EQ(back.weighted->quadratic_share, r.weighted->quadratic_share) << model;
    EXPECT_EQ(back.at.size(), 2u) << model;
    EXPECT_EQ(back.input.points.size(), 7u) << model;
    EXPECT_EQ(back.input.points.back().batch, 4) << model;
    EXPECT_EQ(back.selection.has_value(), std::string(model) == "auto") << model;
    EXPECT_EQ(back.outcome, Outcome::kOk) << model;
  }
}

TEST(ScalingFitFromJson, RoundTripsRefusals) {
  // Two widths for three parameters: the fit itself is refused.
  ScalingFitInput under;
  under.points = {{1000, 1, 0, "a"}, {2000, 2.5, 0, "b"}};
  under.model = "ABC";
  const ScalingFitReport u = analyze_scaling(under);
  ASSERT_TRUE(u.refused);
  EXPECT_EQ(round_trip(u), to_json(u));
  const ScalingFitReport ub = scaling_fit_report_from_json(to_json(u), "u");
  EXPECT_TRUE(ub.refused);
  EXPECT_EQ(ub.refusal, u.refusal);
  EXPECT_EQ(ub.outcome, Outcome::kNo);
  ASSERT_TRUE(ub.fit.has_value());
  EXPECT_FALSE(ub.fit->determined);
  // --form auto with too few widths: refused before any fit.
  under.model = "auto";
  const ScalingFitReport a = analyze_scaling(under);
  ASSERT_TRUE(a.refused);
  EXPECT_FALSE(a.fit.has_value());
  EXPECT_EQ(round_trip(a), to_json(a));
  EXPECT_FALSE(scaling_fit_report_from_json(to_json(a), "a").fit.has_value());
  // An exact fit (no error bars) keeps its status.
  ScalingFitInput exact;
  exact.points = {{1000, 1, 0, "a"}, {2000, 2.5, 0, "b"}};
  const ScalingFitReport e = analyze_scaling(exact);
  ASSERT_TRUE(e.fit && e.fit->exact);
  EXPECT_EQ(round_trip(e), to_json(e));
  EXPECT_TRUE(scaling_fit_report_from_json(to_json(e), "e").fit->exact);
}

TEST(ScalingFitFromJson, BrokenResultsNameTheField) {
  const Json good = to_json(analyze_scaling(fit_input("auto")));
  auto read = [](const Json& j) { return scaling_fit_report_from_json(j, "f.json results"); };
  Json j = good;
  j["coefficients"].erase("b_s_per_token2");
  EXPECT_ERROR_NAMES(read(j), "f.json results.coefficients: missing field 'b_s_per_token2'");
  j = good;
  j["points"][1]["seconds"] = "fast";
  EXPECT_ERROR_NAMES(read(j), "f.json results points[1]: field 'seconds' must be a finite number");
  j = good;
  j["batch"] = -2;
  EXPECT_ERROR_NAMES(read(j), "field 'batch' must be an integer in 1..");
  j = good;
  j["samples"] = "mean";
  EXPECT_ERROR_NAMES(read(j), "field 'samples' must be one of median, raw");
  j = good;
  j["selection"]["tests"][0]["full"] = "ABD";
  EXPECT_ERROR_NAMES(read(j), "selection tests[0]: field 'full' must be one of A, AB, AC, ABC");
  j = good;
  j["fit_status"] = "refused";
  EXPECT_ERROR_NAMES(read(j), "fit_status 'refused' with model");
  j = good;
  j["widths_from"]["width_histogram"][0]["count"] = 0;
  EXPECT_ERROR_NAMES(read(j), "width_histogram[0]: field 'count' must be an integer in 1..");
  EXPECT_ERROR_NAMES(read(Json::array()), "f.json results must be an object");
}

// `bucket --scaling-fit`: the cost comes from the typed report.
TEST(ScalingFitCost, CoefficientsOfAFile) {
  const std::string dir = testing_support::temp_dir();
  auto write = [&](const std::string& name, const Json& results) {
    const std::string p = dir + "/" + name;
    Json doc = {{"schema", {{"name", "tprobe.scaling-fit"}, {"version", 1}}}, {"results", results}};
    std::ofstream(p) << doc.dump();
    return p;
  };
  const ScalingFitReport abc = analyze_scaling(fit_input("ABC"));
  const std::string ok = write("fit.json", to_json(abc));
  const FittedCost c = fitted_cost(read_scaling_fit_evidence(ok), ok);
  EXPECT_EQ(c.a_s_per_token, abc.fit->a.value);
  EXPECT_EQ(c.b_s_per_token2, abc.fit->b.value);
  EXPECT_EQ(c.c_s, abc.fit->c.value);
  // A model without C: the cost has none.
  const std::string ab = write("ab.json", to_json(analyze_scaling(fit_input("AB"))));
  EXPECT_EQ(fitted_cost(read_scaling_fit_evidence(ab), ab).c_s, 0.0);

  Json broken = to_json(abc);
  broken["coefficients"].erase("b_s_per_token2");
  const std::string no_b = write("no_b.json", broken);
  EXPECT_ERROR_NAMES(read_scaling_fit_evidence(no_b), "missing field 'b_s_per_token2'");
  broken = to_json(abc);
  broken["coefficients"]["c_s"] = -3.5;
  const std::string neg = write("neg.json", broken);
  EXPECT_ERROR_NAMES(fitted_cost(read_scaling_fit_evidence(neg), neg),
                     "results.coefficients.c_s is negative");
  broken["coefficients"]["c_s"] = "1e999";
  const std::string text = write("text.json", broken);
  EXPECT_ERROR_NAMES(read_scaling_fit_evidence(text), "field 'c_s' must be a finite number");
  ScalingFitInput two;
  two.points = {{1000, 1, 0, "a"}, {2000, 2.5, 0, "b"}};
  two.model = "ABC";
  const std::string refused = write("refused.json", to_json(analyze_scaling(two)));
  EXPECT_ERROR_NAMES(fitted_cost(read_scaling_fit_evidence(refused), refused),
                     "the scaling fit was refused");
  const std::string pad = dir + "/pad.json";
  std::ofstream(pad) << R"({"schema": {"name": "tprobe.padding", "version": 1}, "results": {}})";
  EXPECT_THROW(read_scaling_fit_evidence(pad), Error);
}

// ---- kernels ----

const std::string kTraces = std::string(TPROBE_FIXTURES_DIR) + "/traces";

// `results` written as `probe` evidence in a fresh file.
std::string write_evidence(const std::string& dir, const std::string& name, const Json& results,
                           const std::string& probe = "kernels") {
  const std::string p = dir + "/" + name;
  Json doc = {{"schema", {{"name", "tprobe." + probe}, {"version", 1}}}, {"results", results}};
  std::ofstream(p) << doc.dump();
  return p;
}

KernelsReport kernels_of(std::vector<std::string> inputs) {
  KernelsRequest q;
  q.inputs = std::move(inputs);
  return analyze_kernels(q);
}

TEST(KernelsFromJson, TraceSourceGivesItsTableAndParts) {
  const KernelsReport r = kernels_of({kTraces + "/hf-sdpa-stack-2x256.json.gz"});
  const Json j = to_json(r);
  const KernelsReport back = kernels_report_from_json(j, "k.json results");
  ASSERT_EQ(back.sources.size(), 1u);
  const KernelSource& s = back.sources[0];
  EXPECT_EQ(s.kind, "trace");
  EXPECT_EQ(s.path, r.sources[0].path);
  EXPECT_EQ(to_json(s.table), j["kernel_table"]);
  EXPECT_EQ(s.table.totals.sum_ns, r.sources[0].table.totals.sum_ns);
  ASSERT_TRUE(r.sources[0].parts.available);
  ASSERT_TRUE(s.parts.available);
  EXPECT_EQ(s.parts.steps, r.sources[0].parts.steps);
  EXPECT_EQ(s.parts.kernel_ns, r.sources[0].parts.kernel_ns);
  ASSERT_EQ(s.parts.rows.size(), r.sources[0].parts.rows.size());
  EXPECT_EQ(s.parts.rows[0].part, r.sources[0].parts.rows[0].part);
}

// Sources read from evidence files: single and diff reports round-trip whole.
TEST(KernelsFromJson, EvidenceSourcesRoundTrip) {
  const std::string dir = testing_support::temp_dir();
  const std::string a = write_evidence(
      dir, "a.json", to_json(kernels_of({kTraces + "/hf-sdpa-stack-2x256.json.gz"})));
  const std::string b =
      write_evidence(dir, "b.json", to_json(kernels_of({kTraces + "/parts-small.json"})));
  for (const KernelsReport& r : {kernels_of({a}), kernels_of({a, b})}) {
    const Json j = to_json(r);
    EXPECT_EQ(to_json(kernels_report_from_json(j, "k.json results")), j);
  }
  const KernelsReport d = kernels_of({a, b});
  const KernelsReport back = kernels_report_from_json(to_json(d), "d.json results");
  EXPECT_EQ(back.mode, KernelsReport::Mode::kDiff);
  EXPECT_EQ(back.diff.a_label, a);
  EXPECT_EQ(back.diff.b_totals.sum_ns, d.diff.b_totals.sum_ns);
  ASSERT_EQ(back.diff.families.size(), d.diff.families.size());
  EXPECT_EQ(back.diff.families[0].key, d.diff.families[0].key);
  EXPECT_EQ(back.part_diff.available, d.part_diff.available);
  ASSERT_EQ(back.part_diff.rows.size(), d.part_diff.rows.size());
  ASSERT_FALSE(back.part_diff.rows.empty());
  EXPECT_EQ(back.part_diff.rows[0].b_ns, d.part_diff.rows[0].b_ns);
  EXPECT_EQ(back.sources[1].evidence_probe, "kernels");
}

TEST(KernelsFromJson, RanksGiveTheirRows) {
  const KernelsReport r = kernels_of({kTraces + "/ranks"});
  ASSERT_EQ(r.mode, KernelsReport::Mode::kRanks);
  const KernelsReport back = kernels_report_from_json(to_json(r), "r.json results");
  ASSERT_EQ(back.ranks.size(), r.ranks.size());
  EXPECT_EQ(back.slowest_rank, r.slowest_rank);
  EXPECT_EQ(back.ranks.back().communication_ns, r.ranks.back().communication_ns);
  EXPECT_EQ(back.ranks.back().overlap_ratio, r.ranks.back().overlap_ratio);
  ASSERT_EQ(back.sources.size(), r.sources.size());
  EXPECT_EQ(to_json(back.sources[0].table), to_json(r.sources[0].table));
}

TEST(KernelsFromJson, BrokenResultsNameTheField) {
  const std::string dir = testing_support::temp_dir();
  const std::string a =
      write_evidence(dir, "a.json", to_json(kernels_of({kTraces + "/parts-small.json"})));
  const Json diff = to_json(kernels_of({a, a}));
  auto read = [](const Json& j) { return kernels_report_from_json(j, "k.json results"); };
  Json j = diff;
  j["mode"] = "triple";
  EXPECT_ERROR_NAMES(read(j), "field 'mode' must be one of single, diff, ranks");
  j = diff;
  j["diff"]["families"][0].erase("b_ns");
  EXPECT_ERROR_NAMES(read(j), "k.json results.diff families[0]: missing field 'b_ns'");
  j = diff;
  j["part_diff"]["a"]["steps"] = 0;
  EXPECT_ERROR_NAMES(read(j),
                     "k.json results.part_diff.a: field 'steps' must be an integer in 1..");
  j = diff;
  j["part_diff"]["rows"][0]["delta_ns_per_step"] = 12345678;
  EXPECT_ERROR_NAMES(read(j), "delta_ns_per_step is not");
  j = diff;
  j["a"]["kind"] = 3;
  EXPECT_ERROR_NAMES(read(j), "k.json results.a: field 'kind' must be a string");
  // What `kernels A B` reads of an evidence file goes through the same reader.
  Json single = to_json(kernels_of({kTraces + "/parts-small.json"}));
  single["parts_steps"] = -1;
  const std::string bad = write_evidence(dir, "bad.json", single);
  EXPECT_ERROR_NAMES(load_kernel_source(bad, {}), "field 'parts_steps' must be an integer in 1..");
  const std::string d = write_evidence(dir, "d.json", diff);
  EXPECT_ERROR_NAMES(load_kernel_source(d, {}), "holds no results.kernel_table");
}

}  // namespace
}  // namespace tprobe::core
