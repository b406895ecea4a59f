// The torch-free half of `tprobe levers`: which configurations are measured, how a lever's repeats
// are compared with the baseline's (hand-worked numbers), and which levers the best combination
// takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "tprobe/config.hpp"
#include "tprobe/core/cost/levers.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {
namespace {

LeverRow row(const std::string& lever, const StepConfig& k, int64_t width,
             std::vector<double> samples, const StepConfig& base) {
  LeverRow r;
  r.lever = lever;
  r.config = k;
  r.setting = config_difference(k, base);
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

// The baseline as the engine resolved it on a GPU.
StepConfig resolved_baseline() {
  StepConfig b = hf_peft_baseline();
  b.attn = AttentionPath::kSdpa;
  b.moe = MoeDispatch::kHfGroupedMm;
  return b;
}

TEST(Levers, ConfigsAreTheBaselineThenEachLeverAloneForTheDevice) {
  LeverPlanInput in;
  in.device = "cuda";
  in.baseline = resolved_baseline();
  std::vector<LeverConfig> c = lever_configs(in);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c.front().lever, "baseline");
  EXPECT_EQ(c.front().setting, "");
  std::vector<std::string> settings;
  for (const auto& x : c) settings.push_back(x.setting);
  for (const char* want : {"--attn flash-window", "--norm fused", "--lora-dtype model",
                           "--moe grouped_mm", "--checkpointing off", "--ce naive", "--ce chunked", "--batch 1",
                           "--batch 4"}) {
    EXPECT_NE(std::find(settings.begin(), settings.end(), want), settings.end()) << want;
  }
  // transformers' experts are the baseline; from the CPU's loop the levers are both grouped paths
  // (refused there by the engine, each a row with its reason); the loop is never a lever.
  EXPECT_EQ(c.front().config.moe, MoeDispatch::kHfGroupedMm);
  LeverPlanInput on_cpu = in;
  on_cpu.device = "cpu";
  on_cpu.baseline.moe = MoeDispatch::kLoop;
  bool hf_lever = false, loop_lever = false;
  for (const auto& x : lever_configs(on_cpu)) {
    hf_lever |= x.setting == "--moe hf_grouped_mm";
    loop_lever |= x.setting == "--moe loop";
  }
  EXPECT_TRUE(hf_lever);
  EXPECT_FALSE(loop_lever);
  for (const auto& x : c) {
    EXPECT_NE(x.setting, "--moe loop");
    EXPECT_NE(x.setting, "--attn eager");  // the slow reference is never a lever
    EXPECT_NE(x.setting, "--attn sdpa-masked");  // a FLOP rule only: the engine does not run it
  }
  // Each lever moves one knob from the baseline.
  for (const auto& x : c) EXPECT_EQ(x.setting.find(" --"), std::string::npos) << x.setting;
  // No packing without a padded point; blockwise is the CPU's windowed path.
  for (const auto& x : c) {
    EXPECT_NE(x.lever, "packing");
    EXPECT_NE(x.config.attn, AttentionPath::kBlockwise);
  }
  in.padded_point = true;
  in.packing_path = packing_path("cuda");
  c = lever_configs(in);
  auto p = std::find_if(c.begin(), c.end(), [](const LeverConfig& x) { return x.lever == "packing"; });
  ASSERT_NE(p, c.end());
  EXPECT_TRUE(p->padded_only);
  EXPECT_EQ(p->config.attn, AttentionPath::kFlashWindow);

  // On the CPU blockwise is the windowed lever; flash-window is offered too (the engine refuses
  // it there with its reason: a CUDA build, the cuda device, bf16).
  LeverPlanInput cpu;
  cpu.device = "cpu";
  cpu.baseline = resolved_baseline();
  cpu.baseline.attn = AttentionPath::kEager;
  cpu.baseline.moe = MoeDispatch::kLoop;
  bool blockwise = false;
  for (const auto& x : lever_configs(cpu)) blockwise |= x.config.attn == AttentionPath::kBlockwise;
  EXPECT_TRUE(blockwise);
  EXPECT_EQ(packing_path("cpu"), AttentionPath::kBlockwise);
}

TEST(Levers, BestCombinesTheLeversFasterAtEveryPoint) {
  LeversReport rep;
  rep.baseline = resolved_baseline();
  const StepConfig b = rep.baseline;
  StepConfig fw = b, fused = b, lora = b;
  fw.attn = AttentionPath::kFlashWindow;
  fused.norm = NormKind::kFused;
  lora.lora_dtype = LoraDtype::kModel;
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
  EXPECT_EQ(best->attn, AttentionPath::kFlashWindow);
  EXPECT_EQ(best->norm, NormKind::kFused);
  EXPECT_EQ(best->lora_dtype, LoraDtype::kFp32);
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
    // Every lever but packing is a knob of the registry, and carries its lever name there.
    if (l.knob) {
      EXPECT_STREQ(knob_info(*l.knob).lever, l.name);
    }
  }
}


