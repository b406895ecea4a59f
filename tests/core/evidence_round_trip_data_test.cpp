// Typed evidence read back by its own code: padding, bucket, flops, lora-gate and env results go
// through to_json -> from_json -> to_json unchanged, and damaged results are one tprobe::Error
// that names the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "test_datasets.hpp"
#include "test_paths.hpp"
#include "tprobe/core/adapter/lora_gate_report.hpp"
#include "tprobe/core/base/environment.hpp"
#include "support/error_of.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/cost/flops_report.hpp"
#include "tprobe/core/data/bucket_report.hpp"
#include "tprobe/core/data/padding_report.hpp"

namespace tprobe::core {
namespace {

using testing_support::random_dataset;

using testing_support::error_of;

// Whether `message` names `field` (the messages quote a key as 'key' and an element as key[i]).
::testing::AssertionResult names(const std::string& message, const std::string& field) {
  if (message.find(field) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << message << "' does not name " << field;
}

// ---- padding ----

PaddingReport padding_report() {
  PaddingOptions o;
  o.micro_batch = 3;
  o.order = BatchOrder::kShuffled;
  o.seed = 0x8000000000000005ULL;  // above int64: the seed is read as unsigned
  o.max_seq_len = 300;
  o.vocab = 1000;
  o.ce_chunk = 64;
  return analyze_padding(random_dataset(7, 50, 3, 400), o);
}

TEST(EvidenceRoundTrip, Padding) {
  const PaddingReport r = padding_report();
  ASSERT_GT(r.breakdown.total.truncated_records, 0);  // the truncation block holds something
  const Json j = to_json(r);
  const PaddingReport back = padding_report_from_json(j, "p.json results");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.widths, r.widths);
  EXPECT_EQ(back.rows, r.rows);
  EXPECT_EQ(back.options.micro_batch, 3);
  EXPECT_EQ(back.options.order, BatchOrder::kShuffled);
  EXPECT_EQ(back.options.seed, 0x8000000000000005ULL);
  EXPECT_EQ(back.options.max_seq_len, 300);
  EXPECT_EQ(back.breakdown.sources.size(), 3u);
  EXPECT_EQ(back.breakdown.sources[1].pad_tokens, r.breakdown.sources[1].pad_tokens);
  EXPECT_EQ(back.breakdown.total.pad_tokens, r.breakdown.total.pad_tokens);
  EXPECT_EQ(back.breakdown.total.max_length, r.breakdown.total.max_length);
  EXPECT_EQ(back.loss.naive_ce_transient_bytes, r.loss.naive_ce_transient_bytes);
  EXPECT_EQ(back.histogram.size(), r.histogram.size());
  EXPECT_DOUBLE_EQ(back.waste_ratio, r.waste_ratio);
  // The sequential order writes no seed, and reads back as sequential.
  PaddingOptions seq;
  seq.max_seq_len = 300;
  const PaddingReport s = analyze_padding(random_dataset(8, 20, 1, 400), seq);
  const Json js = to_json(s);
  EXPECT_TRUE(js["sampler_seed"].is_null());
  EXPECT_EQ(to_json(padding_report_from_json(js, "p.json results")), js);
}

TEST(EvidenceRoundTrip, PaddingBrokenInputNamesTheField) {
  const Json good = to_json(padding_report());
  auto err = [&](const std::function<void(Json&)>& damage) {
    Json j = good;
    damage(j);
    return error_of([&] { padding_report_from_json(j, "p.json results"); });
  };
  EXPECT_TRUE(names(err([](Json& j) { j.erase("micro_batch_rows"); }),
                    "missing field 'micro_batch_rows'"));
  EXPECT_TRUE(names(err([](Json& j) { j["waste_ratio"] = "x"; }), "'waste_ratio'"));
  EXPECT_TRUE(names(err([](Json& j) { j["pad_tokens"] = -1; }), "'pad_tokens'"));
  EXPECT_TRUE(names(err([](Json& j) { j["micro_batch_widths"][1] = "x"; }),
                    "micro_batch_widths[1]"));
  EXPECT_TRUE(names(err([](Json& j) { j["per_source"][2]["records"] = -4; }),
                    "per_source[2]: field 'records'"));
  EXPECT_TRUE(names(err([](Json& j) { j["loss_head"]["widest_micro_batch"].erase("rows"); }),
                    "loss_head widest_micro_batch: missing field 'rows'"));
  EXPECT_TRUE(names(err([](Json& j) { j["sampler"] = "random"; }), "'sampler'"));
  EXPECT_TRUE(names(err([](Json& j) { j["batch"] = 0; }), "'batch'"));
  EXPECT_TRUE(names(err([](Json& j) { j["micro_batch_rows"].push_back(1); }), "micro_batch_rows"));
  EXPECT_TRUE(names(err([](Json& j) { j["dataset"]["sources"] = 9; }), "per_source"));
  EXPECT_TRUE(names(err([](Json& j) { j = Json::array(); }), "p.json results"));
}

// ---- bucket ----

BucketReport bucket_report() {
  BucketOptions o;
  o.micro_batch = 2;
  o.accum = 4;
  o.max_seq_len = 300;
  o.sweep = {2, 8, 32};
  o.seeds = 2;
  o.seed = 11;
  o.cost = parse_cost("1e-3,1e-7,0.01");
  BucketReport r = analyze_bucket(random_dataset(5, 80, 4, 400), o);
  r.emit_order = "order.jsonl";
  return r;
}

TEST(EvidenceRoundTrip, Bucket) {
  const BucketReport r = bucket_report();
  ASSERT_EQ(r.sweep.size(), 3u);
  const Json j = to_json(r);
  EXPECT_EQ(j["emit_order"], "order.jsonl");
  const BucketReport back = bucket_report_from_json(j, "b.json results");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.chosen_widths, r.chosen_widths);
  EXPECT_EQ(back.chosen_bucket, r.chosen_bucket);
  EXPECT_EQ(back.emit_order, "order.jsonl");
  EXPECT_EQ(back.options.micro_batch, 2);
  EXPECT_EQ(back.options.accum, 4);
  EXPECT_EQ(back.options.seed, 11u);
  EXPECT_EQ(back.options.sweep, (std::vector<int64_t>{2, 8, 32}));
  ASSERT_TRUE(back.options.cost.has_value());
  EXPECT_DOUBLE_EQ(back.options.cost->b_s_per_token2, 1e-7);
  EXPECT_EQ(back.sweep[1].seeds, r.sweep[1].seeds);
  EXPECT_EQ(back.sweep[2].fingerprint, r.sweep[2].fingerprint);
  EXPECT_EQ(back.baseline.fingerprint, r.baseline.fingerprint);
  ASSERT_TRUE(back.sweep[0].saving_ratio.has_value());
  EXPECT_DOUBLE_EQ(*back.sweep[0].saving_ratio, *r.sweep[0].saving_ratio);
  EXPECT_DOUBLE_EQ(back.sweep[1].per_seed[1].waste_ratio, r.sweep[1].per_seed[1].waste_ratio);
  EXPECT_EQ(back.noop_sweep, r.noop_sweep);

