// Loading checkpoints written from a model's own tensors (single and sharded, both prefixes,
// vision tensors skipped), broken checkpoints, and PEFT adapter round trips.
#include "tprobe/model/loader.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ftw.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "temp_dir.hpp"

namespace tprobe::model {
namespace {

using testing::TempDir;

using torch::Tensor;


ModelOptions fp32() {
  ModelOptions o;
  o.dtype = torch::kFloat;
  return o;
}

Gemma4Model source_model() {
  auto m = Gemma4Model::random(core::embedded_model("gemma4-tiny"), fp32(), 41);
  torch::manual_seed(42);
  torch::NoGradGuard g;
  for (auto& [name, t] : m.parameters()) {
    if (t->dim() == 1) t->copy_(torch::rand_like(*t) + 0.5);
  }
  return m;
}

struct WriteOptions {
  std::string prefix = core::kMultimodalTextPrefix;
  int shards = 1;
  std::string drop;     // leave this tensor out
  std::string reshape;  // write this tensor with one extra row
  bool vision = false;  // add a non-text tensor that must be skipped
};

void write_model(Gemma4Model& m, const std::string& dir, const WriteOptions& w) {
  auto form = w.prefix == core::kTextOnlyPrefix ? core::ConfigJsonForm::kTextOnlyFlat
                                                : core::ConfigJsonForm::kMultimodalPerLayer;
  core::write_file_atomic(dir + "/config.json", core::to_config_json(m.config(), form).dump(2));
  std::vector<Tensor> keep;
  std::vector<std::vector<core::TensorToWrite>> files(static_cast<size_t>(w.shards));
  size_t i = 0;
  for (auto& [name, t] : m.parameters()) {
    if (name == w.drop) continue;
    Tensor data = t->contiguous();
    if (name == w.reshape) data = torch::cat({data, data.narrow(0, 0, 1)});
    keep.push_back(data);
    core::TensorToWrite tw;
    tw.meta = {w.prefix + name, core::DType::kF32, data.sizes().vec()};
    tw.data = data.data_ptr();
    files[i++ % files.size()].push_back(tw);
  }
  if (w.vision) {
    keep.push_back(torch::ones({3, 5}));
    files[0].push_back({{"model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight",
                         core::DType::kF32,
                         {3, 5}},
                        keep.back().data_ptr()});
  }
  if (w.shards == 1) {
    core::write_safetensors(dir + "/model.safetensors", files[0]);
    return;
  }
  core::Json index = {{"metadata", core::Json::object()}, {"weight_map", core::Json::object()}};
  for (size_t f = 0; f < files.size(); ++f) {
    std::string shard = fmt::format("model-{:05d}-of-{:05d}.safetensors", f + 1, files.size());
    core::write_safetensors(dir + "/" + shard, files[f]);
    for (auto& tw : files[f]) index["weight_map"][tw.meta.name] = shard;
  }
  core::write_file_atomic(dir + "/model.safetensors.index.json", index.dump(2));
}

Tensor ids() {
  torch::manual_seed(43);
  return torch::randint(0, 512, {2, 20}, torch::kLong);
}

TEST(Loader, RoundTripGivesIdenticalLogitsForEveryLayout) {
  Gemma4Model src = source_model();
  torch::NoGradGuard g;
  Tensor want = src.logits(ids());
  for (const std::string prefix : {core::kMultimodalTextPrefix, core::kTextOnlyPrefix}) {
    for (int shards : {1, 3}) {
      TempDir dir;
      WriteOptions w;
      w.prefix = prefix;
      w.shards = shards;
      w.vision = prefix == core::kMultimodalTextPrefix;  // text-only conversions have no towers
      write_model(src, dir.str(), w);
      Gemma4Model loaded = load_model(core::Checkpoint::open(dir.str()), fp32());
      EXPECT_TRUE(torch::equal(loaded.logits(ids()), want)) << prefix << " shards " << shards;
    }
  }
}

TEST(Loader, ConvertsDtypeOnLoad) {
  Gemma4Model src = source_model();
  TempDir dir;
  write_model(src, dir.str(), {});
  ModelOptions o = fp32();
  o.dtype = torch::kBFloat16;
  Gemma4Model loaded = load_model(core::Checkpoint::open(dir.str()), o);
  EXPECT_EQ(loaded.embed_tokens().scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(loaded.embed_tokens(), src.embed_tokens().to(torch::kBFloat16)));
}

TEST(Loader, FailsOnMissingTensorNamingIt) {
  Gemma4Model src = source_model();
  TempDir dir;
  WriteOptions w;
  w.drop = "layers.3.router.per_expert_scale";
  write_model(src, dir.str(), w);
  try {
    load_model(core::Checkpoint::open(dir.str()), fp32());
    FAIL() << "loaded a checkpoint with a missing tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.3.router.per_expert_scale"), std::string::npos)
        << e.what();
  }
}

