// The Gemma-4 engine on the CPU: norms, RoPE, masks, attention, chunked CE, LoRA, checkpointing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tprobe/core/step/knobs.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/gemma4.hpp"

namespace tprobe::model {
namespace {

using torch::Tensor;

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

ModelOptions fp64_options() {
  ModelOptions o;
  o.dtype = torch::kDouble;
  o.ce_chunk = 7;  // several chunks, last one short, for 2×24 tokens
  return o;
}

LoraConfig all_targets_lora() {
  LoraConfig l;
  l.targets = core::linear_module_names();
  l.rank = 4;
  l.alpha = 8;
  return l;
}

// Random non-trivial norm weights, router scales and layer scalars (init sets them to 1).
void perturb(Gemma4Model& m, uint64_t seed) {
  torch::manual_seed(seed);
  torch::NoGradGuard g;
  for (auto& [name, t] : m.parameters()) {
    if (t->dim() == 1) t->copy_(torch::rand_like(*t) + 0.5);
  }
}

Tensor tiny_ids(int64_t batch, int64_t seq, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, core::embedded_model("gemma4-tiny").vocab_size, {batch, seq},
                        torch::kLong);
}

TEST(RmsNorm, HandWorkedValue) {
  // x = [3, 4]: mean of squares 12.5, ×12.5^-0.5 = [0.848528, 1.131371]; weight [1, 2] as-is.
  Tensor x = torch::tensor({3.0, 4.0}, torch::kDouble);
  Tensor y = rms_norm(x, torch::tensor({1.0, 2.0}, torch::kDouble), 0.0);
  EXPECT_NEAR(y[0].item<double>(), 3.0 / std::sqrt(12.5), 1e-12);
  EXPECT_NEAR(y[1].item<double>(), 2.0 * 4.0 / std::sqrt(12.5), 1e-12);
  Tensor z = rms_norm(x, Tensor(), 0.0);  // weight-less (v_norm, router norm)
  EXPECT_NEAR(z[1].item<double>(), 4.0 / std::sqrt(12.5), 1e-12);
}

TEST(Rope, InvFreqSanityValuesFromSpec) {
  core::RopeParams full{core::RopeType::kProportional, 1e6, 0.25};
  Tensor f = rope_inv_freq(full, 512);
  ASSERT_EQ(f.size(0), 256);
  EXPECT_NEAR(f[1].item<float>(), 0.9474635f, 1e-6);
  EXPECT_NEAR(f[63].item<float>(), 0.0333762f, 1e-6);
  EXPECT_EQ(f.narrow(0, 64, 192).abs().sum().item<float>(), 0.0f);  // pass-through lanes
  core::RopeParams sliding{core::RopeType::kDefault, 1e4, 1.0};
  Tensor s = rope_inv_freq(sliding, 256);
  ASSERT_EQ(s.size(0), 128);
  EXPECT_NEAR(s[1].item<float>(), std::pow(1e4, -2.0 / 256.0), 1e-6);
  // Proportional lanes 64..255 and 320..511 have cos 1, sin 0 at any position.
  auto [cos, sin] = rope_cos_sin(full, 512, torch::arange(5).unsqueeze(0), torch::kFloat);
  EXPECT_EQ(sin.index({0, 4, 100}).item<float>(), 0.0f);
  EXPECT_EQ(cos.index({0, 4, 400}).item<float>(), 1.0f);
  EXPECT_NE(sin.index({0, 4, 256 + 3}).item<float>(), 0.0f);
}

TEST(Mask, SlidingWindowHandWritten) {
  // S = 5, W = 2: each query sees itself and one key before it.
  Tensor m = causal_bool_mask(5, 2, torch::kCPU).view({5, 5}).to(torch::kInt);
  Tensor expected = torch::tensor({1, 0, 0, 0, 0,  //
                                   1, 1, 0, 0, 0,  //
                                   0, 1, 1, 0, 0,  //
                                   0, 0, 1, 1, 0,  //
                                   0, 0, 0, 1, 1},
                                  torch::kInt)
                        .view({5, 5});
  EXPECT_TRUE(torch::equal(m, expected));
  EXPECT_EQ(causal_bool_mask(6, 0, torch::kCPU).sum().item<int64_t>(), 21);  // plain causal
}

// Straight loops over (b, h, q, k): the definition the kernels must agree with.
Tensor reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window) {
  const int64_t B = q.size(0), Hq = q.size(1), S = q.size(2);
  const int64_t rep = Hq / k.size(1);
  Tensor out = torch::zeros_like(q);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      for (int64_t i = 0; i < S; ++i) {
        const int64_t lo = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
        Tensor keys = k[b][h / rep].narrow(0, lo, i - lo + 1);
        Tensor w = torch::softmax(torch::matmul(keys, q[b][h][i]), 0);
        out[b][h][i] = torch::matmul(w, v[b][h / rep].narrow(0, lo, i - lo + 1));
      }
    }
  }
  return out;
}

