// Padding as an engine input (checked against each row run alone, fp64) and the step runner on
// the CPU: points, samples, OOM parsing, bad specs, and the observer's phase/part tags.
#include "tprobe/core/step/knobs.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/engine/step_spec.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/gemma4.hpp"
#include "tprobe/runs/step_report.hpp"
#include "tprobe/model/engine.hpp"

namespace tprobe::model {

// The engine works in engine's request and result types.
using namespace engine;
using namespace runs;
namespace {

using core::StepTracer;
using torch::Tensor;
using torch::indexing::Slice;

Gemma4Model tiny_fp64(bool checkpointing,
                      core::AttentionPath attn = core::AttentionPath::kEager) {
  ModelOptions o;
  o.attn = attn;
  o.dtype = torch::kDouble;
  o.ce_chunk = 5;
  o.gradient_checkpointing = checkpointing;
  Gemma4Model m = Gemma4Model::random(core::embedded_model("gemma4-tiny"), o, 3);
  torch::manual_seed(4);
  torch::NoGradGuard g;
  for (auto& [name, t] : m.parameters()) {
    if (t->dim() == 1)
      t->copy_(torch::rand_like(*t) + 0.5);
    else
      t->mul_(5.0);  // wider than HF's init, so that every layer matters to the logits
  }
  return m;
}

Tensor ids(int64_t batch, int64_t seq, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, 512, {batch, seq}, torch::kLong);
}

TEST(PaddedMask, HandCheckedRows) {
  // width 4, window 2, row lengths 4 and 2: row 1's keys 2 and 3 are padding.
  Tensor m = padded_bool_mask(4, 2, {4, 2}, torch::kCPU);
  ASSERT_EQ(m.sizes().vec(), (std::vector<int64_t>{2, 1, 4, 4}));
  // row 0 = causal ∧ window: q3 sees k2, k3 only.
  EXPECT_EQ(m[0][0][3].to(torch::kLong).sum().item<int64_t>(), 2);
  EXPECT_TRUE(m[0][0][3][2].item<bool>());
  // row 1, q3: window allows k2, k3, both padding → nothing; q1 sees k0, k1.
  EXPECT_EQ(m[1][0][3].to(torch::kLong).sum().item<int64_t>(), 0);
  EXPECT_EQ(m[1][0][1].to(torch::kLong).sum().item<int64_t>(), 2);
  EXPECT_TRUE(has_padding({4, 2}, 4));
  EXPECT_FALSE(has_padding({4, 4}, 4));
  EXPECT_FALSE(has_padding({}, 4));
}

// The reference: each row alone, cut to its real length, no padding anywhere. With right padding
// and a causal (windowed) mask a real token never sees a padded one, so the padded batch must give
// the same logits at every real position — to fp64 round-off.
TEST(PaddedBatch, RealPositionsMatchEachRowAloneFp64Eager) {
  Gemma4Model m = tiny_fp64(false);
  torch::NoGradGuard g;
  const int64_t width = 20;  // > sliding window 8: the window is exercised on both rows
  const std::vector<int64_t> lengths = {20, 11};
  Tensor x = ids(2, width, 9);
  Tensor padded = m.logits(x, nullptr, lengths);
  for (int64_t b = 0; b < 2; ++b) {
    Tensor alone = m.logits(x.index({Slice(b, b + 1), Slice(0, lengths[b])}));
    Tensor got = padded.index({Slice(b, b + 1), Slice(0, lengths[b])});
    EXPECT_LT((got - alone).abs().max().item<double>(), 1e-10) << "row " << b;
  }
  // The padding really reached attention: without lengths row 1's real positions see the same
  // (causal) keys, so only the record tells them apart; check the record names the padding.
  ForwardRecord rec;
  m.logits(x, &rec, lengths);
  EXPECT_EQ(rec.attn_sliding, "eager(padding)");
  EXPECT_EQ(rec.attn_full, "eager(padding)");
}

// A model with adapters on every target and non-zero B (so that every adapter's gradient depends
// on the input), and the check that the padded batch's loss and LoRA gradients equal those of the
// rows run alone: mean over all real targets = sum_b loss_b * n_b / sum n_b.
Gemma4Model with_live_adapters(Gemma4Model m, uint64_t seed) {
  LoraConfig lora;
  lora.targets = core::linear_module_names();
  lora.rank = 2;
  lora.alpha = 4;
  m.add_lora(lora, seed);
  torch::NoGradGuard g;
  for (auto& [name, t] : m.lora_parameters()) t->normal_(0.0, 0.3);
  return m;
}

void expect_loss_and_grads_match_rows_alone(Gemma4Model& m, const Tensor& x,
                                            const std::vector<int64_t>& lengths) {
  LossResult padded = m.loss(x, nullptr, lengths);
  int64_t targets = 0;
  for (int64_t l : lengths) targets += l - 1;
  EXPECT_EQ(padded.num_targets, targets);
  padded.loss.backward();
  std::vector<Tensor> g_padded;
  for (auto& [name, t] : m.lora_parameters()) {
    g_padded.push_back(t->grad().clone());
    t->mutable_grad() = Tensor();
  }
  Tensor total;
  int64_t n = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    const auto row = static_cast<int64_t>(b);
    LossResult r = m.loss(x.index({Slice(row, row + 1), Slice(0, lengths[b])}));
    Tensor part = r.loss * static_cast<double>(r.num_targets);
    total = total.defined() ? total + part : part;
    n += r.num_targets;
  }
  Tensor want = total / static_cast<double>(n);
  EXPECT_NEAR(padded.loss.item<double>(), want.item<double>(), 1e-11);
  want.backward();
  size_t i = 0;
  for (auto& [name, t] : m.lora_parameters()) {
    EXPECT_LT((t->grad() - g_padded[i]).abs().max().item<double>(), 1e-10) << name;
    ++i;
  }
}

