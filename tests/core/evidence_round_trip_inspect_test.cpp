// Evidence read back by its own code, for inspect: a report made by the real analyze_inspect (an
// embedded model, a checkpoint on disk, with and without the memory check), written by to_json,
// read by inspect_report_from_json and written again gives the same JSON; broken results are one
// tprobe::Error naming the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/error_of.hpp"
#include "support/synthetic_checkpoint.hpp"
#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/cost/inspect.hpp"
#include "tprobe/core/cost/inspect_report.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::core {
namespace {

using testing_support::error_of;

const std::string kFixtures = TPROBE_FIXTURES_DIR;

InspectInput embedded_input(const ModelConfig& config, const std::string& targets) {
  InspectInput in;
  in.config = config;
  in.tensors = expected_text_tensors(in.config, in.prefix);
  in.embedded_name = config.name;
  in.targets = parse_target_list(targets);
  return in;
}

// The checkpoint is closed before the report is used: the report keeps values, not the checkpoint.
InspectReport checkpoint_report(const std::string& dir, const std::string& targets) {
  const Checkpoint ck = Checkpoint::open(dir);
  InspectInput in;
  in.config = ck.config();
  in.tensors = ck.tensors();
  in.prefix = ck.text_prefix();
  in.checkpoint = &ck;
  in.targets = parse_target_list(targets);
  in.rank = 8;
  return analyze_inspect(in);
}

// to_json of the report read back from to_json, in memory and through the text of a file.
void expect_round_trip(const InspectReport& r, const std::string& what) {
  const Json j = to_json(r);
  const InspectReport back = inspect_report_from_json(j, "i.json results");
  EXPECT_EQ(to_json(back).dump(), j.dump()) << what;
  const Json parsed = Json::parse(j.dump(2));
  EXPECT_EQ(to_json(inspect_report_from_json(parsed, "i.json results")).dump(), j.dump()) << what;
  // What is not in results is rebuilt as analyze_inspect made it.
  EXPECT_EQ(back.outcome, r.outcome) << what;
  ASSERT_EQ(back.diagnostics.size(), r.diagnostics.size()) << what;
  for (std::size_t i = 0; i < r.diagnostics.size(); ++i) {
    EXPECT_EQ(back.diagnostics[i].severity, r.diagnostics[i].severity) << what << " " << i;
    EXPECT_EQ(back.diagnostics[i].code, r.diagnostics[i].code) << what << " " << i;
    EXPECT_EQ(back.diagnostics[i].message, r.diagnostics[i].message) << what << " " << i;
  }
  // The fields to_json leaves out that the reader derives.
  EXPECT_EQ(back.blocks.buffer_elements, r.blocks.buffer_elements) << what;
  EXPECT_EQ(back.memory.inputs.weight_bytes, r.memory.inputs.weight_bytes) << what;
  EXPECT_EQ(back.memory.inputs.trainable_params, r.memory.inputs.trainable_params) << what;
  EXPECT_EQ(back.prefix, r.prefix) << what;
  EXPECT_EQ(back.tensor_count, r.tensor_count) << what;
  // The config fields the summary is written from, and the geometry of every layer.
  const ModelConfig& c = back.config;
  EXPECT_EQ(c.name, r.config.name) << what;
  EXPECT_EQ(c.hidden_size, r.config.hidden_size) << what;
  EXPECT_EQ(c.num_layers, r.config.num_layers) << what;
  EXPECT_EQ(c.num_experts, r.config.num_experts) << what;
  EXPECT_EQ(c.vocab_size, r.config.vocab_size) << what;
  EXPECT_EQ(c.attention_k_eq_v, r.config.attention_k_eq_v) << what;
  EXPECT_EQ(c.dtype, r.config.dtype) << what;
  EXPECT_EQ(c.layer_types, r.config.layer_types) << what;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    EXPECT_EQ(c.layer(i).head_dim, r.config.layer(i).head_dim) << what << " layer " << i;
    EXPECT_EQ(c.layer(i).num_kv_heads, r.config.layer(i).num_kv_heads) << what << " layer " << i;
    EXPECT_EQ(c.layer(i).has_v_proj, r.config.layer(i).has_v_proj) << what << " layer " << i;
  }
  // The tables are made from the report read back as from the one analyzed.
  const std::vector<Table> a = inspect_tables(r), b = inspect_tables(back);
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i].render(), a[i].render()) << what;
}