TEST(Attention, EagerMatchesLoopReferenceWithWindowShorterThanSequence) {
  torch::manual_seed(3);
  auto o = torch::TensorOptions().dtype(torch::kDouble);
  Tensor q = torch::randn({2, 4, 11, 8}, o), k = torch::randn({2, 2, 11, 8}, o),
         v = torch::randn({2, 2, 11, 8}, o);
  for (int64_t window : {0, 4}) {
    std::string resolved;
    Tensor got = attention(core::AttentionPath::kEager, q, k, v, window, &resolved);
    EXPECT_EQ(resolved, "eager");
    EXPECT_LT(max_abs_diff(got, reference_attention(q, k, v, window)), 1e-12)
        << "window " << window;
  }
}

TEST(Attention, SdpaMatchesEagerInFp64) {
  if (auto why = core::unavailable(core::Knob::kAttn, "sdpa", engine_facts("cpu", "fp64")))
    GTEST_SKIP() << *why;
  torch::manual_seed(4);
  auto o = torch::TensorOptions().dtype(torch::kDouble);
  Tensor q = torch::randn({2, 4, 11, 8}, o), k = torch::randn({2, 2, 11, 8}, o),
         v = torch::randn({2, 2, 11, 8}, o);
  for (int64_t window : {0, 4, 16}) {
    std::string resolved;
    Tensor got = attention(core::AttentionPath::kSdpa, q, k, v, window, &resolved);
    EXPECT_LT(max_abs_diff(got, reference_attention(q, k, v, window)), 1e-12) << resolved;
    // HF materialises the sliding mask only once S >= window.
    EXPECT_EQ(resolved.find("bool_mask") != std::string::npos, window == 4) << resolved;
  }
}

TEST(ChunkedCe, UniformLogitsGiveLogVocab) {
  // Zero hidden states → every logit 0 → loss log(V) whatever the labels; V = 4.
  Tensor h = torch::zeros({3, 2}, torch::kDouble);
  Tensor head = torch::randn({4, 2}, torch::kDouble);
  Tensor labels = torch::tensor({1, -100, 3}, torch::kLong);
  for (core::CeForm mode : {core::CeForm::kChunked, core::CeForm::kNaive}) {
    Tensor loss = softcapped_cross_entropy(h, head, labels, 30.0, mode, 2);
    EXPECT_NEAR(loss.item<double>(), std::log(4.0), 1e-12);
  }
}

TEST(ChunkedCe, EqualsNaiveInValueAndGradient) {
  torch::manual_seed(5);
  Tensor head = torch::randn({40, 16}, torch::kDouble);
  Tensor labels = torch::randint(0, 40, {23}, torch::kLong);
  labels[4] = -100;
  labels[22] = -100;
  Tensor base = torch::randn({23, 16}, torch::kDouble) * 3;  // large logits: softcap matters
  Tensor hn = base.clone().requires_grad_(true);
  Tensor hc = base.clone().requires_grad_(true);
  Tensor ln = softcapped_cross_entropy(hn, head, labels, 30.0, core::CeForm::kNaive, 0);
  Tensor lc = softcapped_cross_entropy(hc, head, labels, 30.0, core::CeForm::kChunked, 5);
  EXPECT_NEAR(ln.item<double>(), lc.item<double>(), 1e-12);
  ln.backward();
  lc.backward();
  EXPECT_LT(max_abs_diff(hn.grad(), hc.grad()), 1e-12);
  EXPECT_GT(hc.grad().abs().max().item<double>(), 0.0);
  EXPECT_EQ(hc.grad()[4].abs().max().item<double>(), 0.0);  // ignored row: no gradient
}