// The x, width (or x1) attributes of every element of `cls` in an SVG, in order.
std::vector<std::pair<std::string, std::string>> geometry(const std::string& svg,
                                                          const std::string& element,
                                                          const std::string& cls) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::regex re("<" + element + " class=\"" + cls + "\" ([^>]*)>");
  const std::regex x(R"re((?:^| )x1?="([^"]*)")re"), w(R"re((?:^| )(?:width|y2)="([^"]*)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    const std::string attrs = (*it)[1];
    std::smatch mx, mw;
    std::regex_search(attrs, mx, x);
    std::regex_search(attrs, mw, w);
    out.push_back({mx.size() > 1 ? mx[1].str() : "", mw.size() > 1 ? mw[1].str() : ""});
  }
  return out;
}

TEST(LeversChart, TheNoiseBandIsShadedBetweenTheBaselinesMinAndMax) {
  BarChart ch;
  ch.title = "t";
  ch.series = {"step"};
  ch.items = {{"baseline", {4.0}, false, ""}, {"norm", {2.0}, false, ""}};
  ch.band = true;
  ch.band_low = 1.0;
  ch.band_high = 2.0;
  ch.band_label = "noise";
  // Worked by hand from the layout: short labels keep the label column at 120 px, so the plot
  // runs from 120 + 12 = 132 to 640 - 110 = 530 (398 px); the ticks 0..4 end at the longest bar,
  // so 1 s is 398 / 4 = 99.5 px. Two rows of one 14 px bar + 8 px: the band is 44 px tall from
  // the plot's top at 34.
  const std::string svg = render_svg(ch);
  EXPECT_NE(svg.find("<rect class=\"band\" x=\"231.5\" y=\"34\" width=\"99.5\" "
                     "height=\"44.0\""),
            std::string::npos)
      << svg;
  const auto edges = geometry(svg, "line", "band-edge");
  ASSERT_EQ(edges.size(), 2u) << svg;
  EXPECT_EQ(edges[0].first, "231.5");
  EXPECT_EQ(edges[1].first, "331.0");
  EXPECT_EQ(edges[0].second, "78.0");  // from the top (34) down the two rows
  EXPECT_NE(svg.find(">noise</text>"), std::string::npos);  // in the legend

  // A band beyond every bar widens the scale: ticks 0..5, so 1 s is 398 / 5 = 79.6 px.
  ch.band_high = 5.0;
  const auto wide = geometry(render_svg(ch), "rect", "band");
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_EQ(wide[0].first, "211.6");
  EXPECT_EQ(wide[0].second, "318.4");

  // Unset, or ends that are not a range: no band.
  ch.band_low = 3.0;
  ch.band_high = 2.0;
  EXPECT_EQ(render_svg(ch).find("class=\"band"), std::string::npos);
  ch.band = false;
  ch.band_low = 1.0;
  EXPECT_EQ(render_svg(ch).find("class=\"band"), std::string::npos);
}

