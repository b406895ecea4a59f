// End-to-end `tprobe parity --backward` against Hugging Face + PEFT: the committed tiny checkpoint,
// the PEFT adapter saved after one AdamW step and HF's loss and LoRA gradients (fp32, HF's own bf16
// beside them; checkpointing off and on; the input-grads-off trap; a right-padded batch), all
// written on the GPU host by scripts/make_parity_fixture.py backward (benchmarks/gpu/parity.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kFixture = std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf";
const std::string kAdapter = std::string(TPROBE_FIXTURES_DIR) + "/adapters/peft-tiny-step1";
const std::string kAdapterInit = std::string(TPROBE_FIXTURES_DIR) + "/adapters/peft-tiny-init";
const std::string kBackward = kFixture + "/backward.safetensors";
const std::string kBackwardCkpt = kFixture + "/backward_ckpt.safetensors";
const std::string kBackwardTrap = kFixture + "/backward_ckpt_noinput.safetensors";
const std::string kBackwardPadded = kFixture + "/backward_padded.safetensors";
const std::string kTextPrefix = "base_model.model.model.";
const std::string kMultimodalPrefix = "base_model.model.model.language_model.";

// Copies a safetensors file: `rename` maps each name (empty: drop the tensor), `edit` may change
// an fp32 tensor's values, `edit_i64` an int64 tensor's.
using Rename = std::function<std::string(const std::string&)>;
using Edit = std::function<void(const std::string&, std::vector<float>&)>;
using EditI64 = std::function<void(const std::string&, std::vector<int64_t>&)>;
void rewrite(const std::string& from, const std::string& to, const Rename& rename,
             const Edit& edit = {}, const EditI64& edit_i64 = {}) {
  auto file = core::SafetensorsFile::open(from);
  std::vector<std::vector<char>> keep;
  keep.reserve(file.tensors().size());  // data pointers must stay put
  std::vector<core::TensorToWrite> out;
  for (const auto& t : file.tensors()) {
    const std::string name = rename(t.name);
    if (name.empty()) continue;
    const std::vector<std::byte> owned = file.read(t.name);
    const core::ByteSpan bytes{owned.data(), owned.size()};
    keep.emplace_back(reinterpret_cast<const char*>(bytes.data),
                      reinterpret_cast<const char*>(bytes.data) + bytes.size);
    if (edit && t.dtype == core::DType::kF32) {
      std::vector<float> v(bytes.size / 4);
      std::memcpy(v.data(), bytes.data, bytes.size);
      edit(t.name, v);
      std::memcpy(keep.back().data(), v.data(), bytes.size);
    }
    if (edit_i64 && t.dtype == core::DType::kI64) {
      std::vector<int64_t> v(bytes.size / 8);
      std::memcpy(v.data(), bytes.data, bytes.size);
      edit_i64(t.name, v);
      std::memcpy(keep.back().data(), v.data(), bytes.size);
    }
    core::TensorToWrite w{t, keep.back().data()};
    w.meta.name = name;
    out.push_back(w);
  }
  core::write_safetensors(to, out);
}

std::string same(const std::string& n) { return n; }

struct BackwardRun {
  RunResult r;
  json res;
  json doc;  // the whole evidence file
};

BackwardRun backward(const std::vector<std::string>& extra, const std::string& ref = kBackward,
                     const std::string& adapter = kAdapter) {
  std::string dir = make_temp_dir();
  std::vector<std::string> args = {"parity", "--checkpoint", kFixture, "--adapter",
                                   adapter,  "--reference",  ref,      "--backward",
                                   "--json", dir + "/p.json"};
  args.insert(args.end(), extra.begin(), extra.end());
  BackwardRun run;
  run.r = run_tprobe(args);
  if (file_exists(dir + "/p.json")) {
    run.doc = json::parse(read_text(dir + "/p.json"));
    run.res = run.doc["results"];
  }
  return run;
}

int count_zero_references(const json& b) {
  int n = 0;
  for (const auto& t : b["tensors"]) n += t["zero_reference"].get<bool>();
  return n;
}

