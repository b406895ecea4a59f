// The bad-input matrix (docs/evidence.md, "Bad input"): for each probe and each class of bad input
// (missing, empty, wrong type, truncated, absurd sizes, NaN/inf/negative, unknown option, evidence
// of the wrong probe, inputs accepted that should not be, resource limits) the documented exit
// code, a one-line message naming the file, field, line or option and no library text
// ("json.exception", "internal error", a backtrace), every input byte-identical afterwards, no
// evidence or other file left, and no death by a signal.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <utility>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_tprobe.hpp"
#include "support/synthetic_checkpoint.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/io/safetensors.hpp"
#include "support/gzip_text.hpp"

namespace tprobe::testing {
namespace {

struct Case {
  std::string name;  // "<probe>/<class>/<what>"
  std::vector<std::string> args;
  int exit_code;
  std::string needle;  // must appear in the message
};

std::string gzip_of(const std::string& text) { return testing_support::gzip_text(text); }

// A copy of the parity reference with `edit` applied to its tensors (name -> F32 values).
void write_reference_with(const std::string& from, const std::string& to,
                          const std::function<void(std::map<std::string, std::vector<float>>&,
                                                   std::map<std::string, std::vector<int64_t>>&)>&
                              edit) {
  core::SafetensorsFile ref = core::SafetensorsFile::open(from);
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::vector<int64_t> ids;
  std::vector<int64_t> ids_shape;
  for (const auto& t : ref.tensors()) {
    const std::vector<std::byte> owned = ref.read(t.name);
    const core::ByteSpan b{owned.data(), owned.size()};
    if (t.dtype == core::DType::kI64) {
      ids.resize(b.size / 8);
      std::memcpy(ids.data(), b.data, b.size);
      ids_shape = t.shape;
      continue;
    }
    ASSERT_EQ(t.dtype, core::DType::kF32) << t.name;
    std::vector<float>& v = f32[t.name];
    v.resize(b.size / 4);
    std::memcpy(v.data(), b.data, b.size);
    shapes[t.name] = t.shape;
  }
  edit(f32, shapes);
  std::vector<core::TensorToWrite> out;
  out.push_back({{"input_ids", core::DType::kI64, ids_shape}, ids.data()});
  for (auto& [name, v] : f32) out.push_back({{name, core::DType::kF32, shapes[name]}, v.data()});
  core::write_safetensors(to, out);
}

// Every regular file under `root` (recursively): what changes when a file is written, renamed
// over or created. Contents are compared separately (contents_of).
std::map<std::string, std::string> signature_of(const std::string& root) {
  std::map<std::string, std::string> out;
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0) return out;
  if (!S_ISDIR(st.st_mode)) {
    out[root] = std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
                std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) +
                ":" + std::to_string(st.st_mode);
    return out;
  }
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    for (auto& kv : signature_of(root + "/" + name)) out.insert(std::move(kv));
  }
  ::closedir(d);
  return out;
}

