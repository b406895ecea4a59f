// Backward parity's verdict rules on hand-made errors, run_parity's handling of broken backward
// references (missing gradients, no gradients at all, broken attention masks and labels), and
// right-padded batches against Hugging Face + PEFT (tests/fixtures/gemma4-tiny-hf).
#include "tprobe/core/step/knobs.hpp"
#include "tprobe/engine/parity_request.hpp"

#include <fmt/format.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/io/safetensors.hpp"
#include "tprobe/model/loader.hpp"
#include "tprobe/runs/parity_analysis.hpp"
#include "tprobe/runs/parity_report.hpp"
#include "tprobe/model/engine.hpp"
#include "temp_dir.hpp"

namespace tprobe::model {

// The engine works in engine's request and result types.
using namespace engine;
using namespace runs;
namespace {

using testing::TempDir;

using torch::Tensor;

const std::string kFixture = std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf";
const std::string kAdapter = std::string(TPROBE_FIXTURES_DIR) + "/adapters/peft-tiny-step1";
const std::string kPadded = kFixture + "/backward_padded.safetensors";
const std::string kForwardRef = kFixture + "/reference.safetensors";

// The evidence of a real run read back by its own code: to_json -> parity_evidence_from_json ->
// to_json gives the same JSON, from the document in memory and from its text as the file holds
// it (dumps compared: a NaN is unequal to itself).
void expect_evidence_round_trip(const ParityResult& r, const ParityOptions& o) {
  const core::Json j = to_json(r, o);
  const ParityEvidence back = parity_evidence_from_json(j, "p.json results");
  EXPECT_EQ(to_json(back.result, back.options).dump(), j.dump());
  const ParityEvidence file =
      parity_evidence_from_json(core::Json::parse(j.dump()), "p.json results");
  EXPECT_EQ(to_json(file.result, file.options).dump(), j.dump());
}

// A tensor error with reference norm 1 and the given difference norms.
GradTensorError tensor(const std::string& name, double diff, std::optional<double> base = {}) {
  GradTensorError t;
  t.name = name;
  t.reference_norm = 1;
  t.tprobe_norm = 1;
  t.diff_norm = diff;
  t.rel_l2_error = diff;
  t.baseline_diff_norm = base;
  t.baseline_rel_l2 = base;
  return t;
}

BackwardParity two_modules(double a0, double b0, double a1, double b1) {
  BackwardParity b;
  b.tensors = {tensor("layers.0.self_attn.q_proj.lora_A.weight", a0),
               tensor("layers.0.self_attn.q_proj.lora_B.weight", b0),
               tensor("layers.1.mlp.down_proj.lora_A.weight", a1),
               tensor("layers.1.mlp.down_proj.lora_B.weight", b1)};
  b.loss = b.reference_loss = 3.0;
  return b;
}

TEST(ParityVerdict, Fp32BoundsEveryTensorNotOnlyTheGlobalError) {
  BackwardParity b = two_modules(1e-6, 2e-6, 3e-6, 4e-6);
  judge_backward(b, "fp32");
  EXPECT_TRUE(b.within_tolerance);
  EXPECT_EQ(b.verdict.rule, "fixed_fp32");
  EXPECT_EQ(b.worst_module, "layers.1.mlp.down_proj");
  EXPECT_DOUBLE_EQ(b.worst_module_rel_l2, 4e-6);
  EXPECT_NEAR(b.global_rel_l2, std::sqrt((1 + 4 + 9 + 16) / 4.0) * 1e-6, 1e-15);
  ASSERT_EQ(b.modules.size(), 2u);
  EXPECT_DOUBLE_EQ(b.modules[0].a_rel_l2, 1e-6);
  EXPECT_DOUBLE_EQ(b.modules[0].b_rel_l2, 2e-6);

  // One tensor at 1.5e-4: global error sqrt((1.5e-4)^2 / 4) = 7.5e-5 would pass on its own.
  BackwardParity one = two_modules(0, 0, 1.5e-4, 0);
  judge_backward(one, "fp32");
  EXPECT_LT(one.global_rel_l2, kFp32Tolerance);
  EXPECT_FALSE(one.within_tolerance);
  EXPECT_EQ(one.worst_tensor, "layers.1.mlp.down_proj.lora_A.weight");

  BackwardParity loss = two_modules(0, 0, 0, 0);
  loss.loss_abs_diff = 1e-3;  // relative 3.3e-4
  judge_backward(loss, "fp32");
  EXPECT_FALSE(loss.within_tolerance);
}

TEST(ParityVerdict, ZeroOnOneSideIsTheInertSignatureAndFails) {
  BackwardParity b = two_modules(0, 0, 0, 0);
  b.tensors[0].zero_tprobe = true;  // tprobe's lora_A got nothing, HF's did
  b.tensors[0].tprobe_norm = 0;
  b.tensors[0].diff_norm = b.tensors[0].rel_l2_error = 1;
  judge_backward(b, "bf16");
  EXPECT_FALSE(b.within_tolerance);
  ASSERT_EQ(b.zero_one_side.size(), 1u);
  EXPECT_EQ(b.zero_one_side[0], "layers.0.self_attn.q_proj.lora_A.weight");

  // Equal zeros on both sides (the trap reproduced on both): the gradients agree, listed.
  BackwardParity both = two_modules(0, 0, 0, 0);
  for (auto& t : both.tensors) {
    t.zero_tprobe = t.zero_reference = true;
    t.reference_norm = t.tprobe_norm = 0;
  }
  judge_backward(both, "fp32");
  EXPECT_TRUE(both.within_tolerance);
  EXPECT_EQ(both.zero_both.size(), 4u);
  EXPECT_EQ(both.global_rel_l2, 0.0);

  // A non-zero reference gradient for a LoRA tensor tprobe's model does not have.
  BackwardParity extra = two_modules(0, 0, 0, 0);
  GradTensorError t = tensor("layers.2.self_attn.v_proj.lora_A.weight", 1);
  t.in_tprobe = false;
  t.zero_tprobe = true;
  extra.tensors.push_back(t);
  judge_backward(extra, "fp32");
  EXPECT_FALSE(extra.within_tolerance);
  ASSERT_EQ(extra.zero_one_side.size(), 1u);
  EXPECT_NE(extra.zero_one_side[0].find("no such tensor in tprobe"), std::string::npos);
  // ... but a zero one is PEFT's adapter on an unused module: nothing to compare.
  extra.tensors.back().reference_norm = 0;
  extra.tensors.back().zero_reference = true;
  judge_backward(extra, "fp32");
  EXPECT_TRUE(extra.within_tolerance);
}

TEST(ParityVerdict, Bf16IsJudgedAgainstHfsOwnBf16Error) {
  // HF's bf16 gradients are 10 % off the fp32 reference: tprobe's 15 % is within 2x.
  BackwardParity b = two_modules(0.15, 0.15, 0.15, 0.15);
  for (auto& t : b.tensors) t.baseline_diff_norm = t.baseline_rel_l2 = 0.10;
  judge_backward(b, "bf16");
  EXPECT_EQ(b.verdict.rule, "relative_to_hf_bf16");
  EXPECT_NEAR(b.verdict.tolerance, 0.20, 1e-12);
  ASSERT_TRUE(b.baseline_global_rel_l2.has_value());
  EXPECT_NEAR(*b.baseline_global_rel_l2, 0.10, 1e-12);
  EXPECT_TRUE(b.within_tolerance);

  // The fixed fallback (5e-2) would have failed the same engine.
  BackwardParity fixed = two_modules(0.15, 0.15, 0.15, 0.15);
  judge_backward(fixed, "bf16");
  EXPECT_EQ(fixed.verdict.rule, "fixed_bf16_fallback");
  EXPECT_FALSE(fixed.within_tolerance);

  // The worst module is bounded by HF's worst module, not hidden in the global error.
  BackwardParity worst = two_modules(0.05, 0.05, 0.05, 0.35);
  for (auto& t : worst.tensors) t.baseline_diff_norm = t.baseline_rel_l2 = 0.10;
  judge_backward(worst, "bf16");
  EXPECT_LT(worst.global_rel_l2, worst.verdict.tolerance);
  ASSERT_TRUE(worst.worst_module_tolerance.has_value());
  EXPECT_NEAR(*worst.worst_module_tolerance, 0.20, 1e-12);
  EXPECT_FALSE(worst.within_tolerance);
  EXPECT_EQ(worst.worst_module, "layers.1.mlp.down_proj");
}

TEST(ParityVerdict, LogitsRuleAndBaselineOrder) {
  EXPECT_EQ(verdict_rule("fp32", 0.3).rule, "fixed_fp32");
  EXPECT_EQ(verdict_rule("fp32", 0.3).tolerance, kFp32Tolerance);
  EXPECT_EQ(verdict_rule("bf16", std::nullopt).rule, "fixed_bf16_fallback");
  EXPECT_EQ(verdict_rule("bf16", std::nullopt).tolerance, kBf16FallbackTolerance);
  // The measured case of the issue: HF's bf16 0.255 from its fp32, tprobe's 0.23 -> passes.
  VerdictRule r = verdict_rule("bf16", 0.255);
  EXPECT_EQ(r.rule, "relative_to_hf_bf16");
  EXPECT_NEAR(r.tolerance, 0.51, 1e-12);
  EXPECT_EQ(verdict_rule("bf16", 0.0).tolerance, kFp32Tolerance);  // never below fp32's
  EXPECT_EQ(verdict_rule("bf16", std::numeric_limits<double>::infinity()).rule,
            "fixed_bf16_fallback");
  EXPECT_EQ(baseline_candidates(core::AttentionPath::kEager), (std::vector<std::string>{"eager", "sdpa"}));
  EXPECT_EQ(baseline_candidates(core::AttentionPath::kSdpa), (std::vector<std::string>{"sdpa", "eager"}));
  EXPECT_EQ(baseline_candidates(core::AttentionPath::kFlashWindow),
            (std::vector<std::string>{"sdpa", "eager"}));
}

// An adapter for the HF tiny checkpoint and a backward reference holding `grads` (all zero).
struct BrokenReference {
  TempDir dir;
  std::string adapter, ref;
  BrokenReference(const std::vector<std::string>& grad_names, bool padded) {
    ModelOptions mo;
    Gemma4Model m = load_model(core::Checkpoint::open(kFixture), mo);
    LoraConfig lora;
    lora.targets = {"q_proj"};
    lora.rank = 2;
    lora.alpha = 4;
    m.add_lora(lora, 1);
    adapter = dir.path;
    save_adapter(m, adapter, "model.");
    std::vector<Tensor> keep;
    std::vector<core::TensorToWrite> out;
    keep.push_back(torch::randint(3, 512, {1, 8}, torch::kLong));
    out.push_back({{"input_ids", core::DType::kI64, {1, 8}}, keep.back().data_ptr()});
    keep.push_back(torch::full({1}, 6.0f));
    out.push_back({{"loss", core::DType::kF32, {1}}, keep.back().data_ptr()});
    if (padded) {  // left padding: refused
      keep.push_back(torch::ones({1, 8}, torch::kLong));
      keep.back()[0][0] = 0;
      out.push_back({{"attention_mask", core::DType::kI64, {1, 8}}, keep.back().data_ptr()});
    }
    for (auto& [name, t] : m.lora_parameters()) {
      const std::string key = "base_model.model.model." + name + ".grad";
      bool wanted = false;
      for (const auto& g : grad_names) wanted |= g == name;
      if (!wanted) continue;
      keep.push_back(torch::zeros(t->sizes(), torch::kFloat));
      out.push_back({{key, core::DType::kF32, t->sizes().vec()}, keep.back().data_ptr()});
    }
    ref = dir.path + "/ref.safetensors";
    core::write_safetensors(ref, out);
  }
  ParityOptions options() const {
    ParityOptions o;
    o.checkpoint_dir = kFixture;
    o.reference_path = ref;
    o.adapter_dir = adapter;
    o.backward = true;
    return o;
  }
};

std::string error_of(const ParityOptions& o) {
  try {
    run_parity(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(BackwardParity, BrokenReferencesAreErrorsNamingWhatIsMissing) {
  {
    BrokenReference none({}, false);
    EXPECT_NE(error_of(none.options()).find("no LoRA gradients"), std::string::npos);
  }
  {
    // Every q_proj gradient but layer 3's lora_B.
    std::vector<std::string> names;
    for (int l = 0; l < 6; ++l) {
      names.push_back(fmt::format("layers.{}.self_attn.q_proj.lora_A.weight", l));
      if (l != 3) names.push_back(fmt::format("layers.{}.self_attn.q_proj.lora_B.weight", l));
    }
    BrokenReference partial(names, false);
    const std::string e = error_of(partial.options());
    EXPECT_NE(e.find("base_model.model.model.layers.3.self_attn.q_proj.lora_B.weight.grad"),
              std::string::npos)
        << e;
    BrokenReference padded(names, true);
    const std::string left = error_of(padded.options());
    EXPECT_NE(left.find("attention_mask"), std::string::npos) << left;
    EXPECT_NE(left.find("not right padding"), std::string::npos) << left;
    ParityOptions no_adapter = partial.options();
    no_adapter.adapter_dir.clear();
    EXPECT_THROW(run_parity(no_adapter), UsageError);
  }
}

TEST(ParityPadding, RightPaddedMaskGivesRowLengths) {
  const std::string w = "ref: attention_mask";
  EXPECT_EQ(lengths_from_attention_mask({1, 1, 1, 1, 1, 1, 0, 0}, 2, 4, w),
            (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(lengths_from_attention_mask({1, 0, 0, 1, 1, 1}, 2, 3, w), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(lengths_from_attention_mask({1, 1, 1, 1}, 2, 2, w).empty());  // nothing masked
  auto refused = [&](const std::vector<double>& m, int64_t b, int64_t s) {
    try {
      lengths_from_attention_mask(m, b, s, w);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string e = refused({0, 1, 1, 1}, 1, 4);  // left padding
  EXPECT_NE(e.find("row 0 has a 1 at position 1 after a 0 at position 0"), std::string::npos) << e;
  EXPECT_NE(e.find("not right padding"), std::string::npos) << e;
  EXPECT_NE(e.find("ref: attention_mask"), std::string::npos) << e;
  e = refused({1, 1, 1, 1, 1, 0, 1, 0}, 2, 4);  // a hole
  EXPECT_NE(e.find("row 1 has a 1 at position 2 after a 0 at position 1"), std::string::npos) << e;
  e = refused({1, 2, 0, 0}, 1, 4);
  EXPECT_NE(e.find("[0][1] is 2"), std::string::npos) << e;
  e = refused({1, 0.5, 0, 0}, 1, 4);
  EXPECT_NE(e.find("[0][1] is 0.5"), std::string::npos) << e;
  e = refused({1, 1, 0, 0}, 2, 4);  // too few values
  EXPECT_NE(e.find("4 values for a [2, 4] batch"), std::string::npos) << e;
  e = refused({1, 1, 0, 0, 0, 0}, 2, 3);
  EXPECT_NE(e.find("row 1 has no real token"), std::string::npos) << e;
}

TEST(ParityPadding, LabelsMustBeTheShiftedInputIdsWithPaddingIgnored) {
  const std::vector<int64_t> ids{2, 7, 9, 4, 2, 5, 0, 0};
  const std::vector<int64_t> lengths{4, 2};
  EXPECT_NO_THROW(check_labels({2, 7, 9, 4, 2, 5, -100, -100}, ids, lengths, 2, 4, "l"));
  // labels[:, 0] is never a target (HF shifts): anything there is accepted.
  EXPECT_NO_THROW(check_labels({-100, 7, 9, 4, 11, 5, -100, -100}, ids, lengths, 2, 4, "l"));
  EXPECT_NO_THROW(check_labels({2, 7, 9, 4, 2, 5, 0, 0}, ids, {}, 2, 4, "l"));  // unpadded
  auto refused = [&](const std::vector<double>& labels, const std::vector<int64_t>& len) {
    try {
      check_labels(labels, ids, len, 2, 4, "ref: labels");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // The pad id counted as a target (labels = input_ids without -100): HF's loss would differ.
  std::string e = refused({2, 7, 9, 4, 2, 5, 0, 0}, lengths);
  EXPECT_NE(e.find("ref: labels: [1][2] is 0, expected -100 (a padded position)"),
            std::string::npos)
      << e;
  // A prompt masked with -100 is another loss than tprobe's.
  e = refused({2, -100, 9, 4, 2, 5, -100, -100}, lengths);
  EXPECT_NE(e.find("[0][1] is -100, expected 7"), std::string::npos) << e;
  e = refused({2, 7, 9}, lengths);
  EXPECT_NE(e.find("3 labels and 8 input_ids"), std::string::npos) << e;
}

// A copy of `from` with tensors replaced (defined) or dropped (undefined); fp32, fp64 or int64.
std::string rewrite_reference(const TempDir& dir, const std::string& from,
                              const std::map<std::string, Tensor>& replace,
                              const std::string& name = "ref.safetensors") {
  core::SafetensorsFile file = core::SafetensorsFile::open(from);
  std::vector<Tensor> keep;
  std::vector<core::TensorToWrite> out;
  for (const auto& t : file.tensors()) {
    if (replace.count(t.name)) continue;
    keep.push_back(read_tensor(file, t.name, c10::nullopt, torch::kCPU).contiguous());
  }
  for (const auto& [key, t] : replace) {
    if (t.defined()) keep.push_back(t.contiguous());
  }
  size_t i = 0;
  for (const auto& t : file.tensors()) {
    if (replace.count(t.name)) continue;
    out.push_back({{t.name, t.dtype, t.shape}, keep[i++].data_ptr()});
  }
  for (const auto& [key, t] : replace) {
    if (!t.defined()) continue;
    const Tensor& k = keep[i++];
    const core::DType d = k.scalar_type() == torch::kLong     ? core::DType::kI64
                          : k.scalar_type() == torch::kDouble ? core::DType::kF64
                                                              : core::DType::kF32;
    out.push_back({{key, d, k.sizes().vec()}, k.data_ptr()});
  }
  const std::string path = dir.path + "/" + name;
  core::write_safetensors(path, out);
  return path;
}

ParityOptions padded_backward(const std::string& ref, core::AttentionPath attn) {
  ParityOptions o;
  o.checkpoint_dir = kFixture;
  o.reference_path = ref;
  o.adapter_dir = kAdapter;
  o.backward = true;
  o.attn = attn;
  o.ce_chunk = 7;  // several CE chunks, some straddling the padded positions
  return o;
}

class ParityPaddedBackward : public ::testing::TestWithParam<core::AttentionPath> {};

// HF + PEFT's step on a right-padded batch (row 1's last 6 of 24 positions are padding,
// labels -100 there): tprobe's loss and all 80 LoRA gradients within the fp32 rule.
TEST_P(ParityPaddedBackward, Fp32LossAndEveryLoraGradientMatchHfPeft) {
  if (auto why = core::unavailable(core::Knob::kAttn, core::to_string(GetParam()),
                                    engine_facts("cpu", "fp32")))
    GTEST_SKIP() << *why;
  for (bool ckpt : {false, true}) {
    ParityOptions o = padded_backward(kPadded, GetParam());
    o.gradient_checkpointing = ckpt;
    ParityResult r = run_parity(o);
    ASSERT_TRUE(r.backward.has_value());
    const BackwardParity& b = *r.backward;
    std::cout << "padded backward fp32 " << core::to_string(GetParam())
              << (ckpt ? " (checkpointing)" : "") << ": |dloss| " << b.loss_abs_diff << " (loss "
              << b.reference_loss << "), global rel L2 " << b.global_rel_l2 << ", worst tensor "
              << b.worst_tensor << " " << b.worst_tensor_rel_l2 << ", " << r.attn_sliding << " / "
              << r.attn_full << "\n";
    EXPECT_EQ(r.row_lengths, (std::vector<int64_t>{24, 18}));
    EXPECT_TRUE(b.within_tolerance);
    EXPECT_EQ(b.verdict.rule, "fixed_fp32");
    EXPECT_EQ(b.tensors.size(), 80u);
    EXPECT_LE(b.worst_tensor_rel_l2, kFp32Tolerance) << b.worst_tensor;
    EXPECT_LE(b.global_rel_l2, kFp32Tolerance);
    EXPECT_LE(b.loss_abs_diff, kFp32Tolerance * std::abs(b.reference_loss));
    EXPECT_TRUE(b.zero_one_side.empty());
    EXPECT_TRUE(b.zero_both.empty());
    expect_evidence_round_trip(r, o);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, ParityPaddedBackward,
                         ::testing::Values(core::AttentionPath::kEager, core::AttentionPath::kSdpa,
                                           core::AttentionPath::kBlockwise),
                         [](const ::testing::TestParamInfo<core::AttentionPath>& path) {
                           std::string n = core::to_string(path.param);
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

// The negative control: the same reference run as if it were unpadded (mask and labels gone)
// must fail the verdict, or the padded test above would prove nothing about padding.
TEST(ParityPaddedBackwardControl, ThePaddedReferenceRunUnpaddedFails) {
  TempDir dir;
  const std::string unpadded =
      rewrite_reference(dir, kPadded, {{"attention_mask", Tensor()}, {"labels", Tensor()}});
  ParityResult r = run_parity(padded_backward(unpadded, core::AttentionPath::kEager));
  ASSERT_TRUE(r.backward.has_value());
  const BackwardParity& b = *r.backward;
  std::cout << "padded reference run unpadded: |dloss| " << b.loss_abs_diff << ", global rel L2 "
            << b.global_rel_l2 << ", worst tensor " << b.worst_tensor_rel_l2 << "\n";
  EXPECT_TRUE(r.row_lengths.empty());
  EXPECT_FALSE(b.within_tolerance);
  EXPECT_GT(b.global_rel_l2, 100 * kFp32Tolerance);
  EXPECT_GT(b.loss_abs_diff, 100 * kFp32Tolerance * std::abs(b.reference_loss));

  // The mask alone suffices (labels are optional) ...
  const std::string mask_only = rewrite_reference(dir, kPadded, {{"labels", Tensor()}}, "m.st");
  EXPECT_TRUE(run_parity(padded_backward(mask_only, core::AttentionPath::kEager)).within_tolerance);
  // ... and labels that say "padded" without a mask are refused, not silently ignored.
  const std::string labels_only =
      rewrite_reference(dir, kPadded, {{"attention_mask", Tensor()}}, "l.st");
  const std::string e = error_of(padded_backward(labels_only, core::AttentionPath::kEager));
  EXPECT_NE(e.find("labels: [1][18] is -100, expected"), std::string::npos) << e;
}

TEST(ParityPaddedBackwardControl, BrokenMasksAndLabelsAreRefusedNamingTheFile) {
  TempDir dir;
  core::SafetensorsFile file = core::SafetensorsFile::open(kPadded);
  const Tensor mask = read_tensor(file, "attention_mask", torch::kLong, torch::kCPU);
  const Tensor labels = read_tensor(file, "labels", torch::kLong, torch::kCPU);
  auto refused = [&](const std::map<std::string, Tensor>& replace) {
    return error_of(padded_backward(rewrite_reference(dir, kPadded, replace, "broken.st"),
                                    core::AttentionPath::kEager));
  };
  Tensor left = mask.flip({1});  // the same amount of padding on the left
  std::string e = refused({{"attention_mask", left}, {"labels", Tensor()}});
  EXPECT_NE(e.find("broken.st: attention_mask: row 1 has a 1 at position 6 after a 0"),
            std::string::npos)
      << e;
  Tensor two = mask.clone();
  two[0][3] = 2;
  e = refused({{"attention_mask", two}});
  EXPECT_NE(e.find("attention_mask: [0][3] is 2"), std::string::npos) << e;
  Tensor half = mask.to(torch::kFloat);
  half[1][20] = 0.5;
  e = refused({{"attention_mask", half}});
  EXPECT_NE(e.find("attention_mask: [1][20] is 0.5"), std::string::npos) << e;
  e = refused({{"attention_mask", mask.narrow(1, 0, 23)}});
  EXPECT_NE(e.find("'attention_mask' has shape [2, 23], input_ids [2, 24]"), std::string::npos)
      << e;
  Tensor off = labels.clone();
  off[1][20] = 0;  // the pad token counted as a target
  e = refused({{"labels", off}});
  EXPECT_NE(e.find("labels: [1][20] is 0, expected -100 (a padded position)"), std::string::npos)
      << e;
  e = refused({{"labels", labels.narrow(0, 0, 1)}});
  EXPECT_NE(e.find("'labels' has shape [1, 24]"), std::string::npos) << e;
}

// Forward on a padded batch: HF's logits at real positions do not depend on later tokens
// (causal attention), so HF's unpadded logits are the reference there; tprobe runs row 1 with its
// last 6 positions padded (pad id 0, masked) and compares the 24 + 18 real positions.
TEST(ParityPaddedForward, LogitsAtRealPositionsMatchHf) {
  TempDir dir;
  core::SafetensorsFile file = core::SafetensorsFile::open(kForwardRef);
  Tensor ids = read_tensor(file, "input_ids", torch::kLong, torch::kCPU);
  Tensor mask = torch::ones_like(ids);
  ids.narrow(1, 18, 6)[1].fill_(0);
  mask.narrow(1, 18, 6)[1].fill_(0);
  const std::string padded = rewrite_reference(
      dir, kForwardRef,
      {{"input_ids", ids}, {"attention_mask", mask}, {"loss", Tensor()}, {"loss_sdpa", Tensor()}});
  ParityOptions o;
  o.checkpoint_dir = kFixture;
  o.reference_path = padded;
  ParityResult r = run_parity(o);
  std::cout << "padded forward fp32 eager: logits rel L2 " << r.rel_l2_error << " over "
            << r.positions_compared << " positions\n";
  EXPECT_EQ(r.row_lengths, (std::vector<int64_t>{24, 18}));
  EXPECT_EQ(r.positions_compared, 42);
  EXPECT_TRUE(r.within_tolerance);
  EXPECT_LE(r.rel_l2_error, kFp32Tolerance);
  EXPECT_EQ(r.argmax_agreement_ratio, 1.0);
  EXPECT_GT(r.forward_s, 0);
  EXPECT_GT(r.loss_forward_s, 0);
  // Control: without the mask the pad tokens' logits are compared with HF's real tokens' logits.
  const std::string no_mask =
      rewrite_reference(dir, kForwardRef, {{"input_ids", ids}, {"loss", Tensor()}}, "nomask.st");
  o.reference_path = no_mask;
  ParityResult c = run_parity(o);
  EXPECT_EQ(c.positions_compared, 48);
  EXPECT_FALSE(c.within_tolerance);
  EXPECT_GT(c.rel_l2_error, 100 * kFp32Tolerance);
}

// The cheapest real run, a forward (fp32 eager, HF's sdpa logits as the baseline, a reference
// loss), read back from its evidence; the padded backward test above round-trips backward runs.
TEST(ParityEvidenceRoundTrip, ARealForwardRun) {
  ParityOptions o;
  o.checkpoint_dir = kFixture;
  o.reference_path = kForwardRef;
  o.baseline_key = "logits_sdpa";
  const ParityResult r = run_parity(o);
  ASSERT_TRUE(r.baseline.has_value());
  ASSERT_TRUE(r.reference_loss.has_value());
  expect_evidence_round_trip(r, o);
  const ParityEvidence back = parity_evidence_from_json(to_json(r, o), "p.json results");
  EXPECT_FALSE(back.options.backward);
  EXPECT_EQ(back.options.dtype, "fp32");
  EXPECT_TRUE(back.result.logits_compared);
  EXPECT_EQ(back.result.rel_l2_error, r.rel_l2_error);
  EXPECT_EQ(back.result.error.max_abs_error, r.error.max_abs_error);
  EXPECT_EQ(back.result.baseline_key, "logits_sdpa");
  EXPECT_EQ(back.result.baseline->rel_l2_error, r.baseline->rel_l2_error);
  EXPECT_EQ(back.result.within_tolerance, r.within_tolerance);
  // The report reader judges the result again, as the run was judged.
  const ParityReport judged = judge_parity(o, r);
  const ParityReport read = parity_report_from_json(to_json(judged), "p.json results");
  EXPECT_EQ(read.outcome, judged.outcome);
  EXPECT_EQ(read.diagnostics.size(), judged.diagnostics.size());
}

}  // namespace
}  // namespace tprobe::model
