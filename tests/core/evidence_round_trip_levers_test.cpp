// Typed evidence read back by its own code (issue 34, item 2): a levers report and the report
// probe's own results, built as the probes build them, survive to_json -> from_json -> to_json
// unchanged, and a damaged file is one tprobe::Error naming the field.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tprobe/config.hpp"
#include "support/error_of.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/cost/epoch.hpp"
#include "tprobe/core/cost/levers.hpp"
#include "tprobe/core/report/report.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

StepConfig gpu_baseline() {
  StepConfig b = hf_peft_baseline();
  b.attn = AttentionPath::kSdpa;
  b.moe = MoeDispatch::kHfGroupedMm;
  return b;
}

LeverRow row(const std::string& lever, const StepConfig& k, const StepConfig& base,
             std::vector<int64_t> lengths, std::vector<double> samples) {
  LeverRow r;
  r.lever = lever;
  r.config = k;
  r.setting = config_difference(k, base);
  r.batch = k.batch;
  r.width = 2048;
  r.lengths = std::move(lengths);
  r.tokens = r.lengths.empty() ? k.batch * r.width : 3072;
  r.timing = make_timing(std::move(samples));
  r.peak_allocated_bytes = 20 * kGiB + k.batch * kGiB;
  r.peak_reserved_bytes = *r.peak_allocated_bytes + kGiB / 2;
  r.performed_mfu = 0.31;
  return r;
}

// The epoch block of a run with --dataset: one configuration predicted and measured, one whose
// curve was underdetermined; a seed past INT64_MAX.
EpochReport hand_epoch() {
  EpochReport e;
  e.dataset = "chat.jsonl";
  e.records = 40;
  e.truncated_records = 3;
  e.sampler = "shuffled";
  e.rule = "2 records per micro-batch, padded to the longest";
  e.micro_batch = 2;
  e.max_seq_len = 8;
  e.accumulation = 4;
  e.seed = (uint64_t{1} << 63) + 5;
  e.micro_batches = 20;
  e.real_tokens = 210;
  e.padded_tokens = 290;
  e.zero_pad_micro_batches = 2;
  e.requested_samples = 0;
  e.loss_head_note = "the loss head computes every padded position";
  EpochConfigRow c;
  c.lever = "baseline";
  c.attn = "sdpa";
  c.status = "predicted";
  c.curve = fit_step_curve({{2, 4, 1.12}, {2, 8, 2.88}});
  const std::vector<EpochMicroBatch> shapes = {{8, {8, 5}, {8, 5}, false, {}},
                                               {4, {4, 4}, {4, 3}, false, {}}};
  c.prediction = predict_epoch(c.curve, shapes, false, 4);
  c.flops = EpochFlops{1.5e15, 1.75e15};
  c.measured = true;
  c.pilot = 8;
  c.planned = 3;
  c.pilot_cv = 0.12;
  c.sample = {3, 0, 17};
  c.sample_outcomes = {"ok", "ok", "ok"};
  c.sample_measured_s = {2, 4, 7};
  c.sample_predicted_s = {1, 2, 3};
  c.estimate = estimate_epoch(c.sample_measured_s, c.sample_predicted_s, 20, 20.0);
  c.agree = false;
  e.configs.push_back(c);
  EpochConfigRow u;
  u.lever = "attention";
  u.setting = "--attn flash-window";
  u.attn = "flash-window";
  u.packs = true;
  u.status = "underdetermined";
  u.note = "one measured width";
  u.curve = fit_step_curve({{2, 8, 3.0}, {2, 8, 3.1}});
  u.measure_note = "not asked (--epoch-measure)";
  e.configs.push_back(u);
  return e;
}