std::map<std::string, std::string> contents_of(const std::map<std::string, std::string>& files) {
  std::map<std::string, std::string> out;
  for (const auto& [path, sig] : files) {
    // Regular files only: opening a FIFO would block, a symbolic link is compared by its
    // signature.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) out[path] = read_text(path);
  }
  return out;
}

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
    // A checkpoint whose config disagrees with 18 of its tensors (issue 33: one line).
    ::mkdir(path("ck-disagree").c_str(), 0755);
    {
      const std::string hf = std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf";
      nlohmann::json c = nlohmann::json::parse(read_text(hf + "/config.json"));
      c["intermediate_size"] = c["intermediate_size"].get<int>() + 32;
      write_text(path("ck-disagree") + "/config.json", c.dump());
      write_text(path("ck-disagree") + "/model.safetensors", read_text(hf + "/model.safetensors"));
    }
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
    // An adapter whose safetensors header length runs 4 bytes into the data (issue 23).
    {
      ::mkdir(path("ad-hdrlen").c_str(), 0755);
      write_text(path("ad-hdrlen") + "/adapter_config.json", cfg);
      std::string longer = model;
      uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(longer[i]);
      n += 4;
      for (int i = 0; i < 8; ++i) longer[i] = static_cast<char>((n >> (8 * i)) & 0xff);
      write_text(path("ad-hdrlen") + "/adapter_model.safetensors", longer);
    }
    // A parity reference cut short, and references with values no reference can hold.
    const std::string ref_path = fixtures + "/gemma4-tiny-hf/reference.safetensors";
    std::string ref = read_text(ref_path);
    write_text(path("ref-cut.safetensors"), ref.substr(0, ref.size() / 2));
    write_reference_with(ref_path, path("ref-loss2.safetensors"), [](auto& v, auto& shape) {
      v["loss"] = {v["loss"][0], v["loss"][0]};
      shape["loss"] = {2};
    });
    write_reference_with(ref_path, path("ref-nan-logits.safetensors"), [](auto& v, auto&) {
      v["logits"][700] = std::numeric_limits<float>::quiet_NaN();
    });
    write_reference_with(ref_path, path("ref-inf-logits.safetensors"), [](auto& v, auto&) {
      v["logits"][5] = std::numeric_limits<float>::infinity();
    });
    write_reference_with(ref_path, path("ref-nan-loss.safetensors"), [](auto& v, auto&) {
      v["loss"][0] = std::numeric_limits<float>::quiet_NaN();
    });
    // Traces kernels accepted although they are wrong (issue 23).
    const std::string one_kernel =
        R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,)"
        R"( "ts": 10, "dur": 5, "args": {"device": 0, "stream": 7}}]})";
    write_text(path("trace-gz-garbage.json.gz"), gzip_of(one_kernel) + "garbage after the gzip");
    write_text(path("trace-two-event-arrays.json"),
               R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7,)"
               R"( "ts": 10, "dur": 5}], "traceEvents": [{"ph": "X", "cat": "kernel",)"
               R"( "name": "b", "pid": 0, "tid": 7, "ts": 20, "dur": 5}]})");
    write_text(path("trace-device-2^32.json"),
               R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,)"
               R"( "ts": 10, "dur": 5, "args": {"device": 4294967296, "stream": 7}}]})");
    // A row's recorded attribution outside the vocabulary (issue 49: tprobe's own traces).
    write_text(path("trace-recorded-bad-part.json"),
               R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,)"
               R"( "ts": 10, "dur": 5, "args": {"stream": 7, "tprobe_phase": "forward",)"
               R"( "tprobe_part": "lungs", "tprobe_layer": 0, "tprobe_layer_kind": "full"}}]})");
    write_text(path("trace-string-ts.json"),
               R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,)"
               R"( "ts": "ten", "dur": 5}]})");
    // Ids that are numbers but not integers (issue 33): read as 1, 1.5 put the row on device 1.
    const std::string kernel_with =
        R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": PID, "tid": 7,)"
        R"( "ts": 10, "dur": 5, "args": {"device": DEV, "stream": 7}}]})";
    auto kernel_event = [&](const std::string& pid, const std::string& dev) {
      std::string t = kernel_with;
      t.replace(t.find("PID"), 3, pid);
      t.replace(t.find("DEV"), 3, dev);
      return t;
    };
    write_text(path("trace-device-1.5.json"), kernel_event("0", "1.5"));
    write_text(path("trace-pid-1.5.json"), kernel_event("1.5", "0"));
    // Per-rank directories holding an entry named like a trace that is none (issue 33).
    for (const char* d : {"ranks-fifo", "ranks-dangling", "ranks-loop", "ranks-dir"}) {
      ::mkdir(path(d).c_str(), 0755);
      write_text(path(d) + "/rank0.json", one_kernel);
    }
    EXPECT_EQ(::mkfifo((path("ranks-fifo") + "/rank1.json").c_str(), 0644), 0);
    EXPECT_EQ(::symlink("no-such-trace.json", (path("ranks-dangling") + "/rank1.json").c_str()), 0);
    EXPECT_EQ(::symlink("rank1.json", (path("ranks-loop") + "/rank1.json").c_str()), 0);
    ::mkdir((path("ranks-dir") + "/rank1.json").c_str(), 0755);
    // A raw trace for --replay-trace followed by bytes that are not gzip (issue 33).
    write_text(path("raw-gz-garbage.json.gz"), gzip_of("{}") + "garbage after the gzip");
    write_text(path("trace-long-name.json"),
               R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": ")" +
                   std::string((std::size_t{16} << 20) + 1, 'k') +
                   R"(", "pid": 0, "tid": 7, "ts": 10, "dur": 5}]})");
    // Adapter configs that scale the adapter to nothing or give ranks the tensors do not have
    // (issue 33).
    auto adapter_with_field = [&](const char* d, const std::string& field) {
      std::string c = cfg;
      c.insert(c.find('{') + 1, field + ", ");
      adapter_with(d, c);
    };
    std::string alpha0 = cfg;
    const std::size_t la = alpha0.find("\"lora_alpha\":");
    alpha0 = alpha0.substr(0, la) + "\"lora_alpha\": 0, \"alpha_was\":" + alpha0.substr(la + 13);
    adapter_with("ad-alpha0", alpha0);
    adapter_with_field("ad-alpha-pattern0", R"("alpha_pattern": {"q_proj": 0})");
    adapter_with_field("ad-rank-pattern16", R"("rank_pattern": {"q_proj": 16})");
    adapter_with_field("ad-rank-pattern-list", R"("rank_pattern": [16])");
    // kernels evidence whose parts_steps is no step count (issue 33).
    // (Insertion-ordered: "schema" stays the first key, which says it is evidence.)
    const RunResult ev = run_tprobe(
        {"kernels", fixtures + "/traces/parts-small.json", "--json", path("kernels-ev.json")});
    const nlohmann::ordered_json doc =
        nlohmann::ordered_json::parse(read_text(path("kernels-ev.json")), nullptr, false);
    if (ev.exit_code != 0 || !doc.is_object() || !doc["results"].contains("parts_steps")) {
      throw std::runtime_error("kernels evidence of parts-small.json: " + ev.err);
    }
    for (const auto& [name, v] : std::vector<std::pair<std::string, nlohmann::ordered_json>>{
             {"two", "two"}, {"0", 0}, {"-3", -3}}) {
      nlohmann::ordered_json d = doc;
      d["results"]["parts_steps"] = v;
      write_text(path("kernels-ev-steps-" + name + ".json"), d.dump());
    }
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }
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
       {"padding", "--batch", "1000000000000"},
       2,
       "micro-batch"},
      {"padding/negative-micro-batch", {"padding", "--batch", "-2"}, 2, "micro-batch"},
      {"padding/nan-micro-batch", {"padding", "--batch", nanopt}, 2, "--batch"},
      // CLI11's usage errors on one line, with the --help hint on it (issue 33).
      {"padding/unknown-option", {"padding", "--micro-batches", "2"}, 2,
       "tprobe padding: error: The following argument was not expected: --micro-batches (run "
       "'tprobe padding --help')"},
      {"padding/bad-format", {"padding", "--format", "parquet"}, 2, "parquet"},
      // Integers as written, within their type; no empty path (issue 33).
      {"padding/micro-batch-not-an-integer", {"padding", "--batch", "1.5"}, 2,
       "--batch: '1.5' is not an integer"},
      {"padding/micro-batch-leading-zero", {"padding", "--batch", "010"}, 2,
       "--batch: '010' has a leading zero"},
      {"padding/empty-dataset-path", {"padding", "--dataset", ""}, 2,
       "--dataset: the path is empty"},
      {"padding/absurd-synthetic", {"padding", "--dataset", "synthetic:4294967294"}, 2,
       "at most 100000000 synthetic records"},
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
      // JSON errors in tprobe's words, with the byte (issue 33).
      {"flops/config-wrong-type",
       {"flops", "--config", f.path("config-text.json")},
       1,
       f.path("config-text.json") + ": not valid JSON at byte 2 near 'th': not a JSON value"},
      {"flops/config-truncated",
       {"flops", "--config", f.path("config-cut.json")},
       1,
       f.path("config-cut.json") + ": not valid JSON at byte 34 near '" +
           "ext_config\": {\"hidden_size\": 28': the text ends inside the JSON document"},
      {"flops/config-negative", {"flops", "--config", f.path("config-neg.json")}, 1, "hidden_size"},
      {"flops/absurd-batch", {"flops", "--batch", "1000000000000"}, 2, "batch"},
      {"flops/absurd-width", {"flops", "--width", "1000000000000000"}, 2, "width"},
      {"flops/nan-step-time", {"flops", "--step-time", nanopt}, 2, "--step-time"},
      {"flops/inf-peak", {"flops", "--peak-tflops", "inf"}, 2, "--peak-tflops"},
      {"flops/negative-step-time", {"flops", "--step-time", "-1"}, 2, "--step-time"},
      {"flops/duplicate-target", {"flops", "--targets", "q_proj,q_proj"}, 2, "q_proj"},
      {"flops/none-and-target", {"flops", "--targets", "none,q_proj"}, 2, "none"},
      {"flops/unknown-option", {"flops", "--widht", "2"}, 2, "--widht"},
      {"flops/step-time-below-peak", {"flops", "--step-time", "1e-300"}, 2,
       "--step-time 1e-300 s: the step's"},
      // An overflowing result is refused at its inputs: no 300-digit number (issue 33).
      {"flops/step-time-past-bound", {"flops", "--step-time", "1e308", "--peak-tflops", "1e-300"},
       2, "--step-time: '1e308' is above 1e+06"},
      {"flops/peak-past-bound", {"flops", "--step-time", "10", "--peak-tflops", "1e308"}, 2,
       "--peak-tflops: '1e308' is above 1e+06"},
      {"flops/config-and-model",
       {"flops", "--config", f.path("config-neg.json"), "--model", "gemma4-tiny"},
       2,
       "excludes"},
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
      {"kernels/gzip-then-garbage",
       {"kernels", f.path("trace-gz-garbage.json.gz")},
       1,
       "bytes of data that are not gzip follow the gzip stream"},
      {"kernels/duplicate-top-level-key",
       {"kernels", f.path("trace-two-event-arrays.json")},
       1,
       "the top-level key 'traceEvents' appears twice"},
      {"kernels/device-id-above-2^32",
       {"kernels", f.path("trace-device-2^32.json")},
       1,
       "is on device 4294967296: not a device index"},
      // A string where a trace has a number is refused, a decimal one too (issue 46;
      // docs/kernels.md).
      {"kernels/recorded-attribution-outside-vocabulary",
       {"kernels", f.path("trace-recorded-bad-part.json")}, 1,
       "traceEvents[0] ('kernel' event 'k') has args.tprobe_part \"lungs\": not a part"},
      {"kernels/string-ts-not-a-number", {"kernels", f.path("trace-string-ts.json")}, 1,
       "traceEvents[0] field 'ts' is the string \"ten\""},
      {"kernels/name-longer-than-16-MiB", {"kernels", f.path("trace-long-name.json")}, 1,
       "a string longer than 16777216 bytes"},
      {"kernels/device-id-1.5", {"kernels", f.path("trace-device-1.5.json")}, 1,
       "traceEvents[0] field 'args.device' has value 1.5: not an id"},
      {"kernels/pid-1.5", {"kernels", f.path("trace-pid-1.5.json")}, 1,
       "traceEvents[0] field 'pid' has value 1.5: not an id"},
      {"kernels/ranks-dir-with-fifo", {"kernels", f.path("ranks-fifo")}, 1,
       "entry '" + f.path("ranks-fifo") + "/rank1.json' is a FIFO, not a trace file"},
      {"kernels/ranks-dir-with-dangling-symlink", {"kernels", f.path("ranks-dangling")}, 1,
       "entry '" + f.path("ranks-dangling") + "/rank1.json' is a symbolic link to nothing"},
      {"kernels/ranks-dir-with-symlink-loop", {"kernels", f.path("ranks-loop")}, 1,
       "entry '" + f.path("ranks-loop") + "/rank1.json' is a symbolic link in a loop"},
      {"kernels/ranks-dir-with-json-directory", {"kernels", f.path("ranks-dir")}, 1,
       "entry '" + f.path("ranks-dir") + "/rank1.json' is a directory, not a trace file"},
      {"kernels/parts-steps-string",
       {"kernels", f.path("kernels-ev-steps-two.json"), f.path("kernels-ev.json")}, 1,
       "results: field 'parts_steps' must be an integer in 1..1073741824, got \"two\""},
      {"kernels/parts-steps-zero",
       {"kernels", f.path("kernels-ev-steps-0.json"), f.path("kernels-ev.json")}, 1,
       "results: field 'parts_steps' must be an integer in 1..1073741824, got 0"},
      {"kernels/parts-steps-negative",
       {"kernels", f.path("kernels-ev.json"), f.path("kernels-ev-steps--3.json")}, 1,
       "results: field 'parts_steps' must be an integer in 1..1073741824, got -3"},
      {"kernels/negative-skip", {"kernels", f.path("empty"), "--skip-first", "-1"}, 2,
       "--skip-first"},
      {"kernels/empty-input-path", {"kernels", ""}, 2, "inputs: the path is empty"},
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
      {"mask/materialise-too-large", {"mask", "--width", "4194304", "--materialise"}, 2,
       "at most 17179869184 (16 GiB) per mask"},
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
      // What scales an adapter to nothing, and ranks its tensors do not have (issue 33).
      {"lora-gate/alpha-zero", {"lora-gate", f.path("ad-alpha0")}, 1,
       "field 'lora_alpha' is 0: it scales every update to nothing"},
      {"lora-gate/alpha-pattern-zero", {"lora-gate", f.path("ad-alpha-pattern0")}, 1,
       "alpha_pattern 'q_proj' is 0: it scales every update to nothing"},
      {"lora-gate/rank-pattern-disagrees", {"lora-gate", f.path("ad-rank-pattern16")}, 1,
       "has rank 4 ([4, 64]), but " + f.path("ad-rank-pattern16") +
           "/adapter_config.json says r = 16 for it (rank_pattern 'q_proj')"},
      {"lora-gate/rank-pattern-not-an-object", {"lora-gate", f.path("ad-rank-pattern-list")}, 1,
       "field 'rank_pattern' must be an object"},
      {"lora-gate/safetensors-header-length-into-data", {"lora-gate", f.path("ad-hdrlen")}, 1,
       "runs past the header's JSON object"},
      // report
      {"report/missing", {"report", f.missing()}, 1, f.missing()},
      {"report/unknown-option", {"report", f.path("emptydir"), "--htm", "x"}, 2, "--htm"},
      {"report/empty-html", {"report", f.path("emptydir"), "--html", ""}, 2,
       "--html: the path is empty"},
      {"report/empty-markdown", {"report", f.path("emptydir"), "--markdown", ""}, 2,
       "--markdown: the path is empty"},
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
      // The adapter lora-gate refuses (r=8 config over r=4 tensors), refused by parity with the
      // same message (one shared check; ParityAndLoraGateRefuseOneAdapterAlike below).
      {"parity/config-disagrees/rank",
       {"parity", "--checkpoint", std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf",
        "--reference", std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf/reference.safetensors",
        "--adapter", f.path("ad-r8")},
       1,
       "r = 8"},
      {"parity/reference-loss-two-elements",
       {"parity", "--checkpoint", std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf",
        "--reference", f.path("ref-loss2.safetensors")},
       1,
       "'loss' has 2 elements, expected 1"},
      {"parity/reference-nan-logits",
       {"parity", "--checkpoint", std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf",
        "--reference", f.path("ref-nan-logits.safetensors")},
       1,
       "'logits' holds 1 non-finite values (the first at flat index 700)"},
      {"parity/reference-inf-logits",
       {"parity", "--checkpoint", std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf",
        "--reference", f.path("ref-inf-logits.safetensors")},
       1,
       "(the first at flat index 5)"},
      {"parity/reference-nan-loss",
       {"parity", "--checkpoint", std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf",
        "--reference", f.path("ref-nan-loss.safetensors")},
       1,
       "'loss' is nan: a reference must be finite"},
      // The config-vs-checkpoint error on one line (issue 33).
      {"profile/config-disagrees-with-checkpoint",
       {"profile", "--device", "cpu", "--checkpoint", f.path("ck-disagree"), "--widths", "16",
        "--warmup", "0", "--repeats", "1", "--trace", "off", "--memory", "off"},
       1,
       f.path("ck-disagree") + ": checkpoint disagrees with its config.json: " +
           "model.layers.0.mlp.gate_proj.weight: shape [96, 64] but the config expects [128, 64] "
           "(and 17 more"},
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
      {"profile/replay-trace-not-json",
       {"profile", "--device", "cpu", "--widths", "16", "--replay-trace",
        f.path("config-text.json")},
       1,
       f.path("config-text.json") + ": not valid JSON at byte 2 near 'th'"},
      {"profile/negative-pad-fraction",
       {"profile", "--device", "cpu", "--widths", "16", "--pad-fraction", "-0.5"},
       2,
       "--pad-fraction -0.5: must be in (0, 1)"},
      {"profile/lengths-past-widest-width",
       {"profile", "--device", "cpu", "--batch", "1", "--widths", "16", "--lengths", "32"},
       2,
       "--lengths value 32 is above the widest --widths (16)"},
      {"profile/replay-trace-gzip-then-garbage",
       {"profile", "--device", "cpu", "--widths", "16", "--replay-trace",
        f.path("raw-gz-garbage.json.gz")},
       1,
       "bytes of data that are not gzip follow the gzip stream"},
      {"profile/pad-fraction-pads-no-token",
       {"profile", "--device", "cpu", "--widths", "16", "--pad-fraction", "0.01"}, 2,
       "--pad-fraction 0.01: pads no token of the widest width (16 tokens); give at least "
       "0.0625"},
      {"profile/raw-trace-nothing-traced-on-cpu",
       {"profile", "--device", "cpu", "--widths", "16", "--raw-trace", f.path("never.json")}, 2,
       "--raw-trace: no step is traced on the cpu"},
      {"profile/raw-trace-with-trace-off",
       {"profile", "--device", "cpu", "--widths", "16", "--trace", "off", "--raw-trace",
        f.path("never.json")},
       2, "--raw-trace needs --trace on"},
      {"profile/table-width-not-a-width",
       {"profile", "--device", "cpu", "--widths", "16,24", "--table-width", "99"},
       2,
       "--table-width 99 is none of this run's widths (16, 24)"},
      {"profile/empty-replay-trace", {"profile", "--device", "cpu", "--replay-trace", ""}, 2,
       "--replay-trace: the path is empty"},
      {"profile/fit-peak-without-gpu-memory", {"profile", "--fit-peak", "allocated"}, 2,
       "--fit-peak needs --gpu-memory or --reserve-from-device"},
      {"profile/edge-search-without-gpu-memory", {"profile", "--edge-search", "off"}, 2,
       "--edge-search needs --gpu-memory or --reserve-from-device"},
      {"profile/edge-search-not-on-or-off",
       {"profile", "--device", "cpu", "--gpu-memory", "80", "--edge-search", "maybe"}, 2,
       "--edge-search: maybe not in {on,off}"},
      // issue 44: the reserve is a number or read off the device, not both; the CPU has none.
      {"profile/reserve-and-reserve-from-device",
       {"profile", "--device", "cpu", "--gpu-memory", "80", "--reserve", "2",
        "--reserve-from-device"},
       2, "--reserve excludes --reserve-from-device"},
      {"profile/reserve-from-device-on-the-cpu",
       {"profile", "--device", "cpu", "--widths", "16", "--reserve-from-device"}, 2,
       "--reserve-from-device needs a CUDA device (--device cpu has no device memory to read)"},
      // levers: every integer option within its type; the epoch's options need --dataset.
      {"levers/accum-past-int64",
       {"levers", "--dataset", "synthetic", "--accum", "9223372036854775808"}, 2,
       "--accum: '9223372036854775808' is past the largest value this option takes"},
      {"levers/seed-negative", {"levers", "--seed", "-1"}, 2,
       "--seed: '-1' is negative: this option takes 0 or more"},
      {"levers/sampler-seed-not-an-integer",
       {"levers", "--dataset", "synthetic", "--sampler-seed", "1e23"}, 2,
       "--sampler-seed: '1e23' is not an integer"},
      {"levers/sampler-without-dataset", {"levers", "--sampler", "shuffled"}, 2,
       "--sampler requires --dataset"},
      {"levers/order-file-without-dataset",
       {"levers", "--sampler", "order:" + f.path("empty")}, 2, "--sampler requires --dataset"},
      {"levers/accum-without-dataset", {"levers", "--accum", "4"}, 2,
       "--accum requires --dataset"},
      {"levers/epoch-samples-without-dataset", {"levers", "--epoch-samples", "4"}, 2,
       "--epoch-samples requires --dataset"},
      // Options that mean something only beside another one are refused without it (issue 33).
      {"parity/checkpointing-without-backward",
       {"parity", "--checkpoint", TPROBE_FIXTURES_DIR "/gemma4-tiny-hf", "--reference",
        TPROBE_FIXTURES_DIR "/gemma4-tiny-hf/reference.safetensors", "--checkpointing", "off"},
       2, "--checkpointing requires --backward"},
      {"parity/grad-baseline-suffix-without-backward",
       {"parity", "--checkpoint", TPROBE_FIXTURES_DIR "/gemma4-tiny-hf", "--reference",
        TPROBE_FIXTURES_DIR "/gemma4-tiny-hf/reference.safetensors", "--grad-baseline-suffix",
        "_x"},
       2, "--grad-baseline-suffix requires --backward"},
      {"mask/device-without-materialise", {"mask", "--device", "cuda"}, 2,
       "--device requires --materialise"},
      {"mask/repeats-without-backends", {"mask", "--repeats", "5"}, 2,
       "--repeats requires --backends"},
      {"mask/padded-length-without-backends", {"mask", "--padded-length", "100"}, 2,
       "--padded-length requires --backends"},
      {"kernels/model-with-parts-off",
       {"kernels", TPROBE_FIXTURES_DIR "/traces/parts-small.json", "--parts", "off", "--model",
        "gemma4-tiny"},
       2, "--model gives the layer kinds of the phase x part table, which --parts off turns off"},
      {"padding/seed-without-shuffled-order", {"padding", "--sampler-seed", "3"}, 2,
       "--sampler-seed seeds the shuffled order: give --sampler shuffled with it (the sequential "
       "order takes no seed)"},
      {"levers/reserve-without-gpu-memory", {"levers", "--reserve", "3"}, 2,
       "--reserve requires --gpu-memory"},
      {"profile/reserve-without-gpu-memory", {"profile", "--reserve", "3"}, 2,
       "--reserve requires --gpu-memory"},
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