TEST(Counts, Gemma26bA4bMatchesDomainFigures) {
  // docs/findings.md#f12 and the H200 table: 25,233,141,760 text parameters; q,k,v,o,gate,up,down
  // at r64 → 205 modules (v only on the 25 sliding layers), 74,342,400 trainable.
  LoraConfig l = all_targets_lora();
  l.rank = 64;
  auto n = count_parameters(core::embedded_model("gemma4-26b-a4b"), l);
  EXPECT_EQ(n.base_parameters, 25233141760LL);
  EXPECT_EQ(n.lora_modules, 205);
  EXPECT_EQ(n.lora_parameters, 74342400);
  l.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  EXPECT_EQ(count_parameters(core::embedded_model("gemma4-26b-a4b"), l).lora_parameters, 45957120);
}

TEST(Counts, TensorsAgreeWithArithmetic) {
  auto cfg = core::embedded_model("gemma4-tiny");
  auto m = Gemma4Model::random(cfg, fp64_options(), 1);
  m.add_lora(all_targets_lora(), 2);
  auto n = count_parameters(cfg, all_targets_lora());
  EXPECT_EQ(m.count_base_parameters(), n.base_parameters);
  EXPECT_EQ(m.count_lora_modules(), n.lora_modules);
  EXPECT_EQ(m.count_lora_parameters(), n.lora_parameters);
  EXPECT_EQ(n.lora_modules, 6 * 7 - 2);  // the two key=value layers have no v_proj
}

TEST(Lora, ZeroBLeavesTheBaseForwardUnchanged) {
  auto cfg = core::embedded_model("gemma4-tiny");
  auto base = Gemma4Model::random(cfg, fp64_options(), 11);
  perturb(base, 12);
  auto adapted = Gemma4Model::random(cfg, fp64_options(), 11);
  perturb(adapted, 12);
  adapted.add_lora(all_targets_lora(), 13);
  Tensor ids = tiny_ids(2, 24, 14);
  torch::NoGradGuard g;
  Tensor a = base.logits(ids), b = adapted.logits(ids);
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
  // and a non-zero B does change it (the adapters are wired in)
  adapted.layers()[0].q_proj.lora_b.fill_(0.1);
  EXPECT_GT(max_abs_diff(base.logits(ids), adapted.logits(ids)), 1e-6);
}

// PEFT keeps LoRA factors in fp32 under a bf16 model by default (autocast_adapter_dtype): the
// branch x·Aᵀ·Bᵀ·s and its sum with the frozen output in fp32, one rounding back to bf16.
TEST(Lora, Fp32FactorsUnderABf16LinearFollowPeft) {
  torch::manual_seed(3);
  Linear l;
  l.weight = (torch::randn({16, 32}) * 0.05).to(torch::kBFloat16);
  l.lora_a = torch::randn({4, 32});  // fp32
  l.lora_b = torch::randn({16, 4});
  l.lora_scale = 2.0;
  const Tensor x = torch::randn({3, 5, 32}).to(torch::kBFloat16);
  const Tensor out = apply_linear(l, x);
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  // fp64 reference: the frozen layer's own bf16 output plus the exact branch.
  const Tensor y = torch::matmul(x, l.weight.t()).to(torch::kDouble);
  const Tensor ref = y + torch::matmul(torch::matmul(x.to(torch::kDouble),
                                                     l.lora_a.to(torch::kDouble).t()),
                                       l.lora_b.to(torch::kDouble).t()) *
                             2.0;
  // One rounding to bf16 (half an ulp: at most 2^-8 relative for an 8-bit significand) plus the
  // fp32 branch's own error.
  const Tensor err = (out.to(torch::kDouble) - ref).abs();
  EXPECT_LE((err - ref.abs() * (1.0 / 256) - 1e-4).max().item<double>(), 0.0);
  // The same factors in bf16 (the model-dtype path) round the branch too: farther from it.
  Linear l16 = l;
  l16.lora_a = l.lora_a.to(torch::kBFloat16);
  l16.lora_b = l.lora_b.to(torch::kBFloat16);
  const Tensor out16 = apply_linear(l16, x);
  const double e32 = (out.to(torch::kDouble) - ref).norm().item<double>();
  const double e16 = (out16.to(torch::kDouble) - ref).norm().item<double>();
  EXPECT_LT(e32, e16);
}