// A report as `levers --gpu-memory 80 --reserve 2 --dataset ...` writes it: the baseline, three
// levers at an unpadded and a padded point, an OOM and a refusal, the best combination, the
// epoch and the memory edge.
LeversReport hand_levers() {
  LeversReport rep;
  rep.baseline_name = hf_peft_baseline_name();
  rep.baseline = gpu_baseline();
  rep.device = "cuda";
  rep.model = "gemma4-26b-a4b";
  const StepConfig b = rep.baseline;
  StepConfig fw = b, fused = b, big = b, naive = b;
  fw.attn = AttentionPath::kFlashWindow;
  fused.norm = NormKind::kFused;
  big.batch = 4;
  naive.ce = CeForm::kNaive;
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{}, {2048, 1024}}) {
    rep.rows.push_back(row("baseline", b, b, lengths, {1.0, 1.01, 1.02}));
    rep.rows.push_back(row("attention", fw, b, lengths, {0.5, 0.51, 0.52}));
    rep.rows.push_back(row("norm", fused, b, lengths, {0.9, 0.9, 0.91}));
    rep.rows.push_back(row("batch", big, b, lengths, {1.9}));  // one repeat: no spread
  }
  LeverRow oom = row("ce", naive, b, {}, {});
  oom.outcome = "oom";
  oom.message = "CUDA out of memory";
  oom.peak_allocated_bytes.reset();
  oom.peak_reserved_bytes.reset();
  oom.performed_mfu.reset();
  rep.rows.push_back(oom);
  LeverRow refused = row("packing", fw, b, {2048, 1024}, {0.4, 0.41});
  refused.outcome = "refused";  // its repeats are kept, but no spread is written for it
  refused.message = "flash-window needs a CUDA build";
  rep.rows.push_back(refused);
  compare_rows(rep);
  rep.best_considered = true;
  rep.best = best_combination(rep, &rep.best_from);
  if (rep.best) rep.best_setting = config_difference(*rep.best, b);
  rep.epoch = hand_epoch();
  rep.edge_card_gib = 80;
  rep.edge_reserve_gib = 2;
  rep.edge_cap_bytes = 78 * kGiB;
  auto probe = [](int64_t batch, const char* outcome, std::optional<int64_t> reserved) {
    EdgeProbe p;
    p.batch = batch;
    p.outcome = outcome;
    p.peak_reserved_bytes = reserved;
    p.peak_allocated_bytes = reserved ? std::optional<int64_t>(*reserved - kGiB) : std::nullopt;
    if (std::string(outcome) == "oom") p.message = "CUDA out of memory";
    return p;
  };
  LeverEdge eb;
  eb.lever = "baseline";
  eb.width = 2048;
  eb.start_batch = 2;
  eb.probes = {probe(2, "ok", 30 * kGiB), probe(3, "ok", 50 * kGiB), probe(4, "oom", {})};
  summarise_edge(eb);
  LeverEdge ec = eb;
  ec.lever = "ce";
  ec.setting = "--ce naive";
  ec.probes = {probe(2, "oom", {}), probe(1, "ok", 40 * kGiB)};
  ec.probes[0].uncapped = true;
  summarise_edge(ec);
  LeverEdge en = eb;
  en.lever = "norm";
  en.setting = "--norm fused";
  en.probes.clear();
  en.message = "the configuration failed";
  summarise_edge(en);
  rep.edges = {eb, ec, en};
  return rep;
}

using testing_support::error_of;