TEST(InspectFromJson, EmbeddedModelsRoundTrip) {
  for (const char* name : {"gemma4-tiny", "gemma4-26b-a4b"}) {
    const InspectReport r =
        analyze_inspect(embedded_input(embedded_model(name), default_lora_targets()));
    ASSERT_FALSE(r.source.has_value());
    ASSERT_FALSE(r.lora.missing.empty()) << name;  // v_proj on the key=value full layers
    expect_round_trip(r, name);
    const InspectReport back = inspect_report_from_json(to_json(r), "i.json results");
    EXPECT_FALSE(back.source.has_value()) << name;
    EXPECT_EQ(back.embedded_name, name);
    EXPECT_EQ(back.lora.modules.size(), r.lora.modules.size()) << name;
    EXPECT_EQ(back.lora.trainable_params, r.lora.trainable_params) << name;
    EXPECT_EQ(back.quantization.untouched_expert_params, r.quantization.untouched_expert_params)
        << name;
    EXPECT_FALSE(back.memory_check.has_value()) << name;
    EXPECT_EQ(back.outcome, Outcome::kOk) << name;
  }
  // Targets that match nothing, or only the fused experts.
  const InspectReport odd = analyze_inspect(
      embedded_input(embedded_model("gemma4-tiny"), "gate_up_proj,c_attn,self_attn.q_proj"));
  ASSERT_EQ(odd.lora.missing.size(), 2u);
  expect_round_trip(odd, "odd targets");
}

// A config with per-layer overrides comes back with the same geometry, the overrides as such.
TEST(InspectFromJson, PerLayerOverridesRoundTrip) {
  ModelConfig c = embedded_model("gemma4-tiny");
  c.per_layer[1].head_dim = c.head_dim * 2;
  c.per_layer[2].num_key_value_heads = 1;
  const InspectReport r = analyze_inspect(embedded_input(c, "q_proj,k_proj,o_proj"));
  expect_round_trip(r, "per-layer overrides");
  const InspectReport back = inspect_report_from_json(to_json(r), "i.json results");
  EXPECT_EQ(back.config.head_dim, c.head_dim);
  EXPECT_EQ(back.config.num_kv_heads, c.num_kv_heads);
  EXPECT_EQ(back.config.per_layer.count(1), 1u);
  EXPECT_EQ(back.config.per_layer.count(0), 0u);
}

TEST(InspectFromJson, MemoryCheckRoundTrips) {
  const std::string fixture = kFixtures + "/profile-h200-ce-chunked-2x2048.json";
  std::ifstream f(fixture);
  std::stringstream text;
  text << f.rdbuf();
  const Json measured = Json::parse(text.str())["results"];
  for (int64_t width : {2048, 4096}) {
    InspectInput in = embedded_input(embedded_model("gemma4-26b-a4b"), default_lora_targets());
    in.memory.batch = 2;
    in.memory.width = width;
    in.measured = &measured;
    in.measured_source = fixture;
    const InspectReport r = analyze_inspect(in);
    ASSERT_TRUE(r.memory_check.has_value());
    EXPECT_EQ(r.memory_check->done, width == 2048);
    expect_round_trip(r, "measured at width " + std::to_string(width));
    const InspectReport back = inspect_report_from_json(to_json(r), "i.json results");
    ASSERT_TRUE(back.memory_check.has_value());
    EXPECT_EQ(back.memory_check->done, r.memory_check->done);
    EXPECT_EQ(back.memory_check->why_not, r.memory_check->why_not);
    EXPECT_EQ(back.memory_check->device, r.memory_check->device);
    ASSERT_EQ(back.memory_check->rows.size(), r.memory_check->rows.size());
    for (std::size_t i = 0; i < r.memory_check->rows.size(); ++i) {
      EXPECT_EQ(back.memory_check->rows[i].estimated, r.memory_check->rows[i].estimated) << i;
      EXPECT_EQ(back.memory_check->rows[i].measured, r.memory_check->rows[i].measured) << i;
    }
  }
  // Not a profile evidence: not compared, and said so.
  InspectInput in = embedded_input(embedded_model("gemma4-tiny"), default_lora_targets());
  const Json empty = Json::object();
  in.measured = &empty;
  in.measured_source = "empty.json";
  const InspectReport r = analyze_inspect(in);
  ASSERT_TRUE(r.memory_check.has_value());
  EXPECT_FALSE(r.memory_check->done);
  expect_round_trip(r, "not a profile evidence");
}