TEST(Lora, Fp32FactorsUnderABf16ModelTrainInFp32) {
  auto cfg = core::embedded_model("gemma4-tiny");
  ModelOptions o;
  o.dtype = torch::kBFloat16;
  o.ce_chunk = 7;
  LoraConfig l32 = all_targets_lora();
  l32.fp32 = true;
  auto base = Gemma4Model::random(cfg, o, 11);
  auto m32 = Gemma4Model::random(cfg, o, 11);
  m32.add_lora(l32, 13);
  const Tensor ids = tiny_ids(2, 24, 14);
  {
    torch::NoGradGuard g;
    // B = 0: the fp32 branch adds exactly nothing, whatever the rounding of the cast back.
    EXPECT_EQ(max_abs_diff(base.logits(ids), m32.logits(ids)), 0.0);
    torch::manual_seed(15);
    for (auto& [name, t] : m32.lora_parameters()) {
      EXPECT_EQ(t->scalar_type(), torch::kFloat) << name;
      if (name.find("lora_B") != std::string::npos) t->normal_(0.0, 0.05);
    }
    EXPECT_EQ(m32.logits(ids).scalar_type(), torch::kBFloat16);
    EXPECT_GT(max_abs_diff(base.logits(ids), m32.logits(ids)), 1e-3);
  }
  LossResult loss = m32.loss(ids);
  loss.loss.backward();
  for (auto& [name, t] : m32.lora_parameters()) {
    ASSERT_TRUE(t->grad().defined()) << name;
    EXPECT_EQ(t->grad().scalar_type(), torch::kFloat) << name;
    EXPECT_GT(t->grad().abs().max().item<double>(), 0.0) << name;
  }
}

struct StepResult {
  double loss = 0;
  std::vector<Tensor> grads;
  std::vector<std::string> inert;
  int64_t lora_b_count = 0;
  bool loss_requires_grad = false;
};

StepResult one_step(bool checkpoint, bool input_grads, core::CeForm ce) {
  auto cfg = core::embedded_model("gemma4-tiny");
  ModelOptions o = fp64_options();
  o.gradient_checkpointing = checkpoint;
  o.input_requires_grad = input_grads;
  o.ce = ce;
  auto m = Gemma4Model::random(cfg, o, 21);
  perturb(m, 22);
  m.add_lora(all_targets_lora(), 23);
  {  // a non-zero B so lora_A receives gradient too (at B = 0 only B does)
    torch::NoGradGuard g;
    for (auto& [name, t] : m.lora_parameters()) {
      if (name.find("lora_B") != std::string::npos) t->normal_(0.0, 0.01);
    }
  }
  StepResult r;
  LossResult loss = m.loss(tiny_ids(2, 24, 24));
  r.loss = loss.loss.item<double>();
  r.loss_requires_grad = loss.loss.requires_grad();
  if (r.loss_requires_grad) loss.loss.backward();
  for (auto& [name, t] : m.lora_parameters()) {
    r.grads.push_back(t->grad().defined() ? t->grad().clone() : torch::zeros_like(*t));
    r.lora_b_count += name.find("lora_B") != std::string::npos;
  }
  r.inert = inert_lora_b(m);
  return r;
}

TEST(Checkpointing, MatchesPlainBackward) {
  StepResult plain = one_step(false, true, core::CeForm::kNaive);
  StepResult ckpt = one_step(true, true, core::CeForm::kChunked);
  EXPECT_NEAR(plain.loss, ckpt.loss, 1e-12);
  ASSERT_EQ(plain.grads.size(), ckpt.grads.size());
  double worst = 0, largest = 0;
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    worst = std::max(worst, max_abs_diff(plain.grads[i], ckpt.grads[i]));
    largest = std::max(largest, plain.grads[i].abs().max().item<double>());
  }
  EXPECT_LT(worst, 1e-12 * std::max(1.0, largest));
  EXPECT_GT(largest, 0.0);
}