TEST(ParityBackwardCli, Fp32LoraGradientsMatchHuggingFacePeft) {
  BackwardRun run = backward({"--ce-chunk", "7"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  const json& b = run.res["backward"];
  EXPECT_EQ(run.res["mode"], "backward");
  EXPECT_EQ(b["verdict_rule"], "fixed_fp32");
  EXPECT_EQ(b["reference_prefix"], kTextPrefix);
  EXPECT_LE(b["worst_tensor_rel_l2"].get<double>(), 1e-4) << run.r.out;
  EXPECT_LE(b["global_rel_l2"].get<double>(), 1e-4);
  EXPECT_LE(b["loss_abs_diff"].get<double>(), 1e-4 * b["reference_loss"].get<double>());
  EXPECT_TRUE(b["zero_one_side"].empty());
  EXPECT_TRUE(b["loss_requires_grad"].get<bool>());
  // 6 layers x 7 targets, no v_proj on the two key=value layers: 40 modules, 80 tensors; the
  // adapter was saved after one step, so lora_A gradients are non-zero too.
  EXPECT_EQ(b["lora_tensors"], 80);
  EXPECT_EQ(b["modules"].size(), 40u);
  EXPECT_EQ(count_zero_references(b), 0);
  EXPECT_NE(run.r.out.find("verdict rule: fixed_fp32"), std::string::npos) << run.r.out;
  EXPECT_NE(run.r.out.find("layers.0.self_attn.q_proj"), std::string::npos) << run.r.out;
}

TEST(ParityBackwardCli, GradientCheckpointingGivesHfsCheckpointedGradients) {
  BackwardRun run = backward({"--checkpointing", "on"}, kBackwardCkpt);
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  EXPECT_TRUE(run.res["backward"]["gradient_checkpointing"].get<bool>());
  EXPECT_LE(run.res["backward"]["worst_tensor_rel_l2"].get<double>(), 1e-4);
  // "on" is the old spelling of reentrant: the evidence records the registry's name.
  EXPECT_EQ(run.doc["invocation"]["options"]["checkpointing"], "reentrant");
  EXPECT_EQ(run.r.err.find("deprecated"), std::string::npos) << run.r.err;
  // and the same against the reference without checkpointing (HF gives identical gradients)
  BackwardRun cross = backward({"--checkpointing", "on"}, kBackward);
  EXPECT_EQ(cross.r.exit_code, 0) << cross.r.out;
  // off is the default, and what the backward runs without the option compare
  BackwardRun off = backward({"--checkpointing", "off"}, kBackward);
  ASSERT_EQ(off.r.exit_code, 0) << off.r.out << off.r.err;
  EXPECT_FALSE(off.res["backward"]["gradient_checkpointing"].get<bool>());
}

// The old spelling, for one release: the same checkpointed run, a note on stderr and a warning in
// the evidence; the evidence's options say what ran.
TEST(ParityBackwardCli, GradientCheckpointingFlagIsADeprecatedAliasOfCheckpointingOn) {
  BackwardRun run = backward({"--gradient-checkpointing"}, kBackwardCkpt);
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  EXPECT_TRUE(run.res["backward"]["gradient_checkpointing"].get<bool>());
  EXPECT_NE(run.r.err.find("deprecated: --gradient-checkpointing is deprecated"),
            std::string::npos)
      << run.r.err;
  EXPECT_NE(run.r.err.find("write --checkpointing reentrant"), std::string::npos) << run.r.err;
  int warnings = 0;
  for (const auto& d : run.doc["status"]["diagnostics"]) {
    warnings += d["code"] == "deprecated_option" && d["severity"] == "warning";
  }
  EXPECT_EQ(warnings, 1) << run.doc["status"];
  EXPECT_EQ(run.doc["invocation"]["options"]["checkpointing"], "reentrant");
  // Recorded because it was given (as every given flag is recorded today: the text "true").
  EXPECT_EQ(run.doc["invocation"]["options"]["gradient-checkpointing"], "true");
  // Both spellings at once are a usage error.
  BackwardRun both = backward({"--gradient-checkpointing", "--checkpointing", "off"});
  EXPECT_EQ(both.r.exit_code, 2);
  EXPECT_NE(both.r.err.find("--gradient-checkpointing is the old spelling of --checkpointing"),
            std::string::npos)
      << both.r.err;
}

TEST(ParityBackwardCli, InputGradsOffUnderCheckpointingShowsWhatHfShows) {
  // HF with reentrant checkpointing and no input grads: nothing reaches an adapter.
  BackwardRun trap = backward({"--checkpointing", "on", "--no-input-grads"}, kBackwardTrap);
  ASSERT_EQ(trap.r.exit_code, 0) << trap.r.out << trap.r.err;
  const json& b = trap.res["backward"];
  EXPECT_FALSE(b["loss_requires_grad"].get<bool>());
  EXPECT_EQ(b["zero_both_sides"].size(), 80u);
  EXPECT_NE(trap.r.out.find("no gradient reaches any adapter"), std::string::npos) << trap.r.out;
  // Against a healthy reference the same settings are the inert-adapter signature: exit 3,
  // every zero gradient named.
  BackwardRun inert = backward({"--checkpointing", "on", "--no-input-grads"}, kBackward);
  EXPECT_EQ(inert.r.exit_code, 3) << inert.r.out;
  EXPECT_EQ(inert.res["backward"]["zero_one_side"].size(), 80u);
  EXPECT_NE(inert.r.out.find("zero on one side: layers.0.self_attn.q_proj.lora_A.weight"),
            std::string::npos)
      << inert.r.out;
}

TEST(ParityBackwardCli, MultimodalPrefixOnAdapterAndReference) {
  std::string dir = make_temp_dir();
  auto to_mm = [](const std::string& n) {
    return n.rfind(kTextPrefix, 0) == 0 ? kMultimodalPrefix + n.substr(kTextPrefix.size()) : n;
  };
  write_text(dir + "/adapter_config.json", read_text(kAdapter + "/adapter_config.json"));
  rewrite(kAdapter + "/adapter_model.safetensors", dir + "/adapter_model.safetensors", to_mm);
  rewrite(kBackward, dir + "/ref.safetensors", to_mm);
  BackwardRun run = backward({}, dir + "/ref.safetensors", dir);
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  EXPECT_EQ(run.res["backward"]["reference_prefix"], kMultimodalPrefix);
}

TEST(ParityBackwardCli, OneGradientOffOrZeroIsNamedAndExitsThree) {
  std::string dir = make_temp_dir();
  const std::string target = kTextPrefix + "layers.4.mlp.down_proj.lora_A.weight.grad";
  rewrite(kBackward, dir + "/off.safetensors", same, [&](const std::string& n, auto& v) {
    if (n == target)
      for (float& x : v) x *= 1.01f;
  });
  BackwardRun off = backward({}, dir + "/off.safetensors");
  EXPECT_EQ(off.r.exit_code, 3) << off.r.out;
  EXPECT_EQ(off.res["backward"]["worst_tensor"], "layers.4.mlp.down_proj.lora_A.weight");
  EXPECT_EQ(off.res["backward"]["worst_module"], "layers.4.mlp.down_proj");
  EXPECT_NEAR(off.res["backward"]["worst_tensor_rel_l2"].get<double>(), 0.01 / 1.01, 1e-3);

  rewrite(kBackward, dir + "/zero.safetensors", same, [&](const std::string& n, auto& v) {
    if (n == target) std::fill(v.begin(), v.end(), 0.0f);
  });
  BackwardRun zero = backward({}, dir + "/zero.safetensors");
  EXPECT_EQ(zero.r.exit_code, 3) << zero.r.out;
  ASSERT_EQ(zero.res["backward"]["zero_one_side"].size(), 1u);
  EXPECT_EQ(zero.res["backward"]["zero_one_side"][0], "layers.4.mlp.down_proj.lora_A.weight");
}

TEST(ParityBackwardCli, Bf16IsJudgedAgainstHfsOwnBf16Gradients) {
  BackwardRun run = backward({"--dtype", "bf16"});
  const json& b = run.res["backward"];
  ASSERT_FALSE(b.is_null()) << run.r.out << run.r.err;
  EXPECT_EQ(b["verdict_rule"], "relative_to_hf_bf16");
  EXPECT_EQ(b["baseline_suffix"], "_hf_bf16_eager");
  EXPECT_NEAR(b["tolerance_global_rel_l2"].get<double>(),
              2 * b["baseline_global_rel_l2"].get<double>(), 1e-12);
  EXPECT_EQ(run.r.exit_code, 0) << run.r.out;
  EXPECT_NE(run.r.out.find("relative_to_hf_bf16"), std::string::npos) << run.r.out;

  // Without HF's bf16 gradients in the reference: the fixed fallback, and it says so.
  std::string dir = make_temp_dir();
  rewrite(kBackward, dir + "/fp32only.safetensors", [](const std::string& n) {
    return n.find("_hf_bf16_") == std::string::npos ? n : std::string();
  });
  BackwardRun fallback = backward({"--dtype", "bf16"}, dir + "/fp32only.safetensors");
  EXPECT_EQ(fallback.res["backward"]["verdict_rule"], "fixed_bf16_fallback") << fallback.r.out;
  EXPECT_EQ(fallback.res["backward"]["tolerance_global_rel_l2"].get<double>(), 5e-2);
}

TEST(ParityBackwardCli, RightPaddedBatchMatchesHuggingFacePeft) {
  BackwardRun run = backward({"--ce-chunk", "7"}, kBackwardPadded);
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  const json& b = run.res["backward"];
  EXPECT_EQ(run.res["row_lengths"], json::array({24, 18}));
  EXPECT_LE(b["worst_tensor_rel_l2"].get<double>(), 1e-4) << run.r.out;
  EXPECT_LE(b["global_rel_l2"].get<double>(), 1e-4);
  EXPECT_LE(b["loss_abs_diff"].get<double>(), 1e-4 * b["reference_loss"].get<double>());
  EXPECT_EQ(b["lora_tensors"], 80);
  EXPECT_NE(run.r.out.find("right-padded batch (attention_mask): real tokens per row 24, 18"),
            std::string::npos)
      << run.r.out;
}

TEST(ParityBackwardCli, PaddedReferenceRunUnpaddedExitsThreeAndBrokenMasksAreErrors) {
  std::string dir = make_temp_dir();
  // Without its mask and labels the padded reference is a different step: exit 3.
  rewrite(kBackwardPadded, dir + "/unpadded.safetensors", [](const std::string& n) {
    return n == "attention_mask" || n == "labels" ? std::string() : n;
  });
  BackwardRun unpadded = backward({}, dir + "/unpadded.safetensors");
  EXPECT_EQ(unpadded.r.exit_code, 3) << unpadded.r.out;
  EXPECT_TRUE(unpadded.res["row_lengths"].is_null());
  EXPECT_GT(unpadded.res["backward"]["global_rel_l2"].get<double>(), 1e-2);
  // Left padding (row 1's mask reversed): named, exit 1, no evidence.
  rewrite(
      kBackwardPadded, dir + "/left.safetensors",
      [](const std::string& n) { return n == "labels" ? std::string() : n; }, {},
      [](const std::string& n, std::vector<int64_t>& v) {
        if (n == "attention_mask") std::reverse(v.begin() + 24, v.end());
      });
  BackwardRun left = backward({}, dir + "/left.safetensors");
  EXPECT_EQ(left.r.exit_code, 1);
  EXPECT_NE(left.r.err.find("attention_mask: row 1 has a 1 at position 6 after a 0 at position 0"),
            std::string::npos)
      << left.r.err;
  EXPECT_TRUE(left.res.is_null());
  // A mask value other than 0 and 1.
  rewrite(kBackwardPadded, dir + "/three.safetensors", same, {},
          [](const std::string& n, std::vector<int64_t>& v) {
            if (n == "attention_mask") v[5] = 3;
          });
  BackwardRun three = backward({}, dir + "/three.safetensors");
  EXPECT_EQ(three.r.exit_code, 1);
  EXPECT_NE(three.r.err.find("attention_mask: [0][5] is 3"), std::string::npos) << three.r.err;
}

TEST(ParityBackwardCli, BadInputsGiveTheirExitCodes) {
  std::string dir = make_temp_dir();
  RunResult no_adapter =
      run_tprobe({"parity", "--checkpoint", kFixture, "--reference", kBackward, "--backward"});
  EXPECT_EQ(no_adapter.exit_code, 2) << no_adapter.err;
  RunResult forward_only =
      run_tprobe({"parity", "--checkpoint", kFixture, "--reference",
                  kFixture + "/reference.safetensors", "--checkpointing", "on"});
  EXPECT_EQ(forward_only.exit_code, 2) << forward_only.err;
  EXPECT_NE(forward_only.err.find("--checkpointing requires --backward"),
            std::string::npos)
      << forward_only.err;
  // A reference of logits only has no gradients to compare: named, exit 1, no evidence.
  BackwardRun logits_only = backward({}, kFixture + "/reference.safetensors");
  EXPECT_EQ(logits_only.r.exit_code, 1);
  EXPECT_NE(logits_only.r.err.find("no LoRA gradients"), std::string::npos) << logits_only.r.err;
  EXPECT_TRUE(logits_only.res.is_null());
  // One gradient missing from the reference.
  const std::string gone = kTextPrefix + "layers.5.mlp.up_proj.lora_B.weight.grad";
  rewrite(kBackward, dir + "/missing.safetensors",
          [&](const std::string& n) { return n == gone ? std::string() : n; });
  BackwardRun missing = backward({}, dir + "/missing.safetensors");
  EXPECT_EQ(missing.r.exit_code, 1);
  EXPECT_NE(missing.r.err.find(gone), std::string::npos) << missing.r.err;
  // The adapter saved before any step (PEFT's lora_B = 0) is a different adapter: its
  // gradients are not the reference's, and its lora_A gradients are all zero (the trap of
  // testing with an untrained adapter).
  BackwardRun init = backward({}, kBackward, kAdapterInit);
  EXPECT_EQ(init.r.exit_code, 3) << init.r.out;
  EXPECT_GE(init.res["backward"]["zero_one_side"].size(), 40u);
}

}  // namespace
}  // namespace tprobe::testing
