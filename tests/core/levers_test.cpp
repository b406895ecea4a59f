// The torch-free half of `tprobe levers`: which configurations are measured, how a lever's repeats
// are compared with the baseline's (hand-worked numbers), and which levers the best combination
// takes.
#include <gtest/gtest.h>

#include <algorithm>

#include "tprobe/core/cost/levers.hpp"

namespace tprobe::core {
namespace {

LeverRow row(const std::string& lever, const StepKnobs& k, int64_t width,
             std::vector<double> samples, const StepKnobs& base) {
  LeverRow r;
  r.lever = lever;
  r.knobs = k;
  r.setting = knob_options(k, base);
  r.batch = k.batch;
  r.width = width;
  r.tokens = k.batch * width;
  r.timing = make_timing(std::move(samples));
  return r;
}

TEST(Levers, TimingIsTheMedianAndRangeOfTheRepeats) {
  const Timing t = make_timing({1.3, 1.0, 1.1, 1.2});
  EXPECT_DOUBLE_EQ(t.median_s, 1.15);
  EXPECT_DOUBLE_EQ(t.min_s, 1.0);
  EXPECT_DOUBLE_EQ(t.max_s, 1.3);
  EXPECT_DOUBLE_EQ(make_timing({2.0, 1.0, 3.0}).median_s, 2.0);
}

TEST(Levers, FasterBeyondTheSpreadSlowerAndInsideTheNoise) {
  const Timing base = make_timing({1.0, 1.1, 1.2});
  const LeverDelta faster = compare(base, make_timing({0.5, 0.55, 0.6}));
  EXPECT_EQ(faster.verdict, "faster");
  EXPECT_DOUBLE_EQ(faster.ratio, 2.0);
  EXPECT_NEAR(faster.delta_s, -0.55, 1e-12);
  EXPECT_FALSE(faster.inside_noise);

  EXPECT_EQ(compare(base, make_timing({1.25, 1.3, 1.4})).verdict, "slower");
  // Ranges that touch cannot be told apart.
  const LeverDelta noise = compare(base, make_timing({1.2, 1.3, 1.4}));
  EXPECT_TRUE(noise.inside_noise);
  EXPECT_EQ(noise.verdict, "inside the noise");
  // One repeat on either side: no spread, no verdict either way.
  EXPECT_EQ(compare(base, make_timing({0.5})).verdict, "no spread measured");
  EXPECT_EQ(compare(make_timing({1.0}), make_timing({0.5, 0.6})).verdict, "no spread measured");
}

TEST(Levers, TheBatchLeverIsComparedForTheSameTokens) {
  // One row per micro-batch at 0.6 s is 1.2 s for the baseline's two rows: inside its range.
  const Timing base = make_timing({1.0, 1.1, 1.2});
  const LeverDelta d = compare(base, make_timing({0.6, 0.6, 0.61}), 2.0);
  EXPECT_DOUBLE_EQ(d.delta_s, 1.2 - 1.1);
  EXPECT_TRUE(d.inside_noise);
}

TEST(Levers, ConfigsAreTheBaselineThenEachLeverAloneForTheDevice) {
  LeverPlanInput in;
  in.device = "cuda";
  std::vector<LeverConfig> c = lever_configs(in);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c.front().lever, "baseline");
  EXPECT_EQ(c.front().setting, "");
  std::vector<std::string> settings;
  for (const auto& x : c) settings.push_back(x.setting);
  for (const char* want : {"--attn flash-window", "--norm fused", "--lora-dtype model",
                           "--moe grouped_mm", "--checkpointing off", "--ce naive", "--batch 1",
                           "--batch 4"}) {
    EXPECT_NE(std::find(settings.begin(), settings.end(), want), settings.end()) << want;
  }
  // transformers' experts are the baseline; from the CPU's loop the lever is transformers' path.
  EXPECT_EQ(c.front().knobs.moe, "hf_grouped_mm");
  LeverPlanInput on_cpu = in;
  on_cpu.device = "cpu";
  on_cpu.baseline.moe = "loop";
  bool hf_lever = false;
  for (const auto& x : lever_configs(on_cpu)) hf_lever |= x.setting == "--moe hf_grouped_mm";
  EXPECT_TRUE(hf_lever);
  // Each lever moves one knob from the baseline.
  for (const auto& x : c) EXPECT_EQ(x.setting.find(" --"), std::string::npos) << x.setting;
  // No packing without a padded point; blockwise is the CPU's windowed path.
  for (const auto& x : c) {
    EXPECT_NE(x.lever, "packing");
    EXPECT_NE(x.knobs.attn, "blockwise");
  }
  in.padded_point = true;
  in.packing_path = "flash-window";
  c = lever_configs(in);
  auto p = std::find_if(c.begin(), c.end(), [](const LeverConfig& x) { return x.lever == "packing"; });
  ASSERT_NE(p, c.end());
  EXPECT_TRUE(p->padded_only);
  EXPECT_EQ(p->knobs.attn, "flash-window");