TEST(InertAdapter, EveryLoraBLearnsAfterOneStep) {
  // lora_B starts at zero (PEFT init): after one backward each must have a non-zero gradient.
  for (bool checkpoint : {false, true}) {
    auto cfg = core::embedded_model("gemma4-tiny");
    ModelOptions o = fp64_options();
    o.gradient_checkpointing = checkpoint;
    auto m = Gemma4Model::random(cfg, o, 31);
    m.add_lora(all_targets_lora(), 32);
    m.loss(tiny_ids(2, 24, 33)).loss.backward();
    EXPECT_TRUE(inert_lora_b(m).empty())
        << "checkpointing " << checkpoint << ": " << inert_lora_b(m).size() << " inert";
  }
}

TEST(InertAdapter, DetectsTheCheckpointWithoutInputGradsTrap) {
  // Reentrant checkpointing over a frozen base whose input does not require grad: nothing
  // reaches the adapters. The gate must report every lora_B as inert.
  StepResult r = one_step(true, false, core::CeForm::kChunked);
  EXPECT_FALSE(r.loss_requires_grad);
  EXPECT_EQ(static_cast<int64_t>(r.inert.size()), r.lora_b_count);
  EXPECT_EQ(r.lora_b_count, 40);
  // Without checkpointing the same setting is fine: the adapters are in the graph directly.
  EXPECT_TRUE(one_step(false, false, core::CeForm::kChunked).inert.empty());
}

TEST(Model, RejectsUnsupportedConfigs) {
  auto cfg = core::embedded_model("gemma4-tiny");
  cfg.hidden_size_per_layer_input = 256;
  EXPECT_THROW(Gemma4Model::random(cfg, fp64_options(), 1), Error);
  LoraConfig bad = all_targets_lora();
  bad.targets.push_back("experts");
  EXPECT_THROW(validate_lora(bad), UsageError);
}

}  // namespace
}  // namespace tprobe::model

namespace tprobe::model {
namespace {

using torch::Tensor;

// The expert block's gathers against index_select's own autograd (index_add_ backward), in fp64:
// forward equal, gradients equal to rounding, for routings with empty and crowded experts.
TEST(ExpertGathers, BackwardByGatherEqualsIndexAdd) {
  torch::manual_seed(3);
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  for (int64_t experts : {1, 3, 16}) {
    const int64_t tokens = 37, k = 4, hidden = 5;
    Tensor idx = torch::randint(0, experts, {tokens, k}, torch::kLong);
    Tensor flat = idx.reshape({-1});
    Tensor perm = std::get<1>(flat.sort(/*stable=*/true, 0, false));
    Tensor inverse = torch::empty_like(perm).scatter_(0, perm, torch::arange(perm.numel()));
    Tensor x = torch::randn({tokens, hidden}, f64).requires_grad_(true);
    Tensor x_ref = x.detach().clone().requires_grad_(true);
    Tensor up = torch::randn({tokens * k, hidden}, f64);

    Tensor xs = gather_token_copies(x, perm, inverse, k);
    Tensor xs_ref = x_ref.index_select(0, perm.div(k, "floor"));
    EXPECT_TRUE(torch::equal(xs, xs_ref));
    // A weight per gathered row so that every copy's gradient differs, then back to token order.
    Tensor y = permute_rows(xs * up, inverse, perm);
    Tensor y_ref = (xs_ref * up).index_select(0, inverse);
    EXPECT_TRUE(torch::equal(y, y_ref));
    Tensor g = torch::randn_like(y);
    (y * g).sum().backward();
    (y_ref * g).sum().backward();
    const double err = (x.grad() - x_ref.grad()).abs().max().item<double>();
    EXPECT_LT(err, 1e-12) << experts << " experts";
    EXPECT_GT(x.grad().abs().sum().item<double>(), 0.0);
  }
}

}  // namespace
}  // namespace tprobe::model