  // Interrupted before the first size, without a cost model or an emitted order: the nulls and
  // the absent key read back as such.
  BucketReport cut = r;
  cut.sweep.clear();
  cut.interrupted = true;
  cut.options.cost.reset();
  cut.emit_order.clear();
  const Json jc = to_json(cut);
  EXPECT_FALSE(jc.contains("emit_order"));
  const BucketReport cut_back = bucket_report_from_json(jc, "b.json results");
  EXPECT_EQ(to_json(cut_back), jc);
  EXPECT_TRUE(cut_back.interrupted);
  EXPECT_FALSE(cut_back.options.cost.has_value());
  EXPECT_TRUE(cut_back.chosen_widths.empty());
}

TEST(EvidenceRoundTrip, BucketBrokenInputNamesTheField) {
  const Json good = to_json(bucket_report());
  auto err = [&](const std::function<void(Json&)>& damage) {
    Json j = good;
    damage(j);
    return error_of([&] { bucket_report_from_json(j, "b.json results"); });
  };
  EXPECT_TRUE(names(err([](Json& j) { j.erase("noop_sweep"); }), "missing field 'noop_sweep'"));
  EXPECT_TRUE(names(err([](Json& j) { j["interrupted"] = 1; }), "'interrupted'"));
  EXPECT_TRUE(names(err([](Json& j) { j["sweep"][0]["per_seed"][1]["seed"] = -3; }),
                    "sweep[0] per_seed[1]: field 'seed'"));
  EXPECT_TRUE(names(err([](Json& j) { j["chosen"]["windows"] = -1; }), "chosen: field 'windows'"));
  EXPECT_TRUE(names(err([](Json& j) { j["micro_batch_widths"][0] = 2.5; }),
                    "micro_batch_widths[0]"));
  EXPECT_TRUE(names(err([](Json& j) { j["sweep"][1]["micro_batch_set_fingerprint"] = "xyz"; }),
                    "micro_batch_set_fingerprint"));
  EXPECT_TRUE(names(err([](Json& j) { j["baseline"]["over_seeds"].erase("waste_ratio"); }),
                    "baseline over_seeds: missing field 'waste_ratio'"));
  EXPECT_TRUE(names(err([](Json& j) { j["cost_model"]["c_s"] = "1"; }), "cost_model: field 'c_s'"));
  EXPECT_TRUE(names(err([](Json& j) { j["sweep_sizes_measured"] = 2; }), "sweep_sizes_measured"));
  EXPECT_TRUE(names(err([](Json& j) { j["emit_order"] = 3; }), "'emit_order'"));
}

// ---- flops ----

FlopsEvidence flops_evidence() {
  FlopsRequest q;
  q.batch = 2;
  q.width = 128;
  q.lengths = {100, 64};
  q.path = AttentionPath::kSdpaMasked;
  q.lora_targets = {"q_proj", "v_proj", "down_proj"};
  q.lora_rank = 8;
  FlopsRates rates;
  rates.step_time_s = 0.25;
  rates.peak_tflops = 500;
  return {count_flops(embedded_model("gemma4-tiny"), q), rates};
}

TEST(EvidenceRoundTrip, Flops) {
  const FlopsEvidence e = flops_evidence();
  ASSERT_FALSE(e.report.rows.empty());
  const Json j = to_json(e.report, e.rates);
  const FlopsEvidence back = flops_report_from_json(j, "f.json results");
  EXPECT_EQ(to_json(back.report, back.rates), j);
  EXPECT_EQ(back.report.request.lengths, (std::vector<int64_t>{100, 64}));
  EXPECT_EQ(back.report.request.path, AttentionPath::kSdpaMasked);
  EXPECT_EQ(back.report.request.lora_targets, e.report.request.lora_targets);
  EXPECT_EQ(back.report.rows.size(), e.report.rows.size());
  EXPECT_EQ(back.report.rows[3].component, e.report.rows[3].component);
  EXPECT_EQ(back.report.rows[3].performed, e.report.rows[3].performed);
  EXPECT_EQ(back.report.lora.size(), 3u);
  EXPECT_EQ(back.report.performed_total, e.report.performed_total);
  EXPECT_DOUBLE_EQ(back.report.pairs_performed_sliding, e.report.pairs_performed_sliding);
  ASSERT_TRUE(back.rates.step_time_s.has_value());
  EXPECT_DOUBLE_EQ(*back.rates.step_time_s, 0.25);
  EXPECT_DOUBLE_EQ(back.rates.peak_tflops, 500);
  // No step time: MFU's nulls read back as no rate.
  const Json jn = to_json(e.report, FlopsRates{});
  const FlopsEvidence none = flops_report_from_json(jn, "f.json results");
  EXPECT_FALSE(none.rates.step_time_s.has_value());
  EXPECT_EQ(to_json(none.report, none.rates), jn);
}

TEST(EvidenceRoundTrip, FlopsBrokenInputNamesTheField) {
  const FlopsEvidence e = flops_evidence();
  const Json good = to_json(e.report, e.rates);
  auto err = [&](const std::function<void(Json&)>& damage) {
    Json j = good;
    damage(j);
    return error_of([&] { flops_report_from_json(j, "f.json results"); });
  };
  EXPECT_TRUE(names(err([](Json& j) { j.erase("totals"); }), "missing field 'totals'"));
  EXPECT_TRUE(names(err([](Json& j) { j["padded"] = "no"; }), "'padded'"));
  EXPECT_TRUE(names(err([](Json& j) { j["components"][2]["layers"] = -1; }),
                    "components[2]: field 'layers'"));
  EXPECT_TRUE(names(err([](Json& j) { j["lengths"][1] = "64"; }), "lengths[1]"));
  EXPECT_TRUE(names(err([](Json& j) { j["lengths"][0] = 129; }), "lengths[0]"));  // > width
  EXPECT_TRUE(names(err([](Json& j) { j["attention_path"] = "magic"; }), "'attention_path'"));
  EXPECT_TRUE(names(err([](Json& j) { j["lora"]["targets"][0] = 1; }), "targets[0]"));
  EXPECT_TRUE(names(err([](Json& j) { j["mfu"]["step_time_s"] = "fast"; }),
                    "mfu: field 'step_time_s'"));
  EXPECT_TRUE(names(err([](Json& j) { j["components"][0]["intended"].erase("backward_flop"); }),
                    "components[0] intended: missing field 'backward_flop'"));
}

// ---- lora-gate ----

LoraGateReport gate_report() {
  // Trained with only the attention modules in the optimizer: the MLP's lora_B stay zero.
  const LoraAdapter adapter =
      read_lora_adapter(std::string(TPROBE_FIXTURES_DIR) + "/adapters/attention-only-optimizer");
  return gate_lora_adapter(adapter, gate_base_from_model("gemma4-tiny"));
}

TEST(EvidenceRoundTrip, LoraGate) {
  const LoraGateReport r = gate_report();
  ASSERT_FALSE(r.modules.empty());
  ASSERT_TRUE(r.count.checked);
  const Json j = to_json(r);
  const LoraGateReport back = lora_gate_report_from_json(j, "g.json results");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.verdict, r.verdict);
  EXPECT_EQ(back.passed(), r.passed());
  EXPECT_EQ(back.outcome, r.outcome);
  EXPECT_EQ(back.config.target_modules, r.config.target_modules);
  EXPECT_EQ(back.count.expected, r.count.expected);
  EXPECT_EQ(back.count.base_source, r.count.base_source);
  ASSERT_EQ(back.modules.size(), r.modules.size());
  for (std::size_t i = 0; i < r.modules.size(); ++i) {
    EXPECT_EQ(back.modules[i].state, r.modules[i].state) << r.modules[i].module;
    EXPECT_EQ(back.modules[i].b_norm, r.modules[i].b_norm) << r.modules[i].module;
    EXPECT_EQ(back.modules[i].layer, r.modules[i].layer) << r.modules[i].module;
    EXPECT_EQ(back.modules[i].layer_type, r.modules[i].layer_type) << r.modules[i].module;
  }
  // gemma4-tiny's layers are sliding but for the last of each group: both kinds were read back.
  EXPECT_EQ(j["modules"][0]["layer_type"], "sliding_attention");
  EXPECT_TRUE(std::any_of(back.modules.begin(), back.modules.end(), [](const GateModule& m) {
    return m.layer_type == LayerType::kFull;
  }));
  EXPECT_EQ(back.per_target.size(), r.per_target.size());

