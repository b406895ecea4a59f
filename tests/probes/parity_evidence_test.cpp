// parity's evidence read back by its own code, without libtorch: hand-made forward and backward
// results (NaN and inf among them, as a blown-up model or a zero reference gives them) survive
// to_json -> parity_evidence_from_json -> to_json, and damaged results are one tprobe::Error naming
// the field. tests/model/parity_test.cpp round-trips real runs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support/error_of.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/runs/parity_analysis.hpp"
#include "tprobe/runs/parity_report.hpp"

namespace tprobe::runs {
namespace {

using namespace engine;  // the engine's request and result types

using core::Json;
using testing_support::error_of;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const std::string kWhere = "p.json results";

using testing_support::names;

// A bf16 forward on a right-padded batch, judged against HF's own bf16 run.
ParityReport forward_report() {
  ParityReport rep;
  ParityOptions& o = rep.options;
  o.checkpoint_dir = "ckpt";
  o.reference_path = "ref.safetensors";
  o.dtype = "bf16";
  o.adapter_dir = "adapter";
  ParityResult& r = rep.result;
  r.batch = 2;
  r.seq = 24;
  r.vocab = 512;
  r.text_prefix = "model.language_model.";
  r.tensors_loaded = 93;
  r.attn_sliding = "sdpa(bool_mask,repeat_kv)";
  r.attn_full = "eager";
  r.moe = "loop";
  r.row_lengths = {24, 18};
  r.positions_compared = 42;
  r.max_abs_error = r.error.max_abs_error = 0.03125;
  r.rel_l2_error = r.error.rel_l2_error = 0.0123;
  r.argmax_agreement_ratio = r.error.argmax_agreement_ratio = 41.0 / 42;
  r.error.position_rel_l2_median = 0.011;
  r.error.position_rel_l2_p99 = 0.05;
  r.baseline = LogitsError{0.04, 0.0127, 0.012, 0.06, 40.0 / 42};
  r.baseline_key = "logits_hf_bf16_eager";
  r.loss = 6.2383;
  r.reference_loss = 6.2371;
  r.loss_abs_diff = 0.0012;
  r.verdict_rule = "relative_to_hf_bf16";
  r.tolerance_rel_l2 = 0.0254;
  r.within_tolerance = true;
  r.forward_s = 0.0125;
  r.loss_forward_s = 0.011;
  return rep;
}

GradTensorError grad(const std::string& name, double ref, double got, double rel,
                     std::optional<double> base) {
  GradTensorError t;
  t.name = name;
  t.reference_norm = ref;
  t.tprobe_norm = got;
  t.rel_l2_error = rel;
  t.baseline_rel_l2 = base;
  t.zero_reference = ref == 0;
  t.zero_tprobe = got == 0;
  return t;
}

// A bf16 backward that went wrong every way the engine reports: a gradient zero in the reference
// only (relative error inf), a NaN gradient, a reference tensor tprobe has none for.
ParityReport backward_report() {
  ParityReport rep;
  ParityOptions& o = rep.options;
  o.dtype = "bf16";
  o.adapter_dir = "adapters/peft-tiny-step1";
  o.backward = true;
  o.gradient_checkpointing = true;
  o.input_grads = false;
  BackwardParity b;
  b.gradient_checkpointing = true;
  b.input_grads = false;
  b.reference_prefix = "base_model.model.model.";
  b.loss = 3.5;
  b.reference_loss = 3.4999;
  b.loss_abs_diff = 1e-4;
  b.baseline_loss_abs_diff = 2e-3;
  b.loss_requires_grad = true;
  const std::string q = "layers.0.self_attn.q_proj", d = "layers.1.mlp.down_proj";
  b.tensors = {grad(q + ".lora_A.weight", 1.5, 1.5, 1e-3, 2e-3),
               grad(q + ".lora_B.weight", 0, 0.25, kInf, kInf),
               grad(d + ".lora_A.weight", 0.75, kNaN, kNaN, 3e-3),
               grad(d + ".lora_B.weight", 0.5, 0, 1, std::nullopt)};
  b.tensors[3].in_tprobe = false;
  b.modules = {{q, 1e-3, kInf, 2e-3, kInf}, {d, kNaN, 1, 3e-3, std::nullopt}};
  b.worst_module = d;
  b.worst_module_rel_l2 = kNaN;
  b.worst_tensor = d + ".lora_A.weight";
  b.worst_tensor_rel_l2 = kNaN;
  b.global_rel_l2 = kInf;
  b.baseline_suffix = "_hf_bf16_sdpa";
  b.baseline_global_rel_l2 = 2e-3;
  b.baseline_worst_module_rel_l2 = kInf;
  b.verdict = {"relative_to_hf_bf16", 4e-3};
  b.worst_module_tolerance = kInf;
  b.zero_one_side = {q + ".lora_B.weight", d + ".lora_B.weight (no such tensor in tprobe)"};
  b.within_tolerance = false;
  b.forward_backward_s = 0.5;
  ParityResult& r = rep.result;
  r.batch = 1;
  r.seq = 8;
  r.vocab = 512;
  r.text_prefix = "model.";
  r.tensors_loaded = 101;
  r.attn_sliding = r.attn_full = "eager";
  r.moe = "loop";
  r.logits_compared = false;
  r.loss = b.loss;
  r.reference_loss = b.reference_loss;
  r.loss_abs_diff = b.loss_abs_diff;
  r.verdict_rule = b.verdict.rule;
  r.tolerance_rel_l2 = b.verdict.tolerance;
  r.within_tolerance = b.within_tolerance;
  r.backward = b;
  return rep;
}

// JSON compares NaN unequal to itself: the dumps (null for NaN and inf, as the file has them).
std::string round_trip(const Json& j) {
  const ParityEvidence e = parity_evidence_from_json(j, kWhere);
  return to_json(e.result, e.options).dump();
}

TEST(ParityEvidenceRoundTrip, Forward) {
  const ParityReport rep = forward_report();
  const Json j = to_json(rep);
  EXPECT_EQ(round_trip(j), j.dump());
  EXPECT_EQ(round_trip(Json::parse(j.dump())), j.dump());
  const ParityEvidence back = parity_evidence_from_json(j, kWhere);
  const ParityResult& r = back.result;
  EXPECT_FALSE(back.options.backward);
  EXPECT_EQ(back.options.dtype, "bf16");
  EXPECT_EQ(back.options.adapter_dir, "adapter");
  EXPECT_TRUE(r.logits_compared);
  EXPECT_EQ(r.row_lengths, (std::vector<int64_t>{24, 18}));
  EXPECT_EQ(r.error.rel_l2_error, 0.0123);  // the error block's copy of the top-level one
  EXPECT_EQ(r.error.argmax_agreement_ratio, 41.0 / 42);
  ASSERT_TRUE(r.baseline.has_value());
  EXPECT_EQ(r.baseline_key, "logits_hf_bf16_eager");
  EXPECT_EQ(r.baseline->position_rel_l2_p99, 0.06);
  // The options the evidence does not hold (the paths in the title) from the run's.
  EXPECT_EQ(parity_table(r, rep.options).render(), parity_table(rep.result, rep.options).render());

  // Unpadded, fp32, no baseline, no reference loss, no adapter: the nulls read back as such.
  ParityReport plain = forward_report();
  plain.options.dtype = "fp32";
  plain.options.adapter_dir.clear();
  plain.result.row_lengths.clear();
  plain.result.baseline.reset();
  plain.result.baseline_key.clear();
  plain.result.reference_loss.reset();
  plain.result.loss_abs_diff.reset();
  plain.result.verdict_rule = "fixed_fp32";
  const Json p = to_json(plain);
  EXPECT_TRUE(p["baseline"].is_null());
  EXPECT_EQ(round_trip(p), p.dump());
  const ParityEvidence pb = parity_evidence_from_json(p, kWhere);
  EXPECT_TRUE(pb.result.row_lengths.empty());
  EXPECT_FALSE(pb.result.baseline.has_value());
  EXPECT_TRUE(pb.result.baseline_key.empty());
  EXPECT_FALSE(pb.result.reference_loss.has_value());
  EXPECT_TRUE(pb.options.adapter_dir.empty());

  // A blown-up model: NaN logits errors and loss. The file holds null, read back as NaN; with a
  // reference loss the difference stays present (the table prints it).
  ParityReport nan = forward_report();
  nan.result.max_abs_error = nan.result.rel_l2_error = nan.result.loss = kNaN;
  nan.result.error.position_rel_l2_median = nan.result.error.position_rel_l2_p99 = kNaN;
  nan.result.loss_abs_diff = kNaN;
  nan.result.within_tolerance = false;
  const Json n = to_json(nan);
  EXPECT_EQ(round_trip(n), n.dump());
  const std::string text = n.dump();
  EXPECT_EQ(round_trip(Json::parse(text)), text);
  const ParityEvidence nb = parity_evidence_from_json(Json::parse(text), kWhere);
  EXPECT_TRUE(std::isnan(nb.result.rel_l2_error));
  EXPECT_TRUE(std::isnan(nb.result.loss));
  ASSERT_TRUE(nb.result.loss_abs_diff.has_value());
  EXPECT_TRUE(std::isnan(*nb.result.loss_abs_diff));
  EXPECT_NE(parity_table(nb.result, nb.options).render().find("OUTSIDE tolerance"),
            std::string::npos);
}

TEST(ParityEvidenceRoundTrip, Backward) {
  const ParityReport rep = backward_report();
  const Json j = to_json(rep);
  EXPECT_TRUE(j["rel_l2_error"].is_null());
  EXPECT_EQ(round_trip(j), j.dump());
  const std::string text = j.dump();
  EXPECT_EQ(round_trip(Json::parse(text)), text);

  // In memory the non-finite values are the doubles themselves.
  const ParityEvidence mem = parity_evidence_from_json(j, kWhere);
  EXPECT_TRUE(mem.options.backward);
  EXPECT_TRUE(mem.options.gradient_checkpointing);
  EXPECT_FALSE(mem.options.input_grads);
  EXPECT_EQ(mem.options.adapter_dir, "adapters/peft-tiny-step1");
  EXPECT_FALSE(mem.result.logits_compared);
  ASSERT_TRUE(mem.result.backward.has_value());
  const BackwardParity& b = *mem.result.backward;
  EXPECT_EQ(b.global_rel_l2, kInf);
  ASSERT_EQ(b.tensors.size(), 4u);
  EXPECT_EQ(b.tensors[1].rel_l2_error, kInf);
  EXPECT_TRUE(std::isnan(b.tensors[2].tprobe_norm));
  EXPECT_FALSE(b.tensors[3].in_tprobe);
  EXPECT_FALSE(b.tensors[3].baseline_rel_l2.has_value());
  ASSERT_EQ(b.modules.size(), 2u);
  EXPECT_EQ(b.modules[0].b_baseline, kInf);
  EXPECT_EQ(b.baseline_suffix, "_hf_bf16_sdpa");
  EXPECT_EQ(b.worst_module_tolerance, kInf);
  EXPECT_FALSE(b.worst_tensor_tolerance.has_value());
  EXPECT_EQ(b.zero_one_side, rep.result.backward->zero_one_side);

  // From the file: inf and NaN are both null, read as NaN (or none where null means none).
  const ParityEvidence file = parity_evidence_from_json(Json::parse(text), kWhere);
  const BackwardParity& f = *file.result.backward;
  EXPECT_TRUE(std::isnan(f.global_rel_l2));
  EXPECT_TRUE(std::isnan(f.tensors[1].rel_l2_error));
  EXPECT_FALSE(f.tensors[1].baseline_rel_l2.has_value());
  EXPECT_FALSE(f.baseline_worst_module_rel_l2.has_value());
  EXPECT_EQ(f.baseline_global_rel_l2, 2e-3);
  // The tables render from either (the file's NaN where memory has inf).
  EXPECT_EQ(parity_table(mem.result, rep.options).render(),
            parity_table(rep.result, rep.options).render());
  EXPECT_EQ(parity_module_table(b).render(), parity_module_table(*rep.result.backward).render());
  EXPECT_NE(parity_module_table(f).render().find("layers.1.mlp.down_proj"), std::string::npos);
}

TEST(ParityEvidenceRoundTrip, ReportJudgedAgain) {
  // parity_report_from_json recomputes the diagnostics and the outcome from the result.
  const ParityReport back = parity_report_from_json(to_json(backward_report()), kWhere);
  EXPECT_EQ(back.outcome, core::Outcome::kNo);
  std::vector<std::string> codes;
  for (const core::Diagnostic& d : back.diagnostics) codes.push_back(d.code);
  EXPECT_EQ(codes, (std::vector<std::string>{"lora_gradient_zero_on_one_side",
                                             "parity_outside_tolerance"}));
  EXPECT_EQ(to_json(back).dump(), to_json(backward_report()).dump());
  const ParityReport ok = parity_report_from_json(to_json(forward_report()), kWhere);
  EXPECT_EQ(ok.outcome, core::Outcome::kOk);
  EXPECT_TRUE(ok.diagnostics.empty());
}

TEST(ParityEvidenceRoundTrip, BrokenInputNamesTheField) {
  auto err = [](const ParityReport& rep, const std::function<void(Json&)>& damage) {
    Json j = to_json(rep);
    damage(j);
    return error_of([&] { parity_evidence_from_json(j, kWhere); });
  };
  const ParityReport fwd = forward_report(), bwd = backward_report();
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j.erase("rel_l2_error"); }),
                    "p.json results: missing field 'rel_l2_error'"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["batch"] = "2"; }), "field 'batch' must be"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["batch"] = 0; }), "field 'batch' must be"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["tolerance_rel_l2"] = kNaN; }),
                    "field 'tolerance_rel_l2' must be a finite number"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["rel_l2_error"] = "small"; }),
                    "field 'rel_l2_error' must be a finite number"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["argmax_agreement_ratio"] = 1.5; }),
                    "field 'argmax_agreement_ratio' must be a ratio in 0..1"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["forward_s"] = -1.0; }), "field 'forward_s'"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["row_lengths"][1] = 25; }), "row_lengths[1]"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["positions_compared"] = -3; }),
                    "field 'positions_compared'"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["mode"] = "sideways"; }), "field 'mode'"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["dtype"] = "fp16"; }), "field 'dtype'"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["verdict_rule"] = "loose"; }),
                    "field 'verdict_rule' must be one of"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["baseline"]["key"] = 3; }),
                    "p.json results baseline: field 'key'"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["reference_loss"] = kInf; }),
                    "field 'reference_loss'"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j["within_tolerance"] = 1; }),
                    "field 'within_tolerance'"));
  EXPECT_TRUE(names(err(fwd, [](Json& j) { j = Json::array(); }), "p.json results"));

  EXPECT_TRUE(names(err(bwd, [](Json& j) { j["rel_l2_error"] = 0.1; }),
                    "field 'rel_l2_error' must be null"));
  EXPECT_TRUE(names(err(bwd, [](Json& j) { j["backward"] = Json::array(); }),
                    "field 'backward' must be an object"));
  EXPECT_TRUE(names(err(bwd, [](Json& j) { j["backward"].erase("modules"); }),
                    "p.json results backward: missing field 'modules'"));
  EXPECT_TRUE(names(err(bwd, [](Json& j) { j["backward"]["tensors"][2]["rel_l2_error"] = "x"; }),
                    "p.json results backward tensors[2]: field 'rel_l2_error'"));
  EXPECT_TRUE(names(err(bwd, [](Json& j) { j["backward"]["modules"][1].erase("lora_b_rel_l2"); }),
                    "backward modules[1]: missing field 'lora_b_rel_l2'"));
  EXPECT_TRUE(names(err(bwd, [](Json& j) { j["backward"]["lora_tensors"] = 5; }),
                    "field 'lora_tensors' is 5, but 'tensors' holds 4"));
  EXPECT_TRUE(names(err(bwd, [](Json& j) { j["backward"]["tolerance_global_rel_l2"] = kNaN; }),
                    "backward: field 'tolerance_global_rel_l2' must be a finite number"));
  EXPECT_TRUE(names(err(bwd, [](Json& j) { j["backward"]["zero_one_side"][0] = 7; }),
                    "zero_one_side[0]"));
}

}  // namespace
}  // namespace tprobe::runs
