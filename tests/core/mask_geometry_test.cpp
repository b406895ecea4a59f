// Mask geometry: the reference band by hand, each path's decision, the assertions, and negative
// controls (a plan off by one, leaking a future key, or leaving a padded key visible is caught).
#include "tprobe/core/mask/mask_geometry.hpp"

#include <gtest/gtest.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/mask/mask_report.hpp"

namespace tprobe::core {
namespace {

ModelConfig big() { return embedded_model("gemma4-26b-a4b"); }

MaskRequest req(int64_t width, std::vector<int64_t> lengths = {}) {
  MaskRequest r;
  r.width = width;
  r.batch = lengths.empty() ? 2 : static_cast<int64_t>(lengths.size());
  r.lengths = std::move(lengths);
  return r;
}

const MaskBand& band(const MaskReport& r, MaskRules rules, LayerType t) {
  for (const MaskBand& b : r.bands) {
    if (b.rules == rules && b.type == t) return b;
  }
  throw std::runtime_error("no band");
}

const MaskAssertion* assertion(const MaskReport& r, const std::string& name) {
  for (const MaskAssertion& a : r.assertions) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

TEST(MaskGeometry, ReferenceBandByHand) {
  EXPECT_EQ(reference_keys(0, 1024, 16384), (KeyInterval{0, 0}));
  EXPECT_EQ(reference_keys(1023, 1024, 16384), (KeyInterval{0, 1023}));
  EXPECT_EQ(reference_keys(1023, 1024, 16384).count(), 1024);
  EXPECT_EQ(reference_keys(1024, 1024, 16384), (KeyInterval{1, 1024}));
  EXPECT_EQ(reference_keys(16383, 1024, 16384).count(), 1024);
  EXPECT_EQ(reference_keys(5, 0, 16384), (KeyInterval{0, 5}));
  // Padded query 10 of a row with 8 real tokens: every real key on a full layer ...
  EXPECT_EQ(reference_keys(10, 0, 8), (KeyInterval{0, 7}));
  // ... and none on a window-4 layer once the window has passed the last real key.
  EXPECT_EQ(reference_keys(10, 4, 8), (KeyInterval{7, 7}));
  EXPECT_TRUE(reference_keys(11, 4, 8).empty());
}

TEST(MaskGeometry, HfSdpaAt16kUnpadded) {
  MaskReport r = analyze_mask(big(), req(16384));
  ASSERT_EQ(r.layers.size(), 30u);
  EXPECT_TRUE(r.ok);
  for (const MaskLayer& l : r.layers) {
    const LayerMaskPlan& p = l.plans[0];  // hf-sdpa
    if (l.type == LayerType::kFull) {
      EXPECT_TRUE(p.fast_path) << l.layer;
      EXPECT_FALSE(p.explicit_mask) << l.layer;
      // head_dim 512: HF repeats K/V rather than enable_gqa there.
      EXPECT_EQ(p.call, "sdpa(is_causal, repeat_kv)");
    } else {
      EXPECT_TRUE(p.explicit_mask) << l.layer;
      EXPECT_FALSE(p.fast_path) << l.layer;
    }
  }
  EXPECT_EQ(r.layers[5].type, LayerType::kFull);
  const MaskBand& s = band(r, MaskRules::hf(), LayerType::kSliding);
  EXPECT_EQ(s.check.max_allowed_per_row, 1024);
  EXPECT_EQ(s.check.saturates_at_row, 1023);
  EXPECT_EQ(s.check.violating_rows, 0);
  EXPECT_EQ(s.check.rows_checked, 2 * 16384);
  const MaskBand& f = band(r, MaskRules::hf(), LayerType::kFull);
  EXPECT_EQ(f.check.max_allowed_per_row, 16384);
  EXPECT_EQ(f.check.saturates_at_row, 16383);
  EXPECT_EQ(f.check.fully_masked_rows, 0);
}

TEST(MaskGeometry, SlidingSkipNeedsWidthStrictlyBelowWindow) {
  MaskReport below = analyze_mask(big(), req(1023));
  MaskReport at = analyze_mask(big(), req(1024));
  EXPECT_TRUE(below.layers[0].plans[0].fast_path);
  EXPECT_EQ(below.layers[0].plans[0].call, "sdpa(is_causal, enable_gqa)");
  EXPECT_TRUE(at.layers[0].plans[0].explicit_mask);
  EXPECT_EQ(at.layers[0].plans[0].call, "sdpa(bool mask [B,1,S,S], repeat_kv)");
  // Below the window the sliding band is plain causal: it never saturates at W.
  EXPECT_EQ(band(below, MaskRules::hf(), LayerType::kSliding).check.max_allowed_per_row, 1023);
}

TEST(MaskGeometry, PaddingMakesFullLayersExplicitAndMasksPaddedRows) {
  MaskReport r = analyze_mask(big(), req(16384, {16384, 8192}));
  EXPECT_TRUE(r.ok);
  EXPECT_TRUE(r.layers[5].plans[0].explicit_mask);
  const MaskBand& s = band(r, MaskRules::hf(), LayerType::kSliding);
  EXPECT_EQ(s.check.padded_query_rows, 8192);
  // Row 1's padded queries see no key once i - 1023 > 8191, i.e. from row 9215 on.
  EXPECT_EQ(s.check.fully_masked_rows, 16384 - 9215);
  EXPECT_EQ(s.check.first_fully_masked_row, 9215);
  const MaskBand& f = band(r, MaskRules::hf(), LayerType::kFull);
  EXPECT_EQ(f.check.fully_masked_rows, 0);
  // An all-ones mask (every length == width) keeps the fast path.
  MaskReport ones = analyze_mask(big(), req(16384, {16384, 16384}));
  EXPECT_TRUE(ones.layers[5].plans[0].fast_path);
}

TEST(MaskGeometry, EachTprobePathsDecision) {
  MaskReport r = analyze_mask(big(), req(16384, {16384, 8192}));
  const auto& sl = r.layers[0].plans;
  const auto& fu = r.layers[5].plans;
  // eager: always explicit.
  EXPECT_TRUE(sl[1].explicit_mask);
  EXPECT_TRUE(fu[1].explicit_mask);
  // flash-window: sliding on flash with window arguments, padded queries not computed; full
  // layers (head_dim 512, which flash refuses) on the blockwise-GEMM path, which takes the
  // lengths as arguments: padded keys masked, padded queries not computed, no mask tensor.
  EXPECT_TRUE(sl[3].fast_path);
  EXPECT_FALSE(sl[3].computes_padded_queries);
  EXPECT_NE(sl[3].call.find("window_left=1023"), std::string::npos) << sl[3].call;
  EXPECT_TRUE(fu[3].fast_path);
  EXPECT_FALSE(fu[3].explicit_mask);
  EXPECT_TRUE(fu[3].masks_padded_keys);
  EXPECT_FALSE(fu[3].computes_padded_queries);
  EXPECT_NE(fu[3].call.find("blockwise_gemm(block=512) with the lengths"), std::string::npos)
      << fu[3].call;
  const MaskBand& fw = band(r, MaskRules::of(AttentionPath::kFlashWindow), LayerType::kSliding);
  EXPECT_EQ(fw.check.violating_rows, 0);
  EXPECT_EQ(fw.check.rows_checked, 16384 + 8192);
  EXPECT_EQ(fw.check.fully_masked_rows, 0);
  const MaskBand& ff = band(r, MaskRules::of(AttentionPath::kFlashWindow), LayerType::kFull);
  EXPECT_EQ(ff.check.violating_rows, 0);
  EXPECT_EQ(ff.check.padded_rows_differing, 0);  // padded queries are not computed at all
  EXPECT_EQ(ff.check.rows_checked, 16384 + 8192);
  // tprobe sdpa un-masks the sliding layers' empty padded rows; HF (torch >= 2.5) does not.
  EXPECT_TRUE(sl[2].unmask_empty_rows);
  EXPECT_FALSE(sl[0].unmask_empty_rows);
  const MaskBand& ts = band(r, MaskRules::of(AttentionPath::kSdpa), LayerType::kSliding);
  EXPECT_EQ(ts.check.violating_rows, 0);
  EXPECT_EQ(ts.check.fully_masked_rows, 0);
  EXPECT_EQ(ts.check.padded_rows_differing, 16384 - 9215);
  EXPECT_TRUE(r.ok);
}

TEST(MaskGeometry, NegativeControlsAreCaught) {
  MaskShape shape;
  shape.width = 4096;
  shape.lengths = {4096, 2000};
  shape.has_2d_mask = true;
  LayerMaskPlan good;
  good.keys_before = 1023;
  EXPECT_EQ(check_band(good, 1024, shape).violating_rows, 0);

  LayerMaskPlan off_by_one = good;
  off_by_one.keys_before = 1024;  // 1025 keys
  BandCheck c1 = check_band(off_by_one, 1024, shape);
  ASSERT_TRUE(c1.first_violation);
  EXPECT_EQ(c1.first_violation->row, 1024);
  EXPECT_EQ(c1.first_violation->kind, "outside_window");
  EXPECT_EQ(c1.first_violation->got.count(), 1025);

  LayerMaskPlan leak = good;
  leak.causal = false;
  BandCheck c2 = check_band(leak, 1024, shape);
  ASSERT_TRUE(c2.first_violation);
  EXPECT_EQ(c2.first_violation->row, 0);
  EXPECT_EQ(c2.first_violation->kind, "future_key");

  // Right padding: only padded queries can reach a padded key, so it shows as a padded-row
  // difference; the real rows stay exact.
  LayerMaskPlan visible = good;
  visible.masks_padded_keys = false;
  BandCheck c3 = check_band(visible, 1024, shape);
  EXPECT_EQ(c3.violating_rows, 0);
  ASSERT_TRUE(c3.first_padded_difference);
  EXPECT_EQ(c3.first_padded_difference->batch_row, 1);
  EXPECT_EQ(c3.first_padded_difference->row, 2000);
  EXPECT_EQ(c3.first_padded_difference->kind, "padded_key");
  EXPECT_EQ(c3.padded_rows_differing, 4096 - 2000);

  LayerMaskPlan narrow = good;
  narrow.keys_before = 1022;
  BandCheck c4 = check_band(narrow, 1024, shape);
  ASSERT_TRUE(c4.first_violation);
  EXPECT_EQ(c4.first_violation->row, 1023);
  EXPECT_EQ(c4.first_violation->kind, "missing_key");
}

TEST(MaskGeometry, ExpectWindow) {
  MaskRequest q = req(16384);
  q.expect.window = 1024;
  EXPECT_TRUE(analyze_mask(big(), q).ok);
  q.expect.window = 512;
  MaskReport r = analyze_mask(big(), q);
  EXPECT_FALSE(r.ok);
  const MaskAssertion* a = assertion(r, "window");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->layer, 0);
  EXPECT_EQ(a->row, 512);
  EXPECT_NE(a->message.find("row 512 allows 513 keys, expected 512"), std::string::npos)
      << a->message;
  q.expect.window = 2048;
  EXPECT_EQ(assertion(analyze_mask(big(), q), "window")->row, 1024);
  // Too narrow to see the rows differ: the config's window still decides.
  MaskRequest narrow = req(100);
  narrow.expect.window = 512;
  MaskReport n = analyze_mask(big(), narrow);
  EXPECT_FALSE(n.ok);
  EXPECT_FALSE(assertion(n, "window")->row.has_value());
}

// Each failed assertion is one error diagnostic "mask_<name>" with its message, and the outcome
// is kNo; a passing report has neither.
TEST(MaskGeometry, FailedAssertionsAreDiagnosticsAndANo) {
  MaskRequest q = req(16384);
  q.expect.window = 1024;
  q.expect.fast_path = parse_fast_path_types("full");
  const MaskReport pass = analyze_mask(big(), q);
  EXPECT_EQ(pass.outcome, Outcome::kOk);
  EXPECT_TRUE(pass.diagnostics.empty());
  q.expect.window = 512;
  q.expect.fast_path = parse_fast_path_types("full,sliding");
  const MaskReport fail = analyze_mask(big(), q);
  EXPECT_EQ(fail.outcome, Outcome::kNo);
  ASSERT_EQ(fail.diagnostics.size(), 2u);
  EXPECT_EQ(fail.diagnostics[0].code, "mask_window");
  EXPECT_EQ(fail.diagnostics[0].severity, Severity::kError);
  EXPECT_EQ(fail.diagnostics[0].message, assertion(fail, "window")->message);
  EXPECT_EQ(fail.diagnostics[1].code, "mask_fast_path");
}

TEST(MaskGeometry, ExpectFastPath) {
  MaskRequest q = req(16384);
  q.expect.fast_path = parse_fast_path_types("full");
  EXPECT_TRUE(analyze_mask(big(), q).ok);

  q.expect.fast_path = parse_fast_path_types("full,sliding");
  MaskReport r = analyze_mask(big(), q);
  EXPECT_FALSE(r.ok);
  const MaskAssertion* a = assertion(r, "fast_path");
  EXPECT_EQ(a->layer, 0);
  EXPECT_EQ(a->row, 1024);  // where is_causal would let key 0 in
  EXPECT_NE(a->message.find("25 layers disagree"), std::string::npos) << a->message;

  q.expect.fast_path = parse_fast_path_types("none");
  MaskReport none = analyze_mask(big(), q);
  EXPECT_EQ(assertion(none, "fast_path")->layer, 5);

  MaskRequest padded = req(16384, {16384, 8192});
  padded.expect.fast_path = parse_fast_path_types("full");
  MaskReport p = analyze_mask(big(), padded);
  EXPECT_FALSE(p.ok);
  const MaskAssertion* pa = assertion(p, "fast_path");
  EXPECT_EQ(pa->layer, 5);
  EXPECT_EQ(pa->batch_row, 1);
  EXPECT_EQ(pa->row, 8192);
  EXPECT_NE(pa->message.find("padding present"), std::string::npos) << pa->message;
  EXPECT_THROW(parse_fast_path_types("global"), UsageError);
}

TEST(MaskGeometry, BadRequestsAreRefused) {
  EXPECT_THROW(analyze_mask(big(), req(0)), UsageError);
  // Past 4M tokens the per-row walk would take minutes: refused, not computed.
  EXPECT_THROW(analyze_mask(big(), req((int64_t{1} << 22) + 1)), UsageError);
  EXPECT_THROW(analyze_mask(big(), req(100, {100, 0})), Error);
  EXPECT_THROW(analyze_mask(big(), req(100, {101, 100})), Error);
  MaskRequest q = req(100);
  q.lengths = {100};  // batch 2, one length
  EXPECT_THROW(analyze_mask(big(), q), Error);
}

TEST(MaskGeometry, Width262144IsFast) {
  MaskRequest q = req(262144, {262144, 131072});
  q.expect.window = 1024;
  MaskReport r = analyze_mask(big(), q);
  EXPECT_TRUE(r.ok);
  // Closed form per row: 4 rule sets x 2 types x 2 rows x 262,144 rows. A guard against an O(n^2)
  // mask (6.9e10 cells at this width: minutes), not a speed figure: under ASan at -O0 on a loaded
  // 2-core machine it took 0.63-1.0 s, where 0.5 s had been the bound.
  EXPECT_LT(r.geometry_s, 5.0);
}

TEST(MaskGeometry, JsonCarriesEveryLayer) {
  MaskReport r = analyze_mask(big(), req(16384, {16384, 8192}));
  Json j = to_json(r);
  ASSERT_EQ(j["layers"].size(), 30u);
  EXPECT_EQ(j["layers"][0]["type"], "sliding_attention");
  EXPECT_EQ(j["layers"][0]["window"], 1024);
  EXPECT_EQ(j["layers"][0]["max_allowed_per_row"], 1024);
  EXPECT_EQ(j["layers"][0]["saturates_at_row"], 1023);
  EXPECT_EQ(j["layers"][5]["mask"], "explicit");
  EXPECT_EQ(j["layers"][5]["fast_path"], false);
  EXPECT_EQ(j["layers"][5]["paths"]["flash_window"]["mask"], "none");
  EXPECT_EQ(j["layers"][5]["paths"]["eager"]["mask"], "explicit");
  EXPECT_EQ(j["attention_mask_2d"], "padded");
  // one band per rule set and layer type: hf-sdpa and every engine path of the registry
  EXPECT_EQ(j["bands"].size(), 2 * all_mask_rules().size());
  EXPECT_EQ(all_mask_rules().size(), 5u);
  EXPECT_EQ(j["layers"][5]["paths"]["blockwise"]["mask"], "none");
  EXPECT_EQ(j["layers"][0]["paths"]["blockwise"]["fast_path"], true);
  EXPECT_EQ(format_ranges({0, 1, 2, 4, 6, 7}), "0-2,4,6-7");
  EXPECT_FALSE(mask_tables(r).empty());
}

}  // namespace
}  // namespace tprobe::core
