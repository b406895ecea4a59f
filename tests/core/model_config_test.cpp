// Embedded configs and per-layer geometry resolution.
#include "tprobe/core/gemma4/model_config.hpp"

#include <gtest/gtest.h>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

TEST(ModelConfig, Gemma26bGeometry) {
  ModelConfig c = embedded_model("gemma4-26b-a4b");
  ASSERT_EQ(c.layer_types.size(), 30u);
  EXPECT_EQ(c.count_layers(LayerType::kFull), 5);
  EXPECT_EQ(c.count_layers(LayerType::kSliding), 25);
  for (int64_t i : {5, 11, 17, 23, 29}) {
    LayerGeometry g = c.layer(i);
    EXPECT_EQ(g.type, LayerType::kFull) << i;
    EXPECT_EQ(g.head_dim, 512);
    EXPECT_EQ(g.num_kv_heads, 2);
    EXPECT_FALSE(g.has_v_proj);
  }
  LayerGeometry s = c.layer(0);
  EXPECT_EQ(s.type, LayerType::kSliding);
  EXPECT_EQ(s.head_dim, 256);
  EXPECT_EQ(s.num_kv_heads, 8);
  EXPECT_TRUE(s.has_v_proj);
  EXPECT_THROW(c.layer(30), Error);
  EXPECT_THROW(c.layer(-1), Error);
}

TEST(ModelConfig, PerLayerOverrideWins) {
  ModelConfig c = embedded_model("gemma4-tiny");
  c.per_layer[2].head_dim = 48;
  EXPECT_EQ(c.layer(2).head_dim, 48);
  EXPECT_EQ(c.layer(2).num_kv_heads, 1);
  EXPECT_EQ(c.layer(5).head_dim, 32);
}

TEST(ModelConfig, UnknownNameListsKnownOnes) {
  try {
    embedded_model("gemma4-9000b");
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("gemma4-9000b"), std::string::npos);
    EXPECT_NE(msg.find("gemma4-26b-a4b"), std::string::npos);
  }
}

}  // namespace
}  // namespace tprobe::core