  // No base: the count is unchecked (its nulls), the per-target expectations absent (-1), and a
  // regex target list and another tensor read back too.
  LoraGateReport nobase = gate_lora_adapter(
      read_lora_adapter(std::string(TPROBE_FIXTURES_DIR) + "/adapters/attention-only-optimizer"),
      std::nullopt);
  nobase.config.target_modules.clear();
  nobase.config.target_regex = ".*\\.(q_proj|v_proj)";
  nobase.other_tensors.push_back({"vision.proj", "x.safetensors", DType::kBF16, {4, 2}, 0.5, 8, 0});
  const Json jn = to_json(nobase);
  const LoraGateReport nb = lora_gate_report_from_json(jn, "g.json results");
  EXPECT_EQ(to_json(nb), jn);
  EXPECT_FALSE(nb.count.checked);
  EXPECT_EQ(nb.count.why_unchecked, nobase.count.why_unchecked);
  EXPECT_EQ(nb.config.target_regex, ".*\\.(q_proj|v_proj)");
  ASSERT_EQ(nb.other_tensors.size(), 1u);
  EXPECT_EQ(nb.other_tensors[0].dtype, DType::kBF16);
  ASSERT_FALSE(nb.per_target.empty());
  EXPECT_EQ(nb.per_target[0].expected, -1);
}