// An evidence file as the probe writes it: its results are to_json of a report of these rows
// (the section reads them back with levers_report_from_json).
EvidenceInput levers_evidence(std::vector<LeverRow> rows) {
  LeversReport rep;
  rep.baseline_name = "hf";
  rep.baseline = resolved_baseline();
  rep.device = "cuda";
  rep.model = "m";
  rep.rows = std::move(rows);
  compare_rows(rep);
  EvidenceInput in;
  in.name = "levers.json";
  in.path = "/x/levers.json";
  in.doc = {{"schema", {{"name", "tprobe.levers"}, {"version", kEvidenceSchemaVersion}}},
            {"tool", {{"version", TPROBE_VERSION}}},
            {"status", {{"outcome", "ok"}}},
            {"results", to_json(rep)}};
  return in;
}

LeverRow lever_row(const std::string& lever, const std::string& setting, double lo, double hi,
                   std::optional<int64_t> peak, const std::string& outcome = "ok") {
  LeverRow r;
  r.lever = lever;
  r.setting = setting;
  r.config = resolved_baseline();
  r.batch = 2;
  r.width = 2048;
  r.tokens = 4096;
  r.outcome = outcome;
  r.peak_allocated_bytes = peak;
  if (outcome == "ok") r.timing = make_timing({lo, hi});
  return r;
}

const ReportSection& only_section(const Report& r) {
  static const ReportSection none;
  return r.sections.size() == 1 ? r.sections[0] : none;
}

TEST(LeversChart, MemoryPerLeverBesideTheTimeChartWithTheDifferenceFromTheBaseline) {
  const int64_t gib = int64_t{1} << 30;
  const std::vector<LeverRow> rows = {lever_row("baseline", "", 1.0, 1.2, 10 * gib),
                                      lever_row("norm", "--norm fused", 0.7, 0.8, gib * 19 / 2),
                                      lever_row("ce", "--ce naive", 0, 0, std::nullopt, "oom")};
  const Report rep =
      build_report({levers_evidence(rows)}, {{"levers", "Levers", levers_report_section}});
  const ReportSection& s = only_section(rep);
  ASSERT_EQ(s.figures.size(), 2u);
  EXPECT_EQ(s.figures[0].id, "fig-levers-point-1");
  EXPECT_EQ(s.figures[1].id, "fig-levers-memory-1");
  // The time chart's band is the baseline's 1.0–1.2 s.
  EXPECT_NE(s.figures[0].svg.find("class=\"band\""), std::string::npos);
  EXPECT_NE(s.figures[0].svg.find("(1–1.2 s)"), std::string::npos) << s.figures[0].svg;
  const std::string& mem = s.figures[1].svg;
  EXPECT_NE(mem.find(">10 GiB (baseline)</text>"), std::string::npos) << mem;
  EXPECT_NE(mem.find(">9.5 GiB (-0.5)</text>"), std::string::npos) << mem;
  // Two bars: the OOM row has none, only its outcome.
  EXPECT_EQ(geometry(mem, "rect", "bar").size(), 2u) << mem;
  EXPECT_NE(mem.find(">oom</text>"), std::string::npos) << mem;
}

