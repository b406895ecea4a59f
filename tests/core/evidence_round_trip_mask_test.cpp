// Evidence read back by its own code (issue 34, item 2), for `tprobe mask`'s geometry: reports made
// by the real analysis of the embedded models (the probe's own call) at a few widths, paddings,
// rule sets and expectations, written by to_json, read by mask_report_from_json and written again
// give the same JSON; broken results are one tprobe::Error naming the field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/error_of.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/mask/mask_geometry.hpp"
#include "tprobe/core/mask/mask_report.hpp"

namespace tprobe::core {
namespace {

using testing_support::error_of;

MaskReport read(const Json& j) { return mask_report_from_json(j, "t.json results"); }

// What the probe does (probes/mask_probe.cpp): the embedded config, the request, analyze_mask.
MaskReport analysed(const std::string& model, int64_t width, std::vector<int64_t> lengths = {},
                    const std::string& rules = "hf-sdpa") {
  MaskRequest q;
  q.width = width;
  q.batch = lengths.empty() ? 2 : static_cast<int64_t>(lengths.size());
  q.lengths = std::move(lengths);
  q.rules = *parse_mask_rules(rules);
  return analyze_mask(embedded_model(model), q);
}

void expect_round_trip(const MaskReport& r, const std::string& label) {
  const Json j = to_json(r);
  EXPECT_EQ(to_json(read(j)).dump(), j.dump()) << label;
}

TEST(MaskFromJson, RoundTripsTheRealAnalysis) {
  struct Case {
    const char* model;
    int64_t width;
    std::vector<int64_t> lengths;
  };
  // Wider and narrower than the window (8 on the tiny model, 1,024 on the 26B), unpadded, an
  // all-ones 2-D mask, right padding with fully masked padded rows.
  const std::vector<Case> cases = {{"gemma4-tiny", 24, {}},
                                   {"gemma4-tiny", 8, {}},
                                   {"gemma4-tiny", 5, {5, 5, 5}},
                                   {"gemma4-tiny", 24, {24, 3}},
                                   {"gemma4-tiny", 24, {10, 24, 1}},
                                   {"gemma4-26b-a4b", 16384, {}},
                                   {"gemma4-26b-a4b", 1000, {}},
                                   {"gemma4-26b-a4b", 16384, {16384, 8192}}};
  for (const Case& c : cases) {
    for (const std::string& rules : mask_rules_names()) {
      const MaskReport r = analysed(c.model, c.width, c.lengths, rules);
      const std::string label = fmt::format("{} width {} lengths {} rules {}", c.model, c.width,
                                            fmt::join(c.lengths, ","), rules);
      expect_round_trip(r, label);
      const MaskReport back = read(to_json(r));
      EXPECT_EQ(back.model, r.model) << label;
      EXPECT_EQ(back.request.width, r.request.width) << label;
      EXPECT_EQ(back.request.batch, r.request.batch) << label;
      EXPECT_EQ(back.request.lengths, r.request.lengths) << label;
      EXPECT_EQ(back.request.rules, r.request.rules) << label;
      EXPECT_EQ(back.shape.has_2d_mask, r.shape.has_2d_mask) << label;
      EXPECT_EQ(back.shape.lengths, r.shape.lengths) << label;
      ASSERT_EQ(back.layers.size(), r.layers.size()) << label;
      ASSERT_EQ(back.bands.size(), r.bands.size()) << label;
      for (size_t i = 0; i < r.bands.size(); ++i) {
        const LayerMaskPlan& p = back.bands[i].plan;
        const LayerMaskPlan& q = r.bands[i].plan;
        EXPECT_EQ(p.call, q.call) << label << " band " << i;
        EXPECT_EQ(p.reason, q.reason) << label << " band " << i;
        EXPECT_EQ(p.keys_before, q.keys_before) << label << " band " << i;
        EXPECT_EQ(p.unmask_empty_rows, q.unmask_empty_rows) << label << " band " << i;
        EXPECT_EQ(back.bands[i].check.first_fully_masked_row,
                  r.bands[i].check.first_fully_masked_row)
            << label << " band " << i;
      }
      EXPECT_EQ(back.ok, r.ok) << label;
      EXPECT_EQ(back.outcome, r.outcome) << label;
      // The tables drawn from the report read back are the ones the probe printed.
      const std::vector<Table> want = mask_tables(r), got = mask_tables(back);
      ASSERT_EQ(got.size(), want.size()) << label;
      for (size_t t = 0; t < want.size(); ++t) {
        // The band table's title carries geometry_s, identical after the round trip.
        EXPECT_EQ(got[t].render(), want[t].render()) << label << " table " << t;
      }
    }
  }
}

TEST(MaskFromJson, RoundTripsFailedAssertionsAndViolations) {
  // The probe's expectations, passing and failing: window and fast-path assertions with rows.
  for (const char* fast : {"full", "full,sliding", "none", "sliding"}) {
    for (int64_t window : {1024, 512, 2048}) {
      for (const std::vector<int64_t>& lengths :
           {std::vector<int64_t>{}, std::vector<int64_t>{16384, 8192}}) {
        MaskRequest q;
        q.width = 16384;
        q.batch = 2;
        q.lengths = lengths;
        q.expect.window = window;
        q.expect.fast_path = parse_fast_path_types(fast);
        const MaskReport r = analyze_mask(embedded_model("gemma4-26b-a4b"), q);
        const std::string label = fmt::format("{} {} {}", fast, window, lengths.size());
        expect_round_trip(r, label);
        const MaskReport back = read(to_json(r));
        EXPECT_EQ(back.ok, r.ok) << label;
        EXPECT_EQ(back.outcome, r.outcome) << label;
        ASSERT_EQ(back.diagnostics.size(), r.diagnostics.size()) << label;
        for (size_t i = 0; i < r.diagnostics.size(); ++i) {
          EXPECT_EQ(back.diagnostics[i].code, r.diagnostics[i].code) << label;
          EXPECT_EQ(back.diagnostics[i].message, r.diagnostics[i].message) << label;
          EXPECT_EQ(back.diagnostics[i].severity, r.diagnostics[i].severity) << label;
        }
      }
    }
  }
  // A model with no sliding layers and an expected window: the assertion fails with no layer.
  ModelConfig full = embedded_model("gemma4-tiny");
  for (LayerType& t : full.layer_types) t = LayerType::kFull;
  MaskRequest q;
  q.width = 24;
  q.expect.window = 8;
  const MaskReport nf = analyze_mask(full, q);
  ASSERT_FALSE(nf.ok);
  expect_round_trip(nf, "no sliding layers");
  EXPECT_EQ(read(to_json(nf)).outcome, Outcome::kNo);

  // Real-row violations come only from a wrong plan (the negative controls of
  // mask_geometry_test): the checks of an off-by-one and a leaking plan survive the round trip.
  MaskReport r = analysed("gemma4-26b-a4b", 4096, {4096, 2000});
  ASSERT_GE(r.bands.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    LayerMaskPlan& p = r.bands[i].plan;
    if (i == 0) {
      p.keys_before += 1;
    } else {
      p.causal = false;
    }
    r.bands[i].check = check_band(p, r.bands[i].window, r.shape);
    ASSERT_TRUE(r.bands[i].check.first_violation.has_value()) << i;
  }
  expect_round_trip(r, "negative controls");
  const MaskReport back = read(to_json(r));
  ASSERT_TRUE(back.bands[0].check.first_violation.has_value());
  EXPECT_EQ(back.bands[0].check.first_violation->kind, "outside_window");
  EXPECT_EQ(back.bands[0].check.first_violation->got.count(), 1025);
  EXPECT_EQ(back.bands[1].check.violating_rows, r.bands[1].check.violating_rows);
}

// The probe's evidence is MaskAnalysis's: the geometry's keys plus materialised and backends,
// which the core reader leaves to engine's.
TEST(MaskFromJson, ReadsTheProbesResults) {
  const MaskReport r = analysed("gemma4-tiny", 24, {24, 3});
  Json j = to_json(r);
  j["materialised"] = {{"device", "cpu"}, {"ok", true}};
  j["backends"] = Json::array();
  EXPECT_EQ(to_json(read(j)).dump(), to_json(r).dump());
}

TEST(MaskFromJson, BrokenResultsNameTheField) {
  const Json good = to_json(analysed("gemma4-26b-a4b", 16384, {16384, 8192}));
  ASSERT_EQ(good["layers"].size(), 30u);
  EXPECT_ERROR_NAMES(read(Json::array()), "t.json results must be an object");
  // Missing fields.
  Json j = good;
  j.erase("geometry_s");
  EXPECT_ERROR_NAMES(read(j), "t.json results: missing field 'geometry_s'");
  j = good;
  j["layers"][3]["paths"].erase("eager");
  EXPECT_ERROR_NAMES(read(j), "t.json results layers[3] paths: missing field 'eager'");
  j = good;
  j["bands"][1].erase("first_violation");
  EXPECT_ERROR_NAMES(read(j), "t.json results bands[1]: missing field 'first_violation'");
  j = good;
  j["assertions"][0].erase("row");
  EXPECT_ERROR_NAMES(read(j), "t.json results assertions[0]: missing field 'row'");
  // Wrong types.
  j = good;
  j["layers"][0]["window"] = "1024";
  EXPECT_ERROR_NAMES(read(j), "t.json results layers[0]: field 'window' must be an integer");
  j = good;
  j["padded"] = "yes";
  EXPECT_ERROR_NAMES(read(j), "t.json results: field 'padded' must be true or false");
  j = good;
  j["bands"][0]["first_violation"] = 3;
  EXPECT_ERROR_NAMES(read(j), "t.json results bands[0]: field 'first_violation' must be an object");
  j = good;
  j["layers"][2]["paths"]["sdpa"]["call"] = nullptr;
  EXPECT_ERROR_NAMES(read(j), "layers[2] paths.sdpa: field 'call' must be a string");
  // Values out of range or outside their vocabulary.
  j = good;
  j["lengths"][1] = 0;
  EXPECT_ERROR_NAMES(read(j), "t.json results lengths[1] must be an integer in 1..16384");
  j = good;
  j["bands"][0]["first_layer"] = 30;
  EXPECT_ERROR_NAMES(read(j), "bands[0]: field 'first_layer' must be an integer in 0..29");
  j = good;
  j["bands"][2]["saturates_at_row"] = 16384;
  EXPECT_ERROR_NAMES(read(j), "bands[2]: field 'saturates_at_row' must be an integer in 0..16383");
  j = good;
  j["rules"] = "flash";
  EXPECT_ERROR_NAMES(read(j), "t.json results: field 'rules' must be one of hf-sdpa,");
  j = good;
  j["layers"][4]["type"] = "global_attention";
  EXPECT_ERROR_NAMES(read(j), "layers[4]: field 'type' must be one of sliding_attention, "
                              "full_attention");
  j = good;
  j["assertions"][0]["name"] = "speed";
  EXPECT_ERROR_NAMES(read(j), "assertions[0]: field 'name' must be one of band, window, "
                              "fast_path");
  j = good;
  j["geometry_s"] = -1.0;
  EXPECT_ERROR_NAMES(read(j), "field 'geometry_s' is negative");
  // Fields that repeat others and disagree with them.
  j = good;
  j["lengths"] = Json::array({16384, 16384});
  EXPECT_ERROR_NAMES(read(j), "field 'padded' is true but the lengths hold no padding");
  j = good;
  j["lengths"] = Json::array({16384});
  EXPECT_ERROR_NAMES(read(j), "field 'lengths' has 1 values for batch 2");
  j = good;
  j["attention_mask_2d"] = "all_ones";
  EXPECT_ERROR_NAMES(read(j), "field 'attention_mask_2d' is 'all_ones' but 'padded' is true");
  j = good;
  j["layers"][5]["mask"] = "none";
  EXPECT_ERROR_NAMES(read(j), "layers[5]: field 'mask' disagrees with paths.hf_sdpa");
  j = good;
  j["layers"][0]["max_allowed_per_row"] = 1000;
  EXPECT_ERROR_NAMES(read(j), "layers[0]: field 'max_allowed_per_row' disagrees with the "
                              "sliding_attention band under hf-sdpa");
  j = good;
  j["layers"][7]["layer"] = 8;
  EXPECT_ERROR_NAMES(read(j), "layers[7]: field 'layer' is 8");
  j = good;
  j["layers"][1]["paths"]["flash"] = j["layers"][1]["paths"]["eager"];
  EXPECT_ERROR_NAMES(read(j), "layers[1] paths: 'flash' names no attention path");
  j = good;
  j["bands"][0]["fast_path"] = !j["bands"][0]["fast_path"].get<bool>();
  EXPECT_ERROR_NAMES(read(j), "bands[0]: field 'fast_path' disagrees with layer 0");
  j = good;
  j["bands"][0]["fully_masked_rows"] = 0;
  EXPECT_ERROR_NAMES(read(j), "bands[0]: field 'first_fully_masked_row' is set but "
                              "'fully_masked_rows' is 0");
}

TEST(MaskFromJson, BrokenViolationsNameTheField) {
  MaskReport r = analysed("gemma4-26b-a4b", 4096, {4096, 2000});
  LayerMaskPlan& p = r.bands[0].plan;
  p.keys_before += 1;
  r.bands[0].check = check_band(p, r.bands[0].window, r.shape);
  const Json good = to_json(r);
  ASSERT_TRUE(good["bands"][0]["first_violation"].is_object());
  Json j = good;
  j["bands"][0]["first_violation"]["got_count"] = 1024;
  EXPECT_ERROR_NAMES(read(j), "bands[0] first_violation: field 'got_count' is 1024, but [0, "
                              "1024] holds 1025 keys");
  j = good;
  j["bands"][0]["first_violation"]["kind"] = "late_key";
  EXPECT_ERROR_NAMES(read(j), "bands[0] first_violation: field 'kind' must be one of future_key");
  j = good;
  j["bands"][0]["first_violation"]["batch_row"] = 2;
  EXPECT_ERROR_NAMES(read(j), "first_violation: field 'batch_row' must be an integer in 0..1");
  j = good;
  j["bands"][0]["first_violation"] = nullptr;
  EXPECT_ERROR_NAMES(read(j), "bands[0]: field 'first_violation' is null but 'violating_rows' is");
}

}  // namespace
}  // namespace tprobe::core