// Cases that need more than arguments: standard output full or closed, an environment variable.
struct RunCase {
  Case c;
  RunOptions run;
};

std::vector<RunCase> run_cases(const Files& f) {
  const std::string fx = TPROBE_FIXTURES_DIR;
  const std::string trace = fx + "/traces/parts-small.json";
  RunOptions full;
  full.stdout_path = "/dev/full";
  RunOptions closed;
  closed.close_stdout = true;
  RunOptions no_module;
  no_module.env = {{"TPROBE_TORCH_MODULE", f.path("no-such-module.so")}};
  // An allocator that refuses every allocation a reader sizes by its input
  // (base/out_of_memory.hpp's fault injection: ASan's operator new aborts instead of throwing).
  RunOptions no_memory;
  no_memory.env = {{"TPROBE_FAULT_ALLOC_LIMIT", "0"}};
  return {
      // Out of memory at every reader is its read error, naming the file and the bytes asked
      // (issue 33, item 3). The dataset's first growth is 16 lengths of 8 bytes.
      {{"padding/out-of-memory-reading-the-dataset", {"padding", "--dataset", fx + "/lengths/small.jsonl"}, 1,
        "tprobe padding: error: out of memory reading " + fx + "/lengths/small.jsonl (128 bytes asked)"},
       no_memory},
      {{"kernels/out-of-memory-reading-the-trace", {"kernels", trace}, 1,
        "tprobe kernels: error: out of memory reading " + trace + " ("},
       no_memory},
      {{"inspect/out-of-memory-reading-the-config", {"inspect", "--checkpoint", fx + "/gemma4-tiny-hf"}, 1,
        "tprobe inspect: error: out of memory reading config '" + fx +
            "/gemma4-tiny-hf/config.json' ("},
       no_memory},
      {{"scaling-fit/out-of-memory-reading-the-csv", {"scaling-fit", "--csv", fx + "/example_points.csv"}, 1,
        "tprobe scaling-fit: error: out of memory reading points file '" + fx +
            "/example_points.csv' ("},
       no_memory},
      // A full or closed standard output is a failed run (issue 33): nothing committed.
      {{"kernels/stdout-full", {"kernels", trace}, 1,
        "tprobe kernels: error: cannot write to standard output: No space left on device"},
       full},
      {{"kernels/stdout-closed", {"kernels", trace}, 1,
        "tprobe kernels: error: standard output is closed"},
       closed},
      // The torch module that cannot be loaded, on one line naming where it was looked for.
      {{"parity/torch-module-not-loaded",
        {"parity", "--checkpoint", fx + "/gemma4-tiny-hf", "--reference",
         fx + "/gemma4-tiny-hf/reference.safetensors"},
        1,
        "the torch module could not be loaded (set TPROBE_TORCH_MODULE to its path, or "
        "rebuild): " +
            f.path("no-such-module.so") + ": not found"},
       no_module},
  };
}

