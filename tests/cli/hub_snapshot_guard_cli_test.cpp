// Issue 46, item 1: an output never lands on a file that an input reaches, by any path. A
// Hugging Face cache snapshot is a folder of symlinks into `blobs/`; before the guard compared by
// identity, `--json` aimed at a blob (or at the snapshot's link itself) passed the check and
// overwrote the checkpoint's weights or config. Every probe with an output flag is tried against
// such a layout: each case must exit 2 with one line, leave every blob and link as it was, and
// leave no output behind. The negative controls run the same inputs with outputs beside them and
// must succeed, so the refusals are the guard's and not an unreadable input's.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

namespace fs = std::filesystem;

// A cache laid out as huggingface_hub lays it: snapshots/<rev>/<name> -> ../../blobs/<hash>.
class HubCache {
 public:
  HubCache() : dir_(make_temp_dir()) {
    const std::string fx = TPROBE_FIXTURES_DIR;
    // The checkpoint: weights, config and the parity reference as blobs.
    repo("model", {{"model.safetensors", fx + "/gemma4-tiny-hf/model.safetensors"},
                   {"config.json", fx + "/gemma4-tiny-hf/config.json"},
                   {"reference.safetensors", fx + "/gemma4-tiny-hf/reference.safetensors"},
                   {"backward.safetensors", fx + "/gemma4-tiny-hf/backward.safetensors"}});
    // The adapter.
    repo("adapter",
         {{"adapter_config.json", fx + "/adapters/peft-tiny-step1/adapter_config.json"},
          {"adapter_model.safetensors", fx + "/adapters/peft-tiny-step1/adapter_model.safetensors"}});
    // A rank folder of traces, an evidence folder, a dataset and a points CSV, all links.
    repo("ranks", {{"rank0.json.gz", fx + "/traces/hf-sdpa-2x256.json.gz"},
                   {"rank1.json.gz", fx + "/traces/hf-sdpa-stack-2x256.json.gz"}});
    repo("evidence", {{"profile.json", fx + "/report/profile.json"}});
    repo("data", {{"d.jsonl", ""}, {"p.csv", fx + "/example_points.csv"}},
         "{\"length\": 100}\n{\"length\": 300}\n{\"length\": 200}\n");
    // A folder linked whole from inside a snapshot: a new file in its target lies in the input.
    fs::create_directories(path("linked-blobs/tiny"));
    fs::copy(fx + "/gemma4-tiny-hf", path("linked-blobs/tiny"), fs::copy_options::recursive);
    fs::create_directories(path("fixtures/snapshots/r"));
    fs::create_directory_symlink("../../../linked-blobs/tiny",
                                 path("fixtures/snapshots/r/gemma4-tiny-hf"));
    fs::create_directory(path("out"));
  }
  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }
  // The snapshot folder of a repository, and one of its links, and the blob behind that link.
  std::string snap(const std::string& repo) const { return path(repo + "/snapshots/r"); }
  std::string link(const std::string& repo, const std::string& name) const {
    return snap(repo) + "/" + name;
  }
  std::string blob(const std::string& repo, const std::string& name) const {
    return path(repo + "/blobs/" + name + ".blob");
  }
  std::string root() const { return dir_; }

 private:
  void repo(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files,
            const std::string& text = "") {
    fs::create_directories(path(name + "/blobs"));
    fs::create_directories(snap(name));
    for (const auto& [file, from] : files) {
      if (from.empty()) {
        write_text(blob(name, file), text);
      } else {
        fs::copy_file(from, blob(name, file));
      }
      fs::create_symlink("../../blobs/" + file + ".blob", link(name, file));
    }
  }
  std::string dir_;
};

// A file's size and FNV-1a digest: what a failure prints stays short.
std::string digest(const std::string& bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : bytes) h = (h ^ ch) * 1099511628211ull;
  return std::to_string(bytes.size()) + ":" + std::to_string(h);
}

// Every regular file and every link under the cache, with its digest or its target.
std::map<std::string, std::string> state(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string p = e.path().string();
    if (p.find("/out/") != std::string::npos) continue;
    if (e.is_symlink()) {
      out[p] = "-> " + fs::read_symlink(e.path()).string();
    } else if (e.is_regular_file()) {
      out[p] = digest(read_text(p));
    }
  }
  return out;
}

struct Case {
  std::string name;
  std::vector<std::string> args;
  std::vector<std::string> needles;
};