TEST(LeversRoundTrip, ToJsonOfTheReadBackIsTheSameDocument) {
  const LeversReport rep = hand_levers();
  ASSERT_TRUE(rep.best) << "the hand report should have a best combination";
  const Json j = to_json(rep);
  const LeversReport back = levers_report_from_json(j, "l.json results");
  EXPECT_EQ(to_json(back), j);
  // Through its text too, as a file is read: integers come back unsigned, floats as written.
  const LeversReport parsed = levers_report_from_json(Json::parse(j.dump()), "l.json results");
  EXPECT_EQ(to_json(parsed), j);

  EXPECT_EQ(back.baseline_name, rep.baseline_name);
  EXPECT_TRUE(back.baseline == rep.baseline);
  EXPECT_EQ(back.device, "cuda");
  ASSERT_EQ(back.rows.size(), rep.rows.size());
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    const LeverRow& a = rep.rows[i];
    const LeverRow& z = back.rows[i];
    EXPECT_EQ(z.setting, a.setting) << i;
    EXPECT_TRUE(z.config == a.config) << i;
    EXPECT_EQ(z.lengths, a.lengths) << i;
    EXPECT_EQ(z.outcome, a.outcome) << i;
    EXPECT_EQ(z.timing.samples_s, a.timing.samples_s) << i;
    EXPECT_EQ(z.timing.median_s, a.timing.median_s) << i;
    EXPECT_EQ(z.timing.max_s, a.timing.max_s) << i;
    EXPECT_EQ(z.peak_reserved_bytes, a.peak_reserved_bytes) << i;
    EXPECT_EQ(z.performed_mfu, a.performed_mfu) << i;
    ASSERT_EQ(z.delta.has_value(), a.delta.has_value()) << i;
    if (a.delta) {
      EXPECT_EQ(z.delta->verdict, a.delta->verdict) << i;
      EXPECT_EQ(z.delta->ratio, a.delta->ratio) << i;
      EXPECT_EQ(z.delta->inside_noise, a.delta->inside_noise) << i;
    }
  }
  EXPECT_EQ(back.rows[1].delta->verdict, "faster");
  EXPECT_EQ(back.rows[3].delta->verdict, "no spread measured");
  ASSERT_TRUE(back.best);
  EXPECT_TRUE(*back.best == *rep.best);
  EXPECT_EQ(back.best_setting, rep.best_setting);
  EXPECT_EQ(back.best_from, rep.best_from);
  EXPECT_TRUE(back.best_considered);

  ASSERT_TRUE(back.epoch);
  EXPECT_EQ(back.epoch->seed, (uint64_t{1} << 63) + 5);
  EXPECT_EQ(back.epoch->accumulation, 4);
  ASSERT_EQ(back.epoch->configs.size(), 2u);
  const EpochConfigRow& c = back.epoch->configs[0];
  EXPECT_TRUE(c.curve.determined);
  EXPECT_EQ(c.curve.form, "AB");
  EXPECT_EQ(c.curve.per_len2_s, rep.epoch->configs[0].curve.per_len2_s);
  ASSERT_TRUE(c.prediction && c.estimate);
  EXPECT_EQ(c.prediction->optimizer_steps, 1);
  EXPECT_EQ(c.estimate->ratio_half_s, rep.epoch->configs[0].estimate->ratio_half_s);
  EXPECT_EQ(c.agree, std::optional<bool>(false));
  EXPECT_FALSE(back.epoch->configs[1].curve.determined);
  EXPECT_FALSE(back.epoch->configs[1].estimate);

  EXPECT_EQ(back.edge_card_gib, 80.0);
  EXPECT_EQ(back.edge_reserve_gib, 2.0);
  EXPECT_EQ(back.edge_cap_bytes, 78 * kGiB);
  ASSERT_EQ(back.edges.size(), 3u);
  EXPECT_EQ(back.edges[0].outcome, "measured");
  EXPECT_EQ(back.edges[0].largest_batch, 3);
  EXPECT_TRUE(back.edges[1].probes[0].uncapped);
  EXPECT_EQ(back.edges[1].probes[1].peak_allocated_bytes, 39 * kGiB);
  EXPECT_EQ(back.edges[2].message, "the configuration failed");
}

TEST(LeversRoundTrip, WhyThereIsNoBestIsReadBack) {
  LeversReport rep = hand_levers();
  rep.epoch.reset();
  rep.edge_card_gib.reset();
  rep.edges.clear();
  rep.best.reset();
  rep.best_setting.clear();
  for (bool considered : {false, true}) {
    rep.best_considered = considered;
    const Json j = to_json(rep);
    const LeversReport back = levers_report_from_json(j, "l.json results");
    EXPECT_EQ(to_json(back), j);
    EXPECT_EQ(back.best_considered, considered);
    EXPECT_FALSE(back.best);
    EXPECT_FALSE(back.epoch);
    EXPECT_FALSE(back.edge_card_gib);
  }
}