TEST_F(BadInputMatrix, EveryCaseIsRefusedOnOneLineWithItsExitCodeAndNoEvidence) {
  const std::string out_dir = make_temp_dir();
  std::vector<RunCase> cases_list;
  for (Case& c : cases(*files_)) cases_list.push_back({std::move(c), {}});
  for (RunCase& c : run_cases(*files_)) cases_list.push_back(std::move(c));
  // The inputs: the bad files and the fixtures the cases read, by signature (inode, size, mtime)
  // after every case and by content at the end.
  auto all_inputs = [&] {
    std::map<std::string, std::string> sig = signature_of(files_->dir());
    for (const char* fx :
         {"/gemma4-tiny-hf", "/adapters/after-step", "/traces/parts-small.json"}) {
      for (auto& kv : signature_of(std::string(TPROBE_FIXTURES_DIR) + fx)) sig.insert(kv);
    }
    return sig;
  };
  // The executable and the torch module beside it, by signature after every case and by a digest
  // of their bytes at the end (hundreds of MB under ASan: not kept whole).
  const std::string binary = TPROBE_BINARY;
  const std::vector<std::string> programs = {
      binary, binary.substr(0, binary.rfind('/')) + "/libtprobe_torch.so"};
  auto program_signatures = [&] {
    std::map<std::string, std::string> sig;
    for (const std::string& p : programs) {
      for (auto& kv : signature_of(p)) sig.insert(kv);
    }
    return sig;
  };
  auto program_digests = [&] {
    std::vector<std::size_t> d;
    for (const std::string& p : programs) d.push_back(std::hash<std::string>{}(read_text(p)));
    return d;
  };
  const auto programs_before = program_signatures();
  ASSERT_GE(programs_before.size(), 1u) << "the executable is missing";
  const auto program_digests_before = program_digests();
  const auto inputs_before = all_inputs();
  const auto contents_before = contents_of(inputs_before);
  for (const RunCase& rc : cases_list) {
    const Case& c = rc.c;
    SCOPED_TRACE(c.name);
    const std::string json = out_dir + "/" + std::to_string(&rc - cases_list.data()) + ".json";
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--json", json});
    RunResult r = run_tprobe(args, rc.run);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err << r.out;
    EXPECT_LT(r.exit_code, 128) << "killed by a signal";
    EXPECT_NE(r.err.find(c.needle), std::string::npos)
        << "message lacks '" << c.needle << "': " << r.err;
    // One line, whatever the exit code (CLI11's usage errors too, their --help hint on it),
    // "tprobe <subcommand>: error: " first, printable ASCII only.
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    const std::string who =
        c.args.empty() || c.name.rfind("tprobe/", 0) == 0 ? "tprobe" : "tprobe " + c.args[0];
    EXPECT_EQ(r.err.rfind(who + ": error: ", 0), 0u) << r.err;
    EXPECT_LE(r.err.size(), 400u) << r.err;
    for (char ch : r.err) EXPECT_TRUE(ch == '\n' || (ch >= 0x20 && ch < 0x7f)) << r.err;
    // No library's own text: nlohmann's tags and wording, "internal error", c10's backtraces.
    for (const char* leak : {"json.exception", "internal error", "Exception raised from",
                             "frame #", "std::bad_alloc", "basic_string", "vector::",
                             "syntax error while parsing", "last read:", "Run with --help"}) {
      EXPECT_EQ(r.err.find(leak), std::string::npos) << "'" << leak << "' in: " << r.err;
    }
    EXPECT_FALSE(file_exists(json)) << "evidence written by a failed run";
    EXPECT_TRUE(signature_of(out_dir).empty()) << "a file left in the output folder";
    ::unlink(json.c_str());  // one failure above must not fail every later case
    EXPECT_EQ(all_inputs(), inputs_before) << "an input was written, replaced or added to";
    EXPECT_EQ(program_signatures(), programs_before) << "the executable or its module was touched";
  }
  EXPECT_EQ(contents_of(inputs_before), contents_before) << "an input's bytes changed";
  EXPECT_EQ(program_digests(), program_digests_before) << "the executable's or module's bytes changed";
}