TEST(InspectFromJson, CheckpointsRoundTrip) {
  // The HF tiny fixture: one model.safetensors.
  const InspectReport hf = checkpoint_report(kFixtures + "/gemma4-tiny-hf", default_lora_targets());
  ASSERT_TRUE(hf.source.has_value());
  expect_round_trip(hf, "gemma4-tiny-hf");
  const InspectReport hf_back = inspect_report_from_json(to_json(hf), "i.json results");
  ASSERT_TRUE(hf_back.source.has_value());
  EXPECT_EQ(hf_back.source->dir, hf.source->dir);
  EXPECT_EQ(hf_back.source->files.size(), 1u);
  EXPECT_EQ(hf_back.source->files[0].header_bytes, hf.source->files[0].header_bytes);

  // Sharded, per_layer_config form, a vision tower and a tensor tprobe cannot compute with.
  const std::string dir = testing_support::temp_dir();
  testing_support::SyntheticOptions opt;
  opt.shards = 3;
  opt.vision_tower = true;
  opt.form = ConfigJsonForm::kMultimodalPerLayer;
  const ModelConfig tiny = embedded_model("gemma4-tiny");
  std::vector<TensorMeta> ts = testing_support::synthetic_tensors(tiny, opt);
  ts.push_back({"model.vision_tower.step_counter", DType::kI64, {1}});
  testing_support::write_checkpoint(dir, tiny, ts, opt);
  const InspectReport sharded = checkpoint_report(dir, default_lora_targets());
  ASSERT_TRUE(sharded.source.has_value());
  EXPECT_TRUE(sharded.source->sharded);
  EXPECT_EQ(sharded.source->files.size(), 3u);
  EXPECT_EQ(sharded.outcome, Outcome::kOk);
  expect_round_trip(sharded, "sharded");
  const InspectReport back = inspect_report_from_json(to_json(sharded), "i.json results");
  ASSERT_TRUE(back.source.has_value());
  EXPECT_TRUE(back.source->sharded);
  EXPECT_EQ(back.source->per_layer_config_form, sharded.source->per_layer_config_form);
  EXPECT_EQ(back.source->files[2].path, sharded.source->files[2].path);
  EXPECT_EQ(back.source->files[2].tensors, sharded.source->files[2].tensors);
  bool unsupported = false;
  for (const auto& d : back.diagnostics) unsupported |= d.code == "unsupported_dtype";
  EXPECT_TRUE(unsupported);
  std::filesystem::remove_all(dir);
}

// config.json against tensors it does not describe: the disagreements, and outcome no, come back.
TEST(InspectFromJson, DisagreementsRoundTripWithTheirOutcome) {
  const std::string dir = testing_support::temp_dir();
  const ModelConfig tiny = embedded_model("gemma4-tiny");
  testing_support::SyntheticOptions opt;
  std::vector<TensorMeta> ts = testing_support::synthetic_tensors(tiny, opt);
  bool changed = false;
  for (auto& t : ts) {
    if (t.name.find("layers.0.self_attn.q_proj.weight") == std::string::npos) continue;
    t.shape[0] += 8;
    changed = true;
  }
  ASSERT_TRUE(changed);
  testing_support::write_checkpoint(dir, tiny, ts, opt);
  const InspectReport r = checkpoint_report(dir, "q_proj");
  ASSERT_FALSE(r.disagreements.empty());
  ASSERT_EQ(r.outcome, Outcome::kNo);
  expect_round_trip(r, "disagreements");
  const InspectReport back = inspect_report_from_json(to_json(r), "i.json results");
  ASSERT_EQ(back.disagreements.size(), r.disagreements.size());
  EXPECT_EQ(back.disagreements[0].tensor, r.disagreements[0].tensor);
  EXPECT_EQ(back.disagreements[0].message, r.disagreements[0].message);
  EXPECT_EQ(back.outcome, Outcome::kNo);
  std::filesystem::remove_all(dir);
}