std::vector<Case> cases(const HubCache& h) {
  const std::string ck = h.snap("model"), ad = h.snap("adapter"), ranks = h.snap("ranks");
  const std::string ref = h.link("model", "reference.safetensors");
  const std::string w = h.blob("model", "model.safetensors"), c = h.blob("model", "config.json");
  const std::string ac = h.blob("adapter", "adapter_config.json");
  const std::string trace = h.link("ranks", "rank0.json.gz");
  const std::string o = h.path("out");
  return {
      // The reproduction: the weights' blob behind the snapshot's link.
      {"inspect/json-at-weights-blob", {"inspect", ck, "--json", w}, {"--json", "model.safetensors"}},
      // The link itself: replacing it breaks the snapshot as surely.
      {"inspect/json-at-config-link", {"inspect", ck, "--json", h.link("model", "config.json")},
       {"--json", "inside the input folder"}},
      {"inspect/json-at-config-blob-by-dot-dot",
       {"inspect", ck, "--json", ck + "/../../blobs/config.json.blob"}, {"--json"}},
      {"parity/json-at-config-blob", {"parity", "--checkpoint", ck, "--reference", ref, "--json", c},
       {"--json", "config.json"}},
      {"parity/dump-hidden-at-weights-blob",
       {"parity", "--checkpoint", ck, "--reference", ref, "--dump-hidden", w, "--json",
        o + "/p.json"},
       {"--dump-hidden"}},
      {"parity/dump-hidden-at-reference-link",
       {"parity", "--checkpoint", ck, "--reference", ref, "--dump-hidden", ref}, {"--dump-hidden"}},
      // The "exited 3 and still overwrote the file".
      {"parity/backward-json-at-adapter-config-blob",
       {"parity", "--checkpoint", ck, "--reference", h.link("model", "backward.safetensors"),
        "--backward", "--adapter", ad, "--json", ac},
       {"--json", "adapter_config.json"}},
      {"lora-gate/json-at-adapter-config-blob", {"lora-gate", ad, "--json", ac},
       {"--json", "adapter_config.json"}},
      {"lora-gate/json-at-base-weights-blob", {"lora-gate", ad, "--checkpoint", ck, "--json", w},
       {"--json", "model.safetensors"}},
      {"profile/json-at-config-blob",
       {"profile", "--device", "cpu", "--checkpoint", ck, "--widths", "8", "--json", c},
       {"--json", "config.json"}},
      {"profile/raw-trace-at-weights-blob",
       {"profile", "--device", "cpu", "--checkpoint", ck, "--widths", "8", "--raw-trace", w},
       {"--raw-trace"}},
      {"profile/raw-memory-at-weights-link",
       {"profile", "--device", "cpu", "--checkpoint", ck, "--widths", "8", "--raw-memory",
        h.link("model", "model.safetensors")},
       {"--raw-memory"}},
      {"kernels/checkpoint-json-at-config-blob",
       {"kernels", trace, "--checkpoint", ck, "--json", c}, {"--json", "config.json"}},
      {"kernels/rank-folder-json-at-trace-blob",
       {"kernels", ranks, "--json", h.blob("ranks", "rank1.json.gz")}, {"--json", "rank1"}},
      {"kernels/config-link-json-at-its-blob",
       {"kernels", trace, "--config", h.link("model", "config.json"), "--json", c},
       {"--json", "config.json"}},
      {"mask/json-at-config-blob", {"mask", ck, "--width", "64", "--json", c},
       {"--json", "config.json"}},
      {"flops/json-at-config-blob",
       {"flops", "--config", h.link("model", "config.json"), "--json", c}, {"--json"}},
      {"levers/json-at-weights-blob",
       {"levers", "--device", "cpu", "--checkpoint", ck, "--widths", "8", "--json", w},
       {"--json", "model.safetensors"}},
      {"padding/json-at-dataset-blob",
       {"padding", h.link("data", "d.jsonl"), "--json", h.blob("data", "d.jsonl")}, {"--json"}},
      {"bucket/emit-order-at-dataset-blob",
       {"bucket", h.link("data", "d.jsonl"), "--emit-order", h.blob("data", "d.jsonl"), "--json",
        o + "/b.json"},
       {"--emit-order"}},
      {"scaling-fit/json-at-csv-blob",
       {"scaling-fit", "--csv", h.link("data", "p.csv"), "--json", h.blob("data", "p.csv")},
       {"--json"}},
      {"report/html-at-evidence-blob",
       {"report", h.snap("evidence"), "--html", h.blob("evidence", "profile.json"), "--markdown",
        o + "/r.md"},
       {"--html", "profile.json"}},
      // A folder linked whole from inside the input: files in its target, existing or new.
      {"suite/out-inside-a-folder-the-fixtures-link-to",
       {"suite", "--fixtures", h.snap("fixtures"), "--out", h.path("linked-blobs/tiny/out"),
        "--quiet"},
       {"links to"}},
      {"inspect/json-new-file-in-linked-folder",
       {"inspect", h.snap("fixtures") + "/gemma4-tiny-hf", "--json",
        h.path("linked-blobs/tiny/new.json")},
       {"--json", "inside the input folder"}},
  };
}

TEST(HubSnapshotGuard, EveryOutputFlagIsRefusedOnAnInputsBlobOrLink) {
  const HubCache h;
  const auto before = state(h.root());
  ASSERT_GT(before.size(), 15u);
  for (const Case& c : cases(h)) {
    SCOPED_TRACE(c.name);
    const RunResult r = run_tprobe(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
    for (const auto& n : c.needles) {
      EXPECT_NE(r.err.find(n), std::string::npos) << "message lacks '" << n << "': " << r.err;
    }
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    EXPECT_EQ(state(h.root()), before) << "a blob or link changed";
    for (const auto& e : fs::directory_iterator(h.path("out"))) {
      ADD_FAILURE() << "left behind: " << e.path();
    }
  }
}

// The negative controls: the same snapshot inputs, every output beside them, succeed; the cache
// is unchanged and each output exists.
TEST(HubSnapshotGuard, OutputsBesideTheCacheAreWritten) {
  const HubCache h;
  const auto before = state(h.root());
  const std::string o = h.path("out");
  const std::vector<std::vector<std::string>> runs = {
      {"inspect", h.snap("model"), "--json", o + "/i.json"},
      {"lora-gate", h.snap("adapter"), "--json", o + "/l.json"},
      {"kernels", h.snap("ranks"), "--json", o + "/k.json"},
      {"flops", "--config", h.link("model", "config.json"), "--json", o + "/f.json"},
      {"report", h.snap("evidence"), "--html", o + "/r.html", "--markdown", o + "/r.md"},
  };
  for (const auto& args : runs) {
    SCOPED_TRACE(args[0]);
    const RunResult r = run_tprobe(args);
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  }
  for (const char* f : {"i.json", "l.json", "k.json", "f.json", "r.html", "r.md"}) {
    EXPECT_TRUE(file_exists(o + "/" + f)) << f;
  }
  EXPECT_EQ(state(h.root()), before);
}

}  // namespace
}  // namespace tprobe::testing