TEST(LeversChart, MemoryNotMeasuredOnTheCpuIsSaidNotDrawnAsZero) {
  const std::vector<LeverRow> rows = {lever_row("baseline", "", 1.0, 1.2, std::nullopt),
                                      lever_row("norm", "--norm fused", 0.7, 0.8, std::nullopt)};
  const Report rep =
      build_report({levers_evidence(rows)}, {{"levers", "Levers", levers_report_section}});
  const ReportSection& s = only_section(rep);
  ASSERT_EQ(s.figures.size(), 1u);  // the time chart only
  const auto fact = std::find_if(s.facts.begin(), s.facts.end(),
                                 [](const ReportFact& f) { return f.label == "peak memory"; });
  ASSERT_NE(fact, s.facts.end());
  EXPECT_NE(fact->value.find("not measured"), std::string::npos) << fact->value;
  EXPECT_EQ(fact->field, "results.rows[].peak_allocated_bytes");

  // One measured row at the point: the chart is drawn, the unmeasured rows say so, with no bar.
  const int64_t gib = int64_t{1} << 30;
  const std::vector<LeverRow> mixed = {lever_row("baseline", "", 1.0, 1.2, 4 * gib),
                                       lever_row("norm", "--norm fused", 0.7, 0.8, std::nullopt)};
  const Report rep2 =
      build_report({levers_evidence(mixed)}, {{"levers", "Levers", levers_report_section}});
  const ReportSection& s2 = only_section(rep2);
  ASSERT_EQ(s2.figures.size(), 2u);
  EXPECT_EQ(geometry(s2.figures[1].svg, "rect", "bar").size(), 1u);
  EXPECT_NE(s2.figures[1].svg.find("not measured"), std::string::npos);
}

}  // namespace
}  // namespace tprobe::core

// The memory edge's search: upward from the start while each batch fits (at most start + 3),
// downward while each fails; the summary names what was measured, never a prediction.
namespace {
tprobe::core::EdgeProbe probe(int64_t batch, const char* outcome) {
  tprobe::core::EdgeProbe p;
  p.batch = batch;
  p.outcome = outcome;
  return p;
}
}  // namespace

TEST(LeverEdge, SearchWalksUpWhileItFitsAndDownWhileItFails) {
  using tprobe::core::EdgeProbe;
  using tprobe::core::next_edge_batch;
  std::vector<EdgeProbe> done;
  EXPECT_EQ(next_edge_batch(2, done), 2);
  done.push_back(probe(2, "ok"));
  EXPECT_EQ(next_edge_batch(2, done), 3);
  done.push_back(probe(3, "ok"));
  EXPECT_EQ(next_edge_batch(2, done), 4);
  done.push_back(probe(4, "oom"));
  EXPECT_EQ(next_edge_batch(2, done), std::nullopt);  // 3 fits, 4 does not: known
  // Every probe fits: the search stops at start + max_up.
  std::vector<EdgeProbe> up = {probe(2, "ok"), probe(3, "ok"), probe(4, "ok"), probe(5, "ok")};
  EXPECT_EQ(next_edge_batch(2, up), std::nullopt);
  // The start fails: down until one fits, or batch 1 fails.
  std::vector<EdgeProbe> down = {probe(4, "oom")};
  EXPECT_EQ(next_edge_batch(4, down), 3);
  down.push_back(probe(3, "oom"));
  EXPECT_EQ(next_edge_batch(4, down), 2);
  down.push_back(probe(2, "ok"));
  EXPECT_EQ(next_edge_batch(4, down), std::nullopt);
  std::vector<EdgeProbe> none = {probe(1, "oom")};
  EXPECT_EQ(next_edge_batch(1, none), std::nullopt);
  EXPECT_EQ(next_edge_batch(0, {}), std::nullopt);
}