TEST(LeversRoundTrip, ABrokenFileIsOneErrorNamingTheField) {
  const Json good = to_json(hand_levers());
  auto read = [](const Json& j) {
    return error_of([&] { levers_report_from_json(j, "l.json results"); });
  };
  ASSERT_EQ(read(good), "");
  Json j = good;
  j["rows"][2].erase("knobs");  // missing
  EXPECT_EQ(read(j), "l.json results rows[2]: missing field 'knobs'");
  j = good;
  j["rows"][1]["batch"] = "two";  // wrong type
  EXPECT_NE(read(j).find("rows[1]: field 'batch' must be an integer"), std::string::npos)
      << read(j);
  j = good;
  j["rows"][0]["peak_allocated_bytes"] = -1;  // out of range
  EXPECT_NE(read(j).find("rows[0]: field 'peak_allocated_bytes' must be an integer in 0.."),
            std::string::npos)
      << read(j);
  j = good;
  j["rows"][0]["knobs"]["attn"] = "warp-speed";
  EXPECT_NE(read(j).find("rows[0].knobs: field 'attn'"), std::string::npos) << read(j);
  j = good;
  j["rows"][0]["median_s"] = "NaN";
  EXPECT_NE(read(j).find("field 'median_s' must be a finite number"), std::string::npos);
  j = good;
  j["memory_edge"]["rows"][1]["probes"][0]["uncapped"] = "yes";
  EXPECT_NE(read(j).find("memory_edge rows[1] probes[0]: field 'uncapped' must be true or false"),
            std::string::npos)
      << read(j);
  j = good;
  j["epoch"]["seed"] = -3;
  EXPECT_NE(read(j).find("l.json results.epoch: field 'seed' must be an integer in 0.."),
            std::string::npos)
      << read(j);
  j = good;
  j["epoch"]["optimizer_steps"] = 4;  // 20 micro-batches in windows of 4 are 5 steps
  EXPECT_NE(read(j).find("optimizer_steps is not ceil"), std::string::npos) << read(j);
  j = good;
  j["epoch"]["configs"][0]["sampled"]["n"] = 21;  // more than the population of 20
  EXPECT_NE(read(j).find("configs[0].sampled: field 'n' must be an integer in 0..20"),
            std::string::npos)
      << read(j);
  j = good;
  j["best"]["combines"] = "attention";
  EXPECT_NE(read(j).find("l.json results.best: field 'combines' must be an array"),
            std::string::npos)
      << read(j);
  EXPECT_NE(read(Json::array()).find("l.json results must be an object"), std::string::npos);
}

EvidenceInput evidence(const std::string& name, Json results) {
  EvidenceInput in;
  in.name = name + ".json";
  in.path = "/x/" + in.name;
  in.doc = {{"schema", {{"name", "tprobe." + name}, {"version", kEvidenceSchemaVersion}}},
            {"tool", {{"version", TPROBE_VERSION}}},
            {"status", {{"outcome", "ok"}}},
            {"results", std::move(results)}};
  return in;
}

const std::vector<ReportProbe> kLeversOnly = {{"levers", "Levers", levers_report_section}};

// The section draws the report its own reader read: every figure and table of a full run, with
// the fields they came from.
TEST(LeversRoundTrip, TheSectionDrawsTheTypedReport) {
  const Report r = build_report({evidence("levers", to_json(hand_levers()))}, kLeversOnly);
  ASSERT_EQ(r.sections.size(), 1u);
  const ReportSection& s = r.sections[0];
  std::vector<std::string> figures, tables;
  for (const auto& f : s.figures) figures.push_back(f.id);
  for (const auto& t : s.tables) tables.push_back(t.id);
  EXPECT_EQ(figures, (std::vector<std::string>{"fig-levers-point-1", "fig-levers-memory-1",
                                               "fig-levers-point-2", "fig-levers-memory-2",
                                               "fig-levers-epoch"}));
  EXPECT_EQ(tables, (std::vector<std::string>{"tab-levers-rows", "tab-levers-memory-edge"}));
  ASSERT_FALSE(s.facts.empty());
  EXPECT_EQ(s.facts[0].value, hf_peft_baseline_name());
  EXPECT_EQ(s.facts[0].field, "results.baseline.reproduces");
  EXPECT_EQ(s.facts[1].field, "results.best.setting");
  EXPECT_EQ(s.facts[1].value, hand_levers().best_setting);
  // The epoch figure: the prediction lies outside the measured interval (agree false).
  EXPECT_NE(s.figures[4].svg.find("disagrees"), std::string::npos) << s.figures[4].svg;
  EXPECT_EQ(s.figures[4].fields[0], "results.epoch.configs[].predicted.hours");
}