TEST(EvidenceRoundTrip, LoraGateBrokenInputNamesTheField) {
  const Json good = to_json(gate_report());
  auto err = [&](const std::function<void(Json&)>& damage) {
    Json j = good;
    damage(j);
    return error_of([&] { lora_gate_report_from_json(j, "g.json results"); });
  };
  EXPECT_TRUE(names(err([](Json& j) { j.erase("verdict"); }), "missing field 'verdict'"));
  EXPECT_TRUE(names(err([](Json& j) { j["verdict"] = "fine"; }), "'verdict'"));
  EXPECT_TRUE(names(err([](Json& j) { j["modules"][3]["rank"] = -2; }),
                    "modules[3]: field 'rank'"));
  EXPECT_TRUE(names(err([](Json& j) { j["modules"][0]["b_shape"][1] = "r"; }), "b_shape[1]"));
  EXPECT_TRUE(names(err([](Json& j) { j["count"]["missing"] = Json::array({1}); }),
                    "missing[0]"));
  EXPECT_TRUE(names(err([](Json& j) { j["count"].erase("expected_modules"); }),
                    "count: missing field 'expected_modules'"));
  EXPECT_TRUE(names(err([](Json& j) { j["per_target"][0]["found"] = 1.5; }),
                    "per_target[0]: field 'found'"));
  EXPECT_TRUE(names(err([](Json& j) { j["module_count"] = 1; }), "module_count"));
  // The layer type is one of HF's two names or null; the trace's word is not it.
  EXPECT_TRUE(names(err([](Json& j) { j["modules"][2]["layer_type"] = "sliding"; }),
                    "modules[2]: field 'layer_type'"));
  EXPECT_TRUE(names(err([](Json& j) { j["modules"][2]["layer_type"] = 3; }),
                    "modules[2]: field 'layer_type'"));
  Json null_type = good;
  null_type["modules"][2]["layer_type"] = nullptr;  // the control: null reads as unknown
  EXPECT_FALSE(lora_gate_report_from_json(null_type, "g.json results").modules[2].layer_type);
  EXPECT_TRUE(names(err([](Json& j) { j["adapter_config"]["target_modules"] = 7; }),
                    "'target_modules'"));
}