TEST(PaddedBatch, LossCountsOnlyRealTargetsAndGradientsMatchRowsAlone) {
  Gemma4Model m = with_live_adapters(tiny_fp64(true), 5);
  expect_loss_and_grads_match_rows_alone(m, ids(2, 16, 11), {16, 7});
}

// The blockwise path packs a padded batch's real tokens into one sequence before the first layer
// (flash-window does the same on CUDA): logits at real positions, the loss and every LoRA gradient
// must equal each row run alone, and the padded positions come back as zeros in the hidden state.
TEST(PackedRows, PaddedBatchThroughPackingMatchesEachRowAloneFp64) {
  const std::vector<int64_t> lengths = {20, 11, 3};  // window 8: inside, across and past it
  const int64_t width = 20;
  Tensor x = ids(3, width, 13);
  Gemma4Model m = with_live_adapters(tiny_fp64(true, core::AttentionPath::kBlockwise), 6);
  {
    torch::NoGradGuard g;
    ForwardRecord rec;
    Tensor padded = m.logits(x, &rec, lengths);
    EXPECT_NE(rec.attn_sliding.find("packed rows"), std::string::npos) << rec.attn_sliding;
    EXPECT_NE(rec.attn_full.find("packed rows"), std::string::npos) << rec.attn_full;
    for (int64_t b = 0; b < 3; ++b) {
      Tensor alone = m.logits(x.index({Slice(b, b + 1), Slice(0, lengths[b])}));
      Tensor got = padded.index({Slice(b, b + 1), Slice(0, lengths[b])});
      EXPECT_LT((got - alone).abs().max().item<double>(), 1e-10) << "row " << b;
    }
    Tensor h = m.hidden_states(x, nullptr, lengths);
    EXPECT_EQ(h.index({1, Slice(11, width)}).abs().max().item<double>(), 0.0);
  }
  expect_loss_and_grads_match_rows_alone(m, x, lengths);
}

// flash-window packs on CUDA (bf16): the varlen kernel over the rows' cumulative lengths and the
// blockwise global layers row by row. Against each row alone in the same dtype and path: the
// same kernels per row, only GEMM shapes differ, so bf16 rounding is all that may differ.
TEST(PackedRows, FlashWindowOnCudaMatchesEachRowAlone) {
  if (!torch::cuda::is_available() ||
      core::unavailable(core::Knob::kAttn, "flash-window", engine_facts("cuda", "bf16"))) {
    GTEST_SKIP() << "needs a CUDA device and libtorch >= 2.5";
  }
  ModelOptions o;
  o.attn = core::AttentionPath::kFlashWindow;
  o.dtype = torch::kBFloat16;
  o.device = torch::Device(torch::kCUDA, 0);
  o.ce_chunk = 16;
  Gemma4Model m = Gemma4Model::random(core::embedded_model("gemma4-tiny"), o, 3);
  const std::vector<int64_t> lengths = {40, 23, 9};
  Tensor x = ids(3, 40, 17).to(o.device);
  torch::NoGradGuard g;
  ForwardRecord rec;
  Tensor padded = m.logits(x, &rec, lengths).to(torch::kDouble);
  EXPECT_NE(rec.attn_sliding.find("packed rows"), std::string::npos) << rec.attn_sliding;
  EXPECT_NE(rec.attn_full.find("packed rows"), std::string::npos) << rec.attn_full;
  for (int64_t b = 0; b < 3; ++b) {
    Tensor alone = m.logits(x.index({Slice(b, b + 1), Slice(0, lengths[b])})).to(torch::kDouble);
    Tensor got = padded.index({Slice(b, b + 1), Slice(0, lengths[b])});
    const double rel = ((got - alone).norm() / alone.norm()).item<double>();
    EXPECT_LT(rel, 1e-2) << "row " << b;
  }
}

