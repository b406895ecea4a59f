// Checkpoint directories (single, sharded, text-only), tensor layout, and the config cross-check.
#include "tprobe/core/gemma4/checkpoint.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <algorithm>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "support/synthetic_checkpoint.hpp"
#include "test_paths.hpp"
#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"

namespace tprobe::core {
namespace {

using testing_support::SyntheticOptions;
using testing_support::temp_dir;
using testing_support::write_checkpoint;
using testing_support::write_synthetic_checkpoint;

std::string error_of_open(const std::string& dir) {
  try {
    Checkpoint::open(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_open_error(const std::string& dir, std::vector<std::string> needles) {
  std::string msg = error_of_open(dir);
  ASSERT_FALSE(msg.empty()) << "opened " << dir;
  for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << n << " in: " << msg;
}

bool has_field(const std::vector<Disagreement>& ds, const std::string& field,
               const std::string& tensor_part) {
  for (const auto& d : ds) {
    if (d.field == field && d.tensor.find(tensor_part) != std::string::npos) return true;
  }
  return false;
}

TEST(Gemma4Tensors, Layout26bHasPublishedCountsAndShapes) {
  std::vector<TensorMeta> ts = expected_text_tensors(embedded_model("gemma4-26b-a4b"));
  // Sliding layers 22 tensors, full layers 21 (no v_proj): 25*22 + 5*21 + 2 = 657.
  EXPECT_EQ(ts.size(), 657u);
  std::map<std::string, std::vector<int64_t>> shape;
  for (const auto& t : ts) shape[t.name] = t.shape;
  const std::string p = "model.language_model.";
  EXPECT_EQ(shape[p + "embed_tokens.weight"], (std::vector<int64_t>{262144, 2816}));
  EXPECT_EQ(shape[p + "layers.0.self_attn.q_proj.weight"], (std::vector<int64_t>{4096, 2816}));
  EXPECT_EQ(shape[p + "layers.0.self_attn.k_proj.weight"], (std::vector<int64_t>{2048, 2816}));
  EXPECT_EQ(shape[p + "layers.5.self_attn.q_proj.weight"], (std::vector<int64_t>{8192, 2816}));
  EXPECT_EQ(shape[p + "layers.5.self_attn.k_proj.weight"], (std::vector<int64_t>{1024, 2816}));
  EXPECT_EQ(shape[p + "layers.5.self_attn.o_proj.weight"], (std::vector<int64_t>{2816, 8192}));
  EXPECT_EQ(shape.count(p + "layers.5.self_attn.v_proj.weight"), 0u);
  EXPECT_EQ(shape[p + "layers.5.self_attn.q_norm.weight"], (std::vector<int64_t>{512}));
  EXPECT_EQ(shape[p + "layers.7.experts.gate_up_proj"], (std::vector<int64_t>{128, 1408, 2816}));
  EXPECT_EQ(shape[p + "layers.7.experts.down_proj"], (std::vector<int64_t>{128, 2816, 704}));
  EXPECT_EQ(shape[p + "layers.7.router.proj.weight"], (std::vector<int64_t>{128, 2816}));
  EXPECT_EQ(shape[p + "layers.7.layer_scalar"], (std::vector<int64_t>{1}));
  EXPECT_EQ(shape.count("lm_head.weight"), 0u);
  EXPECT_EQ(expected_text_tensors(embedded_model("gemma4-26b-a4b"), "model.")[0].name,
            "model.embed_tokens.weight");
}

TEST(Gemma4Tensors, LayoutOrderRolesAndLinearModules) {
  const ModelConfig c = embedded_model("gemma4-26b-a4b");
  std::vector<TextTensor> layout = text_tensor_layout(c, "");
  // HF's named_parameters order: embedding first, final norm last.
  EXPECT_EQ(layout.front().meta.name, "embed_tokens.weight");
  EXPECT_EQ(layout.front().role, TensorRole::kEmbedTokens);
  EXPECT_EQ(layout.back().meta.name, "norm.weight");
  EXPECT_EQ(layout.back().role, TensorRole::kFinalNorm);
  EXPECT_EQ(layout.back().layer, -1);
  for (const auto& t : layout) {
    if (t.layer < 0) continue;
    EXPECT_EQ(t.meta.name.rfind(fmt::format("layers.{}.", t.layer), 0), 0u) << t.meta.name;
  }
  // Linear modules: all seven on a sliding layer, no v_proj on a key=value full layer, and
  // their shapes are the layout's [out, in].
  std::map<std::string, std::vector<int64_t>> shape;
  for (const auto& t : layout) shape[t.meta.name] = t.meta.shape;
  for (int64_t layer : {0, 5}) {
    std::vector<std::string> names;
    for (const LinearModule& m : layer_linear_modules(c, layer)) {
      names.push_back(m.target);
      EXPECT_EQ(shape[fmt::format("layers.{}.{}.weight", layer, m.path)],
                (std::vector<int64_t>{m.out_features, m.in_features}))
          << m.path;
    }
    std::vector<std::string> want = linear_module_names();
    if (layer == 5) want.erase(std::find(want.begin(), want.end(), "v_proj"));
    EXPECT_EQ(names, want) << "layer " << layer;
  }
  EXPECT_EQ(default_lora_targets(), "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj");
  // An untied head is listed last, outside the prefix.
  ModelConfig untied = c;
  untied.tie_word_embeddings = false;
  EXPECT_EQ(text_tensor_layout(untied).back().meta.name, "lm_head.weight");
}

TEST(Gemma4Tensors, DetectPrefix) {
  EXPECT_EQ(detect_text_prefix({"model.language_model.layers.0.x", "model.vision_tower.y"}),
            "model.language_model.");
  EXPECT_EQ(detect_text_prefix({"model.layers.0.x", "lm_head.weight"}), "model.");
  EXPECT_THROW(detect_text_prefix({"transformer.h.0.attn"}), Error);
}

TEST(Checkpoint, TinySingleFileOpensAndAgrees) {
  std::string dir = temp_dir();
  SyntheticOptions opt;
  opt.fill = true;
  write_synthetic_checkpoint(dir, embedded_model("gemma4-tiny"), opt);
  Checkpoint ck = Checkpoint::open(dir + "/");
  EXPECT_EQ(ck.dir(), dir);
  EXPECT_FALSE(ck.sharded());
  EXPECT_EQ(ck.file_count(), 1u);
  EXPECT_EQ(ck.text_prefix(), "model.language_model.");
  // 4 sliding layers * 22 + 2 full * 21 + embedding + norm = 132.
  EXPECT_EQ(ck.tensor_count(), 132u);
  EXPECT_EQ(ck.config().hidden_size, 64);
  EXPECT_TRUE(ck.config_info().multimodal);
  EXPECT_TRUE(cross_check(ck.config(), ck.tensors(), ck.text_prefix()).empty());
  // embed [512, 64] f32 = 131072 bytes, filled with (i*7 + name length) & 0xff.
  const std::string embed = "model.language_model.embed_tokens.weight";
  const std::vector<std::byte> bytes = ck.read(embed);
  ASSERT_EQ(bytes.size(), 512u * 64u * 4u);
  EXPECT_EQ(bytes[3], std::byte{static_cast<unsigned char>((3 * 7 + embed.size()) & 0xff)});
  EXPECT_EQ(ck.tensor(embed).dtype, DType::kF32);
  EXPECT_EQ(ck.file_of(embed).path(), dir + "/model.safetensors");
  EXPECT_EQ(ck.find("nope"), nullptr);
  EXPECT_THROW(ck.read("nope"), Error);
  EXPECT_TRUE(ck.warnings().empty());
}

TEST(Checkpoint, ShardedAndTextOnlyForms) {
  for (bool multimodal : {true, false}) {
    std::string dir = temp_dir();
    SyntheticOptions opt;
    opt.shards = 3;
    opt.multimodal = multimodal;
    opt.fill = true;
    write_synthetic_checkpoint(dir, embedded_model("gemma4-tiny"), opt);
    Checkpoint ck = Checkpoint::open(dir);
    EXPECT_TRUE(ck.sharded());
    EXPECT_EQ(ck.file_count(), 3u);
    EXPECT_EQ(ck.tensor_count(), 132u);
    EXPECT_EQ(ck.text_prefix(), multimodal ? "model.language_model." : "model.");
    EXPECT_EQ(ck.config_info().multimodal, multimodal);
    EXPECT_TRUE(cross_check(ck.config(), ck.tensors(), ck.text_prefix()).empty());
    EXPECT_TRUE(ck.warnings().empty()) << ck.warnings().front();
    uint64_t sum = 0;
    for (const auto& t : ck.tensors()) sum += t.nbytes();
    EXPECT_EQ(ck.total_bytes(), sum);
    // Data of the last tensor lives in the last shard, read from that file.
    const std::string last = std::string(ck.text_prefix()) + "layers.5.layer_scalar";
    EXPECT_EQ(ck.file_of(last).path(), dir + "/model-00003-of-00003.safetensors");
    const std::vector<std::byte> bytes = ck.read(last);
    ASSERT_EQ(bytes.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(bytes[i], std::byte{static_cast<unsigned char>((i * 7 + last.size()) & 0xff)});
    }
  }
}

TEST(Checkpoint, PerLayerConfigFormCheckpointAgrees) {
  std::string dir = temp_dir();
  SyntheticOptions opt;
  opt.form = ConfigJsonForm::kMultimodalPerLayer;
  write_synthetic_checkpoint(dir, embedded_model("gemma4-tiny"), opt);
  Checkpoint ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.config_info().per_layer_config_form);
  EXPECT_TRUE(cross_check(ck.config(), ck.tensors(), ck.text_prefix()).empty());
}

TEST(CrossCheck, ReportsEachKindOfDisagreement) {
  const ModelConfig tiny = embedded_model("gemma4-tiny");
  std::vector<TensorMeta> tensors = expected_text_tensors(tiny);
  const std::string p = "model.language_model.";

  ModelConfig head = tiny;
  head.global_head_dim = 48;  // checkpoint's full layers have q_norm 32
  auto ds = cross_check(head, tensors, p);
  EXPECT_TRUE(has_field(ds, "global_head_dim", "layers.2.self_attn.q_norm"));
  EXPECT_TRUE(has_field(ds, "global_head_dim", "layers.5.self_attn.q_norm"));

  ModelConfig kv = tiny;
  kv.num_global_kv_heads = 2;  // checkpoint's k_proj on full layers has 1 head of 32
  ds = cross_check(kv, tensors, p);
  ASSERT_TRUE(has_field(ds, "num_global_key_value_heads", "layers.2.self_attn.k_proj"));
  bool said_one_head = false;
  for (const auto& d : ds)
    said_one_head |= d.message.find("1 kv heads of dim 32") != std::string::npos;
  EXPECT_TRUE(said_one_head);

  ModelConfig no_keqv = tiny;
  no_keqv.attention_k_eq_v = false;  // config expects v_proj on the full layers
  ds = cross_check(no_keqv, tensors, p);
  EXPECT_TRUE(has_field(ds, "attention_k_eq_v", "layers.2.self_attn.v_proj"));
  EXPECT_TRUE(has_field(ds, "attention_k_eq_v", "layers.5.self_attn.v_proj"));

  std::vector<TensorMeta> with_v = tensors;
  with_v.push_back({p + "layers.2.self_attn.v_proj.weight", DType::kF32, {32, 64}});
  ds = cross_check(tiny, with_v, p);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].field, "attention_k_eq_v");

  ModelConfig experts = tiny;
  experts.num_experts = 16;
  ds = cross_check(experts, tensors, p);
  EXPECT_TRUE(
      has_field(ds, "num_experts / moe_intermediate_size", "layers.0.experts.gate_up_proj"));
  EXPECT_TRUE(has_field(ds, "num_experts / moe_intermediate_size", "layers.0.experts.down_proj"));

  std::vector<TensorMeta> ple = tensors;
  ple.push_back({p + "embed_tokens_per_layer.weight", DType::kF32, {512, 6 * 8}});
  ds = cross_check(tiny, ple, p);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].field, "hidden_size_per_layer_input");