namespace tprobe::model {
namespace {

using torch::Tensor;

// --norm fused: libtorch's at::rms_norm must compute what the formula computes. fp64 on the CPU:
// the tiny model's logits and every LoRA gradient agree to rounding. CUDA bf16 (GPU host): the
// fused norm's error against the fp64 formula is no larger than the bf16 formula's own.
TEST(RmsNorm, FusedEqualsTheFormula) {
  if (!has_fused_rms_norm()) {
    ModelOptions o = fp64_options();
    o.fused_rms_norm = true;
    auto m = Gemma4Model::random(core::embedded_model("gemma4-tiny"), o, 1);
    EXPECT_THROW(m.logits(tiny_ids(1, 8, 2)), std::exception);
    GTEST_SKIP() << "at::rms_norm needs libtorch >= 2.4";
  }
  const auto cfg = core::embedded_model("gemma4-tiny");
  Tensor ids = tiny_ids(2, 24, 5);
  auto run = [&](ModelOptions o, bool fused) {
    o.fused_rms_norm = fused;
    auto m = Gemma4Model::random(cfg, o, 21);
    perturb(m, 22);
    m.add_lora(all_targets_lora(), 23);
    for (auto& [name, t] : m.lora_parameters()) {
      torch::NoGradGuard g;
      t->normal_(0.0, 0.05);
    }
    Tensor logits = m.logits(ids.to(o.device));
    (logits.to(torch::kDouble) * torch::linspace(-1, 1, logits.size(-1), torch::kDouble)
                                     .to(o.device))
        .sum()
        .backward();
    std::vector<Tensor> grads;
    for (auto& [name, t] : m.lora_parameters()) grads.push_back(t->grad().to(torch::kDouble).cpu());
    return std::make_pair(logits.to(torch::kDouble).cpu(), grads);
  };
  auto [ref_logits, ref_grads] = run(fp64_options(), false);
  auto [fused_logits, fused_grads] = run(fp64_options(), true);
  EXPECT_LT(max_abs_diff(ref_logits, fused_logits), 1e-10);
  ASSERT_EQ(ref_grads.size(), fused_grads.size());
  for (size_t i = 0; i < ref_grads.size(); ++i) {
    EXPECT_LT(max_abs_diff(ref_grads[i], fused_grads[i]), 1e-9) << "gradient " << i;
  }
  if (!torch::cuda::is_available()) return;
  ModelOptions bf = fp64_options();
  bf.dtype = torch::kBFloat16;
  bf.device = torch::Device(torch::kCUDA, 0);
  auto rel = [](const Tensor& a, const Tensor& ref) {
    return ((a - ref).norm() / ref.norm()).item<double>();
  };
  auto [hf_logits, hf_grads] = run(bf, false);
  auto [fu_logits, fu_grads] = run(bf, true);
  const double hf_err = rel(hf_logits, ref_logits), fu_err = rel(fu_logits, ref_logits);
  EXPECT_LE(fu_err, hf_err * 1.25 + 1e-4) << "logits: fused " << fu_err << " vs formula " << hf_err;
  double hf_g = 0, fu_g = 0;
  for (size_t i = 0; i < ref_grads.size(); ++i) {
    hf_g = std::max(hf_g, rel(hf_grads[i], ref_grads[i]));
    fu_g = std::max(fu_g, rel(fu_grads[i], ref_grads[i]));
  }
  EXPECT_LE(fu_g, hf_g * 1.25 + 1e-3) << "LoRA gradients: fused " << fu_g << " vs formula " << hf_g;
}

}  // namespace
}  // namespace tprobe::model

