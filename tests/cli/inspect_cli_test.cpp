// End-to-end `tprobe inspect`: embedded model, sparse 26B checkpoint with real names, a
// disagreeing config (exit 3), broken inputs (exit 1 / 2, no evidence file).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"
#include "support/synthetic_checkpoint.hpp"
#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/gemma4/config_json.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

bool has_diagnostic(const json& doc, const std::string& code) {
  for (const auto& d : doc["status"]["diagnostics"]) {
    if (d["code"] == code) return true;
  }
  return false;
}

int64_t block_params(const json& doc, const std::string& block) {
  for (const auto& b : doc["results"]["blocks"]) {
    if (b["block"] == block) return b["params"].get<int64_t>();
  }
  return -1;
}

// The numbers of docs/findings.md#f11–f12, whichever source they come from.
void expect_published(const json& doc) {
  const json& r = doc["results"];
  EXPECT_EQ(r["lora"]["modules"], 205);
  EXPECT_EQ(r["lora"]["trainable_params"], 74342400);
  EXPECT_EQ(r["lora"]["rank"], 64);
  ASSERT_EQ(r["lora"]["missing"].size(), 1u);
  EXPECT_EQ(r["lora"]["missing"][0]["target"], "v_proj");
  EXPECT_EQ(r["lora"]["missing"][0]["layers"], json::array({5, 11, 17, 23, 29}));
  EXPECT_EQ(r["quantization"]["untouched_expert_params"], 22837985280);
  EXPECT_EQ(block_params(doc, "experts"), 22837985280);
  EXPECT_EQ(r["text_params"], 25233141760);
  EXPECT_TRUE(r["memory_estimate"]["is_estimate"].get<bool>());
  EXPECT_TRUE(has_diagnostic(doc, "lora_target_absent"));
}