// One adapter (an r=8 config over r=4 tensors) refused by lora-gate and parity --adapter with the
// same message: both read it through core::read_lora_adapter (issue 23, item 3).
TEST_F(BadInputMatrix, ParityAndLoraGateRefuseOneAdapterAlike) {
  const std::string fx = TPROBE_FIXTURES_DIR;
  RunResult gate = run_tprobe({"lora-gate", files_->path("ad-r8")});
  RunResult parity =
      run_tprobe({"parity", "--checkpoint", fx + "/gemma4-tiny-hf", "--reference",
                  fx + "/gemma4-tiny-hf/reference.safetensors", "--adapter", files_->path("ad-r8")});
  EXPECT_EQ(gate.exit_code, 1) << gate.err;
  EXPECT_EQ(parity.exit_code, 1) << parity.err;
  EXPECT_NE(gate.err.find("but " + files_->path("ad-r8") + "/adapter_config.json says r = 8"),
            std::string::npos)
      << gate.err;
  // The same message after each probe's own "tprobe <probe>: error: ".
  const std::string gate_prefix = "tprobe lora-gate: error: ";
  const std::string parity_prefix = "tprobe parity: error: ";
  ASSERT_EQ(gate.err.rfind(gate_prefix, 0), 0u) << gate.err;
  ASSERT_EQ(parity.err.rfind(parity_prefix, 0), 0u) << parity.err;
  EXPECT_EQ(parity.err.substr(parity_prefix.size()), gate.err.substr(gate_prefix.size()));
}