  std::vector<TensorMeta> missing(tensors.begin() + 1, tensors.end());
  ds = cross_check(tiny, missing, p);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].tensor, p + "embed_tokens.weight");
  EXPECT_NE(ds[0].message.find("missing"), std::string::npos);

  ModelConfig fewer = tiny;
  fewer.num_layers = 5;
  fewer.layer_types.pop_back();
  ds = cross_check(fewer, tensors, p);
  EXPECT_TRUE(has_field(ds, "num_hidden_layers", "layers.5."));

  ModelConfig dense = tiny;
  dense.enable_moe_block = false;  // the checkpoint has experts and routers
  ds = cross_check(dense, tensors, p);
  EXPECT_TRUE(has_field(ds, "enable_moe_block", "layers.0.experts.gate_up_proj"));
  EXPECT_TRUE(has_field(ds, "enable_moe_block", "layers.0.router.proj.weight"));

  // Non-text tensors are not the decoder's business.
  std::vector<TensorMeta> vision = tensors;
  vision.push_back({"model.vision_tower.std_bias", DType::kBF16, {8}});
  EXPECT_TRUE(cross_check(tiny, vision, p).empty());
}

TEST(CheckpointBroken, DirectoryLevelErrors) {
  std::string dir = temp_dir();
  expect_open_error(dir + "/nope", {"nope", "not a checkpoint directory"});
  expect_open_error(dir, {"no config.json"});
  write_file_atomic(dir + "/config.json", to_config_json(embedded_model("gemma4-tiny")).dump());
  expect_open_error(dir, {"model.safetensors.index.json", "model.safetensors"});
  write_file_atomic(dir + "/config.json", "{\"text_config\": ");
  expect_open_error(dir, {dir + "/config.json", "not valid JSON"});
}

