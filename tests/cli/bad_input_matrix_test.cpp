// The bad-input matrix (docs/evidence.md, "Bad input"): for each probe and each class of bad input
// (missing, empty, wrong type, truncated, absurd sizes, NaN/inf/negative, unknown option, evidence
// of the wrong probe) the documented exit code, a one-line message naming the file, field, line or
// option, no evidence file, and no death by a signal.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_tprobe.hpp"
#include "support/synthetic_checkpoint.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::testing {
namespace {

struct Case {
  std::string name;  // "<probe>/<class>/<what>"
  std::vector<std::string> args;
  int exit_code;
  std::string needle;  // must appear in the message
};

// Bad files, built once in one directory.
class Files {
 public:
  Files() : dir_(make_temp_dir()) {
    write_text(path("empty"), "");
    write_text(path("binary"), std::string("\x7f"
                                           "ELF\x02\x01\x01\0\0\0\xff\xfe",
                                           12));
    write_text(path("cut.jsonl"), "{\"length\": 5}\n{\"length\": 7, \"sou");
    write_text(path("huge.txt"), "5\n1000000000000000000\n");
    write_text(path("neg.csv"), "length\n5\n-3\n");
    write_text(path("nan.csv"), "width,seconds\n1024,nan\n2048,1.5\n4096,3\n");
    write_text(path("inf.csv"), "width,seconds\n1024,inf\n2048,1.5\n4096,3\n");
    write_text(path("zero.csv"), "width,seconds\n1024,0\n2048,1.5\n4096,3\n");
    write_text(path("huge-s.csv"), "width,seconds\n1024,1e300\n2048,1e301\n4096,1e302\n");
    write_text(path("cut.csv"), "width,seconds\n1024,0.5\n2048,");
    write_text(path("object.json"), "{\"schema\": {\"name\": \"tprobe.padding\"");
    write_text(path("array.json"), "[1, 2, 3]\n");
    write_text(path("wrong-probe.json"),
               R"({"schema":{"name":"tprobe.flops","version":1},"results":{}})");
    write_text(path("config-text.json"), "this is not json\n");
    write_text(path("config-cut.json"), "{\"text_config\": {\"hidden_size\": 28");
    write_text(path("config-neg.json"),
               R"({"text_config":{"hidden_size":-2816,"num_hidden_layers":30}})");
    ::mkdir(path("emptydir").c_str(), 0755);
    // A checkpoint directory whose safetensors header is cut short.
    ::mkdir(path("ck-cut").c_str(), 0755);
    testing_support::write_synthetic_checkpoint(path("ck-cut"),
                                                core::embedded_model("gemma4-tiny"));
    std::string st = read_text(path("ck-cut") + "/model.safetensors");
    write_text(path("ck-cut") + "/model.safetensors", st.substr(0, 200));
    // Traces: a gzip stream cut short, JSON without traceEvents, events with absurd fields.
    const std::string fixtures = TPROBE_FIXTURES_DIR;
    std::string gz = read_text(fixtures + "/traces/hf-sdpa-2x256.json.gz");
    write_text(path("trace-cut.json.gz"), gz.substr(0, gz.size() / 3));
    write_text(path("trace-noevents.json"), R"({"schemaVersion": 1, "deviceProperties": []})");
    write_text(path("trace-absurd.json"),
               R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0,)"
               R"( "tid": 7, "ts": 1e300, "dur": -5}]})");
    // Adapters: an empty directory, a cut config, a cut safetensors file, a negative rank.
    const std::string good = fixtures + "/adapters/after-step";
    for (const char* d : {"ad-empty", "ad-cutcfg", "ad-cutst", "ad-negrank"}) {
      ::mkdir(path(d).c_str(), 0755);
    }
    const std::string cfg = read_text(good + "/adapter_config.json");
    const std::string model = read_text(good + "/adapter_model.safetensors");
    write_text(path("ad-cutcfg") + "/adapter_config.json", cfg.substr(0, cfg.size() / 2));
    write_text(path("ad-cutcfg") + "/adapter_model.safetensors", model);
    write_text(path("ad-cutst") + "/adapter_config.json", cfg);
    write_text(path("ad-cutst") + "/adapter_model.safetensors", model.substr(0, 300));
    std::string neg = cfg;
    const std::size_t r = neg.find("\"r\":");
    neg = neg.substr(0, r) + "\"r\": -4, \"r_was\":" + neg.substr(r + 4);
    write_text(path("ad-negrank") + "/adapter_config.json", neg);
    write_text(path("ad-negrank") + "/adapter_model.safetensors", model);
    // Configs that disagree with their tensors, and hostile target_modules patterns (issue 23).
    auto adapter_with = [&](const char* d, const std::string& config) {
      ::mkdir(path(d).c_str(), 0755);
      write_text(path(d) + "/adapter_config.json", config);
      write_text(path(d) + "/adapter_model.safetensors", model);
    };
    std::string r8 = cfg;
    r8.replace(cfg.find("\"r\": 4"), 6, "\"r\": 8");
    adapter_with("ad-r8", r8);
    const std::size_t tm = cfg.find("\"target_modules\"");
    const std::size_t tm_end = cfg.find(']', tm) + 1;
    auto with_targets = [&](const std::string& targets) {
      return cfg.substr(0, tm) + "\"target_modules\": " + targets + cfg.substr(tm_end);
    };
    adapter_with("ad-notarget", with_targets("[\"gate_proj\"]"));
    adapter_with("ad-nested",
                 with_targets("\"" + std::string(20000, '(') + "a" + std::string(20000, ')') + "\""));
    adapter_with("ad-deep",
                 with_targets("\"" + std::string(1000, '(') + "a" + std::string(1000, ')') + "\""));
    std::string trap = ".*";
    for (int i = 0; i < 40; ++i) trap += "(.*)*";
    adapter_with("ad-backtrack", with_targets("\"" + trap + "X\""));
    adapter_with("ad-backref", with_targets("\"(q)\\\\1_proj\""));
    adapter_with("ad-lookahead", with_targets("\".*(?=q_proj).*\""));
    // A parity reference cut short.
    std::string ref = read_text(fixtures + "/gemma4-tiny-hf/reference.safetensors");
    write_text(path("ref-cut.safetensors"), ref.substr(0, ref.size() / 2));
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string missing() const { return dir_ + "/no-such-file"; }