TEST(PackedRows, OnlyThePathsThatPackSayTheyDo) {
  EXPECT_TRUE(packs_padding(core::AttentionPath::kBlockwise, torch::kCPU));
  EXPECT_FALSE(packs_padding(core::AttentionPath::kEager, torch::kCPU));
  EXPECT_FALSE(packs_padding(core::AttentionPath::kSdpa, torch::kCPU));
  EXPECT_FALSE(packs_padding(core::AttentionPath::kFlashWindow, torch::kCPU));
  Tensor q = torch::zeros({1, 2, 5, 4}, torch::kDouble);
  EXPECT_THROW(packed_attention(core::AttentionPath::kEager, q, q, q, 0, nullptr, {3, 2}), Error);
  EXPECT_THROW(packed_attention(core::AttentionPath::kBlockwise, q, q, q, 0, nullptr, {3, 3}),
               Error);
}

TEST(PaddedBatch, BadLengthsAreRefused) {
  Gemma4Model m = tiny_fp64(false);
  torch::NoGradGuard g;
  Tensor x = ids(2, 8, 1);
  EXPECT_THROW(m.logits(x, nullptr, {8}), Error);
  EXPECT_THROW(m.logits(x, nullptr, {8, 0}), Error);
  EXPECT_THROW(m.logits(x, nullptr, {8, 9}), Error);
}

// Records what the engine says it is running, and the autograd links: for every backward node
// that starts, the scope of the forward (or recompute) op that made it — the join the CUPTI
// source's raw trace leaves to core::attribute, done here live on the CPU.
class RecordingObserver : public StepTracer {
 public:
  void begin() override { ++begins; }
  void end() override { ++ends; }
  void discard() override { ++discards; }
  bool wants_links() const override { return true; }
  void enter(const core::StepTag& tag) override {
    seen.insert({core::to_string(tag.phase), core::to_string(tag.part)});
    stack.push_back(tag);
    ++depth;
    max_depth = std::max(max_depth, depth);
  }
  void leave() override {
    --depth;
    stack.pop_back();
  }
  void forward_op(uint64_t thread, int64_t seq) override {
    std::lock_guard<std::mutex> lock(mu);
    if (!stack.empty()) made_by[{thread, seq}] = stack.back();
    else made_by.erase({thread, seq});
  }
  void node_enter(uint64_t thread, int64_t seq) override {
    std::lock_guard<std::mutex> lock(mu);
    ++nodes;
    auto it = made_by.find({thread, seq});
    if (it == made_by.end()) {
      ++unlinked;
      return;
    }
    const core::StepTag b = core::backward_of(it->second);
    node_tags.insert({core::to_string(b.phase), core::to_string(b.part), b.layer,
                      core::to_string(it->second.phase)});
  }
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<core::StepTag> stack;  // the engine runs the CPU backward on this thread
  std::mutex mu;
  std::map<std::pair<uint64_t, int64_t>, core::StepTag> made_by;
  // (phase, part, layer, phase of the scope that made the node)
  std::set<std::tuple<std::string, std::string, int32_t, std::string>> node_tags;
  int64_t nodes = 0, unlinked = 0;
  int begins = 0, ends = 0, discards = 0, depth = 0, max_depth = 0;
};

StepSpec tiny_spec() {
  StepSpec s;
  s.model = "gemma4-tiny";
  s.device = "cpu";
  s.dtype = "fp32";
  s.lora_targets = core::linear_module_names();
  s.lora_rank = 4;
  s.lora_alpha = 8;
  s.ce_chunk = 16;
  s.config.ce = core::CeForm::kChunked;  // tprobe's own CE node: every backward node links
  s.warmup = 1;
  s.repeats = 2;
  s.points = {{2, 16, {}}, {2, 24, {}}, {2, 24, {24, 12}}};
  return s;
}