TEST(CheckpointBroken, BrokenShardNamesTheShard) {
  std::string dir = temp_dir();
  write_synthetic_checkpoint(dir, embedded_model("gemma4-tiny"));
  std::string path = dir + "/model.safetensors";
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  expect_open_error(dir, {path});
}

TEST(CheckpointBroken, IndexInconsistencies) {
  const ModelConfig tiny = embedded_model("gemma4-tiny");
  auto fresh = [&]() {
    std::string dir = temp_dir();
    SyntheticOptions opt;
    opt.shards = 2;
    write_synthetic_checkpoint(dir, tiny, opt);
    return dir;
  };
  auto edit_index = [](const std::string& dir, const std::function<void(Json&)>& f) {
    std::ifstream in(dir + "/model.safetensors.index.json");
    Json idx = Json::parse(in);
    f(idx);
    write_file_atomic(dir + "/model.safetensors.index.json", idx.dump());
  };
  const std::string embed = "model.language_model.embed_tokens.weight";
  const std::string shard1 = "model-00001-of-00002.safetensors";
  const std::string shard2 = "model-00002-of-00002.safetensors";

  std::string d = fresh();
  edit_index(d, [&](Json& i) { i["weight_map"]["model.language_model.ghost"] = shard1; });
  expect_open_error(d, {"model.language_model.ghost", "has no such tensor"});

  d = fresh();
  edit_index(d, [&](Json& i) { i["weight_map"].erase(embed); });
  expect_open_error(d, {embed, "not in the weight_map"});

  d = fresh();
  edit_index(d, [&](Json& i) { i["weight_map"][embed] = shard2; });
  expect_open_error(d, {embed, shard2});

  d = fresh();
  edit_index(d, [&](Json& i) { i["weight_map"][embed] = "model-00009-of-00009.safetensors"; });
  expect_open_error(d, {"model-00009-of-00009.safetensors", "does not exist"});

  d = fresh();
  edit_index(d, [&](Json& i) { i["weight_map"][embed] = "../elsewhere.safetensors"; });
  expect_open_error(d, {"not a file name inside the checkpoint"});

  d = fresh();
  edit_index(d, [&](Json& i) { i["weight_map"] = Json::array(); });
  expect_open_error(d, {"weight_map"});

  // The same tensor in both shards.
  d = fresh();
  write_safetensors(d + "/" + shard2, {{{embed, DType::kF32, {512, 64}}, nullptr}});
  expect_open_error(d, {embed, "two shards"});

  // A tensor listed twice in the weight_map (JSON duplicate key).
  d = fresh();
  {
    std::ifstream in(d + "/model.safetensors.index.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string entry = "\"" + embed + "\": \"" + shard1 + "\"";
    std::size_t at = text.find("\"" + embed + "\"");
    ASSERT_NE(at, std::string::npos);
    text.insert(at, entry + ", ");
    write_file_atomic(d + "/model.safetensors.index.json", text);
  }
  expect_open_error(d, {embed, "twice"});

  // total_size disagreeing is a warning, not an error.
  d = fresh();
  edit_index(d, [&](Json& i) { i["metadata"]["total_size"] = 12345; });
  Checkpoint ck = Checkpoint::open(d);
  ASSERT_EQ(ck.warnings().size(), 1u);
  EXPECT_NE(ck.warnings()[0].find("12345"), std::string::npos);
}

// Issue 46: a shard that shrinks after the checkpoint was opened (headers checked) is "changed
// while it was read" when its bytes are read, never a SIGBUS; the other shards still read.
TEST(Checkpoint, AShardCutShortAfterOpenIsAChangedFileError) {
  std::string dir = temp_dir();
  SyntheticOptions opt;
  opt.shards = 3;
  opt.fill = true;
  write_synthetic_checkpoint(dir, embedded_model("gemma4-tiny"), opt);
  Checkpoint ck = Checkpoint::open(dir);
  const std::string last = std::string(ck.text_prefix()) + "layers.5.layer_scalar";
  const std::string shard = ck.file_of(last).path();
  const std::vector<std::byte> before = ck.read(last);
  ASSERT_EQ(::truncate(shard.c_str(), static_cast<off_t>(ck.file_of(last).data_start())), 0);
  try {
    ck.read(last);
    ADD_FAILURE() << "read a tensor of a truncated shard";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(shard + " changed while it was read", 0), 0u) << e.what();
  }
  // Negative control: a tensor of an untouched shard reads as before.
  const std::string embed = std::string(ck.text_prefix()) + "embed_tokens.weight";
  ASSERT_NE(ck.file_of(embed).path(), shard);
  const std::vector<std::byte> bytes = ck.read(embed);
  EXPECT_EQ(bytes.size(), ck.tensor(embed).nbytes());
  EXPECT_EQ(bytes[3], std::byte{static_cast<unsigned char>((3 * 7 + embed.size()) & 0xff)});
  EXPECT_EQ(before.size(), 4u);
}

}  // namespace
}  // namespace tprobe::core
