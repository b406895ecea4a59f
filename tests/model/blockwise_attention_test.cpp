// The blockwise-GEMM attention against a plain fp64 autograd reference: values and dq/dk/dv at
// widths that are and are not multiples of the block, GQA groups 8 and 2, windows, right padding,
// strided inputs, refusals, and the model run through it.
#include "tprobe/core/step/knobs.hpp"
#include "tprobe/model/blockwise_attention.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/gemma4.hpp"

namespace tprobe::model {
namespace {

using torch::Tensor;

// max |a − b| / max(1, max |b|): values and gradients are O(1)..O(S) here.
double rel_max_diff(const Tensor& a, const Tensor& b) {
  Tensor ad = a.to(torch::kDouble), bd = b.to(torch::kDouble);
  return (ad - bd).abs().max().item<double>() / std::max(1.0, bd.abs().max().item<double>());
}

// Softmax attention written the obvious way (repeated KV heads, a full [S, S] mask), fp64.
// Padded query rows attend to every key before being zeroed, so no row is all −inf and the
// reference's own gradients stay finite.
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window,
                 const std::vector<int64_t>& lengths) {
  const int64_t B = q.size(0), S = q.size(2);
  const int64_t rep = q.size(1) / k.size(1);
  Tensor s = torch::matmul(q, repeat_kv(k, rep).transpose(2, 3));
  Tensor allowed = causal_bool_mask(S, window, q.device()).expand({B, 1, S, S});
  Tensor qpad = torch::zeros({B, 1, S, 1}, torch::kBool);
  if (!lengths.empty()) {
    Tensor len = torch::tensor(lengths, torch::kLong).view({B, 1, 1, 1});
    Tensor pos = torch::arange(S, torch::kLong);
    allowed = allowed.logical_and(pos.view({1, 1, 1, S}).lt(len));
    qpad = pos.view({1, 1, S, 1}).ge(len);
    allowed = allowed.logical_or(qpad);
  }
  Tensor p = torch::softmax(s.masked_fill(allowed.logical_not(), -INFINITY), -1);
  p = p.masked_fill(qpad, 0.0);
  return torch::matmul(p, repeat_kv(v, rep));
}

struct Grads {
  Tensor out, dq, dk, dv;
};

// out and the gradients of sum(out · dout) with respect to q, k, v.
template <typename Fn>
Grads run(Fn fn, const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& dout) {
  Tensor q = q0.detach().clone().requires_grad_(true);
  Tensor k = k0.detach().clone().requires_grad_(true);
  Tensor v = v0.detach().clone().requires_grad_(true);
  Tensor out = fn(q, k, v);
  out.backward(dout);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

struct Case {
  int64_t batch, q_heads, kv_heads, seq, dim, block, window;
  std::vector<int64_t> lengths;
};

std::string describe(const Case& c) {
  std::string l;
  for (int64_t x : c.lengths) l += std::to_string(x) + ",";
  return "B=" + std::to_string(c.batch) + " Hq=" + std::to_string(c.q_heads) +
         " Hkv=" + std::to_string(c.kv_heads) + " S=" + std::to_string(c.seq) +
         " D=" + std::to_string(c.dim) + " block=" + std::to_string(c.block) +
         " window=" + std::to_string(c.window) + " lengths=" + l;
}

void check_case(const Case& c, torch::ScalarType dtype, double tol, uint64_t seed) {
  torch::manual_seed(seed);
  auto o = torch::TensorOptions().dtype(torch::kDouble);
  // Scores of a few units: softmax neither uniform nor one-hot.
  const double scale = 2.0 / std::sqrt(static_cast<double>(c.dim));
  Tensor q = torch::randn({c.batch, c.q_heads, c.seq, c.dim}, o) * scale;
  Tensor k = torch::randn({c.batch, c.kv_heads, c.seq, c.dim}, o);
  Tensor v = torch::randn({c.batch, c.kv_heads, c.seq, c.dim}, o);
  Tensor dout = torch::randn({c.batch, c.q_heads, c.seq, c.dim}, o);
  Grads want =
      run([&](auto& a, auto& b, auto& d) { return reference(a, b, d, c.window, c.lengths); }, q, k,
          v, dout);
  for (auto how : {BlockwiseRecompute::kSoftmax, BlockwiseRecompute::kLogSumExp}) {
    BlockwiseAttentionOptions opt;
    opt.block = c.block;
    opt.window = c.window;
    opt.lengths = c.lengths;
    opt.recompute = how;
    const std::string what =
        describe(c) + (how == BlockwiseRecompute::kSoftmax ? " softmax" : " lse");
    Grads got = run([&](auto& a, auto& b, auto& d) { return blockwise_attention(a, b, d, opt); },
                    q.to(dtype), k.to(dtype), v.to(dtype), dout.to(dtype));
    EXPECT_EQ(got.out.scalar_type(), dtype);
    EXPECT_EQ(got.dk.scalar_type(), dtype);
    EXPECT_LT(rel_max_diff(got.out, want.out), tol) << what << " out";
    EXPECT_LT(rel_max_diff(got.dq, want.dq), tol) << what << " dq";
    EXPECT_LT(rel_max_diff(got.dk, want.dk), tol) << what << " dk";
    EXPECT_LT(rel_max_diff(got.dv, want.dv), tol) << what << " dv";
  }
  // dK is zero only where every query sees a single key (S = 1, window 1): softmax of one score.
  if (c.seq > 1 && c.window != 1) {
    EXPECT_GT(want.dk.abs().max().item<double>(), 0.0) << describe(c);
  }
}

const std::vector<Case>& causal_cases() {
  static const std::vector<Case> cases = {
      {2, 16, 2, 37, 8, 8, 0, {}},    // group 8, 37 = 4·8 + 5: last block short
      {2, 16, 2, 37, 8, 37, 0, {}},   // one block
      {2, 16, 2, 37, 8, 64, 0, {}},   // block wider than S
      {1, 4, 2, 23, 16, 5, 0, {}},    // group 2
      {1, 4, 2, 24, 16, 6, 0, {}},    // exact multiple
      {1, 2, 2, 9, 4, 1, 0, {}},      // block of one query, group 1
      {1, 16, 2, 1, 8, 4, 0, {}},     // one token
      {1, 16, 2, 19, 512, 8, 0, {}},  // the real head_dim
  };
  return cases;
}

TEST(BlockwiseAttention, CausalMatchesReferenceInFp64) {
  uint64_t seed = 100;
  for (const Case& c : causal_cases()) check_case(c, torch::kDouble, 1e-12, seed++);
}

TEST(BlockwiseAttention, CausalMatchesReferenceInFp32) {
  uint64_t seed = 200;
  for (const Case& c : causal_cases()) check_case(c, torch::kFloat, 2e-5, seed++);
}

TEST(BlockwiseAttention, SlidingWindowMatchesReference) {
  // Windows shorter than, equal to and longer than the block, and the first blocks where the
  // window reaches back to key 0.
  const std::vector<Case> cases = {
      {2, 16, 2, 29, 8, 4, 5, {}}, {2, 16, 2, 29, 8, 8, 5, {}},  {1, 4, 2, 29, 8, 8, 8, {}},
      {1, 4, 2, 29, 8, 3, 11, {}}, {1, 4, 2, 29, 8, 16, 40, {}}, {1, 4, 2, 12, 8, 5, 1, {}},
  };
  uint64_t seed = 300;
  for (const Case& c : cases) check_case(c, torch::kDouble, 1e-12, seed++);
}

TEST(BlockwiseAttention, RightPaddingMasksKeysAndZeroesQueries) {
  // Rows of length S, shorter than a block, spanning blocks, and empty; S = 20 with block 4
  // leaves blocks that every row pads (skipped) in the second case.
  const std::vector<Case> cases = {
      {3, 16, 2, 21, 8, 4, 0, {21, 7, 0}},
      {2, 4, 2, 20, 8, 4, 0, {6, 9}},
      {2, 4, 2, 20, 8, 32, 0, {1, 13}},
      {2, 16, 2, 21, 8, 4, 5, {21, 10}},  // with a window
  };
  uint64_t seed = 400;
  for (const Case& c : cases) {
    check_case(c, torch::kDouble, 1e-12, seed++);
    check_case(c, torch::kFloat, 2e-5, seed++);
  }
  // Zeros where the rule says, not merely "close to the reference".
  torch::manual_seed(7);
  Tensor q = torch::randn({2, 4, 20, 8}, torch::kDouble);
  Tensor k = torch::randn({2, 2, 20, 8}, torch::kDouble);
  Tensor v = torch::randn({2, 2, 20, 8}, torch::kDouble);
  BlockwiseAttentionOptions opt;
  opt.block = 4;
  opt.lengths = {6, 9};
  Grads g = run([&](auto& a, auto& b, auto& d) { return blockwise_attention(a, b, d, opt); }, q, k,
                v, torch::randn({2, 4, 20, 8}, torch::kDouble));
  EXPECT_EQ(g.out[0].narrow(1, 6, 14).abs().max().item<double>(), 0.0);
  EXPECT_EQ(g.out[1].narrow(1, 9, 11).abs().max().item<double>(), 0.0);
  EXPECT_GT(g.out[1].narrow(1, 0, 9).abs().min().item<double>(), 0.0);
  EXPECT_EQ(g.dq[0].narrow(1, 6, 14).abs().max().item<double>(), 0.0);
  EXPECT_EQ(g.dk[0].narrow(1, 6, 14).abs().max().item<double>(), 0.0);
  EXPECT_EQ(g.dv[1].narrow(1, 9, 11).abs().max().item<double>(), 0.0);
  // A padded key changes nothing for the rows that are not padded.
  Tensor k2 = k.clone();
  k2[1].narrow(1, 9, 11).fill_(50.0);
  Tensor out2 = blockwise_attention(q, k2, v, opt);
  EXPECT_EQ(rel_max_diff(out2, g.out), 0.0);
}

TEST(BlockwiseAttention, OneTensorAsKeyAndValueGetsBothGradients) {
  // K = V layers: the caller passes one tensor twice; its gradient is dK + dV.
  torch::manual_seed(8);
  Tensor q = torch::randn({1, 16, 13, 8}, torch::kDouble) * 0.7;
  Tensor kv = torch::randn({1, 2, 13, 8}, torch::kDouble);
  Tensor dout = torch::randn({1, 16, 13, 8}, torch::kDouble);
  auto grad_of_kv = [&](auto fn) {
    Tensor x = kv.clone().requires_grad_(true);
    Tensor qq = q.clone().requires_grad_(true);
    fn(qq, x).backward(dout);
    return x.grad();
  };
  BlockwiseAttentionOptions opt;
  opt.block = 5;
  Tensor got = grad_of_kv([&](auto& a, auto& x) { return blockwise_attention(a, x, x, opt); });
  Tensor want = grad_of_kv([&](auto& a, auto& x) { return reference(a, x, x, 0, {}); });
  EXPECT_LT(rel_max_diff(got, want), 1e-12);
}

TEST(BlockwiseAttention, StridedInputsAndTokenMajorOutput) {
  // The model hands over q, k, v as transposes of [B, S, H, D]; the output's storage is
  // token-major so transpose(1, 2) back is contiguous.
  torch::manual_seed(9);
  Tensor qt = torch::randn({2, 11, 16, 8}, torch::kDouble);
  Tensor kt = torch::randn({2, 11, 2, 8}, torch::kDouble);
  Tensor vt = torch::randn({2, 11, 2, 8}, torch::kDouble);
  Tensor q = qt.transpose(1, 2), k = kt.transpose(1, 2), v = vt.transpose(1, 2);
  BlockwiseAttentionOptions opt;
  opt.block = 4;
  Tensor out = blockwise_attention(q, k, v, opt);
  EXPECT_TRUE(out.transpose(1, 2).is_contiguous());
  EXPECT_LT(rel_max_diff(out, reference(q, k, v, 0, {})), 1e-12);
  Tensor dout = torch::randn({2, 11, 16, 8}, torch::kDouble).transpose(1, 2);  // strided grad
  Grads got = run([&](auto& a, auto& b, auto& d) { return blockwise_attention(a, b, d, opt); }, q,
                  k, v, dout);
  Grads want =
      run([&](auto& a, auto& b, auto& d) { return reference(a, b, d, 0, {}); }, q, k, v, dout);
  EXPECT_LT(rel_max_diff(got.dq, want.dq), 1e-12);
  EXPECT_LT(rel_max_diff(got.dk, want.dk), 1e-12);
}

TEST(BlockwiseAttention, RefusesWhatItCannotRun) {
  Tensor q = torch::randn({1, 4, 6, 8}), k = torch::randn({1, 2, 6, 8});
  BlockwiseAttentionOptions opt;
  EXPECT_THROW(blockwise_attention(q, torch::randn({1, 3, 6, 8}), torch::randn({1, 3, 6, 8}), opt),
               Error);  // 4 heads over 3
  EXPECT_THROW(blockwise_attention(q, k, torch::randn({1, 2, 5, 8}), opt), Error);
  EXPECT_THROW(blockwise_attention(q.view({4, 6, 8}), k, k, opt), Error);
  EXPECT_THROW(blockwise_attention(q.to(torch::kInt), k.to(torch::kInt), k.to(torch::kInt), opt),
               Error);
  EXPECT_THROW(blockwise_attention(q, k.to(torch::kDouble), k, opt), Error);
  BlockwiseAttentionOptions bad = opt;
  bad.block = 0;
  EXPECT_THROW(blockwise_attention(q, k, k, bad), Error);
  bad = opt;
  bad.window = -1;
  EXPECT_THROW(blockwise_attention(q, k, k, bad), Error);
  bad = opt;
  bad.lengths = {3, 3};  // batch is 1
  EXPECT_THROW(blockwise_attention(q, k, k, bad), Error);
  bad.lengths = {7};  // > S
  EXPECT_THROW(blockwise_attention(q, k, k, bad), Error);
  bad.lengths = {-1};
  EXPECT_THROW(blockwise_attention(q, k, k, bad), Error);
  try {
    bad.lengths = {7};
    blockwise_attention(q, k, k, bad);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lengths[0] = 7"), std::string::npos) << e.what();
  }
}

TEST(BlockwiseAttention, DispatchRecordsWhatRan) {
  torch::manual_seed(10);
  auto o = torch::TensorOptions().dtype(torch::kDouble);
  Tensor q = torch::randn({1, 4, 9, 8}, o), k = torch::randn({1, 2, 9, 8}, o),
         v = torch::randn({1, 2, 9, 8}, o);
  EXPECT_EQ(core::attention_path_from_name("blockwise", "--attn"), core::AttentionPath::kBlockwise);
  EXPECT_STREQ(to_string(core::AttentionPath::kBlockwise), "blockwise");
  EXPECT_FALSE(core::unavailable(core::Knob::kAttn, "blockwise", engine_facts("cpu", "fp64")));
  std::string resolved;
  Tensor out = attention(core::AttentionPath::kBlockwise, q, k, v, 0, &resolved);
  EXPECT_EQ(resolved, "blockwise_gemm(block=" + std::to_string(kBlockwiseDefaultBlock) + ")");
  EXPECT_LT(rel_max_diff(out, reference(q, k, v, 0, {})), 1e-12);
  attention(core::AttentionPath::kBlockwise, q, k, v, 4, &resolved);
  EXPECT_NE(resolved.find(",window=4"), std::string::npos) << resolved;
  // bf16 on the CPU has no fp32-output GEMM: the record says the scores were rounded.
  attention(core::AttentionPath::kBlockwise, q.to(torch::kBFloat16), k.to(torch::kBFloat16),
            v.to(torch::kBFloat16), 0, &resolved);
  EXPECT_NE(resolved.find("scores=rounded"), std::string::npos) << resolved;
}

TEST(BlockwiseAttention, Bf16StaysNearTheFp64Reference) {
  // Not a parity claim: bf16 inputs, fp32 softmax statistics; the error is bf16 rounding (~1e-2).
  torch::manual_seed(11);
  Case c{1, 16, 2, 45, 64, 16, 0, {}};
  check_case(c, torch::kBFloat16, 5e-2, 500);
}

TEST(BlockwiseAttention, ModelLogitsAndLoraGradientsMatchEager) {
  // The tiny model (two key=value full layers, sliding window) through every attention layer of
  // the blockwise path, fp64, with checkpointing: same loss and adapter gradients as eager.
  auto cfg = core::embedded_model("gemma4-tiny");
  auto step = [&](core::AttentionPath impl) {
    ModelOptions o;
    o.dtype = torch::kDouble;
    o.attn = impl;
    o.gradient_checkpointing = true;
    auto m = Gemma4Model::random(cfg, o, 41);
    LoraConfig l;
    l.targets = core::linear_module_names();
    l.rank = 4;
    l.alpha = 8;
    m.add_lora(l, 42);
    {
      torch::NoGradGuard g;
      for (auto& [name, t] : m.lora_parameters()) {
        if (name.find("lora_B") != std::string::npos) t->normal_(0.0, 0.01);
      }
    }
    torch::manual_seed(43);
    Tensor ids = torch::randint(0, cfg.vocab_size, {2, 24}, torch::kLong);
    ForwardRecord rec;
    LossResult loss = m.loss(ids, &rec);
    loss.loss.backward();
    std::vector<Tensor> grads;
    for (auto& [name, t] : m.lora_parameters()) grads.push_back(t->grad().clone());
    return std::make_tuple(loss.loss.item<double>(), grads, rec.attn_full);
  };
  auto [eager_loss, eager_grads, eager_full] = step(core::AttentionPath::kEager);
  auto [bw_loss, bw_grads, bw_full] = step(core::AttentionPath::kBlockwise);
  EXPECT_NEAR(eager_loss, bw_loss, 1e-12);
  ASSERT_EQ(eager_grads.size(), bw_grads.size());
  for (size_t i = 0; i < eager_grads.size(); ++i) {
    EXPECT_LT(rel_max_diff(bw_grads[i], eager_grads[i]), 1e-11) << i;
  }
  EXPECT_EQ(eager_full, "eager");
  EXPECT_EQ(bw_full.rfind("blockwise_gemm(", 0), 0u) << bw_full;
}

}  // namespace
}  // namespace tprobe::model
