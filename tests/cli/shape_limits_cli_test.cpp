// Issue 46, items 3, 5 and 7, end to end: absurd config sizes are refused by every probe that
// reads a config.json, in one line and at once; an odd head dim never reaches libtorch; a LoRA
// rank or a reference the machine cannot hold is refused with the bytes in tprobe's words before
// anything is allocated, never with the allocator's text. Each refusal has an accepted control.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_tprobe.hpp"
#include "support/synthetic_checkpoint.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kFixture = std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf";
const std::string kReference = kFixture + "/reference.safetensors";
const std::string kAdapter = std::string(TPROBE_FIXTURES_DIR) + "/adapters/after-step";
const std::string kTrace = std::string(TPROBE_FIXTURES_DIR) + "/traces/hf-sdpa-2x256.json.gz";

// The fixture's config.json without layer_types, with `set` applied.
json fixture_config(const json& set) {
  json doc = json::parse(read_text(kFixture + "/config.json"));
  doc.erase("layer_types");
  doc.erase("per_layer_config");
  doc.update(set);
  return doc;
}

// A checkpoint folder: that config beside a link to the fixture's weights.
std::string checkpoint_with(const json& config) {
  const std::string dir = make_temp_dir();
  write_text(dir + "/config.json", config.dump(2));
  std::filesystem::create_symlink(kFixture + "/model.safetensors", dir + "/model.safetensors");
  return dir;
}

// One line on stderr (the message and its newline), and nothing libtorch says.
void expect_one_tprobe_line(const RunResult& r, const std::string& text, const std::string& what) {
  EXPECT_NE(r.err.find(text), std::string::npos) << what << ": " << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": " << r.err;
  for (const char* torch : {"DefaultCPUAllocator", "enforce fail", "The size of tensor",
                            "libtorch refused"}) {
    EXPECT_EQ(r.err.find(torch), std::string::npos) << what << ": " << r.err;
  }
}

TEST(ShapeLimitsCli, AbsurdLayerCountsAreRefusedByEveryProbeAtOnce) {
  for (int64_t layers : {int64_t{1000000}, int64_t{1000000000}, int64_t{1} << 62}) {
    const json config = fixture_config({{"num_hidden_layers", layers}});
    const std::string dir = checkpoint_with(config);
    const std::string path = dir + "/config.json";
    const std::vector<std::vector<std::string>> runs = {
        {"flops", "--config", path},
        {"mask", path, "--width", "32"},
        {"kernels", kTrace, "--config", path},
        {"kernels", kTrace, "--checkpoint", dir},
        {"inspect", dir},
        {"lora-gate", kAdapter, "--checkpoint", dir},
        {"parity", "--checkpoint", dir, "--reference", kReference},
        {"profile", "--device", "cpu", "--checkpoint", dir, "--widths", "16", "--repeats", "1"},
    };
    for (const auto& args : runs) {
      const auto t0 = std::chrono::steady_clock::now();
      const RunResult r = run_tprobe(args);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string what = args[0] + " " + std::to_string(layers);
      EXPECT_EQ(r.exit_code, 1) << what << ": " << r.out << r.err;
      expect_one_tprobe_line(
          r,
          "field 'num_hidden_layers' is " + std::to_string(layers) +
              ", above tprobe's limit of 1024 (docs/inspect.md#limits)",
          what);
      EXPECT_LT(s, 30.0) << what;  // the 10^9 layers ran 102 s in kernels
      EXPECT_LT(r.out.size(), 4096u) << what;  // lora-gate printed a 7 MB line
    }
  }
}

TEST(ShapeLimitsCli, ALayerCountAtTheLimitStillRuns) {
  const std::string dir = make_temp_dir();
  write_text(dir + "/config.json", fixture_config({{"num_hidden_layers", 1024}}).dump());
  const RunResult flops = run_tprobe({"flops", "--config", dir + "/config.json"});
  EXPECT_EQ(flops.exit_code, 0) << flops.err;
  const RunResult mask = run_tprobe({"mask", dir + "/config.json", "--width", "32"});
  EXPECT_EQ(mask.exit_code, 0) << mask.err;
}

TEST(ShapeLimitsCli, FlopsRefusesAHiddenSizePastTheLimitInsteadOfWrappingTheLoraCount) {
  const std::string dir = make_temp_dir();
  write_text(dir + "/huge.json", fixture_config({{"hidden_size", int64_t{1} << 62}}).dump());
  const RunResult r = run_tprobe({"flops", "--config", dir + "/huge.json"});
  EXPECT_EQ(r.exit_code, 1);
  expect_one_tprobe_line(
      r, "field 'hidden_size' is 4611686018427387904, above tprobe's limit of 131072", "flops");
  EXPECT_EQ(r.out.find("trainable parameters"), std::string::npos) << r.out;
  // Another instance of the class: a vocabulary past its limit.
  write_text(dir + "/vocab.json", fixture_config({{"vocab_size", 4194305}}).dump());
  const RunResult v = run_tprobe({"flops", "--config", dir + "/vocab.json"});
  EXPECT_EQ(v.exit_code, 1);
  expect_one_tprobe_line(v, "field 'vocab_size' is 4194305, above tprobe's limit of 4194304",
                         "flops vocab");
  // Control: at the limit, the count is the rank times the features (no wrap).
  write_text(dir + "/wide.json", fixture_config({{"hidden_size", 131072}}).dump());
  const JsonRun ok = run_json({"flops", "--config", dir + "/wide.json", "--rank", "16"});
  ASSERT_EQ(ok.r.exit_code, 0) << ok.r.err;
  EXPECT_NE(ok.r.out.find("trainable parameters"), std::string::npos);
  EXPECT_GT(ok.doc["results"]["lora"]["trainable_params"].get<int64_t>(), 16 * 131072);
}