TEST(StepRunner, MeasuresEveryPointAndTagsEveryPart) {
  StepSpec spec = tiny_spec();
  RecordingObserver tracer;
  spec.tracer = &tracer;
  int calls = 0;
  StepReport r = run_steps(spec, [&](const PointResult&) { ++calls; });
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(r.points.size(), 3u);
  EXPECT_EQ(r.clock, "steady_clock");
  EXPECT_EQ(r.weights_allocated_bytes, -1);  // no allocator to ask on the CPU: null, not 0 B
  EXPECT_EQ(r.lora_modules, count_parameters(core::embedded_model("gemma4-tiny"),
                                             LoraConfig{core::linear_module_names(), 4, 8})
                                .lora_modules);
  for (const auto& p : r.points) {
    EXPECT_EQ(p.outcome, PointOutcome::kOk) << p.message;
    EXPECT_EQ(p.step_s.size(), 2u);
    EXPECT_EQ(p.forward_s.size(), 2u);
    for (size_t i = 0; i < p.step_s.size(); ++i) {
      EXPECT_GT(p.forward_s[i], 0);
      EXPECT_GT(p.backward_s[i], 0);
      EXPECT_GE(p.step_s[i], p.forward_s[i] + p.backward_s[i]);
    }
    EXPECT_EQ(p.inert_adapters, 0);
    // AdamW (the default) ends every timed step, and its time is part of the step's.
    ASSERT_EQ(p.optimizer_s.size(), 2u);
    for (size_t i = 0; i < p.step_s.size(); ++i) {
      EXPECT_GT(p.optimizer_s[i], 0);
      EXPECT_GE(p.step_s[i], p.forward_s[i] + p.backward_s[i] + p.optimizer_s[i]);
    }
    EXPECT_TRUE(p.traced);
    EXPECT_EQ(p.moe, "loop");
  }
  EXPECT_EQ(r.points[2].loss_targets, 23 + 11);
  // The attention path left open resolves to sdpa where the linked libtorch has it (>= 2.0).
  EXPECT_EQ(r.points[2].attn_sliding,
            has_sdpa() ? "sdpa(bool_mask,padding,repeat_kv)" : "eager(padding)");
  // One traced step per point, plus the priming step before the first, dropped.
  EXPECT_EQ(tracer.begins, 4);
  EXPECT_EQ(tracer.ends, 4);
  EXPECT_EQ(tracer.discards, 1);
  EXPECT_GT(r.points[0].trace_priming_step_s, 0);
  EXPECT_EQ(r.points[1].trace_priming_step_s, 0);
  EXPECT_EQ(tracer.depth, 0);
  // Every part is tagged in the forward and again in the recompute of the checkpointed layers.
  for (const char* phase : {"forward", "recompute"}) {
    for (const char* part :
         {"attention_proj", "attention_core", "dense_mlp", "router", "experts", "other"}) {
      EXPECT_TRUE(tracer.seen.count({phase, part})) << phase << " " << part;
    }
  }
  EXPECT_TRUE(tracer.seen.count({"forward", "embedding"}));
  EXPECT_TRUE(tracer.seen.count({"loss", "loss_head"}));
  EXPECT_TRUE(tracer.seen.count({"optimizer", "other"}));  // the traced step's AdamW
  // The engine never tags a backward scope itself: the backward is all links.
  EXPECT_FALSE(tracer.seen.count({"backward", "attention_core"}));
  // Backward nodes: every one that carries a sequence number links to a recorded forward op.
  EXPECT_GT(tracer.nodes, 100);
  EXPECT_EQ(tracer.unlinked, 0) << "of " << tracer.nodes << " nodes";
  const auto layers = static_cast<int32_t>(core::embedded_model("gemma4-tiny").num_layers);
  for (int32_t layer = 0; layer < layers; ++layer) {
    // The layer's own gradients come from nodes its recompute made, part by part.
    for (const char* part : {"attention_proj", "attention_core", "dense_mlp", "router", "experts"}) {
      EXPECT_TRUE(tracer.node_tags.count({"backward", part, layer, "recompute"}))
          << "layer " << layer << " " << part;
      // ...never from the first forward, whose graph the checkpoint does not keep
      EXPECT_FALSE(tracer.node_tags.count({"backward", part, layer, "forward"}))
          << "layer " << layer << " " << part;
    }
    // the checkpoint node itself, made in the forward under the layer's `other`
    EXPECT_TRUE(tracer.node_tags.count({"backward", "other", layer, "forward"})) << layer;
  }
  // the loss head's own node stays in the loss phase
  EXPECT_TRUE(tracer.node_tags.count({"loss", "loss_head", -1, "loss"}));

  core::Json j = to_json(r);
  ASSERT_EQ(j["points"].size(), 2u);
  ASSERT_EQ(j["padded_points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["samples_s"].size(), 2u);
  EXPECT_TRUE(j["points"][0]["trace_priming_step_s"].is_number());
  EXPECT_TRUE(j["points"][1]["trace_priming_step_s"].is_null());
  EXPECT_EQ(j["padded_points"][0]["real_tokens"], 36);

  // Read back by profile's own reader (what scaling-fit --profile takes): each real point, written,
  // read and written again, gives the same JSON; the unpadded points come first, then the padded.
  for (const auto& p : r.points) {
    const std::string first = point_to_json(p).dump();
    EXPECT_EQ(point_to_json(point_from_json(point_to_json(p), "p.json point")).dump(), first);
  }
  const std::vector<PointResult> back = profile_points_from_json(j, "p.json results");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(point_to_json(back[0]).dump(), point_to_json(r.points[0]).dump());
  EXPECT_EQ(point_to_json(back[1]).dump(), point_to_json(r.points[1]).dump());
  EXPECT_EQ(point_to_json(back[2]).dump(), point_to_json(r.points[2]).dump());
  StepReport again = r;
  again.points = back;  // the sweep put the padded point last, as the reader does
  EXPECT_EQ(to_json(again).dump(), j.dump());
}

// The step's AdamW (--optimizer adamw) against the update computed by hand in long double, on a
// tiny fp64 parameter over three steps with a weight decay and a learning rate large enough to
// move it: the bias corrections, the decoupled decay and eps in the denominator. A parameter
// without a gradient is not moved and gets no moments (negative control); the moments are
// allocated at the first step, two per element in the parameter's dtype.
TEST(LoraOptimizer, AdamWMatchesTheUpdateComputedByHandInHigherPrecision) {
  AdamWSettings s;
  s.lr = 1e-2;
  s.beta1 = 0.9;
  s.beta2 = 0.999;
  s.eps = 1e-8;
  s.weight_decay = 0.1;
  const std::vector<double> start = {0.5, -1.25, 2.0};
  Tensor p = torch::tensor(start, torch::kDouble).requires_grad_(true);
  Tensor idle = torch::zeros({4}, torch::kFloat).requires_grad_(true);
  LoraOptimizer opt({p, idle}, s);
  EXPECT_EQ(opt.state_bytes(), 0);  // lazily, at the first step
  const std::vector<std::vector<double>> grads = {{0.3, -2.0, 1e-3}, {-0.1, 0.5, 4.0},
                                                  {0.0, -0.25, 2.5}};
  std::vector<long double> ref(start.begin(), start.end()), m(3, 0.0L), v(3, 0.0L);
  for (size_t step = 1; step <= grads.size(); ++step) {
    p.mutable_grad() = torch::tensor(grads[step - 1], torch::kDouble);
    opt.step();
    const long double bc1 = 1.0L - std::pow(0.9L, static_cast<long double>(step));
    const long double bc2 = 1.0L - std::pow(0.999L, static_cast<long double>(step));
    for (size_t i = 0; i < 3; ++i) {
      const long double g = grads[step - 1][i];
      ref[i] *= 1.0L - 1e-2L * 0.1L;
      m[i] = 0.9L * m[i] + 0.1L * g;
      v[i] = 0.999L * v[i] + 0.001L * g * g;
      ref[i] -= 1e-2L / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + 1e-8L);
      const double got = p[static_cast<int64_t>(i)].item<double>();
      EXPECT_NEAR(got, static_cast<double>(ref[i]), 1e-14 * std::max(1.0, std::abs(got)))
          << "step " << step << " element " << i;
    }
    opt.zero_grad();
    EXPECT_FALSE(p.grad().defined());
  }
  // The moved parameter moved by about lr per step; the idle one not at all, and has no moments.
  EXPECT_GT(std::abs(p[0].item<double>() - start[0]), 1e-3);
  EXPECT_EQ(idle.abs().max().item<double>(), 0.0);
  EXPECT_EQ(opt.steps(), 3);
  EXPECT_EQ(opt.state_bytes(), 2 * 3 * 8);  // fp64: two moments of 8 B per element
  // fp32 parameters (fp32 adapters): 8 B of moments per parameter.
  Tensor f = torch::ones({5, 2}, torch::kFloat).requires_grad_(true);
  LoraOptimizer fp32({f});
  f.mutable_grad() = torch::ones({5, 2}, torch::kFloat);
  fp32.step();
  EXPECT_EQ(fp32.state_bytes(), 8 * 10);
}

// On the model: every step starts with no gradients; AdamW's first step moves every lora_B off
// PEFT's zero init (each has a gradient) and, with no weight decay, leaves every lora_A where it
// was (its gradient is zero while B is); after zero_grad(set_to_none) every gradient is undefined;
// the moments are 8 B per LoRA parameter (fp32 adapters).
TEST(LoraOptimizer, AStepMovesLoraBOffZeroAndLeavesNoGradients) {
  ModelOptions o;
  o.dtype = torch::kFloat;
  o.ce_chunk = 16;
  Gemma4Model m = Gemma4Model::random(core::embedded_model("gemma4-tiny"), o, 3);
  m.add_lora(LoraConfig{core::linear_module_names(), 4, 8}, 5);
  std::map<std::string, Tensor> before;
  for (auto& [name, t] : m.lora_parameters()) {
    before[name] = t->detach().clone();
    EXPECT_FALSE(t->grad().defined()) << name;
    if (name.find("lora_B") != std::string::npos) {
      EXPECT_EQ(t->abs().max().item<double>(), 0.0) << name;
    }
  }
  LoraOptimizer opt(m);
  const Tensor x = ids(2, 16, 9);
  LossResult loss = m.head_loss(m.hidden_states(x), x);
  loss.loss.backward();
  EXPECT_TRUE(inert_lora_b(m).empty());
  opt.step();
  int64_t b_moved = 0, a_moved = 0, b_total = 0;
  for (auto& [name, t] : m.lora_parameters()) {
    const bool b = name.find("lora_B") != std::string::npos;
    const double moved = (t->detach() - before[name]).abs().max().item<double>();
    b_total += b;
    if (b && moved > 0) ++b_moved;
    if (!b && moved > 0) ++a_moved;
    if (b) {
      // Adam's first step moves each element by lr · g / (|g| + eps'): at most lr.
      EXPECT_LE(moved, 5e-5 * (1 + 1e-5)) << name;
    }
  }
  EXPECT_GT(b_total, 0);
  EXPECT_EQ(b_moved, b_total);
  EXPECT_EQ(a_moved, 0);
  EXPECT_EQ(opt.state_bytes(), 8 * m.count_lora_parameters());
  opt.zero_grad();
  for (auto& [name, t] : m.lora_parameters()) EXPECT_FALSE(t->grad().defined()) << name;
}

TEST(StepRunner, BadSpecsAreUsageErrors) {
  auto expect_usage = [](StepSpec s) { EXPECT_THROW(run_steps(s), UsageError); };
  StepSpec s = tiny_spec();
  s.points = {};
  expect_usage(s);
  s = tiny_spec();
  s.points = {{2, 16, {16}}};
  expect_usage(s);
  s = tiny_spec();
  s.points = {{2, 16, {16, 17}}};
  expect_usage(s);
  s = tiny_spec();
  s.repeats = 0;
  expect_usage(s);
  s = tiny_spec();
  s.dtype = "int8";
  expect_usage(s);
  s = tiny_spec();
  s.config.attn = core::AttentionPath::kFlashWindow;
  expect_usage(s);
}

TEST(StepRunner, OomMessageSizeIsParsed) {
  EXPECT_EQ(parse_oom_bytes("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 139 GiB)"),
            int64_t{2} * 1073741824);
  EXPECT_EQ(parse_oom_bytes("Tried to allocate 512.00 MiB"), int64_t{512} * 1048576);
  EXPECT_EQ(parse_oom_bytes("out of memory"), std::nullopt);
}

TEST(SampleStats, MedianMinSpread) {
  SampleStats s = sample_stats({3.0, 1.0, 2.0, 10.0});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.spread_ratio, 9.0 / 2.5);
  EXPECT_DOUBLE_EQ(sample_stats({}).median, 0.0);
}

}  // namespace
}  // namespace tprobe::model