TEST(InspectCli, EmbeddedDefaultGivesPublishedNumbers) {
  std::string dir = make_temp_dir();
  std::string path = dir + "-inspect.json";  // not inside the input folder
  RunResult r = run_tprobe({"inspect", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(read_text(path));
  EXPECT_EQ(doc["schema"]["name"], "tprobe.inspect");
  expect_published(doc);
  EXPECT_EQ(doc["results"]["total_params"], 25233141760);
  EXPECT_EQ(doc["results"]["source"]["kind"], "embedded");
  EXPECT_FALSE(doc["results"]["cross_check"]["checked"].get<bool>());
  EXPECT_EQ(doc["invocation"]["options"]["rank"], 64);
  EXPECT_EQ(doc["invocation"]["options"]["model"], "gemma4-26b-a4b");
  EXPECT_NE(r.out.find("74,342,400"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("22,837,985,280"), std::string::npos);
  EXPECT_NE(r.out.find("ESTIMATE"), std::string::npos);
  EXPECT_NE(r.out.find("warning: target 'v_proj'"), std::string::npos);
}

// The estimate beside a profile run's memory step, recorded on the H200 (profile --ce chunked at
// 2x2,048, benchmarks/gpu/records/memfaithful/): each row's error is its own two figures', and
// the items the estimate has no row for are listed as its limits.
TEST(InspectCli, EstimateBesideAMeasuredProfile) {
  const std::string fixture =
      std::string(TPROBE_FIXTURES_DIR) + "/profile-h200-ce-chunked-2x2048.json";
  JsonRun run = run_json({"inspect", "--model", "gemma4-26b-a4b", "--batch", "2", "--width", "2048",
                          "--measured", fixture});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_NE(run.r.out.find("the ESTIMATE beside what profile's memory step measured"),
            std::string::npos);
  const json& c = run.doc["results"]["memory_check"];
  ASSERT_EQ(c["done"], true) << c.dump();
  EXPECT_EQ(c["device"], "cuda:0");
  // The measured side, read independently from the fixture.
  json prof = json::parse(read_text(fixture));
  const json* mem = nullptr;
  for (const auto& p : prof["results"]["points"]) {
    if (p["batch"] == 2 && p["width"] == 2048) mem = &p["memory"];
  }
  ASSERT_NE(mem, nullptr);
  auto item = [&](const std::string& key) -> int64_t {
    for (const auto& it : (*mem)["items"]) {
      if (it["key"] == key) return it["bytes"].get<int64_t>();
    }
    return -1;
  };
  bool weights = false, total = false, recompute = false;
  for (const auto& r : c["rows"]) {
    if (!r["estimated_bytes"].is_null() && !r["measured_bytes"].is_null()) {
      const double e = r["estimated_bytes"].get<double>(), m = r["measured_bytes"].get<double>();
      EXPECT_NEAR(r["error_ratio"].get<double>(), e / m - 1.0, 1e-12) << r.dump();
    }
    if (r["label"] == "weights (as stored)") {
      weights = true;
      EXPECT_EQ(r["measured_bytes"].get<int64_t>(), item("weights"));
    }
    if (r["label"] == "total with chunked CE") {
      total = true;
      EXPECT_EQ(r["measured_bytes"].get<int64_t>(), (*mem)["peak_allocated_bytes"].get<int64_t>());
    }
    if (r["label"] == "recompute working set") {
      recompute = true;
      EXPECT_TRUE(r["estimated_bytes"].is_null());
      EXPECT_EQ(r["measured_bytes"].get<int64_t>(), item("recompute"));
    }
  }
  EXPECT_TRUE(weights && total && recompute);
  // No point at that shape: said, not guessed.
  JsonRun other = run_json({"inspect", "--model", "gemma4-26b-a4b", "--batch", "2", "--width",
                            "4096", "--measured", fixture});
  ASSERT_EQ(other.r.exit_code, 0) << other.r.err;
  EXPECT_EQ(other.doc["results"]["memory_check"]["done"], false);
  EXPECT_NE(other.doc["results"]["memory_check"]["why_not"].get<std::string>().find("2x4096"),
            std::string::npos);
  // Another probe's evidence is refused on one line, with no evidence written.
  const std::string dir = make_temp_dir();
  RunResult wrong = run_tprobe({"inspect", "--model", "gemma4-26b-a4b", "--measured",
                                std::string(TPROBE_FIXTURES_DIR) + "/raw-memory-tiny-cuda.json",
                                "--json", dir + "/i.json"});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.err;
  EXPECT_EQ(std::count(wrong.err.begin(), wrong.err.end(), '\n'), 1) << wrong.err;
  EXPECT_FALSE(file_exists(dir + "/i.json"));
}

TEST(InspectCli, QkvoTargetsAndRank) {
  std::string dir = make_temp_dir();
  std::string path = dir + "/qkvo.json";
  RunResult r = run_tprobe({"inspect", "--targets", "q_proj,k_proj,v_proj,o_proj", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(read_text(path));
  EXPECT_EQ(doc["results"]["lora"]["modules"], 115);
  EXPECT_EQ(doc["results"]["lora"]["trainable_params"], 45957120);
  // Rank is linear: r16 is a quarter of r64.
  r = run_tprobe(
      {"inspect", "--targets", "q_proj,k_proj,v_proj,o_proj", "--rank", "16", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(read_text(path))["results"]["lora"]["trainable_params"], 45957120 / 4);
}

TEST(InspectCli, SparseShardedCheckpointWithRealNames) {
  std::string dir = make_temp_dir();
  testing_support::SyntheticOptions opt;
  opt.shards = 3;
  opt.vision_tower = true;
  testing_support::write_synthetic_checkpoint(dir, core::embedded_model("gemma4-26b-a4b"), opt);
  std::string path = dir + "-inspect.json";  // not inside the input folder
  RunResult r = run_tprobe({"inspect", "--checkpoint", dir, "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json doc = json::parse(read_text(path));
  expect_published(doc);
  EXPECT_EQ(doc["results"]["source"]["kind"], "checkpoint");
  EXPECT_EQ(doc["results"]["source"]["files"].size(), 3u);
  EXPECT_TRUE(doc["results"]["cross_check"]["checked"].get<bool>());
  EXPECT_TRUE(doc["results"]["cross_check"]["disagreements"].empty());
  EXPECT_GT(block_params(doc, "non_text"), 0);
  EXPECT_GT(doc["results"]["total_params"].get<int64_t>(), 25233141760);
  EXPECT_NE(r.out.find("agree"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(InspectCli, TextOnlyAndPerLayerConfigCheckpoints) {
  for (bool text_only : {true, false}) {
    std::string dir = make_temp_dir();
    testing_support::SyntheticOptions opt;
    opt.multimodal = !text_only;
    opt.form = core::ConfigJsonForm::kMultimodalPerLayer;  // used when multimodal
    testing_support::write_synthetic_checkpoint(dir, core::embedded_model("gemma4-26b-a4b"), opt);
    std::string path = dir + "-inspect.json";  // not inside the input folder
    RunResult r = run_tprobe({"inspect", "--checkpoint", dir, "--json", path});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    json doc = json::parse(read_text(path));
    expect_published(doc);
    EXPECT_EQ(doc["results"]["source"]["text_prefix"],
              text_only ? "model." : "model.language_model.");
    EXPECT_EQ(doc["results"]["source"]["per_layer_config_form"], !text_only);
    EXPECT_EQ(doc["results"]["total_params"], 25233141760);
    std::filesystem::remove_all(dir);
  }
}

TEST(InspectCli, DisagreeingConfigExitsThreeWithEvidence) {
  std::string dir = make_temp_dir();
  core::ModelConfig tiny = core::embedded_model("gemma4-tiny");
  testing_support::SyntheticOptions opt;
  testing_support::write_synthetic_checkpoint(dir, tiny, opt);
  core::ModelConfig wrong = tiny;
  wrong.global_head_dim = 48;
  core::write_file_atomic(dir + "/config.json", core::to_config_json(wrong).dump());
  std::string path = dir + "-inspect.json";  // not inside the input folder
  RunResult r = run_tprobe({"inspect", "--checkpoint", dir, "--json", path});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  json doc = json::parse(read_text(path));
  EXPECT_EQ(doc["status"]["outcome"], "no");
  EXPECT_FALSE(doc["results"]["cross_check"]["disagreements"].empty());
  EXPECT_NE(r.out.find("global_head_dim"), std::string::npos) << r.out;
}

TEST(InspectCli, BrokenInputsGiveTheirExitCodesAndNoEvidence) {
  std::string dir = make_temp_dir();
  testing_support::write_synthetic_checkpoint(dir, core::embedded_model("gemma4-tiny"));
  ASSERT_EQ(::truncate((dir + "/model.safetensors").c_str(), 64), 0);
  std::string path = dir + "-inspect.json";  // not inside the input folder
  RunResult r = run_tprobe({"inspect", "--checkpoint", dir, "--json", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(dir + "/model.safetensors"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(path));

  r = run_tprobe({"inspect", "--model", "gemma4-9000b", "--json", path});
  EXPECT_EQ(r.exit_code, 2);  // an option value: a usage error
  EXPECT_NE(r.err.find("gemma4-tiny"), std::string::npos) << r.err;
  r = run_tprobe({"inspect", "--rank", "0", "--json", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rank"), std::string::npos) << r.err;
  r = run_tprobe({"inspect", "--targets", "q_proj,,v_proj", "--json", path});
  EXPECT_EQ(r.exit_code, 2);
  r = run_tprobe({"inspect", "--model", "gemma4-tiny", "--checkpoint", dir, "--json", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(file_exists(path));
}

}  // namespace
}  // namespace tprobe::testing