TEST(Loader, FailsOnMisShapedTensorNamingIt) {
  Gemma4Model src = source_model();
  TempDir dir;
  WriteOptions w;
  w.reshape = "layers.1.mlp.up_proj.weight";
  write_model(src, dir.str(), w);
  try {
    load_model(core::Checkpoint::open(dir.str()), fp32());
    FAIL() << "loaded a mis-shaped tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.1.mlp.up_proj.weight"), std::string::npos)
        << e.what();
  }
}

TEST(Adapter, PeftRoundTripRestoresEveryTensorWithPeftNames) {
  Gemma4Model a = source_model();
  LoraConfig lora;
  lora.targets = {"q_proj", "v_proj", "down_proj"};
  lora.rank = 2;
  lora.alpha = 4;
  a.add_lora(lora, 44);
  {
    torch::NoGradGuard g;
    for (auto& [name, t] : a.lora_parameters()) t->normal_();
  }
  TempDir dir;
  save_adapter(a, dir.str());
  auto file = core::SafetensorsFile::open(dir.str() + "/adapter_model.safetensors");
  EXPECT_NE(
      file.find("base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight"),
      nullptr);
  EXPECT_EQ(
      file.find("base_model.model.model.language_model.layers.2.self_attn.v_proj.lora_A.weight"),
      nullptr)
      << "layer 2 is key=value: no v_proj, no adapter";
  EXPECT_EQ(file.tensors().size(), 2u * (6 + 4 + 6));

  Gemma4Model b = source_model();
  load_adapter(b, dir.str());
  EXPECT_EQ(b.lora().rank, 2);
  EXPECT_EQ(b.lora().alpha, 4.0);
  auto pa = a.lora_parameters(), pb = b.lora_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_TRUE(torch::equal(*pa[i].second, *pb[i].second)) << pa[i].first;
  }
}

TEST(Adapter, MissingTensorOrBadConfigIsAnError) {
  TempDir dir;
  Gemma4Model m = source_model();
  EXPECT_THROW(load_adapter(m, dir.str()), Error);  // no adapter_config.json
  core::write_file_atomic(
      dir.str() + "/adapter_config.json",
      R"({"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":["q_proj"]})");
  core::write_safetensors(dir.str() + "/adapter_model.safetensors", {});
  EXPECT_THROW(load_adapter(m, dir.str()), Error);  // tensors missing
  Gemma4Model m2 = source_model();
  core::write_file_atomic(
      dir.str() + "/adapter_config.json",
      R"({"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":"q_proj|v_proj"})");
  EXPECT_THROW(load_adapter(m2, dir.str()), Error);  // regex targets unsupported
  for (const char* variant : {R"("use_dora":true)", R"("use_rslora":true)",
                              R"("alpha_pattern":{"q_proj":16})"}) {
    Gemma4Model m3 = source_model();
    core::write_file_atomic(
        dir.str() + "/adapter_config.json",
        std::string(R"({"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":["q_proj"],)") +
            variant + "}");
    try {
      load_adapter(m3, dir.str());
      ADD_FAILURE() << variant << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("adapter_config.json"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tprobe::model