TEST(LeverEdge, SummaryIsWhatWasMeasured) {
  using tprobe::core::LeverEdge;
  LeverEdge a;
  a.start_batch = 2;
  a.probes = {probe(2, "ok"), probe(3, "ok"), probe(4, "oom")};
  tprobe::core::summarise_edge(a);
  EXPECT_EQ(a.largest_batch, 3);
  EXPECT_EQ(a.outcome, "measured");
  LeverEdge b;
  b.start_batch = 2;
  b.probes = {probe(2, "ok"), probe(3, "ok"), probe(4, "ok"), probe(5, "ok")};
  tprobe::core::summarise_edge(b);
  EXPECT_EQ(b.largest_batch, 5);
  EXPECT_EQ(b.outcome, "at least");
  LeverEdge c;
  c.start_batch = 2;
  c.probes = {probe(2, "oom"), probe(1, "oom")};
  tprobe::core::summarise_edge(c);
  EXPECT_EQ(c.largest_batch, 0);
  EXPECT_EQ(c.outcome, "none fits");
  LeverEdge d;
  d.start_batch = 3;
  d.probes = {probe(3, "oom"), probe(2, "ok")};
  tprobe::core::summarise_edge(d);
  EXPECT_EQ(d.largest_batch, 2);
  EXPECT_EQ(d.outcome, "measured");
  LeverEdge e;  // stopped by a signal after the start fitted: not an edge
  e.start_batch = 2;
  e.probes = {probe(2, "ok")};
  tprobe::core::summarise_edge(e);
  EXPECT_EQ(e.outcome, "not measured");
}

// The search starts at the widest unpadded point that ran; where none ran, at the widest that ran
// out of memory on the whole card, which is the search's first failure (it then walks down).
TEST(LeverEdge, SearchStartsAtTheWidestPointThatRanOrElseAtTheWidestOom) {
  using tprobe::core::EdgeCandidate;
  using tprobe::core::edge_start;
  using tprobe::core::next_edge_batch;
  std::vector<EdgeCandidate> ran = {{2048, false, probe(2, "ok")},
                                    {16384, false, probe(2, "ok")},
                                    {32768, true, probe(2, "ok")},
                                    {65536, false, probe(2, "oom")}};
  EXPECT_EQ(edge_start(ran), 1u);  // the padded point and the wider OOM do not start it
  std::vector<EdgeCandidate> oom = {{2048, false, probe(2, "oom")},
                                    {16384, false, probe(2, "oom")},
                                    {16384, true, probe(2, "oom")}};
  ASSERT_EQ(edge_start(oom), 1u);
  // That uncapped OOM, as the first probe, sends the search down.
  EXPECT_EQ(next_edge_batch(2, {oom[1].probe}), 1);
  std::vector<EdgeCandidate> failed = {{16384, false, probe(2, "error")}};
  EXPECT_EQ(edge_start(failed), std::nullopt);  // an error is not a memory edge
  EXPECT_EQ(edge_start({}), std::nullopt);
}

// A rise or a drop is said only where the measurements order the two edges: never between two
// lower bounds (the batch lever's search, started at its own batch, stops at batch + 3).
TEST(LeverEdge, ChangeIsSaidOnlyWhereTheMeasurementsOrderTheEdges) {
  using tprobe::core::edge_change;
  using tprobe::core::LeverEdge;
  auto edge = [](int64_t largest, const char* outcome) {
    LeverEdge e;
    e.largest_batch = largest;
    e.outcome = outcome;
    return e;
  };
  EXPECT_EQ(edge_change(edge(2, "measured"), edge(1, "measured")), "drops");
  EXPECT_EQ(edge_change(edge(1, "measured"), edge(2, "measured")), "rises");
  EXPECT_EQ(edge_change(edge(2, "measured"), edge(2, "measured")), std::nullopt);
  EXPECT_EQ(edge_change(edge(5, "at least"), edge(1, "measured")), "drops");
  EXPECT_EQ(edge_change(edge(5, "at least"), edge(0, "none fits")), "drops");
  EXPECT_EQ(edge_change(edge(1, "measured"), edge(4, "at least")), "rises");
  // Two lower bounds, or a bound that does not pass the other's value: no order.
  EXPECT_EQ(edge_change(edge(5, "at least"), edge(4, "at least")), std::nullopt);
  EXPECT_EQ(edge_change(edge(5, "at least"), edge(7, "at least")), std::nullopt);
  EXPECT_EQ(edge_change(edge(5, "at least"), edge(6, "measured")), std::nullopt);
  EXPECT_EQ(edge_change(edge(4, "measured"), edge(3, "at least")), std::nullopt);
  EXPECT_EQ(edge_change(edge(2, "measured"), edge(0, "not measured")), std::nullopt);
}

