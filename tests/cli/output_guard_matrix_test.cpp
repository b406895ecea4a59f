// The bad-input matrix's output half (docs/evidence.md, "Outputs"): an output that names an input
// (however spelled), lies in an input folder, names another output, or is not a regular file is
// refused before anything runs; a run that fails leaves none of its outputs. Every case asserts
// the exit code, the one-line message, that every input is byte-identical afterwards and that no
// output of the failed run exists.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

namespace fs = std::filesystem;

// Every regular file under `paths` (a file or a folder), with its bytes.
std::map<std::string, std::string> snapshot(const std::vector<std::string>& paths) {
  std::map<std::string, std::string> out;
  for (const auto& p : paths) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) out[e.path().string()] = read_text(e.path().string());
      }
    } else {
      out[p] = read_text(p);
    }
  }
  return out;
}

struct Case {
  std::string name;  // "<probe>/<class>/<what>"
  std::vector<std::string> args;
  int exit_code;
  std::vector<std::string> needles;  // each must appear in the message
  std::vector<std::string> inputs;   // byte-identical afterwards
  std::vector<std::string> absent;   // must not exist afterwards
};

// Inputs copied from the fixtures into one folder, so a failing guard damages only copies.
class Inputs {
 public:
  Inputs() : dir_(make_temp_dir()) {
    const std::string fx = TPROBE_FIXTURES_DIR;
    fs::copy(fx + "/gemma4-tiny-hf", path("ck"), fs::copy_options::recursive);
    fs::copy(fx + "/adapters/after-step", path("adapter"), fs::copy_options::recursive);
    fs::copy_file(fx + "/traces/hf-sdpa-2x256.json.gz", path("t.json.gz"));
    fs::copy_file(fx + "/raw_trace_small.json", path("rt.json"));
    fs::copy_file(fx + "/report/profile.json", path("e.json"));
    fs::copy_file(fx + "/example_points.csv", path("p.csv"));
    write_text(path("d.jsonl"), "{\"length\": 100}\n{\"length\": 300}\n{\"length\": 200}\n");
    fs::create_symlink(path("t.json.gz"), path("link.json.gz"));
    fs::create_directory(path("out"));
    fs::create_hard_link(path("ck/config.json"), path("out/hard.json"));
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

std::vector<Case> cases(const Inputs& in) {
  const std::string ck = in.path("ck"), ad = in.path("adapter"), t = in.path("t.json.gz");
  const std::string ref = ck + "/reference.safetensors", o = in.path("out");
  const std::string rel = "kernels";  // relative spellings are run from the input folder
  return {
      // An output that is an input, through every spelling.
      {"inspect/output-is-input/file-in-checkpoint-folder",
       {"inspect", ck, "--json", ck + "/model.safetensors"},
       2,
       {"--json", ck},
       {ck},
       {}},
      {"kernels/output-is-input/same-path", {"kernels", t, "--json", t}, 2, {"--json", t}, {t}, {}},
      {"kernels/output-is-input/dot-slash",
       {"kernels", t, "--json", in.dir() + "/./t.json.gz"},
       2,
       {"--json", t},
       {t},
       {}},
      {"kernels/output-is-input/dot-dot",
       {"kernels", t, "--json", o + "/../t.json.gz"},
       2,
       {"--json", "t.json.gz"},
       {t},
       {}},
      {"kernels/output-is-input/symlink",
       {"kernels", t, "--json", in.path("link.json.gz")},
       2,
       {"--json", "link.json.gz", t},
       {t},
       {}},
      {"kernels/output-is-input/diff-input-b",
       {"kernels", t, in.path("e.json"), "--json", in.path("e.json")},
       2,
       {"--json", "e.json"},
       {t, in.path("e.json")},
       {}},
      {"report/output-is-input/html",
       {"report", in.path("e.json"), "--html", in.path("e.json"), "--markdown", o + "/r.md"},
       2,
       {"--html", "e.json"},
       {in.path("e.json")},
       {o + "/r.md"}},
      {"lora-gate/output-is-input/adapter-config",
       {"lora-gate", ad, "--json", ad + "/adapter_config.json"},
       2,
       {"--json", ad},
       {ad},
       {}},
      {"parity/output-is-input/dump-hidden-over-reference",
       {"parity", "--checkpoint", ck, "--reference", ref, "--dump-hidden", ref},
       2,
       {"--dump-hidden", ref},
       {ck},
       {}},
      {"padding/output-is-input/dataset",
       {"padding", in.path("d.jsonl"), "--json", in.path("d.jsonl")},
       2,
       {"--json", "d.jsonl"},
       {in.path("d.jsonl")},
       {}},
      {"bucket/output-is-input/emit-order-over-dataset",
       {"bucket", in.path("d.jsonl"), "--emit-order", in.path("d.jsonl")},
       2,
       {"--emit-order", "d.jsonl"},
       {in.path("d.jsonl")},
       {}},
      {"scaling-fit/output-is-input/csv",
       {"scaling-fit", "--csv", in.path("p.csv"), "--json", in.path("p.csv")},
       2,
       {"--json", "p.csv"},
       {in.path("p.csv")},
       {}},
      {"profile/output-is-input/replay-trace",
       {"profile", "--device", "cpu", "--widths", "16", "--replay-trace", in.path("rt.json"),
        "--json", in.path("rt.json")},
       2,
       {"--json", "rt.json"},
       {in.path("rt.json")},
       {}},
      // Two outputs naming one file.
      {"report/two-outputs-one-file/html-and-markdown",
       {"report", in.path("e.json"), "--html", o + "/s", "--markdown", o + "/./s"},
       2,
       {"--html", "--markdown", "same file"},
       {in.path("e.json")},
       {o + "/s"}},
      {"suite/two-outputs-one-file/json-over-a-step",
       {"suite", "--out", o + "/suite", "--json", o + "/suite/env.json"},
       2,
       {"--json", "env.json", "same file"},
       {},
       {o + "/suite"}},
      {"suite/output-in-input/out-inside-fixtures",
       {"suite", "--out", ck + "/suite", "--fixtures", ck},
       2,
       {"--out", ck},
       {ck},
       {ck + "/suite"}},
      // Empty paths.
      {"padding/empty-path/json", {"padding", "--json", ""}, 2, {"--json", "empty"}, {}, {}},
      {"suite/empty-path/out", {"suite", "--out", ""}, 2, {"--out", "empty"}, {}, {}},
      // A failed run leaves none of its outputs: the last output's folder does not exist.
      {"report/failed-run/html-left-behind",
       {"report", in.path("e.json"), "--html", o + "/h.html", "--markdown", o + "/nodir/m.md"},
       1,
       {"--markdown", "nodir"},
       {in.path("e.json")},
       {o + "/h.html"}},
      {"bucket/failed-run/order-left-behind",
       {"bucket", in.path("d.jsonl"), "--emit-order", o + "/e.jsonl", "--json",
        o + "/nodir/o.json"},
       1,
       {"--json", "nodir"},
       {in.path("d.jsonl")},
       {o + "/e.jsonl"}},
      {"parity/failed-run/dump-left-behind",
       {"parity", "--checkpoint", ck, "--reference", ref, "--dump-hidden", o + "/h.st", "--json",
        o + "/nodir/o.json"},
       1,
       {"--json", "nodir"},
       {ck},
       {o + "/h.st"}},
      // A failure inside the run (not the guard): the side output written before it is dropped.
      {"bucket/failed-run/bad-cost-after-order",
       {"bucket", in.path("d.jsonl"), "--emit-order", o + "/e2.jsonl", "--scaling-fit",
        in.path("e.json")},
       1,
       {"e.json"},
       {in.path("d.jsonl"), in.path("e.json")},
       {o + "/e2.jsonl"}},
      {"relative/kernels/output-is-input",
       {"kernels", rel + "/../t.json.gz", "--json", "t.json.gz"},
       2,
       {"--json", "t.json.gz"},
       {t},
       {}},
      // A relative --out inside the fixtures folder that does not exist yet: still inside it.
      {"relative/suite/out-not-yet-inside-fixtures",
       {"suite", "--fixtures", "ck", "--out", "ck/new", "--quiet"},
       2,
       {"ck", "fixtures"},
       {ck},
       {ck + "/new"}},
      {"relative/inspect/output-not-yet-inside-input-folder",
       {"inspect", "ck", "--json", "ck/sub/../new/e.json"},
       2,
       {"--json", "inside the input folder"},
       {ck},
       {ck + "/new"}},
      // A hard link into an input folder names that input, as its symlink does.
      {"inspect/output-is-input/hard-link-into-checkpoint-folder",
       {"inspect", ck, "--json", o + "/hard.json"},
       2,
       {"--json", "hard link", ck},
       {ck, o + "/hard.json"},
       {}},
  };
}

void expect_clean_refusal(const Case& c, const RunResult& r,
                          const std::map<std::string, std::string>& before) {
  EXPECT_EQ(r.exit_code, c.exit_code) << r.err << r.out;
  for (const auto& n : c.needles) {
    EXPECT_NE(r.err.find(n), std::string::npos) << "message lacks '" << n << "': " << r.err;
  }
  ASSERT_FALSE(r.err.empty());
  const std::string first = r.err.substr(0, r.err.find('\n'));
  EXPECT_LE(first.size(), 400u) << first;
  if (c.exit_code == 1) {
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
  for (char ch : r.err) EXPECT_TRUE(ch == '\n' || (ch >= 0x20 && ch < 0x7f)) << r.err;
  EXPECT_EQ(snapshot(c.inputs), before) << "an input changed";
  for (const auto& p : c.absent) {
    EXPECT_FALSE(fs::exists(fs::symlink_status(p))) << p << " left by a failed run";
  }
}

TEST(OutputGuardMatrix, EveryCaseIsRefusedAndLeavesInputsAndNoOutputs) {
  const Inputs in;
  for (const Case& c : cases(in)) {
    SCOPED_TRACE(c.name);
    const auto before = snapshot(c.inputs);
    ASSERT_FALSE(before.empty() && !c.inputs.empty());
    std::vector<std::string> args = c.args;
    RunResult r;
    if (c.name.rfind("relative/", 0) == 0) {
      // Relative spellings: run from inside the inputs' folder.
      const std::string cwd = fs::current_path();
      fs::create_directory(in.path("kernels"));
      fs::current_path(in.dir());
      r = run_tprobe(args);
      fs::current_path(cwd);
    } else {
      r = run_tprobe(args);
    }
    expect_clean_refusal(c, r, before);
    // Staged files never stay behind either.
    for (const auto& e : fs::directory_iterator(in.path("out"))) {
      EXPECT_EQ(e.path().filename().string().find(".tprobe-"), std::string::npos) << e.path();
    }
  }
}

// A FIFO and a character device made here (the same device numbers as /dev/null), /dev/null and
// /dev/full themselves: refused with exit 1, each still what it was.
TEST(OutputGuardMatrix, NonRegularTargetsAreNeverReplaced) {
  const std::string dir = make_temp_dir();
  const std::string fifo = dir + "/fifo", dev = dir + "/null-dev";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const bool have_dev = ::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
  struct stat devst {};
  std::vector<std::string> targets = {fifo, "/dev/null", "/dev/full", dir};
  if (have_dev) targets.push_back(dev);
  for (const std::string& target : targets) {
    SCOPED_TRACE(target);
    struct stat before {};
    ASSERT_EQ(::lstat(target.c_str(), &before), 0);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"padding", "--json", target},
          std::vector<std::string>{"bucket", "--emit-order", target, "--json", dir + "/b.json"},
          std::vector<std::string>{"report", std::string(TPROBE_FIXTURES_DIR) + "/report",
                                   "--html", target, "--markdown", dir + "/r.md"}}) {
      RunResult r = run_tprobe(args);
      EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
      EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
      struct stat after {};
      ASSERT_EQ(::lstat(target.c_str(), &after), 0);
      EXPECT_EQ(after.st_mode, before.st_mode);
      EXPECT_EQ(after.st_ino, before.st_ino);
      EXPECT_EQ(after.st_rdev, before.st_rdev);
      EXPECT_FALSE(file_exists(dir + "/b.json"));
      EXPECT_FALSE(file_exists(dir + "/r.md"));
    }
  }
  if (have_dev) {
    ASSERT_EQ(::stat(dev.c_str(), &devst), 0);
    EXPECT_TRUE(S_ISCHR(devst.st_mode));
    EXPECT_EQ(devst.st_rdev, makedev(1, 3));
  } else {
    ADD_FAILURE() << "mknod failed (not root?): the character-device case did not run";
  }
  struct stat fst {};
  ASSERT_EQ(::stat(fifo.c_str(), &fst), 0);
  EXPECT_TRUE(S_ISFIFO(fst.st_mode));
}