// report.md escapes what the evidence says (input HTML passed through before), and two evidence
// files of one probe give every figure and table of report.html an id of its own (issue 23).
TEST_F(BadInputMatrix, ReportEscapesMarkdownAndKeepsEveryIdUnique) {
  const std::string dir = make_temp_dir();
  const std::string fx = std::string(TPROBE_FIXTURES_DIR) + "/report/kernels.json";
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(read_text(fx));
  const std::string hostile = "<script>alert(1)</script> [click](javascript:x) `tick`\n# heading";
  doc["status"]["diagnostics"] = nlohmann::ordered_json::array(
      {{{"severity", "warning"}, {"code", "hostile"}, {"message", hostile}}});
  write_text(dir + "/a.json", doc.dump(2));
  write_text(dir + "/b.json", read_text(fx));
  RunResult r = run_tprobe(
      {"report", dir + "/a.json", dir + "/b.json", "--html", dir + "/r.html", "--markdown",
       dir + "/r.md"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = read_text(dir + "/r.md");
  EXPECT_EQ(md.find("<script>"), std::string::npos) << md;
  EXPECT_NE(md.find("&lt;script&gt;alert(1)&lt;/script&gt; \\[click\\](javascript:x) \\`tick\\` # heading"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("\n# heading"), std::string::npos) << md;
  const std::string html = read_text(dir + "/r.html");
  std::map<std::string, int> ids;
  for (std::size_t at = html.find(" id=\""); at != std::string::npos;
       at = html.find(" id=\"", at + 1)) {
    const std::size_t start = at + 5, end = html.find('"', start);
    ++ids[html.substr(start, end - start)];
  }
  int figures = 0;
  for (const auto& [id, n] : ids) {
    EXPECT_EQ(n, 1) << "id '" << id << "' appears " << n << " times";
    figures += id.rfind("fig-", 0) == 0 ? 1 : 0;
  }
  EXPECT_GE(figures, 2) << "the two sections' figures were not found";
}

// An event without "ph" is not silently dropped: it is counted and warned about (issue 23).
TEST_F(BadInputMatrix, TraceEventsWithoutPhAreCounted) {
  const std::string dir = make_temp_dir();
  write_text(dir + "/t.json",
             R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,)"
             R"( "ts": 10, "dur": 5}, {"cat": "kernel", "name": "no-ph", "pid": 0, "tid": 7,)"
             R"( "ts": 20, "dur": 5}]})");
  JsonRun run = run_json({"kernels", dir + "/t.json"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.doc["results"]["trace"]["health"]["skipped_events"], 1) << run.doc.dump();
  bool warned = false;
  for (const auto& d : run.doc["status"]["diagnostics"]) {
    warned = warned || d["code"] == "trace_skipped_events";
  }
  EXPECT_TRUE(warned) << run.doc["status"].dump();
  EXPECT_NE(run.r.out.find("1 event(s) left out: no 'ph' field"), std::string::npos) << run.r.out;
}

}  // namespace
}  // namespace tprobe::testing