// ---- env ----

Environment environment() {
  Environment env = base_environment();  // the tool's own facts, as every run records them
  env.torch_loaded = true;
  env.torch_module = "/opt/tprobe/lib/libtprobe_torch.so";
  env.torch_version = "2.11.0";
  env.torch_cuda_build = true;
  env.cuda_usable = true;
  env.device_count = 2;
  env.device_name = "NVIDIA H200";
  env.compute_capability = "9.0";
  env.device_memory_bytes = 150'000'000'000;
  env.multiprocessors = 132;
  env.cuda_runtime_version = "13.0";
  env.cuda_driver_version = "13.0";
  env.cupti_built = true;
  env.cupti_version = "26";
  env.cupti_unavailable_reason = "profiling counters are admin-only";
  env.sdpa_backends = {{"flash", true, true, ""}, {"math", true, false, "disabled by --attn"}};
  env.attn_requested = "sdpa";
  env.attn_resolved = "flash";
  return env;
}

TEST(EvidenceRoundTrip, Environment) {
  const Environment env = environment();
  const Json j = to_json(env);
  const Environment back = environment_from_json(j, "e.json results");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.tool_version, env.tool_version);
  EXPECT_EQ(back.host, env.host);
  EXPECT_EQ(back.device_memory_bytes, 150'000'000'000);
  EXPECT_EQ(back.multiprocessors, 132);
  EXPECT_FALSE(back.cupti_usable);
  ASSERT_EQ(back.sdpa_backends.size(), 2u);
  EXPECT_FALSE(back.sdpa_backends[1].enabled);
  EXPECT_EQ(back.sdpa_backends[1].note, "disabled by --attn");
  // A probe that never loads libtorch: the base facts alone.
  const Json jb = to_json(base_environment());
  EXPECT_EQ(to_json(environment_from_json(jb, "e.json results")), jb);
}

