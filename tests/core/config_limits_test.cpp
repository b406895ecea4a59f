// Issue 46, items 3 and 7: every size a config.json gives is bounded where the file is parsed
// (ConfigLimits), an odd head dim is refused there, the parameter bytes never wrap, and the LoRA
// parameter count of flops is checked arithmetic. Each refusal has an accepted control at the
// limit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/error_of.hpp"
#include "tprobe/core/cost/flops.hpp"
#include "tprobe/core/cost/step_plan.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::core {
namespace {

using testing_support::error_of;

// The tiny model's config.json in the flat text-only form, without layer_types (so that
// num_hidden_layers alone sizes the layer loop, as in the reproduction).
Json tiny() {
  Json doc = to_config_json(embedded_model("gemma4-tiny"), ConfigJsonForm::kTextOnlyFlat);
  doc.erase("layer_types");
  return doc;
}

std::string refusal(const Json& doc) {
  return error_of([&] { parse_config_json(doc, "cfg.json"); });
}

struct Bounded {
  const char* field;
  int64_t limit;
  // Fields set beside it so that the value at the limit is otherwise a valid config.
  Json companions;
};

std::vector<Bounded> bounded_fields() {
  return {
      {"num_hidden_layers", ConfigLimits::kLayers, Json::object()},
      {"hidden_size", ConfigLimits::kHidden, Json::object()},
      {"intermediate_size", ConfigLimits::kIntermediate, Json::object()},
      {"moe_intermediate_size", ConfigLimits::kIntermediate, Json::object()},
      {"num_attention_heads", ConfigLimits::kHeads, Json::object()},
      {"num_key_value_heads", ConfigLimits::kHeads, {{"num_attention_heads", 1024}}},
      {"num_global_key_value_heads", ConfigLimits::kHeads, {{"num_attention_heads", 1024}}},
      {"head_dim", ConfigLimits::kHeadDim, Json::object()},
      {"global_head_dim", ConfigLimits::kHeadDim, Json::object()},
      {"num_experts", ConfigLimits::kExperts, Json::object()},
      {"top_k_experts", ConfigLimits::kTopK, {{"num_experts", 16384}}},
      {"vocab_size", ConfigLimits::kVocab, Json::object()},
      {"sliding_window", ConfigLimits::kSlidingWindow, Json::object()},
  };
}

TEST(ConfigLimits, EachSizeIsRefusedPastItsLimitInOneLineNamingFileFieldValueAndLimit) {
  for (const Bounded& b : bounded_fields()) {
    Json over = tiny();
    over.update(b.companions);
    over[b.field] = b.limit + 1;
    const std::string msg = refusal(over);
    EXPECT_EQ(msg, fmt::format("cfg.json: field '{}' is {}, above tprobe's limit of {} "
                               "(docs/inspect.md#limits)",
                               b.field, b.limit + 1, b.limit))
        << b.field;
  }
}

TEST(ConfigLimits, EachSizeAtItsLimitIsAccepted) {
  for (const Bounded& b : bounded_fields()) {
    Json at = tiny();
    at.update(b.companions);
    at[b.field] = b.limit;
    EXPECT_EQ(refusal(at), "") << b.field;
    const ModelConfig c = parse_config_json(at, "cfg.json").config;
    if (std::string(b.field) == "num_hidden_layers") {
      EXPECT_EQ(c.num_layers, b.limit);
      EXPECT_EQ(static_cast<int64_t>(c.layer_types.size()), b.limit);
    }
  }
}

TEST(ConfigLimits, AbsurdLayerCountsWithoutLayerTypesAreRefusedAtOnce) {
  // The reproductions: 10^6 to 2^62 layers and no layer_types (the default pattern was
  // built one entry per layer), plus INT64_MAX, which it does not name.
  for (int64_t layers : {int64_t{1000000}, int64_t{1000000000}, int64_t{1} << 62, INT64_MAX}) {
    Json doc = tiny();
    doc["num_hidden_layers"] = layers;
    const auto t0 = std::chrono::steady_clock::now();
    const std::string msg = refusal(doc);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(msg.find(fmt::format("field 'num_hidden_layers' is {}, above tprobe's limit of 1024",
                                   layers)),
              std::string::npos)
        << msg;
    EXPECT_LT(s, 1.0) << layers;
  }
}

TEST(ConfigLimits, PerLayerOverridesAreBoundedToo) {
  Json doc = tiny();
  doc["per_layer_config"] = {{"1", {{"num_key_value_heads", 1025}}}};
  EXPECT_NE(refusal(doc).find("field 'per_layer_config[\"1\"].num_key_value_heads' is 1025, above "
                              "tprobe's limit of 1024"),
            std::string::npos)
      << refusal(doc);
  doc["per_layer_config"] = {{"1", {{"head_dim", 8192}}}};
  EXPECT_NE(refusal(doc).find("'per_layer_config[\"1\"].head_dim' is 8192, above tprobe's limit "
                              "of 4096"),
            std::string::npos)
      << refusal(doc);
  doc["per_layer_config"] = {{"1", {{"head_dim", 4096}}}};  // at the limit: accepted
  EXPECT_EQ(refusal(doc), "");
}

TEST(ConfigLimits, AnOddHeadDimIsRefusedBeforeAnyModelIsBuilt) {
  struct Case {
    const char* what;
    Json set;
    const char* field;
    int64_t value;
  };
  const std::vector<Case> cases = {
      {"sliding head_dim 15 (the issue's)", {{"head_dim", 15}}, "head_dim", 15},
      {"full layers' global_head_dim 33", {{"global_head_dim", 33}}, "global_head_dim", 33},
      {"a per-layer override 17",
       {{"per_layer_config", {{"2", {{"head_dim", 17}}}}}},
       "per_layer_config[\"2\"].head_dim",
       17},
      {"head_dim 1", {{"head_dim", 1}}, "head_dim", 1},
  };
  for (const Case& c : cases) {
    Json doc = tiny();
    doc.update(c.set);
    EXPECT_EQ(refusal(doc),
              fmt::format("cfg.json: field '{}' is {}: tprobe's attention needs an even head dim "
                          "(rotary position embedding rotates the two halves of each head)",
                          c.field, c.value))
        << c.what;
  }
  // Controls: even head dims, also ones no real model has, are accepted.
  for (int64_t d : {2, 14, 18, 4096}) {
    Json doc = tiny();
    doc["head_dim"] = d;
    doc["global_head_dim"] = d;
    EXPECT_EQ(refusal(doc), "") << d;
  }
}

TEST(ConfigLimits, ParameterBytesThatWouldWrapAreRefusedNotWrapped) {
  // Every size within its limit, all at once: 1,024 layers of 16,384 experts of width 2^20 on
  // hidden 131,072 are 2^62.6 parameters, past 64 bits at 8 bytes each.
  Json doc = tiny();
  doc["num_hidden_layers"] = ConfigLimits::kLayers;
  doc["num_experts"] = ConfigLimits::kExperts;
  doc["moe_intermediate_size"] = ConfigLimits::kIntermediate;
  doc["hidden_size"] = ConfigLimits::kHidden;
  EXPECT_NE(refusal(doc).find("cfg.json: the model's parameter bytes do not fit in 64 bits"),
            std::string::npos)
      << refusal(doc);
  // Control: one layer of the same is 1.5 * 2^52 parameters, 2^55.6 bytes: accepted.
  doc["num_hidden_layers"] = 1;
  EXPECT_EQ(refusal(doc), "");
}

TEST(ConfigLimits, FlopsLoraCountAtTheLimitsIsExactNotWrapped) {
  // The tiny model at hidden 131,072 (the limit) and LoRA rank 2^20 (the largest accepted):
  // per sliding layer the seven modules have in + out = 7H + 480 features, per full layer (no
  // v_proj, 1 kv head of 32, 4 query heads of 32) 6H + 576; four sliding and two full layers.
  Json doc = tiny();
  doc["hidden_size"] = ConfigLimits::kHidden;
  doc["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention",
                        "sliding_attention", "sliding_attention", "full_attention"};
  const ModelConfig c = parse_config_json(doc, "cfg.json").config;
  FlopsRequest q;
  q.batch = 1;
  q.width = 16;
  q.lora_targets = linear_module_names();
  q.lora_rank = int64_t{1} << 20;
  const FlopsReport rep = count_flops(c, q);
  int64_t params = 0;
  for (const LoraModules& m : rep.lora) params += m.trainable_params;
  const int64_t h = ConfigLimits::kHidden;
  EXPECT_EQ(params, (4 * (7 * h + 480) + 2 * (6 * h + 576)) * q.lora_rank);
}

TEST(ConfigLimits, TheModelPlanCountsAdaptersAndTheirGradients) {
  // The tiny model at rank 2^20, fp32 adapters: (4 (7·64 + 480) + 2 (6·64 + 576)) = 5,632
  // features, so 5,632 · 2^20 parameters, 4 bytes each, twice (weights and gradients).
  const ModelConfig c = embedded_model("gemma4-tiny");
  ModelPlanRequest q;
  q.dtype_bytes = 4;
  q.lora_targets = linear_module_names();
  q.lora_rank = int64_t{1} << 20;
  const ModelPlan plan = plan_model(c, q);
  EXPECT_EQ(plan.lora_modules, 4 * 7 + 2 * 6);
  EXPECT_DOUBLE_EQ(plan.adapter_bytes, 5632.0 * 1048576 * 4);
  EXPECT_DOUBLE_EQ(plan.adapter_grad_bytes, plan.adapter_bytes);
  MemoryLimit limit{int64_t{1} << 30, "the test's limit"};
  const std::string why = model_refusal(plan, q.lora_rank, limit);
  EXPECT_NE(why.find("of LoRA adapters (40 modules at rank 1048576) and 22.00 GiB of their "
                     "gradients), above the test's limit (1.00 GiB); nothing was allocated"),
            std::string::npos)
      << why;
  // Control: rank 8 fits the same limit.
  q.lora_rank = 8;
  EXPECT_EQ(model_refusal(plan_model(c, q), q.lora_rank, limit), "");
}

}  // namespace
}  // namespace tprobe::core