// A self-consistent checkpoint (the weights' shapes follow the config) with head_dim 15.
std::string odd_head_dim_checkpoint(int64_t head_dim) {
  core::ModelConfig c = core::embedded_model("gemma4-tiny");
  c.head_dim = head_dim;
  const std::string dir = make_temp_dir();
  testing_support::write_synthetic_checkpoint(dir, c);
  return dir;
}

TEST(ShapeLimitsCli, AnOddHeadDimIsRefusedBeforeTheModelIsBuilt) {
  for (int64_t d : {15, 17}) {
    const std::string dir = odd_head_dim_checkpoint(d);
    const std::string text = "field 'text_config.head_dim' is " + std::to_string(d) +
                             ": tprobe's attention needs an even head dim";
    const RunResult parity = run_tprobe({"parity", "--checkpoint", dir, "--reference", kReference});
    EXPECT_EQ(parity.exit_code, 1);
    expect_one_tprobe_line(parity, text, "parity");
    const std::string out = make_temp_dir() + "/p.json";
    const RunResult profile =
        run_tprobe({"profile", "--device", "cpu", "--checkpoint", dir, "--dtype", "fp32",
                    "--widths", "16,24", "--repeats", "1", "--json", out});
    EXPECT_EQ(profile.exit_code, 1) << profile.out;  // not every point an error, and exit 0
    expect_one_tprobe_line(profile, text, "profile");
    EXPECT_FALSE(file_exists(out));
  }
  // Control: the same checkpoint with head_dim 16 profiles.
  const RunResult ok =
      run_tprobe({"profile", "--device", "cpu", "--checkpoint", odd_head_dim_checkpoint(16),
                  "--dtype", "fp32", "--widths", "16", "--repeats", "1", "--rank", "4"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

std::vector<std::string> profile_args(const std::string& rank) {
  return {"profile", "--device", "cpu",  "--model",   "gemma4-tiny", "--dtype", "fp32",
          "--rank",  rank,       "--widths", "16", "--repeats", "1"};
}

const std::pair<std::string, std::string> kFourGiB = {"TPROBE_FAULT_MEMORY_LIMIT", "4294967296"};

TEST(ShapeLimitsCli, ALoraRankTheMachineCannotHoldIsRefusedBeforeAnyAllocation) {
  // The issue's: rank 1,048,576 on the tiny model, 22 GiB of fp32 adapters and 22 GiB of their
  // gradients, against a 4 GiB limit (the injected one: AddressSanitizer cannot run under a small
  // RLIMIT_AS).
  RunOptions limited;
  limited.env = {kFourGiB};
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = run_tprobe(profile_args("1048576"), limited);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  expect_one_tprobe_line(r,
                         "the model needs at least 44.00 GiB before its first step (", "rank 2^20");
  expect_one_tprobe_line(r,
                         "22.00 GiB of LoRA adapters (40 modules at rank 1048576) and 22.00 GiB "
                         "of their gradients), above the injected limit "
                         "(TPROBE_FAULT_MEMORY_LIMIT) (4.00 GiB); nothing was allocated",
                         "rank 2^20");
  // Another instance: a rank of 65,536 (1.38 GiB of adapters, as much of gradients) under 2 GiB.
  limited.env = {{"TPROBE_FAULT_MEMORY_LIMIT", "2147483648"}};
  const RunResult mid = run_tprobe(profile_args("65536"), limited);
  EXPECT_EQ(mid.exit_code, 1) << mid.out;
  expect_one_tprobe_line(mid, "of LoRA adapters (40 modules at rank 65536)", "rank 2^16");
  // And the 26B shapes at rank 2^20, with no injected limit: terabytes, past any host.
  const RunResult big = run_tprobe({"profile", "--device", "cpu", "--model", "gemma4-26b-a4b",
                                    "--rank", "1048576", "--widths", "16", "--repeats", "1"});
  EXPECT_EQ(big.exit_code, 1) << big.out;
  expect_one_tprobe_line(big, "TiB of LoRA adapters", "26B rank 2^20");
  // Control: a normal rank under the same 4 GiB runs.
  limited.env = {kFourGiB};
  const RunResult ok = run_tprobe(profile_args("8"), limited);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

// A reference holding only input_ids, [1, tokens] of zeros.
std::string long_reference(int64_t tokens) {
  const std::string path = make_temp_dir() + "/long.safetensors";
  core::TensorMeta ids{"input_ids", core::DType::kI64, {1, tokens}};
  core::write_safetensors(path, {core::TensorToWrite{ids, nullptr}});
  return path;
}

TEST(ShapeLimitsCli, AParityReferenceTheMachineCannotHoldIsRefusedBeforeLoading) {
  RunOptions limited;
  limited.env = {{"TPROBE_FAULT_MEMORY_LIMIT", "8589934592"}};
  for (int64_t tokens : {200000, 1000000}) {
    const RunResult r = run_tprobe(
        {"parity", "--checkpoint", kFixture, "--reference", long_reference(tokens)}, limited);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    expect_one_tprobe_line(r, "parity needs at least ", std::to_string(tokens));
    expect_one_tprobe_line(r,
                           "above the injected limit (TPROBE_FAULT_MEMORY_LIMIT) (8.00 GiB); "
                           "nothing was loaded",
                           std::to_string(tokens));
  }
  // Control: the fixture's reference under the same limit runs and agrees.
  const RunResult ok =
      run_tprobe({"parity", "--checkpoint", kFixture, "--reference", kReference}, limited);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

}  // namespace
}  // namespace tprobe::testing