  LeverPlanInput cpu;
  cpu.device = "cpu";
  cpu.baseline.moe = "loop";
  for (const auto& x : lever_configs(cpu)) EXPECT_NE(x.knobs.attn, "flash-window");
}

TEST(Levers, BestCombinesTheLeversFasterAtEveryPoint) {
  LeversReport rep;
  const StepKnobs b = rep.baseline;
  StepKnobs fw = b, fused = b, lora = b;
  fw.attn = "flash-window";
  fused.norm = "fused";
  lora.lora_dtype = "model";
  for (int64_t w : {2048, 16384}) {
    const double base = w == 2048 ? 1.0 : 13.0;
    rep.rows.push_back(row("baseline", b, w, {base, base * 1.01, base * 1.02}, b));
    rep.rows.push_back(row("attention", fw, w, {base / 3, base / 3 * 1.01, base / 3 * 1.02}, b));
    rep.rows.push_back(row("norm", fused, w, {base * 0.9, base * 0.9, base * 0.91}, b));
    // faster at 16k, inside the noise at 2k: not taken
    const double f = w == 2048 ? 1.0 : 0.8;
    rep.rows.push_back(row("lora-dtype", lora, w, {base * f, base * f * 1.01, base * f * 1.02}, b));
  }
  compare_rows(rep);
  rep.best_considered = true;
  std::vector<std::string> from;
  auto best = best_combination(rep, &from);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->attn, "flash-window");
  EXPECT_EQ(best->norm, "fused");
  EXPECT_EQ(best->lora_dtype, "fp32");
  EXPECT_EQ(from, (std::vector<std::string>{"--attn flash-window", "--norm fused"}));

  // An OOM anywhere drops the lever.
  rep.rows[1].outcome = "oom";
  compare_rows(rep);
  best = best_combination(rep, &from);
  EXPECT_FALSE(best);  // only the norm is left: its own row is the best
  EXPECT_EQ(from, (std::vector<std::string>{"--norm fused"}));

  rep.best_from = from;
  const Json j = to_json(rep);
  EXPECT_EQ(j["best"]["why_none"], "one lever alone: its own row is the best");
  rep.best_considered = false;  // an interrupted run never compared the levers
  EXPECT_EQ(to_json(rep)["best"]["why_none"],
            "not reached: the run stopped before every lever was measured");
  EXPECT_EQ(j["rows"].size(), rep.rows.size());
  EXPECT_TRUE(j["rows"][1]["vs_baseline"].is_null());  // the OOM row has no comparison
  EXPECT_EQ(j["rows"][2]["vs_baseline"]["verdict"], "faster");
  EXPECT_EQ(j["levers"].size(), lever_catalogue().size());
  const auto tables = levers_tables(rep);
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_NE(tables[0].render().find("inside the noise"), std::string::npos);
}

TEST(Levers, EveryLeverSaysHowToPullItInAnHfStack) {
  for (const LeverInfo& l : lever_catalogue()) {
    EXPECT_STRNE(l.name, "");
    EXPECT_STRNE(l.moves, "");
    EXPECT_STRNE(l.in_hf_stack, "") << l.name;
    EXPECT_STREQ(to_string(l.id), l.name);
  }
}

}  // namespace
}  // namespace tprobe::core