// The running executable and its torch module are never outputs, however named (the issue's
// `env --json "$(which tprobe)"`); each is the same file afterwards (inode, size, mtime).
TEST(OutputGuardMatrix, TheExecutableAndItsTorchModuleAreNeverOutputs) {
  const std::string bin = TPROBE_BINARY;
  const std::string module = bin.substr(0, bin.rfind('/')) + "/libtprobe_torch.so";
  const std::string dir = make_temp_dir();
  const std::string link = dir + "/tprobe-link";
  ASSERT_EQ(::symlink(bin.c_str(), link.c_str()), 0);
  for (const std::string& target : {bin, module, link}) {
    SCOPED_TRACE(target);
    struct stat before {};
    ASSERT_EQ(::stat(target.c_str(), &before), 0) << "no " << target;
    RunResult r = run_tprobe({"env", "--json", target});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(r.err.find("executable") != std::string::npos ||
                r.err.find("torch module") != std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    struct stat after {};
    ASSERT_EQ(::stat(target.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(after.st_size, before.st_size);
    EXPECT_EQ(after.st_mtime, before.st_mtime);
  }
}

// A suite run's own files are removed by the next run into the folder only while they are what it
// wrote (the manifest's digests): an edited manifest naming the user's file, or an evidence file
// edited since, is refused and named, and both survive; a clean rerun reuses the folder.
TEST(OutputGuardMatrix, SuiteRemovesOnlyTheFilesItWroteUnchanged) {
  const std::string out = make_temp_dir() + "/out";
  const std::vector<std::string> suite = {
      "suite", "--out", out, "--fixtures", "/nonexistent", "--quiet", "--skip",
      "inspect,padding,scaling-fit,bucket,flops,mask,mask-padded,parity,profile,levers,kernels,"
      "lora-gate,lora-gate-trap"};
  RunResult first = run_tprobe(suite);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  const std::string manifest = out + "/.tprobe-suite-files";
  const std::string listed = read_text(manifest);
  ASSERT_NE(listed.find("\tenv.json\n"), std::string::npos) << listed;
  RunResult again = run_tprobe(suite);  // its own files, unchanged: cleaned and rewritten
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  // The user's file, named in an edited manifest without a digest, and with a made-up one.
  const std::string clean = read_text(manifest);
  write_text(out + "/mine.txt", "mine\n");
  for (const std::string& line :
       {std::string("mine.txt\n"), std::string("5:0123456789abcdef\tmine.txt\n")}) {
    write_text(manifest, clean + line);
    RunResult r = run_tprobe(suite);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("mine.txt"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_EQ(read_text(out + "/mine.txt"), "mine\n");
    EXPECT_TRUE(file_exists(out + "/env.json"));
  }
  write_text(manifest, clean);
  ::unlink((out + "/mine.txt").c_str());
  // An evidence file the user edited since: left alone and named.
  const std::string edited = read_text(out + "/env.json") + " ";
  write_text(out + "/env.json", edited);
  RunResult r = run_tprobe(suite);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("env.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("changed"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(out + "/env.json"), edited);
}

// A suite --out holding a file no suite run wrote is refused (never cleaned); the file stays.
TEST(OutputGuardMatrix, SuiteRefusesAnOutFolderWithForeignFiles) {
  const std::string out = make_temp_dir();
  write_text(out + "/stale.json", "{\"mine\": true}\n");
  RunResult r = run_tprobe({"suite", "--out", out, "--fixtures", "/nonexistent", "--quiet"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("stale.json"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_EQ(read_text(out + "/stale.json"), "{\"mine\": true}\n");
  EXPECT_FALSE(file_exists(out + "/env.json"));
  EXPECT_FALSE(file_exists(out + "/logs"));
}

// The report flags evidence that started before the run it belongs to (--since).
TEST(OutputGuardMatrix, ReportFlagsEvidenceOlderThanItsRun) {
  const std::string dir = make_temp_dir();
  const std::string ev = std::string(TPROBE_FIXTURES_DIR) + "/report/profile.json";
  const std::string started = nlohmann::json::parse(read_text(ev))["invocation"]["started_at"];
  RunResult stale = run_tprobe({"report", ev, "--html", dir + "/a.html", "--markdown",
                                dir + "/a.md", "--since", "2999-01-01T00:00:00.000Z", "--json",
                                dir + "/a.json"});
  ASSERT_EQ(stale.exit_code, 0) << stale.err;
  const auto doc = nlohmann::json::parse(read_text(dir + "/a.json"));
  bool flagged = false;
  for (const auto& d : doc["status"]["diagnostics"]) {
    flagged = flagged || (d["code"] == "stale_evidence" &&
                          d["message"].get<std::string>().find(started) != std::string::npos);
  }
  EXPECT_TRUE(flagged) << doc["status"].dump();
  EXPECT_NE(read_text(dir + "/a.md").find("stale"), std::string::npos);
  RunResult fresh = run_tprobe({"report", ev, "--html", dir + "/b.html", "--markdown",
                                dir + "/b.md", "--since", started, "--json", dir + "/b.json"});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_EQ(read_text(dir + "/b.json").find("stale_evidence"), std::string::npos);
}

}  // namespace
}  // namespace tprobe::testing
