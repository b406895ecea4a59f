// Backward parity's verdict rules on hand-made errors, and run_parity's handling of broken
// backward references (missing gradients, no gradients at all, padded batches).
#include "tprobe/model/parity.hpp"

#include <fmt/format.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/io/checkpoint.hpp"
#include "tprobe/core/io/safetensors.hpp"
#include "tprobe/model/loader.hpp"

namespace tprobe::model {
namespace {

using torch::Tensor;

const std::string kFixture = std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf";

// POSIX only (no std::filesystem next to libtorch: docs/ARCHITECTURE.md).
struct TempDir {
  std::string path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    path = std::string(base && *base ? base : "/tmp") + "/tprobe_parity.XXXXXX";
    if (!mkdtemp(path.data())) throw std::runtime_error("mkdtemp failed");
  }
  ~TempDir() {
    nftw(
        path.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
};

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
  EXPECT_EQ(baseline_candidates(AttnImpl::kEager), (std::vector<std::string>{"eager", "sdpa"}));
  EXPECT_EQ(baseline_candidates(AttnImpl::kSdpa), (std::vector<std::string>{"sdpa", "eager"}));
  EXPECT_EQ(baseline_candidates(AttnImpl::kFlashWindow),
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
    if (padded) {
      keep.push_back(torch::ones({1, 8}, torch::kLong));
      keep.back()[0][7] = 0;
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
    EXPECT_NE(error_of(padded.options()).find("attention_mask"), std::string::npos);
    ParityOptions no_adapter = partial.options();
    no_adapter.adapter_dir.clear();
    EXPECT_THROW(run_parity(no_adapter), UsageError);
  }
}

}  // namespace
}  // namespace tprobe::model