// The table sets each lever's largest batch beside the baseline's and says what moved.
TEST(LeverEdge, TableNamesWhatEachLeverDoesToTheEdge) {
  using namespace tprobe::core;
  LeversReport rep;
  rep.edge_card_gib = 80;
  rep.edge_reserve_gib = 0;
  LeverRow base;
  base.lever = "baseline";
  base.width = 16384;
  base.batch = 2;
  base.timing = make_timing({2.0, 2.0});
  LeverRow off = base;
  off.lever = "checkpointing";
  off.setting = "--checkpointing off";
  off.timing = make_timing({1.0, 1.0});
  rep.rows = {base, off};
  compare_rows(rep);
  LeverEdge eb;
  eb.lever = "baseline";
  eb.width = 16384;
  eb.start_batch = 2;
  eb.probes = {probe(2, "ok"), probe(3, "oom")};
  summarise_edge(eb);
  LeverEdge eo = eb;
  eo.lever = "checkpointing";
  eo.setting = "--checkpointing off";
  eo.probes = {probe(2, "oom"), probe(1, "ok")};
  summarise_edge(eo);
  // A lever searched from an uncapped OOM of its sweep, and two lower bounds that do not order.
  LeverEdge ec = eb;
  ec.lever = "ce";
  ec.setting = "--ce naive";
  ec.probes = {probe(2, "oom"), probe(1, "oom")};
  ec.probes[0].uncapped = true;
  summarise_edge(ec);
  LeverEdge eu = eb;
  eu.lever = "batch";
  eu.setting = "--batch 4";
  eu.start_batch = 4;
  eu.probes = {probe(4, "ok"), probe(5, "ok"), probe(6, "ok"), probe(7, "ok")};
  summarise_edge(eu);
  LeverEdge ea = eb;  // a baseline that fitted every batch it tried: at least 5
  ea.probes = {probe(2, "ok"), probe(3, "ok"), probe(4, "ok"), probe(5, "ok")};
  summarise_edge(ea);
  rep.edges = {eb, eo, ec, eu};
  const std::vector<Table> t = edge_tables(rep);
  ASSERT_EQ(t.size(), 1u);
  const std::string text = t[0].render();
  EXPECT_NE(text.find("--checkpointing off: 2.00× faster than the baseline, and the largest batch "
                      "at 16,384 drops from 2 to 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("--ce naive: no step time to set beside the baseline's, and the largest "
                      "batch at 16,384 drops from 2 to none"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2: oom (the sweep's point, uncapped); 1: oom"), std::string::npos) << text;
  EXPECT_NE(text.find("--batch 4: no step time to set beside the baseline's, and the largest "
                      "batch at 16,384 rises from 2 to at least 7"),
            std::string::npos)
      << text;
  const Json j = to_json(rep);
  ASSERT_TRUE(j["memory_edge"].is_object());
  EXPECT_EQ(j["memory_edge"]["rows"][1]["largest_batch"], 1);
  EXPECT_EQ(j["memory_edge"]["rows"][1]["outcome"], "measured");
  EXPECT_EQ(j["memory_edge"]["rows"][2]["probes"][0]["uncapped"], true);
  EXPECT_EQ(j["memory_edge"]["rows"][2]["probes"][1]["uncapped"], false);
  rep.edges = {ea, eu};  // at least 7 against at least 5: nothing is said
  EXPECT_EQ(edge_tables(rep)[0].render().find("--batch 4: "), std::string::npos);
  LeversReport plain;
  EXPECT_TRUE(edge_tables(plain).empty());
  EXPECT_TRUE(to_json(plain)["memory_edge"].is_null());
}