TEST(InspectFromJson, BrokenResultsNameTheField) {
  const std::string fixture = kFixtures + "/profile-h200-ce-chunked-2x2048.json";
  std::ifstream f(fixture);
  std::stringstream text;
  text << f.rdbuf();
  const Json measured = Json::parse(text.str())["results"];
  InspectInput in = embedded_input(embedded_model("gemma4-26b-a4b"), default_lora_targets());
  in.memory.width = 2048;
  in.measured = &measured;
  in.measured_source = fixture;
  const Json good = to_json(analyze_inspect(in));
  const Json ck = to_json(checkpoint_report(kFixtures + "/gemma4-tiny-hf", "q_proj"));
  auto read = [](const Json& j) { return inspect_report_from_json(j, "i.json results"); };

  EXPECT_ERROR_NAMES(read(Json::array()), "i.json results must be an object");
  Json j = good;
  j.erase("total_params");
  EXPECT_ERROR_NAMES(read(j), "i.json results: missing field 'total_params'");
  j = good;
  j["source"]["kind"] = "archive";
  EXPECT_ERROR_NAMES(read(j), "i.json results.source: field 'kind' must be one of");
  j = good;
  j["config"]["hidden_size"] = "wide";
  EXPECT_ERROR_NAMES(read(j), "i.json results.config: field 'hidden_size' must be an integer");
  j = good;
  j["config"]["layers"][3]["type"] = "local_attention";
  EXPECT_ERROR_NAMES(read(j), "i.json results.config layers[3]: field 'type' must be one of");
  j = good;
  j["config"]["layers"][5]["has_v_proj"] = true;
  EXPECT_ERROR_NAMES(read(j), "i.json results.config layers[5]: field 'has_v_proj' must be false");
  j = good;
  j["config"]["num_layers"] = 29;
  EXPECT_ERROR_NAMES(read(j), "field 'layers' holds 30 layer(s) for num_layers 29");
  j = good;
  j["blocks"][0]["block"] = "mlp";
  EXPECT_ERROR_NAMES(read(j), "i.json results blocks[0]: field 'block' must be one of");
  j = good;
  j["blocks"][1]["params"] = -5;
  EXPECT_ERROR_NAMES(read(j), "i.json results blocks[1]: field 'params' must be an integer in 0..");
  j = good;
  j["quantization"]["bytes_after"] = -1;
  EXPECT_ERROR_NAMES(read(j), "i.json results.quantization: field 'bytes_after'");
  j = good;
  j["quantization"]["scheme"] = "nf4_everything";
  EXPECT_ERROR_NAMES(read(j), "field 'scheme' must be one of linear_only_4bit");
  j = good;
  j["lora"]["rank"] = 0;
  EXPECT_ERROR_NAMES(read(j), "i.json results.lora: field 'rank' must be an integer in 1..");
  j = good;
  j["lora"]["module_list"][7].erase("in_features");
  EXPECT_ERROR_NAMES(read(j), "i.json results.lora module_list[7]: missing field 'in_features'");
  j = good;
  j["lora"]["modules_by_layer_type"]["full_attention"] = 2.5;
  EXPECT_ERROR_NAMES(read(j), "i.json results.lora.modules_by_layer_type: field 'full_attention'");
  j = good;
  j["memory_estimate"]["rows"][2]["bytes"] = "many";
  EXPECT_ERROR_NAMES(read(j), "i.json results.memory_estimate rows[2]: field 'bytes'");
  j = good;
  j["memory_estimate"]["width"] = 0;
  EXPECT_ERROR_NAMES(read(j),
                     "i.json results.memory_estimate: field 'width' must be an integer in 1..");
  j = good;
  j.erase("memory_check");
  EXPECT_ERROR_NAMES(read(j), "i.json results: missing field 'memory_check'");
  j = good;
  j["memory_check"]["rows"][0]["measured_bytes"] = "n/a";
  EXPECT_ERROR_NAMES(read(j), "i.json results.memory_check rows[0]: field 'measured_bytes'");
  j = good;
  j["memory_check"]["done"] = false;  // why_not is null
  EXPECT_ERROR_NAMES(read(j), "i.json results.memory_check: field 'why_not' must be a string");
  j = good;
  j["dtypes"][0]["supported"] = "yes";
  EXPECT_ERROR_NAMES(read(j), "i.json results dtypes[0]: field 'supported' must be true or false");
  j = good;
  j["cross_check"]["checked"] = true;
  EXPECT_ERROR_NAMES(read(j), "i.json results.cross_check: field 'checked' must be false");

  j = ck;
  j["source"]["files"][0].erase("header_bytes");
  EXPECT_ERROR_NAMES(read(j), "i.json results.source files[0]: missing field 'header_bytes'");
  j = ck;
  j["source"]["tensors"] = -1;
  EXPECT_ERROR_NAMES(read(j), "i.json results.source: field 'tensors' must be an integer in 0..");
  j = ck;
  j["source"]["warnings"] = "none";
  EXPECT_ERROR_NAMES(read(j), "i.json results.source: field 'warnings' must be an array");
  j = ck;
  j["cross_check"]["disagreements"] = {{{"tensor", "x"}, {"field", 3}, {"message", "m"}}};
  EXPECT_ERROR_NAMES(read(j),
                     "i.json results.cross_check disagreements[0]: field 'field' must be a string");
}

}  // namespace
}  // namespace tprobe::core
