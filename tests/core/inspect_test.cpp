// inspect analysis: the published 26B numbers (embedded and from a sparse checkpoint with real
// names), hand-worked small cases, LoRA target edge cases, and the 48 GiB headers-only timing.
#include "tprobe/core/cost/inspect.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "support/synthetic_checkpoint.hpp"
#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"

namespace tprobe::core {
namespace {

// Hand-worked 26B-A4B numbers (docs/gemma4-model.md#checkpoint-tensors shapes, H = 2816).
// LoRA r64, params per module = 64 * (in + out):
//   sliding q 64*(2816+4096)=442,368  k,v 64*(2816+2048)=311,296  o 442,368 -> 1,507,328 x 25
//   full    q 64*(2816+8192)=704,512  k 64*(2816+1024)=245,760    o 704,512 -> 1,654,784 x 5
//   q,k,v,o: 37,683,200 + 8,273,920 = 45,957,120
//   mlp gate/up/down 3 * 64*(2816+2112) = 946,176 x 30 = 28,385,280 -> all seven 74,342,400
// Experts per layer: 128*1408*2816 + 128*2816*704 = 761,266,176 x 30 = 22,837,985,280.
constexpr int64_t kQkvo = 25 * (442368 + 311296 + 311296 + 442368) + 5 * (704512 + 245760 + 704512);
constexpr int64_t kAllSeven = kQkvo + 30 * 3 * 64 * (2816 + 2112);
constexpr int64_t kExperts = 30 * (128LL * 1408 * 2816 + 128LL * 2816 * 704);
// Parameters (layer_scalar is a buffer): embedding + final norm + 25 sliding + 5 full layers.
constexpr int64_t kSlidingLayer = (4096 + 2048 + 2048) * 2816LL + 2816LL * 4096 + 2 * 256 +
                                  7 * 2816 + 3 * 2112LL * 2816 + 128 * 2816 + 2816 + 128 +
                                  128LL * 1408 * 2816 + 128LL * 2816 * 704;
constexpr int64_t kFullLayer = (8192 + 1024) * 2816LL + 2816LL * 8192 + 2 * 512 + 7 * 2816 +
                               3 * 2112LL * 2816 + 128 * 2816 + 2816 + 128 + 128LL * 1408 * 2816 +
                               128LL * 2816 * 704;
constexpr int64_t kTextParams = 262144LL * 2816 + 2816 + 25 * kSlidingLayer + 5 * kFullLayer;

std::vector<std::string> seven() { return parse_target_list(default_lora_targets()); }

void expect_published_lora(const ModelConfig& c, const std::vector<TensorMeta>& ts,
                           const std::string& prefix) {
  LoraPlan all = plan_lora(c, ts, prefix, seven(), 64);
  EXPECT_EQ(all.modules.size(), 205u);
  EXPECT_EQ(all.trainable_params, 74342400);
  EXPECT_EQ(all.trainable_params, kAllSeven);
  std::map<std::string, int64_t> count;
  for (const auto& s : all.per_target) count[s.target] = s.modules;
  EXPECT_EQ(count, (std::map<std::string, int64_t>{{"q_proj", 30},
                                                   {"k_proj", 30},
                                                   {"v_proj", 25},
                                                   {"o_proj", 30},
                                                   {"gate_proj", 30},
                                                   {"up_proj", 30},
                                                   {"down_proj", 30}}));
  EXPECT_EQ(all.sliding_modules, 25 * 7);
  EXPECT_EQ(all.full_modules, 5 * 6);
  ASSERT_EQ(all.missing.size(), 1u);
  EXPECT_EQ(all.missing[0].target, "v_proj");
  EXPECT_EQ(all.missing[0].layers, (std::vector<int64_t>{5, 11, 17, 23, 29}));
  EXPECT_EQ(all.missing[0].layer_types, "full_attention");
  EXPECT_NE(all.missing[0].message.find("k_proj"), std::string::npos);

  LoraPlan qkvo = plan_lora(c, ts, prefix, parse_target_list("q_proj,k_proj,v_proj,o_proj"), 64);
  EXPECT_EQ(qkvo.modules.size(), 115u);
  EXPECT_EQ(qkvo.trainable_params, 45957120);
  EXPECT_EQ(qkvo.trainable_params, kQkvo);
}

TEST(Inspect, Embedded26bPublishedNumbers) {
  ModelConfig c = embedded_model("gemma4-26b-a4b");
  std::vector<TensorMeta> ts = expected_text_tensors(c);
  expect_published_lora(c, ts, kMultimodalTextPrefix);

  BlockSummary b = summarize_blocks(ts, kMultimodalTextPrefix);
  EXPECT_EQ(b.total_params, 25233141760);
  EXPECT_EQ(b.total_params, kTextParams);
  EXPECT_EQ(b.text_params, b.total_params);
  EXPECT_EQ(b.buffer_elements, 30);
  EXPECT_EQ(b.total_bytes, static_cast<uint64_t>(kTextParams + 30) * 2);
  std::map<Block, int64_t> params;
  int64_t sum = 0;
  for (const auto& r : b.rows) {
    params[r.block] = r.params;
    if (r.block != Block::kBuffers) sum += r.params;
  }
  EXPECT_EQ(sum, b.total_params);
  EXPECT_EQ(params[Block::kExperts], 22837985280);
  EXPECT_EQ(params[Block::kExperts], kExperts);
  EXPECT_EQ(params[Block::kEmbedding], 262144LL * 2816);
  EXPECT_EQ(params[Block::kDenseMlp], 30 * 3 * 2112LL * 2816);
  EXPECT_EQ(params.count(Block::kNonText), 0u);

  QuantizationEstimate q = estimate_linear_only_4bit(ts, kMultimodalTextPrefix);
  EXPECT_EQ(q.untouched_expert_params, 22837985280);
  // Linear weights: attention projections + dense MLP + router.proj.
  const int64_t linear = 25 * (4096 + 2048 + 2048) * 2816LL + 25 * 2816LL * 4096 +
                         5 * (8192 + 1024) * 2816LL + 5 * 2816LL * 8192 + 30 * 3 * 2112LL * 2816 +
                         30 * 128LL * 2816;
  EXPECT_EQ(q.quantized_params, linear);
  EXPECT_EQ(q.quantized_tensors, 25 * 7 + 5 * 6 + 30);
  EXPECT_EQ(q.quantized_params + q.untouched_params, q.total_params);
  EXPECT_EQ(q.total_params, kTextParams);
  EXPECT_LT(q.bytes_after, q.bytes_before);
  // The experts alone are 90.5 % of the text parameters.
  EXPECT_NEAR(static_cast<double>(q.untouched_expert_params) / q.total_params, 0.905, 0.0005);
}

TEST(Inspect, SparseCheckpointWithRealNamesGivesTheSameNumbers) {
  std::string dir = testing_support::temp_dir();
  testing_support::SyntheticOptions opt;
  opt.shards = 2;
  opt.vision_tower = true;
  ModelConfig c = embedded_model("gemma4-26b-a4b");
  testing_support::write_synthetic_checkpoint(dir, c, opt);
  Checkpoint ck = Checkpoint::open(dir);
  EXPECT_TRUE(cross_check(ck.config(), ck.tensors(), ck.text_prefix()).empty());
  std::vector<TensorMeta> ts = ck.tensors();
  expect_published_lora(ck.config(), ts, ck.text_prefix());
  BlockSummary b = summarize_blocks(ts, ck.text_prefix());
  EXPECT_EQ(b.text_params, 25233141760);
  EXPECT_GT(b.total_params, b.text_params);  // the vision tower is counted, as non-text
  int64_t non_text = 0;
  for (const auto& r : b.rows) {
    if (r.block == Block::kNonText) non_text = r.params;
  }
  EXPECT_EQ(non_text, b.total_params - b.text_params);
  QuantizationEstimate q = estimate_linear_only_4bit(ts, ck.text_prefix());
  EXPECT_EQ(q.untouched_expert_params, 22837985280);
  // Vision linears are quantized too, so more is quantized than in the text-only view.
  EXPECT_GT(
      q.quantized_params,
      estimate_linear_only_4bit(expected_text_tensors(c), kMultimodalTextPrefix).quantized_params);
  std::filesystem::remove_all(dir);
}

TEST(Inspect, HeadersOnlyOf48GiBShardedCheckpointUnderHalfASecond) {
  std::string dir = testing_support::temp_dir();
  testing_support::SyntheticOptions opt;
  opt.shards = 12;
  opt.vision_tower = true;
  testing_support::write_synthetic_checkpoint(dir, embedded_model("gemma4-26b-a4b"), opt);
  auto start = std::chrono::steady_clock::now();
  Checkpoint ck = Checkpoint::open(dir);
  std::vector<TensorMeta> ts = ck.tensors();
  auto d = cross_check(ck.config(), ts, ck.text_prefix());
  BlockSummary b = summarize_blocks(ts, ck.text_prefix());
  LoraPlan p = plan_lora(ck.config(), ts, ck.text_prefix(), seven(), 64);
  QuantizationEstimate q = estimate_linear_only_4bit(ts, ck.text_prefix());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(ck.total_bytes(), 48ull << 30);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(p.modules.size(), 205u);
  EXPECT_GT(q.bytes_before, 0u);
  EXPECT_GT(b.total_params, 0);
  RecordProperty("inspect_seconds", std::to_string(s));
  EXPECT_LT(s, 0.5) << "headers-only inspection took " << s << " s";
  std::filesystem::remove_all(dir);
}

TEST(Inspect, QuantizationHandWorked) {
  std::vector<TensorMeta> ts = {
      {"model.layers.0.self_attn.q_proj.weight", DType::kBF16, {128, 64}},  // 8192 params
      {"model.layers.0.experts.gate_up_proj", DType::kBF16, {2, 8, 4}},     // 64 params
      {"model.layers.0.input_layernorm.weight", DType::kBF16, {64}},
      {"model.embed_tokens.weight", DType::kBF16, {10, 64}},  // 640, embedding
      {"model.layers.0.layer_scalar", DType::kBF16, {1}},     // buffer
  };
  QuantizationEstimate q = estimate_linear_only_4bit(ts, "model.");
  EXPECT_EQ(q.quantized_tensors, 1);
  EXPECT_EQ(q.quantized_params, 8192);
  EXPECT_EQ(q.quantized_bytes_before, 16384u);
  EXPECT_EQ(q.quantized_bytes_after, 8192u / 2 + 8192u / 64 * 4);  // 4096 + 512
  EXPECT_EQ(q.untouched_expert_params, 64);
  EXPECT_EQ(q.untouched_params, 64 + 64 + 640);
  EXPECT_EQ(q.total_params, 8192 + 768);
  EXPECT_EQ(q.bytes_before, 2u * (8192 + 64 + 64 + 640 + 1));
  EXPECT_EQ(q.bytes_after, q.bytes_before - 16384 + 4608);

  BlockSummary b = summarize_blocks(ts, "model.");
  EXPECT_EQ(b.total_params, 8192 + 64 + 64 + 640);
  EXPECT_EQ(b.buffer_elements, 1);
  EXPECT_EQ(classify_tensor("model.vision_tower.x.weight", "model."), Block::kNonText);
  EXPECT_EQ(classify_tensor("lm_head.weight", "model."), Block::kLmHead);
  EXPECT_EQ(classify_tensor("model.layers.0.mlp.up_proj.weight", "model."), Block::kDenseMlp);
  EXPECT_EQ(classify_tensor("model.layers.0.router.scale", "model."), Block::kRouterNorms);
}

TEST(Inspect, MemoryEstimateHandWorked) {
  ModelConfig c = embedded_model("gemma4-26b-a4b");
  MemoryInputs in;
  in.batch = 1;
  in.width = 8192;
  in.ce_chunk_tokens = 1024;
  in.weight_bytes = 1000;
  in.trainable_params = 10;
  MemoryEstimate m = estimate_memory(c, in);
  ASSERT_EQ(m.rows.size(), 5u);
  EXPECT_EQ(m.rows[0].bytes, 1000u);
  EXPECT_EQ(m.rows[1].bytes, 160u);
  EXPECT_EQ(m.rows[2].bytes, 30ull * 8192 * 2816 * 2);
  // Naive CE at 1 x 8192: 2.1 G logits x 14 B = 28 GiB (docs/findings.md#f9: ~28-30 GiB).
  EXPECT_EQ(m.rows[3].bytes, 8192ull * 262144 * 14);
  EXPECT_EQ(m.rows[3].bytes, 28ull << 30);
  EXPECT_EQ(m.rows[4].bytes, 1024ull * 262144 * 14);
  EXPECT_EQ(m.total_naive_ce_bytes, 1000 + 160 + m.rows[2].bytes + m.rows[3].bytes);
  EXPECT_EQ(m.total_chunked_ce_bytes, 1000 + 160 + m.rows[2].bytes + m.rows[4].bytes);
  // A chunk larger than the batch is the batch.
  in.ce_chunk_tokens = 1 << 20;
  EXPECT_EQ(estimate_memory(c, in).rows[4].bytes, m.rows[3].bytes);
  // fp32 activations: 3 x 4 + 8 = 20 B per logit.
  ModelConfig tiny = embedded_model("gemma4-tiny");
  in.batch = 2;
  in.width = 3;
  EXPECT_EQ(estimate_memory(tiny, in).rows[3].bytes, 6u * 512 * 20);
}

TEST(LoraTargets, ParseTargetList) {
  EXPECT_EQ(parse_target_list(" q_proj, k_proj ,q_proj"),
            (std::vector<std::string>{"q_proj", "k_proj"}));
  EXPECT_THROW(parse_target_list(""), UsageError);
  EXPECT_THROW(parse_target_list("q_proj,,k_proj"), UsageError);
}

TEST(LoraTargets, NonLinearAndUnknownTargetsAreReported) {
  ModelConfig c = embedded_model("gemma4-tiny");
  std::vector<TensorMeta> ts = expected_text_tensors(c);
  LoraPlan p = plan_lora(c, ts, kMultimodalTextPrefix,
                         parse_target_list("gate_up_proj,c_attn,self_attn.q_proj"), 8);
  ASSERT_EQ(p.missing.size(), 2u);
  EXPECT_EQ(p.missing[0].target, "gate_up_proj");
  EXPECT_NE(p.missing[0].message.find("fused 3-D"), std::string::npos);
  EXPECT_EQ(p.missing[1].target, "c_attn");
  EXPECT_NE(p.missing[1].message.find("matches no module"), std::string::npos);
  // Dotted targets match by suffix, as PEFT does: 6 q_proj modules.
  EXPECT_EQ(p.modules.size(), 6u);
  // tiny: 4 sliding q [64 <- 64] and 2 full q [128 <- 64]: 8*(64+64)*4 + 8*(64+128)*2.
  EXPECT_EQ(p.trainable_params, 8 * 128 * 4 + 8 * 192 * 2);
  EXPECT_THROW(plan_lora(c, ts, kMultimodalTextPrefix, {"q_proj"}, 0), UsageError);
}

TEST(LoraTargets, RandomTargetSubsetsSumUp) {
  ModelConfig c = embedded_model("gemma4-26b-a4b");
  std::vector<TensorMeta> ts = expected_text_tensors(c);
  std::vector<std::string> pool = seven();
  pool.push_back("proj");
  std::mt19937 rng(12);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> pick;
    for (const auto& t : pool) {
      if (rng() % 2) pick.push_back(t);
    }
    if (pick.empty()) continue;
    int64_t rank = 1 + static_cast<int64_t>(rng() % 128);
    LoraPlan p = plan_lora(c, ts, kMultimodalTextPrefix, pick, rank);
    int64_t modules = 0, params = 0;
    for (const auto& s : p.per_target) {
      modules += s.modules;
      params += s.trainable_params;
      EXPECT_EQ(s.modules, s.sliding_modules + s.full_modules);
      EXPECT_LE(s.modules, c.num_layers * 1 + (s.target == "proj" ? 7 * c.num_layers : 0));
    }
    EXPECT_EQ(modules, static_cast<int64_t>(p.modules.size()));
    EXPECT_EQ(params, p.trainable_params);
    for (const auto& m : p.modules) EXPECT_EQ(m.params, rank * (m.in_features + m.out_features));
    // Each module is adapted at most once.
    std::set<std::string> names;
    for (const auto& m : p.modules) EXPECT_TRUE(names.insert(m.name).second) << m.name;
  }
}

}  // namespace
}  // namespace tprobe::core
