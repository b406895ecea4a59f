// The measured step's memory lower bound before it runs (core/cost/step_plan.hpp): each planned
// tensor's shape and bytes worked by hand from the model's shapes, and the refusal's sentence.
#include "tprobe/core/cost/step_plan.hpp"

#include <gtest/gtest.h>

#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::core {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// gemma4-tiny: hidden 64, 6 layers, 4 query heads, sliding window 8, vocabulary 512.
ModelConfig tiny() {
  ModelConfig c = embedded_model("gemma4-tiny");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.vocab_size, 512);
  return c;
}

TEST(StepPlan, AMillionTokenEagerPointHoldsItsFp32ProbabilitiesBesideTheLayerInputs) {
  StepPlanRequest q;
  q.batch = 2;
  q.width = 1048576;
  q.attn = AttentionPath::kEager;
  const StepPlan p = plan_step(tiny(), q);
  // [2, 4, 2^20, 2^20] fp32 = 2 * 4 * 2^40 * 4 bytes = 2^45 (the first of the two layer kinds).
  EXPECT_EQ(p.largest.what, "the eager attention's fp32 probabilities of a sliding layer");
  EXPECT_EQ(p.largest.shape, (std::vector<int64_t>{2, 4, 1048576, 1048576}));
  EXPECT_EQ(p.largest.element_bytes, 4);
  EXPECT_DOUBLE_EQ(p.largest.bytes, 35184372088832.0);
  // 6 layers x 2 x 2^20 tokens x 64 x 2 bytes (bf16) = 1.5 GiB.
  EXPECT_EQ(p.layers, 6);
  EXPECT_DOUBLE_EQ(p.layer_inputs_bytes, 1.5 * kGiB);
  EXPECT_DOUBLE_EQ(p.activation_floor_bytes, 35184372088832.0 + 1.5 * kGiB);
}

TEST(StepPlan, ShortSdpaPointsHoldNoMaskAndTheLogitsChunkIsTheLargest) {
  StepPlanRequest q;
  q.batch = 2;
  q.width = 4;  // below the window: HF's sdpa passes is_causal, no mask
  q.attn = AttentionPath::kSdpa;
  StepPlan p = plan_step(tiny(), q);
  // 2 x 3 labelled tokens, [6, 512] fp32.
  EXPECT_EQ(p.largest.what, "one chunk of the loss head's fp32 logits");
  EXPECT_EQ(p.largest.shape, (std::vector<int64_t>{6, 512}));
  EXPECT_DOUBLE_EQ(p.largest.bytes, 6 * 512 * 4);
  // At 4,096 tokens the sliding layers' bool mask [1, 1, S, S] (16 MiB) is above the logits chunk
  // ([4096, 512] fp32 = 8 MiB).
  q.width = 4096;
  p = plan_step(tiny(), q);
  EXPECT_EQ(p.largest.what, "the bool attention mask of a sliding layer");
  EXPECT_EQ(p.largest.shape, (std::vector<int64_t>{1, 1, 4096, 4096}));
  EXPECT_DOUBLE_EQ(p.largest.bytes, 4096.0 * 4096.0);
  q.mask_per_row = true;  // an attention_mask passed: [B, 1, S, S]
  EXPECT_DOUBLE_EQ(plan_step(tiny(), q).largest.bytes, 2 * 4096.0 * 4096.0);
}

TEST(StepPlan, BlockwiseHoldsOneBlockRowOfAFullLayer) {
  StepPlanRequest q;
  q.batch = 1;
  q.width = 2048;
  q.attn = AttentionPath::kBlockwise;
  StepPlan p = plan_step(tiny(), q);
  // Full layers: [1, 4, 512, 2048] fp32 = 16 MiB; sliding: keys 8 + 511 = 519; the logits chunk
  // [2047, 512] fp32 = 4,192,256 bytes.
  EXPECT_EQ(p.largest.what, "the blockwise attention's fp32 scores of one block row of a full layer");
  EXPECT_EQ(p.largest.shape, (std::vector<int64_t>{1, 4, 512, 2048}));
  EXPECT_DOUBLE_EQ(p.largest.bytes, 16.0 * 1024 * 1024);
}

TEST(StepPlan, NaiveCrossEntropyHoldsTheWholeLogitsAndTheChunkedFormsOneChunk) {
  StepPlanRequest q;
  q.batch = 1024;
  q.width = 4;  // sdpa below the window: no mask, the logits are the largest
  q.attn = AttentionPath::kSdpa;
  q.ce_chunk = 1024;
  StepPlan p = plan_step(tiny(), q);
  EXPECT_EQ(p.largest.shape, (std::vector<int64_t>{1024, 512}));  // one chunk of 3,072 targets
  EXPECT_DOUBLE_EQ(p.largest.bytes, 1024.0 * 512 * 4);
  q.naive_ce = true;
  p = plan_step(tiny(), q);
  EXPECT_EQ(p.largest.what, "the loss head's fp32 logits (naive cross-entropy)");
  EXPECT_EQ(p.largest.shape, (std::vector<int64_t>{3072, 512}));
  EXPECT_DOUBLE_EQ(p.largest.bytes, 3072.0 * 512 * 4);
  q.dtype_bytes = 8;  // fp64 keeps fp64
  EXPECT_DOUBLE_EQ(plan_step(tiny(), q).largest.bytes, 3072.0 * 512 * 8);
}

TEST(StepPlan, ARefusalNamesEverySizeAndTheLimitAndNothingIsRefusedBelowIt) {
  StepPlanRequest q;
  q.batch = 2;
  q.width = 1048576;
  const StepPlan p = plan_step(tiny(), q);
  MemoryLimit limit{int64_t{24} << 30, "the test's limit"};
  EXPECT_EQ(plan_refusal(p, 5 * 1024 * 1024, limit),
            "not run: it needs at least 32.00 TiB (5.00 MiB of weights, adapters and their "
            "gradients, 1.50 GiB of 6 layer inputs, and the eager attention's fp32 probabilities of a sliding layer [2, 4, "
            "1048576, 1048576] fp32 = 32.00 TiB), above the test's limit (24.00 GiB)");
  EXPECT_EQ(plan_refusal(p, 0, MemoryLimit{}), "") << "an unknown limit refuses nothing";
  q.width = 16;
  EXPECT_EQ(plan_refusal(plan_step(tiny(), q), 5 * 1024 * 1024, limit), "");
}

TEST(StepPlan, TheHostLimitIsKnownAndNamed) {
  const MemoryLimit m = host_memory_limit();
  EXPECT_GT(m.bytes, 0);
  EXPECT_FALSE(m.what.empty());
}

}  // namespace
}  // namespace tprobe::core
