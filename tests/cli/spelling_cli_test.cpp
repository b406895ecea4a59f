// End-to-end: one spelling per fact on the command line (docs/ARCHITECTURE.md, "One spelling per
// fact"). Each old spelling still works for one release, hidden from --help, with a deprecation
// note on stderr and a `deprecated_option` warning in the evidence; the unified spellings carry
// none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kFixtures = TPROBE_FIXTURES_DIR;
const std::string kTrace = kFixtures + "/traces/parts-small.json";

int count_code(const json& doc, const std::string& code, const std::string& severity) {
  int n = 0;
  for (const auto& d : doc["status"]["diagnostics"]) {
    n += d["code"] == code && d["severity"] == severity;
  }
  return n;
}

TEST(SpellingCli, KernelsDeviceIdFiltersWithoutAWarning) {
  JsonRun run = run_json({"kernels", kTrace, "--device-id", "0"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  EXPECT_EQ(run.doc["invocation"]["options"]["device-id"], 0);
  // The hidden alias is recorded only when it was given.
  EXPECT_FALSE(run.doc["invocation"]["options"].contains("device")) << run.doc["invocation"];
  EXPECT_EQ(count_code(run.doc, "deprecated_option", "warning"), 0);
  EXPECT_EQ(run.r.err.find("deprecated"), std::string::npos) << run.r.err;
}

TEST(SpellingCli, KernelsOldDeviceSpellingStillFiltersAndSaysItIsDeprecated) {
  JsonRun run = run_json({"kernels", kTrace, "--device", "0"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  EXPECT_NE(run.r.err.find("deprecated: kernels --device N is deprecated"), std::string::npos)
      << run.r.err;
  EXPECT_NE(run.r.err.find("write --device-id N"), std::string::npos) << run.r.err;
  EXPECT_EQ(count_code(run.doc, "deprecated_option", "warning"), 1) << run.doc["status"];
  EXPECT_EQ(run.doc["invocation"]["options"]["device-id"], 0);
  // The same table as the new spelling gives.
  JsonRun now = run_json({"kernels", kTrace, "--device-id", "0"});
  ASSERT_EQ(now.r.exit_code, 0);
  EXPECT_EQ(run.doc["results"]["kernel_table"], now.doc["results"]["kernel_table"]);
  // A device with no rows is still refused through the old spelling.
  RunResult none = run_tprobe({"kernels", kTrace, "--device", "3"});
  EXPECT_EQ(none.exit_code, 1) << none.err;
  EXPECT_NE(none.err.find("is in the selection"), std::string::npos) << none.err;
  // Both spellings at once: a usage error.
  RunResult both = run_tprobe({"kernels", kTrace, "--device", "0", "--device-id", "0"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--device is the old spelling of --device-id: give one of them"),
            std::string::npos)
      << both.err;
}

TEST(SpellingCli, OldSpellingsAreHiddenFromHelp) {
  RunResult kernels = run_tprobe({"kernels", "--help"});
  EXPECT_EQ(kernels.exit_code, 0);
  EXPECT_NE(kernels.out.find("--device-id"), std::string::npos) << kernels.out;
  EXPECT_EQ(kernels.out.find("--device "), std::string::npos) << kernels.out;
  EXPECT_EQ(kernels.out.find("Deprecated"), std::string::npos) << kernels.out;
  // Nor does the new spelling's help name an exclusion it cannot show.
  EXPECT_EQ(kernels.out.find("Excludes: \n"), std::string::npos) << kernels.out;
  RunResult parity = run_tprobe({"parity", "--help"});
  EXPECT_EQ(parity.exit_code, 0);
  EXPECT_NE(parity.out.find("--checkpointing"), std::string::npos) << parity.out;
  EXPECT_EQ(parity.out.find("--gradient-checkpointing"), std::string::npos) << parity.out;
}

// --checkpointing on|off in every probe that has gradient checkpointing.
TEST(SpellingCli, CheckpointingIsOneOptionEverywhere) {
  for (const char* probe : {"flops", "profile", "parity"}) {
    RunResult help = run_tprobe({probe, "--help"});
    EXPECT_NE(help.out.find("--checkpointing"), std::string::npos) << probe << help.out;
  }
  EXPECT_EQ(run_tprobe({"flops", "--checkpointing", "yes"}).exit_code, 2);
  JsonRun off = run_json({"flops", "--checkpointing", "off"});
  ASSERT_EQ(off.r.exit_code, 0) << off.r.err;
  EXPECT_EQ(off.doc["invocation"]["options"]["checkpointing"], "off");
}

// One --ce-chunk default (4096) wherever the option exists.
TEST(SpellingCli, CeChunkDefaultsTo4096Everywhere) {
  JsonRun inspect = run_json({"inspect"});
  ASSERT_EQ(inspect.r.exit_code, 0) << inspect.r.err;
  EXPECT_EQ(inspect.doc["invocation"]["options"]["ce-chunk"], 4096);
  EXPECT_EQ(inspect.doc["results"]["memory_estimate"]["ce_chunk_tokens"], 4096);
  EXPECT_NE(inspect.r.out.find("4096 tokens x 262144 vocab"), std::string::npos) << inspect.r.out;
  JsonRun padding = run_json({"padding"});
  ASSERT_EQ(padding.r.exit_code, 0) << padding.r.err;
  EXPECT_EQ(padding.doc["invocation"]["options"]["ce-chunk"], 4096);
  for (const char* probe : {"parity", "profile"}) {
    RunResult help = run_tprobe({probe, "--help"});
    const size_t at = help.out.find("--ce-chunk");
    ASSERT_NE(at, std::string::npos) << probe;
    EXPECT_NE(help.out.substr(at, 200).find("4096"), std::string::npos)
        << probe << help.out.substr(at, 200);
  }
  EXPECT_EQ(run_tprobe({"inspect", "--ce-chunk", "0"}).exit_code, 2);
}

// The model a probe reads: the positional, or its option form under the same name.
TEST(SpellingCli, MaskTakesTheModelAsPositionalOrModelOption) {
  JsonRun positional = run_json({"mask", "gemma4-tiny", "--width", "64", "--batch", "1"});
  ASSERT_EQ(positional.r.exit_code, 0) << positional.r.err;
  JsonRun option = run_json({"mask", "--model", "gemma4-tiny", "--width", "64", "--batch", "1"});
  ASSERT_EQ(option.r.exit_code, 0) << option.r.err;
  EXPECT_EQ(option.doc["invocation"]["options"]["model"], "gemma4-tiny");
  EXPECT_EQ(positional.doc["invocation"]["options"]["model"], "gemma4-tiny");
  EXPECT_EQ(positional.doc["results"]["layers"], option.doc["results"]["layers"]);
  EXPECT_EQ(option.doc["results"]["model"], positional.doc["results"]["model"]);
  // Not both.
  EXPECT_EQ(run_tprobe({"mask", "gemma4-tiny", "--model", "gemma4-26b-a4b"}).exit_code, 2);
  // The default model is recorded when neither is given.
  JsonRun neither = run_json({"mask", "--width", "64", "--batch", "1"});
  ASSERT_EQ(neither.r.exit_code, 0) << neither.r.err;
  EXPECT_EQ(neither.doc["invocation"]["options"]["model"], "gemma4-26b-a4b");
}

// Options that exclude each other are CLI11's exclusions (exit 2) in every probe.
TEST(SpellingCli, ExclusiveModelOptionsAreUsageErrors) {
  EXPECT_EQ(run_tprobe({"kernels", kTrace, "--model", "gemma4-tiny", "--config",
                        kFixtures + "/gemma4-tiny-hf/config.json"})
                .exit_code,
            2);
  EXPECT_EQ(run_tprobe({"lora-gate", kFixtures + "/adapters/after-step", "--model", "gemma4-tiny",
                        "--checkpoint", kFixtures + "/gemma4-tiny-hf"})
                .exit_code,
            2);
}

// Rows per micro-batch, the loader's order and its seed: one spelling each in every probe that
// takes them (--batch, --sampler, --sampler-seed; --seed is the measured step's weights and
// inputs). padding's and bucket's old spellings give the same results with a warning each; both
// spellings of one fact at once are a usage error; --help shows only the new ones.
TEST(SpellingCli, BatchSamplerAndSamplerSeedAreOneSpellingInPaddingAndBucket) {
  struct Probe {
    std::vector<std::string> now, old;
  };
  const std::vector<Probe> probes = {
      {{"padding", "--dataset", "synthetic:300", "--batch", "3", "--sampler", "shuffled",
        "--sampler-seed", "7"},
       {"padding", "--dataset", "synthetic:300", "--micro-batch", "3", "--order", "shuffled",
        "--seed", "7"}},
      {{"bucket", "--dataset", "synthetic:300", "--batch", "3", "--sampler", "shuffled",
        "--sampler-seed", "7", "--seeds", "2", "--sweep", "4,16"},
       {"bucket", "--dataset", "synthetic:300", "--micro-batch", "3", "--order", "shuffled",
        "--seed", "7", "--seeds", "2", "--sweep", "4,16"}},
  };
  for (const Probe& p : probes) {
    SCOPED_TRACE(p.now[0]);
    JsonRun now = run_json(p.now);
    ASSERT_EQ(now.r.exit_code, 0) << now.r.err;
    EXPECT_EQ(count_code(now.doc, "deprecated_option", "warning"), 0);
    JsonRun old = run_json(p.old);
    ASSERT_EQ(old.r.exit_code, 0) << old.r.err;
    EXPECT_EQ(count_code(old.doc, "deprecated_option", "warning"), 3) << old.doc["status"];
    for (const char* flag : {"--micro-batch", "--order", "--seed"}) {
      EXPECT_NE(old.r.err.find(p.now[0] + " " + flag + " is deprecated"), std::string::npos)
          << flag << old.r.err;
    }
    EXPECT_EQ(now.doc["results"], old.doc["results"]);
    const json& o = old.doc["invocation"]["options"];
    EXPECT_EQ(o["batch"], 3);
    EXPECT_EQ(o["sampler"], "shuffled");
    EXPECT_EQ(o["sampler-seed"], 7);
    RunResult both = run_tprobe({p.now[0], "--batch", "2", "--micro-batch", "2"});
    EXPECT_EQ(both.exit_code, 2);
    EXPECT_NE(both.err.find("--micro-batch is the old spelling of --batch: give one of them"),
              std::string::npos)
        << both.err;
    RunResult help = run_tprobe({p.now[0], "--help"});
    EXPECT_EQ(help.exit_code, 0);
    for (const char* flag : {"--batch", "--sampler", "--sampler-seed"})
      EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
    for (const char* flag : {"--micro-batch", "--order ", "--seed "})
      EXPECT_EQ(help.out.find(flag), std::string::npos) << flag << help.out;
  }
  // The old seed spelling is checked as the new one is: it needs the shuffled order.
  RunResult seed = run_tprobe({"padding", "--seed", "3"});
  EXPECT_EQ(seed.exit_code, 2);
  EXPECT_NE(seed.err.find("error: --sampler-seed seeds the shuffled order"), std::string::npos)
      << seed.err;
}

}  // namespace
}  // namespace tprobe::testing