TEST(LeversRoundTrip, TheSectionOfABrokenFileIsOneNote) {
  Json j = to_json(hand_levers());
  j["rows"][3]["width"] = "wide";
  const Report r = build_report({evidence("levers", j)}, kLeversOnly);
  ASSERT_EQ(r.sections.size(), 1u);
  const ReportSection& s = r.sections[0];
  EXPECT_TRUE(s.figures.empty());
  EXPECT_TRUE(s.tables.empty());
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("levers.json results rows[3]: field 'width' must be an integer"),
            std::string::npos)
      << s.notes[0];
  EXPECT_NE(s.notes[0].find("the lever figures not drawn"), std::string::npos);
}

// ---- the report probe's own results ----

ReportResults hand_report_results() {
  // A page over a levers file, an unknown probe's and a file that is not evidence.
  const Report r = build_report(
      {evidence("levers", to_json(hand_levers())), evidence("zz", {{"x", 1}}),
       EvidenceInput{"/x/broken.json", "broken.json", nullptr, "not valid JSON at byte 1"}},
      kLeversOnly);
  return report_results(r, "out/report.html", "out/report.md");
}

TEST(ReportResultsRoundTrip, ToJsonOfTheReadBackIsTheSameDocument) {
  const ReportResults rr = hand_report_results();
  ASSERT_EQ(rr.sections.size(), 2u);
  const Json j = to_json(rr);
  const ReportResults back = report_results_from_json(j, "r.json results");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(to_json(report_results_from_json(Json::parse(j.dump()), "r.json results")), j);
  EXPECT_EQ(back.html, "out/report.html");
  EXPECT_EQ(back.markdown, "out/report.md");
  EXPECT_EQ(back.generated_at, rr.generated_at);
  ASSERT_EQ(back.files.size(), rr.files.size());
  EXPECT_EQ(back.files[0].probe, "levers");
  ASSERT_EQ(back.sections.size(), 2u);
  EXPECT_EQ(back.sections[0].id, "sec-levers");
  ASSERT_EQ(back.sections[0].figures.size(), 5u);
  EXPECT_EQ(back.sections[0].figures[4].id, "fig-levers-epoch");
  EXPECT_EQ(back.sections[0].figures[4].fields, rr.sections[0].figures[4].fields);
  ASSERT_EQ(back.sections[0].tables.size(), 2u);
  EXPECT_EQ(back.sections[0].tables[0].rows, 10);  // every lever row
  EXPECT_EQ(back.sections[1].probe, "zz");
  EXPECT_EQ(back.sections[1].notes, rr.sections[1].notes);
  EXPECT_EQ(back.notes, rr.notes);
  EXPECT_FALSE(back.notes.empty());  // the broken file is named
}

TEST(ReportResultsRoundTrip, ABrokenFileIsOneErrorNamingTheField) {
  const Json good = to_json(hand_report_results());
  auto read = [](const Json& j) {
    return error_of([&] { report_results_from_json(j, "r.json results"); });
  };
  ASSERT_EQ(read(good), "");
  Json j = good;
  j.erase("markdown");
  EXPECT_EQ(read(j), "r.json results: missing field 'markdown'");
  j = good;
  j["sections"][0]["tables"][1]["rows"] = -2;
  EXPECT_NE(read(j).find("sections[0] tables[1]: field 'rows' must be an integer in 0.."),
            std::string::npos)
      << read(j);
  j = good;
  j["sections"][0]["figures"][0]["fields"] = {"results.rows", 7};
  EXPECT_NE(read(j).find("figures[0] fields[1] must be a string"), std::string::npos) << read(j);
  j = good;
  j["files"][1]["probe"] = nullptr;
  EXPECT_NE(read(j).find("files[1]: field 'probe' must be a string"), std::string::npos)
      << read(j);
}

}  // namespace
}  // namespace tprobe::core