 private:
  std::string dir_;
};

std::vector<Case> cases(const Files& f) {
  const std::string nanopt = "nan";
  return {
      // env: no inputs; only the command line can be wrong.
      {"env/unknown-option", {"env", "--frobnicate"}, 2, "--frobnicate"},
      // padding (and bucket share the dataset reader)
      {"padding/missing", {"padding", "--dataset", f.missing()}, 1, f.missing()},
      {"padding/empty", {"padding", "--dataset", f.path("empty")}, 1, f.path("empty")},
      {"padding/wrong-type-dir",
       {"padding", "--dataset", f.path("emptydir")},
       1,
       f.path("emptydir")},
      {"padding/wrong-type-binary",
       {"padding", "--dataset", f.path("binary")},
       1,
       f.path("binary") + ":1"},
      {"padding/truncated",
       {"padding", "--dataset", f.path("cut.jsonl")},
       1,
       f.path("cut.jsonl") + ":2"},
      {"padding/absurd-length",
       {"padding", "--dataset", f.path("huge.txt")},
       1,
       f.path("huge.txt") + ":2"},
      {"padding/negative-length",
       {"padding", "--dataset", f.path("neg.csv")},
       1,
       f.path("neg.csv") + ":3"},
      {"padding/absurd-micro-batch",
       {"padding", "--micro-batch", "1000000000000"},
       2,
       "micro-batch"},
      {"padding/negative-micro-batch", {"padding", "--micro-batch", "-2"}, 2, "micro-batch"},
      {"padding/nan-micro-batch", {"padding", "--micro-batch", nanopt}, 2, "--micro-batch"},
      {"padding/unknown-option", {"padding", "--micro-batches", "2"}, 2, "--micro-batches"},
      {"padding/bad-format", {"padding", "--format", "parquet"}, 2, "parquet"},
      // bucket
      {"bucket/missing", {"bucket", "--dataset", f.missing()}, 1, f.missing()},
      {"bucket/empty", {"bucket", "--dataset", f.path("empty")}, 1, f.path("empty")},
      {"bucket/truncated",
       {"bucket", "--dataset", f.path("cut.jsonl")},
       1,
       f.path("cut.jsonl") + ":2"},
      {"bucket/absurd-bucket", {"bucket", "--bucket", "1000000000000000"}, 2, "bucket 1000000000000000"},
      {"bucket/absurd-accum", {"bucket", "--accum", "1000000000000"}, 2, "accum"},
      {"bucket/nan-cost", {"bucket", "--cost", "nan,1e-8"}, 2, "cost"},
      {"bucket/inf-cost", {"bucket", "--cost", "1e-3,inf"}, 2, "cost"},
      {"bucket/negative-cost", {"bucket", "--cost", "-1e-3,1e-8"}, 2, "cost"},
      {"bucket/unknown-option", {"bucket", "--buckets", "64"}, 2, "--buckets"},
      {"bucket/evidence-missing", {"bucket", "--scaling-fit", f.missing()}, 1, f.missing()},
      {"bucket/evidence-empty", {"bucket", "--scaling-fit", f.path("empty")}, 1, f.path("empty")},
      {"bucket/evidence-truncated",
       {"bucket", "--scaling-fit", f.path("object.json")},
       1,
       f.path("object.json")},
      {"bucket/evidence-wrong-type",
       {"bucket", "--scaling-fit", f.path("array.json")},
       1,
       f.path("array.json")},
      {"bucket/evidence-wrong-probe",
       {"bucket", "--scaling-fit", f.path("wrong-probe.json")},
       1,
       "tprobe.flops"},
      // scaling-fit
      {"scaling-fit/csv-missing", {"scaling-fit", "--csv", f.missing()}, 1, f.missing()},
      {"scaling-fit/csv-empty", {"scaling-fit", "--csv", f.path("empty")}, 1, f.path("empty")},
      {"scaling-fit/csv-wrong-type",
       {"scaling-fit", "--csv", f.path("binary")},
       1,
       f.path("binary")},
      {"scaling-fit/csv-truncated",
       {"scaling-fit", "--csv", f.path("cut.csv")},
       1,
       f.path("cut.csv") + ":3"},
      {"scaling-fit/csv-nan",
       {"scaling-fit", "--csv", f.path("nan.csv")},
       1,
       f.path("nan.csv") + ":2"},
      {"scaling-fit/csv-inf",
       {"scaling-fit", "--csv", f.path("inf.csv")},
       1,
       f.path("inf.csv") + ":2"},
      {"scaling-fit/csv-zero-time",
       {"scaling-fit", "--csv", f.path("zero.csv")},
       1,
       f.path("zero.csv") + ":2"},
      {"scaling-fit/csv-near-double-limit",
       {"scaling-fit", "--csv", f.path("huge-s.csv")},
       1,
       f.path("huge-s.csv") + ":2"},
      {"scaling-fit/point-nan", {"scaling-fit", "--point", "1024:nan"}, 2, "nan"},
      {"scaling-fit/point-negative", {"scaling-fit", "--point", "1024:-1"}, 2, "-1"},
      {"scaling-fit/point-absurd-width",
       {"scaling-fit", "--point", "1000000000000000000:1", "--point", "2:1"},
       2,
       "1000000000000000000"},
      {"scaling-fit/alpha-nan",
       {"scaling-fit", "--point", "1024:1", "--alpha", nanopt},
       2,
       "alpha"},
      {"scaling-fit/unknown-option", {"scaling-fit", "--points", "1024:1"}, 2, "--points"},
      {"scaling-fit/profile-missing", {"scaling-fit", "--profile", f.missing()}, 1, f.missing()},
      {"scaling-fit/profile-empty",
       {"scaling-fit", "--profile", f.path("empty")},
       1,
       f.path("empty")},
      {"scaling-fit/profile-truncated",
       {"scaling-fit", "--profile", f.path("object.json")},
       1,
       f.path("object.json")},
      {"scaling-fit/profile-wrong-probe",
       {"scaling-fit", "--profile", f.path("wrong-probe.json")},
       1,
       "tprobe.flops"},
      {"scaling-fit/widths-wrong-probe",
       {"scaling-fit", "--point", "1024:1", "--point", "2048:2", "--widths-from",
        f.path("wrong-probe.json")},
       1,
       "tprobe.flops"},
      // flops
      {"flops/config-missing", {"flops", "--config", f.missing()}, 1, f.missing()},
      {"flops/config-empty", {"flops", "--config", f.path("empty")}, 1, f.path("empty")},
      {"flops/config-wrong-type",
       {"flops", "--config", f.path("config-text.json")},
       1,
       f.path("config-text.json")},
      {"flops/config-truncated",
       {"flops", "--config", f.path("config-cut.json")},
       1,
       f.path("config-cut.json")},
      {"flops/config-negative", {"flops", "--config", f.path("config-neg.json")}, 1, "hidden_size"},
      {"flops/absurd-batch", {"flops", "--batch", "1000000000000"}, 2, "batch"},
      {"flops/absurd-width", {"flops", "--width", "1000000000000000"}, 2, "width"},
      {"flops/nan-step-time", {"flops", "--step-time", nanopt}, 2, "--step-time"},
      {"flops/inf-peak", {"flops", "--peak-tflops", "inf"}, 2, "--peak-tflops"},
      {"flops/negative-step-time", {"flops", "--step-time", "-1"}, 2, "--step-time"},
      {"flops/duplicate-target", {"flops", "--targets", "q_proj,q_proj"}, 2, "q_proj"},
      {"flops/none-and-target", {"flops", "--targets", "none,q_proj"}, 2, "none"},
      {"flops/unknown-option", {"flops", "--widht", "2"}, 2, "--widht"},
      // inspect
      {"inspect/missing", {"inspect", "--checkpoint", f.missing()}, 1, f.missing()},
      {"inspect/empty-dir", {"inspect", "--checkpoint", f.path("emptydir")}, 1, f.path("emptydir")},
      {"inspect/wrong-type-file",
       {"inspect", "--checkpoint", f.path("binary")},
       1,
       f.path("binary")},
      {"inspect/truncated",
       {"inspect", "--checkpoint", f.path("ck-cut")},
       1,
       f.path("ck-cut") + "/model.safetensors"},
      {"inspect/absurd-rank", {"inspect", "--rank", "4611686018427387904"}, 2, "rank"},
      {"inspect/absurd-batch-width",
       {"inspect", "--batch", "1000000", "--width", "2000000000"},
       2,
       "batch x width"},
      {"inspect/negative-width", {"inspect", "--width", "-5"}, 2, "--width"},
      {"inspect/unknown-model", {"inspect", "--model", "gemma4-9000b"}, 2, "gemma4-9000b"},
      {"inspect/unknown-option", {"inspect", "--rnak", "8"}, 2, "--rnak"},
      // kernels
      {"kernels/missing", {"kernels", f.missing()}, 1, f.missing()},
      {"kernels/empty", {"kernels", f.path("empty")}, 1, f.path("empty")},
      {"kernels/not-json", {"kernels", f.path("binary")}, 1, f.path("binary")},
      {"kernels/truncated-gzip",
       {"kernels", f.path("trace-cut.json.gz")},
       1,
       f.path("trace-cut.json.gz")},
      {"kernels/no-trace-events",
       {"kernels", f.path("trace-noevents.json")},
       1,
       "traceEvents"},
      {"kernels/absurd-event",
       {"kernels", f.path("trace-absurd.json")},
       1,
       f.path("trace-absurd.json")},
      {"kernels/wrong-probe", {"kernels", f.path("wrong-probe.json")}, 1, "tprobe.flops"},
      {"kernels/negative-skip", {"kernels", f.path("empty"), "--skip-first", "-1"}, 2,
       "--skip-first"},
      {"kernels/unknown-option", {"kernels", f.path("empty"), "--stpe", "1"}, 2, "--stpe"},
      // mask
      {"mask/config-missing", {"mask", f.missing()}, 1, f.missing()},
      {"mask/config-not-json", {"mask", f.path("config-text.json")}, 1,
       f.path("config-text.json")},
      {"mask/config-truncated", {"mask", f.path("config-cut.json")}, 1,
       f.path("config-cut.json")},
      {"mask/zero-width", {"mask", "--width", "0"}, 2, "--width"},
      {"mask/absurd-width", {"mask", "--width", "1000000000000000"}, 2, "width"},
      {"mask/length-past-width", {"mask", "--width", "64", "--batch", "1", "--lengths", "65"}, 2,
       "65"},
      {"mask/negative-window", {"mask", "--expect-window", "-3"}, 2, "window"},
      {"mask/unknown-option", {"mask", "--widht", "64"}, 2, "--widht"},
      // lora-gate
      {"lora-gate/missing", {"lora-gate", f.missing()}, 1, f.missing()},
      {"lora-gate/empty-dir", {"lora-gate", f.path("ad-empty")}, 1, f.path("ad-empty")},
      {"lora-gate/truncated-config", {"lora-gate", f.path("ad-cutcfg")}, 1,
       f.path("ad-cutcfg") + "/adapter_config.json"},
      {"lora-gate/truncated-safetensors", {"lora-gate", f.path("ad-cutst")}, 1,
       f.path("ad-cutst") + "/adapter_model.safetensors"},
      {"lora-gate/negative-rank", {"lora-gate", f.path("ad-negrank")}, 1, "r"},
      {"lora-gate/config-disagrees/rank", {"lora-gate", f.path("ad-r8")}, 1, "r = 8"},
      {"lora-gate/config-disagrees/targets", {"lora-gate", f.path("ad-notarget")}, 1,
       "target_modules does not name"},
      {"lora-gate/hostile-regex/20000-nested-groups", {"lora-gate", f.path("ad-nested")}, 1,
       "longer than 4096"},
      {"lora-gate/hostile-regex/nested-too-deep", {"lora-gate", f.path("ad-deep")}, 1,
       "nested deeper than 32"},
      // Matches nothing here (no X), in linear time: the config names none of the tensors.
      {"lora-gate/hostile-regex/backtracking", {"lora-gate", f.path("ad-backtrack")}, 1,
       "target_modules does not name"},
      {"lora-gate/hostile-regex/backreference", {"lora-gate", f.path("ad-backref")}, 1,
       "backreference"},
      {"lora-gate/hostile-regex/lookahead", {"lora-gate", f.path("ad-lookahead")}, 1,
       "lookaround"},
      {"lora-gate/unknown-option", {"lora-gate", f.path("ad-empty"), "--modle", "x"}, 2,
       "--modle"},
      // report
      {"report/missing", {"report", f.missing()}, 1, f.missing()},
      {"report/unknown-option", {"report", f.path("emptydir"), "--htm", "x"}, 2, "--htm"},
      // parity (libtorch module)
      {"parity/checkpoint-missing",
       {"parity", "--checkpoint", f.missing(), "--reference", f.path("empty")},
       1,
       f.missing()},
      {"parity/reference-truncated",
       {"parity", "--checkpoint", std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf",
        "--reference", f.path("ref-cut.safetensors")},
       1,
       f.path("ref-cut.safetensors")},
      {"parity/bad-dtype",
       {"parity", "--checkpoint", f.missing(), "--reference", f.missing(), "--dtype", "fp8"},
       2,
       "fp8"},
      // profile
      {"profile/checkpoint-missing", {"profile", "--device", "cpu", "--checkpoint", f.missing()},
       1, f.missing()},
      {"profile/zero-width", {"profile", "--device", "cpu", "--widths", "0"}, 2, "--widths"},
      {"profile/absurd-batch", {"profile", "--device", "cpu", "--batch", "1000000000000"}, 2,
       "--batch"},
      {"profile/nan-pad-fraction", {"profile", "--device", "cpu", "--pad-fraction", nanopt}, 2,
       "--pad-fraction"},
      {"profile/zero-repeats", {"profile", "--device", "cpu", "--repeats", "0"}, 2, "--repeats"},
      {"profile/absurd-width", {"profile", "--device", "cpu", "--widths", "1000000000"}, 2,
       "--widths"},
      {"profile/absurd-repeats", {"profile", "--device", "cpu", "--repeats", "1000000000"}, 2,
       "--repeats"},
      {"profile/unknown-option", {"profile", "--widht", "64"}, 2, "--widht"},
      // suite and the binary itself
      {"suite/unknown-option", {"suite", "--otu", "x"}, 2, "--otu"},
      {"tprobe/unknown-subcommand", {"frobnicate"}, 2, "frobnicate"},
  };
}

class BadInputMatrix : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { files_ = new Files(); }
  static void TearDownTestSuite() { delete files_; }
  static Files* files_;
};
Files* BadInputMatrix::files_ = nullptr;

TEST_F(BadInputMatrix, EveryCaseIsRefusedOnOneLineWithItsExitCodeAndNoEvidence) {
  const std::string out_dir = make_temp_dir();
  const std::vector<Case> cases_list = cases(*files_);
  for (const Case& c : cases_list) {
    SCOPED_TRACE(c.name);
    const std::string json = out_dir + "/" + std::to_string(&c - cases_list.data()) + ".json";
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--json", json});
    RunResult r = run_tprobe(args);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err << r.out;
    EXPECT_LT(r.exit_code, 128) << "killed by a signal";
    EXPECT_NE(r.err.find(c.needle), std::string::npos)
        << "message lacks '" << c.needle << "': " << r.err;
    // One line (CLI11's usage errors add a "Run with --help" line), printable ASCII only.
    std::string first = r.err.substr(0, r.err.find('\n'));
    EXPECT_LE(first.size(), 300u) << first;
    for (char ch : r.err) EXPECT_TRUE(ch == '\n' || (ch >= 0x20 && ch < 0x7f)) << r.err;
    EXPECT_FALSE(file_exists(json)) << "evidence written by a failed run";
  }
}

}  // namespace
}  // namespace tprobe::testing