TEST(EvidenceRoundTrip, EnvironmentBrokenInputNamesTheField) {
  const Json good = to_json(environment());
  auto err = [&](const std::function<void(Json&)>& damage) {
    Json j = good;
    damage(j);
    return error_of([&] { environment_from_json(j, "e.json results"); });
  };
  EXPECT_TRUE(names(err([](Json& j) { j.erase("git_sha"); }), "missing field 'git_sha'"));
  EXPECT_TRUE(names(err([](Json& j) { j["torch"]["loaded"] = "yes"; }), "torch: field 'loaded'"));
  EXPECT_TRUE(names(err([](Json& j) { j["cuda"]["device_count"] = -1; }),
                    "cuda: field 'device_count'"));
  EXPECT_TRUE(names(err([](Json& j) { j["device"]["multiprocessors"] = 1e12; }),
                    "device: field 'multiprocessors'"));
  EXPECT_TRUE(names(err([](Json& j) { j["sdpa_backends"] = Json::array({"flash"}); }),
                    "sdpa_backends[0]"));
  EXPECT_TRUE(names(err([](Json& j) { j["compute_capability"] = "8.0"; }), "compute_capability"));
}

// ---- the consumer: scaling-fit --widths-from ----

std::string write_evidence(const std::string& dir, const std::string& probe, const Json& results,
                           const Json& options = Json::object()) {
  Json doc;
  doc["schema"] = {{"name", "tprobe." + probe}, {"version", kEvidenceSchemaVersion}};
  doc["invocation"] = {{"probe", probe}, {"options", options}};
  doc["results"] = results;
  const std::string path = dir + "/" + probe + ".json";
  std::ofstream(path) << doc.dump();
  return path;
}

TEST(EvidenceRoundTrip, WidthDistributionReadsTheTypedReports) {
  const std::string dir = testing_support::temp_dir();
  const PaddingReport p = padding_report();
  // The rows per micro-batch come from the report, not the invocation (which says otherwise).
  WidthDistribution a =
      read_width_distribution(write_evidence(dir, "padding", to_json(p), {{"batch", 99}}));
  EXPECT_EQ(a.key, "results.micro_batch_widths");
  ASSERT_TRUE(a.micro_batch.has_value());
  EXPECT_EQ(*a.micro_batch, 3);
  EXPECT_EQ(a.micro_batches(), p.micro_batches);
  for (std::size_t i = 1; i < a.widths.size(); ++i) {
    EXPECT_LT(a.widths[i - 1].width, a.widths[i].width);
  }

  const BucketReport b = bucket_report();
  WidthDistribution c = read_width_distribution(write_evidence(dir, "bucket", to_json(b)));
  EXPECT_EQ(c.probe, "bucket");
  ASSERT_TRUE(c.micro_batch.has_value());
  EXPECT_EQ(*c.micro_batch, 2);
  EXPECT_EQ(c.micro_batches(), static_cast<int64_t>(b.chosen_widths.size()));

  // A damaged typed file is an error naming the file and the field.
  Json broken = to_json(p);
  broken["micro_batch_rows"][0] = "two";
  const std::string path = write_evidence(dir, "padding", broken);
  const std::string msg = error_of([&] { read_width_distribution(path); });
  EXPECT_TRUE(names(msg, path));
  EXPECT_TRUE(names(msg, "micro_batch_rows[0]"));
  // An interrupted bucket sweep chose nothing: no micro-batches to weigh.
  BucketReport cut = b;
  cut.sweep.clear();
  cut.interrupted = true;
  const std::string cut_path = write_evidence(dir, "bucket", to_json(cut));
  EXPECT_TRUE(names(error_of([&] { read_width_distribution(cut_path); }), "no micro-batches"));
}

}  // namespace
}  // namespace tprobe::core