namespace tprobe::model {
namespace {

using torch::Tensor;

// at::_grouped_mm's contract (rows [offs[e-1], offs[e]) of a times b[e]) by a loop, so that the
// HF dispatch's gathers, offsets and index_add_ run on the CPU.
Tensor loop_grouped_mm(const Tensor& a, const Tensor& b, const Tensor& offs) {
  Tensor o = offs.to(torch::kLong);
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t e = 0; e < b.size(0); ++e) {
    const int64_t end = o[e].item<int64_t>();
    parts.push_back(torch::matmul(a.narrow(0, start, end - start), b[e]));
    start = end;
  }
  return torch::cat(parts, 0);
}

// transformers' grouped_mm experts (model::hf_grouped_experts) against the formula written per
// token in fp64: out[t] = Σ_k w[t,k] · down[e] (gelu_tanh(gate[e] x_t) · up[e] x_t), e = idx[t,k];
// forward and the gradients of x, w and both expert tensors, for routings with empty and crowded
// experts (one expert: every pair in one group).
TEST(HfGroupedExperts, MatchesThePerTokenFormulaInFp64) {
  torch::manual_seed(11);
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  for (int64_t experts : {1, 3, 16}) {
    const int64_t tokens = 29, k = std::min<int64_t>(2, experts), hidden = 6, inter = 4;
    Tensor idx = torch::randint(0, experts, {tokens, k}, torch::kLong);
    Tensor x = torch::randn({tokens, hidden}, f64).requires_grad_(true);
    Tensor w = torch::rand({tokens, k}, f64).requires_grad_(true);
    Tensor gate_up = torch::randn({experts, 2 * inter, hidden}, f64).requires_grad_(true);
    Tensor down = torch::randn({experts, hidden, inter}, f64).requires_grad_(true);
    Tensor y = hf_grouped_experts(x, idx, w, gate_up, down, loop_grouped_mm);
    ASSERT_EQ(y.sizes(), x.sizes());

    Tensor xr = x.detach().clone().requires_grad_(true);
    Tensor wr = w.detach().clone().requires_grad_(true);
    Tensor gur = gate_up.detach().clone().requires_grad_(true);
    Tensor dr = down.detach().clone().requires_grad_(true);
    std::vector<Tensor> rows;
    for (int64_t t = 0; t < tokens; ++t) {
      Tensor acc = torch::zeros({hidden}, f64);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = idx[t][j].item<int64_t>();
        Tensor gate = torch::mv(gur[e].narrow(0, 0, inter), xr[t]);
        Tensor up = torch::mv(gur[e].narrow(0, inter, inter), xr[t]);
        acc = acc + wr[t][j] * torch::mv(dr[e], torch::gelu(gate, "tanh") * up);
      }
      rows.push_back(acc);
    }
    Tensor yr = torch::stack(rows);
    EXPECT_LT((y - yr).abs().max().item<double>(), 1e-12) << experts << " experts";

    Tensor g = torch::randn_like(y);
    (y * g).sum().backward();
    (yr * g).sum().backward();
    auto err = [](const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<double>(); };
    EXPECT_LT(err(x.grad(), xr.grad()), 1e-12) << experts << " experts";
    EXPECT_LT(err(w.grad(), wr.grad()), 1e-12) << experts << " experts";
    EXPECT_LT(err(gate_up.grad(), gur.grad()), 1e-12) << experts << " experts";
    EXPECT_LT(err(down.grad(), dr.grad()), 1e-12) << experts << " experts";
    EXPECT_GT(x.grad().abs().sum().item<double>(), 0.0);
  }
}

// Under a bf16 model HF's path returns the model dtype (its index_add_ accumulates there) and
// stays within bf16 rounding (5 % of the largest output) of the same path in fp64.
TEST(HfGroupedExperts, Bf16AccumulatesInTheModelDtype) {
  torch::manual_seed(5);
  const int64_t tokens = 64, k = 4, experts = 8, hidden = 32, inter = 16;
  Tensor idx = torch::randint(0, experts, {tokens, k}, torch::kLong);
  Tensor x = torch::randn({tokens, hidden}).to(torch::kBFloat16);
  Tensor w = torch::rand({tokens, k});  // fp32, as the router's softmax leaves it
  Tensor gate_up = (torch::randn({experts, 2 * inter, hidden}) * 0.2).to(torch::kBFloat16);
  Tensor down = (torch::randn({experts, hidden, inter}) * 0.2).to(torch::kBFloat16);
  Tensor y = hf_grouped_experts(x, idx, w, gate_up, down, loop_grouped_mm);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  Tensor y64 = hf_grouped_experts(x.to(torch::kDouble), idx, w.to(torch::kDouble),
                                  gate_up.to(torch::kDouble), down.to(torch::kDouble),
                                  loop_grouped_mm);
  const double scale = y64.abs().max().item<double>();
  EXPECT_LT((y.to(torch::kDouble) - y64).abs().max().item<double>(), 0.05 * scale);
}

}  // namespace
}  // namespace tprobe::model
