// `tprobe suite`: the main job. Runs every probe on its embedded defaults (and the committed
// fixtures) as a child process of this binary, one evidence file each in one folder, then the
// report next to them; prints one progress line per probe and a short summary. docs/suite.md.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <map>
#include <set>

#include "probes/probe.hpp"
#include "probes/suite_plan.hpp"
#include "tprobe/config.hpp"
#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/report/report.hpp"

namespace tprobe::probes {

namespace {

// The main job: every probe's steps, in the registry's order (probe.hpp, ProbeInfo::suite_steps),
// with their CPU arguments (suite_plan() picks the CUDA ones).
std::vector<SuiteStep> steps() {
  std::vector<SuiteStep> all;
  for (const ProbeInfo& p : all_probes()) {
    all.insert(all.end(), p.suite_steps.begin(), p.suite_steps.end());
  }
  return all;
}

struct SuiteOptions {
  std::string out = "out";
  std::string fixtures;  // empty: installed, then the source tree's (find_fixtures)
  std::string device = "auto";
  bool quiet = false;  // no summary lines from the report
  std::vector<std::string> skip;  // step names not to run (--skip)
};

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

void make_dirs(const std::string& dir) {
  std::string cur;
  for (std::size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
        fail("{}: cannot create: {}", cur, std::strerror(errno));
      }
    }
    if (i < dir.size()) cur += dir[i];
  }
}

// Where this run's steps read their fixtures (suite_plan.hpp: --fixtures, installed, source tree).
FixturesChoice fixtures_for(const std::string& given, const std::string& exe) {
  return find_fixtures(given, exe, TPROBE_SOURCE_FIXTURES_DIR, core::is_directory);
}

// What the torch module says about CUDA (loads it: asked only in a CUDA build).
CudaProbe query_cuda() {
  const core::Environment env = collect_environment(Needs::kTorchIfAvailable);
  if (env.cuda_usable) return {true, env.device_name.empty() ? "device 0" : env.device_name};
  return {false, env.cuda_unusable_reason.empty() ? "the torch module says no CUDA device"
                                                  : env.cuda_unusable_reason};
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) fail("cannot find this tprobe binary (/proc/self/exe): {}", std::strerror(errno));
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string replace_all(std::string s, const std::string& what, const std::string& with) {
  for (std::size_t at = s.find(what); at != std::string::npos;
       at = s.find(what, at + with.size())) {
    s.replace(at, what.size(), with);
  }
  return s;
}

// Runs `exe args...` with stdout and stderr into `log`; returns the exit status (128+signal).
int run_child(const std::string& exe, const std::vector<std::string>& args,
              const std::string& log) {
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", log, std::strerror(errno));
  std::vector<char*> argv;
  std::string name = "tprobe";
  argv.push_back(name.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    fail("cannot start a child process: {}", std::strerror(errno));
  }
  if (pid == 0) {
    // Its own process group: a Ctrl-C at the terminal reaches the suite alone, which passes
    // exactly one signal on (two would make the child exit without writing its evidence).
    ::setpgid(0, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(exe.c_str(), argv.data());
    _exit(127);
  }
  ::close(fd);
  int status = 0;
  bool forwarded = false;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) fail("waiting for a child process: {}", std::strerror(errno));
    if (!forwarded && core::interrupt_requested()) {
      ::kill(pid, core::interrupt_signal());
      forwarded = true;
    }
    ::usleep(20 * 1000);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// The list of files a suite run wrote into --out, relative to it, one per line: the next run
// removes exactly these and refuses to start beside anything else.
constexpr const char* kManifest = ".tprobe-suite-files";

// Every file a suite run writes into `out`, relative to it (the children's; the manifest aside).
std::vector<std::string> suite_files() {
  std::vector<std::string> files;
  for (const SuiteStep& s : steps()) {
    files.push_back(std::string(s.name) + ".json");
    files.push_back(std::string("logs/") + s.name + ".txt");
  }
  files.insert(files.end(),
               {"bucket-order.jsonl", "report.html", "report.md", "logs/report.txt"});
  return files;
}

// Files under `dir` (one level of folders, as the suite writes), relative to it.
void list_files(const std::string& dir, const std::string& rel, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat st {};
    const std::string full = dir + "/" + n;
    if (::lstat(full.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && rel.empty()) {
      list_files(full, n + "/", out);
      if (n != "logs") out.push_back(n + "/");  // a folder the suite never makes
    } else {
      out.push_back(rel + n);
    }
  }
  ::closedir(d);
}

// A file's digest for the manifest: its size and FNV-1a (64-bit) over its bytes, as hex — enough
// to tell that a file is no longer the one the suite wrote (not a defence against a forger).
std::string file_digest(const std::string& path) {
  const std::string bytes = core::read_input_file(path, "suite output");
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{}:{:016x}", bytes.size(), h);
}

// A non-empty --out is used only when everything in it is what an earlier suite run wrote: its
// manifest names each file with the digest it had, and a file is removed only when it still has
// it. Anything else — a file the manifest does not name, one whose content changed since, a
// manifest line without a digest (an older or edited manifest) — is refused and named, never
// deleted: the folder may hold the user's files.
void clean_out(const std::string& out) {
  std::vector<std::string> present;
  list_files(out, "", present);
  if (present.empty()) return;
  std::map<std::string, std::string> listed;  // name -> digest
  const std::string manifest = out + "/" + kManifest;
  struct stat st {};
  if (::lstat(manifest.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    std::istringstream in(
        core::read_input_file(manifest, "suite manifest", core::kMaxSmallInputBytes));
    const auto known = suite_files();
    // Only names a suite run writes (its files, or its own --json directly inside --out): a
    // manifest cannot make it delete anything else.
    for (std::string line; std::getline(in, line);) {
      const auto tab = line.find('\t');
      const std::string digest = tab == std::string::npos ? "" : line.substr(0, tab);
      const std::string name = tab == std::string::npos ? line : line.substr(tab + 1);
      if (std::find(known.begin(), known.end(), name) != known.end() ||
          (!name.empty() && name.find('/') == std::string::npos && name[0] != '.')) {
        listed[name] = digest;
      }
    }
  }
  std::sort(present.begin(), present.end());
  std::vector<std::string> ours;
  for (const std::string& f : present) {
    if (f == kManifest) continue;
    const auto it = listed.find(f);
    if (it == listed.end()) {
      fail_usage("--out '{}' holds '{}', which no earlier suite run wrote there: give an empty or "
                 "new folder (the suite never deletes files it did not write)",
                 out, f);
    }
    struct stat fst {};
    if (::lstat((out + "/" + f).c_str(), &fst) != 0 || !S_ISREG(fst.st_mode) ||
        it->second.empty() || file_digest(out + "/" + f) != it->second) {
      fail_usage("--out '{}' holds '{}', which is not the file an earlier suite run wrote there "
                 "({}): it is left alone; move it, or give an empty or new folder",
                 out, f,
                 it->second.empty() ? "the manifest gives no digest for it"
                                    : "its content changed since");
    }
    ours.push_back(f);
  }
  for (const std::string& f : ours) ::unlink((out + "/" + f).c_str());
  ::unlink(manifest.c_str());
}

// What this run wrote into `out` (and its own --json when that lies directly inside it), each
// line "DIGEST<tab>NAME".
void write_manifest(const std::string& out, const core::OutputGuard& files) {
  std::string text;
  auto add = [&](const std::string& name) {
    struct stat st {};
    const std::string full = out + "/" + name;
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    text += file_digest(full) + "\t" + name + "\n";
  };
  for (const std::string& f : suite_files()) add(f);
  const std::string folder = core::OutputGuard::resolve(out) + "/";
  for (const auto& e : files.entries()) {
    if (e.role != "--json" || e.resolved.compare(0, folder.size(), folder) != 0) continue;
    const std::string rel = e.resolved.substr(folder.size());
    if (rel.find('/') == std::string::npos) add(rel);
  }
  core::write_file_atomic(out + "/" + kManifest, text);
}

// Size: the main job's steps in order (plan, run each probe, the report, the headlines).
core::Outcome run(const SuiteOptions& o, RunContext& ctx) {
  const std::string exe = self_exe();
  const std::string out = o.out;
  const std::string since = core::utc_timestamp_now();
  // A bad --skip is refused before the folder is touched.
  {
    const std::vector<SuiteStep> all = steps();
    for (const std::string& name : o.skip) {
      auto is_name = [&](const SuiteStep& s) { return s.name == name; };
      if (std::none_of(all.begin(), all.end(), is_name)) {
        std::vector<std::string> names;
        for (const SuiteStep& s : all) names.push_back(s.name);
        fail_usage("--skip {}: no such step (the steps: {})", name, fmt::join(names, ", "));
      }
    }
  }
  // The device the steps are planned for, decided before the folder is touched (a --device cuda
  // without one is refused here).
  const SuiteDeviceChoice device =
      choose_suite_device(o.device, TPROBE_HAS_TORCH_CUDA != 0, query_cuda);
  const FixturesChoice fixtures = fixtures_for(o.fixtures, exe);
  clean_out(out);
  make_dirs(out + "/logs");
  const std::vector<SuiteStep> all = suite_plan(steps(), device.device);
  const std::size_t total = all.size() + 1;  // + the report
  ctx.out << fmt::format("tprobe suite: {} probes into {}/ (each probe's output in {}/logs/)\n",
                         all.size(), out, out);
  ctx.out << fmt::format("device {} ({}); fixtures {}\n", suite_device_name(device.device),
                         device.why,
                         fixtures.path.empty()
                             ? fmt::format("not found (looked at {})",
                                           fmt::join(fixtures.looked_at, ", "))
                             : fmt::format("{} ({})", fixtures.path, fixtures.source));
  auto resolved_args = [&](const SuiteStep& s) {
    std::vector<std::string> args;
    for (const auto& a : s.args)
      args.push_back(replace_all(replace_all(a, "{out}", out), "{fixtures}", fixtures.path));
    return args;
  };
  // What was decided, in the evidence whatever happens next: the device, the fixtures and every
  // step's arguments on that device.
  SuiteResults results;
  results.out = out;
  results.device = device;
  results.fixtures = fixtures;
  for (const SuiteStep& s : all) results.plan.push_back({s.name, resolved_args(s)});
  std::vector<SuiteStepResult>& rows = results.steps;
  int64_t& failed = results.failed;
  int64_t& said_no = results.said_no;
  int64_t& skipped = results.skipped;
  std::size_t index = 0;
  auto line = [&](const std::string& name, const std::string& state, double secs,
                  const std::string& where) {
    ctx.out << fmt::format("[{:>2}/{}] {:<15} {:<22} {:>7}  {}\n", ++index, total, name, state,
                           secs >= 0 ? fmt::format("{:.1f} s", secs) : "", where)
            << std::flush;
  };
  bool interrupted = false;
  for (const SuiteStep& s : all) {
    SuiteStepResult row;
    row.name = s.name;
    if (interrupted || core::interrupt_requested()) {
      interrupted = true;
      line(s.name, "not run (interrupted)", -1, "");
      row.kind = SuiteRowKind::kNotStarted;
      row.state = "not_run";
      row.message = "a signal stopped the suite before this step";
      rows.push_back(row);
      continue;
    }
    if (std::find(o.skip.begin(), o.skip.end(), s.name) != o.skip.end()) {
      ++skipped;
      line(s.name, "skipped (--skip)", -1, "");
      row.kind = SuiteRowKind::kNotStarted;
      row.state = "skipped";
      row.message = "--skip";
      rows.push_back(row);
      continue;
    }
    if (!s.needs.empty() && (fixtures.path.empty() || !exists(fixtures.path + "/" + s.needs))) {
      ++skipped;
      const std::string why =
          fixtures.path.empty()
              ? fmt::format("skipped: no fixtures (looked for {} in {}; give --fixtures)",
                            s.needs, fmt::join(fixtures.looked_at, ", "))
          : fixtures.source == "--fixtures"
              ? fmt::format("skipped: {}/{} not found (--fixtures)", fixtures.path, s.needs)
              : fmt::format("skipped: {}/{} not found (the {} fixtures)", fixtures.path, s.needs,
                            fixtures.source);
      line(s.name, "skipped", -1, why);
      row.kind = SuiteRowKind::kNotStarted;
      row.state = "skipped";
      row.message = why;
      rows.push_back(row);
      continue;
    }
    std::vector<std::string> args = resolved_args(s);
    const std::string evidence = out + "/" + s.name + ".json";
    const std::string log = out + "/logs/" + s.name + ".txt";
    args.push_back("--json");
    args.push_back(evidence);
    auto t0 = std::chrono::steady_clock::now();
    const int code = run_child(exe, args, log);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string state;
    if (core::interrupt_requested()) interrupted = true;
    if (interrupted && code == core::interrupted_exit_code()) {
      state = "interrupted";
    } else if (code == 0) {
      state = s.expect_no ? "ok (expected no!)" : "ok";
      if (s.expect_no) ++failed;
    } else if (code == 3) {
      state = s.expect_no ? "no, as expected" : "NO (exit 3)";
      if (!s.expect_no) ++said_no;
    } else {
      state = fmt::format("FAILED (exit {})", code);
      ++failed;
    }
    line(s.name, state, secs, code == 0 || code == 3 ? evidence : "see " + log);
    row.state = state == "interrupted" ? "interrupted"
                : code == 0          ? "ok"
                : code == 3          ? "no"
                                     : "failed";
    row.exit_code = code;
    row.expected_exit_code = s.expect_no ? 3 : 0;
    row.wall_time_s = secs;
    row.argv = args;
    if (code == 0 || code == 3 || state == "interrupted") row.evidence = evidence;
    row.log = log;
    row.why = s.why;
    rows.push_back(row);
  }
  if (interrupted) {
    write_manifest(out, ctx.files);
    // No report over a half-run suite: the evidence says which steps ran.
    ctx.evidence.results() = to_json(results);
    ctx.out << fmt::format("\nINTERRUPTED: the suite stopped; {}/ holds the evidence of the steps "
                           "that ran\n",
                           out);
    return core::Outcome::kInterrupted;
  }
  // The report over everything just written, next to it.
  const std::string log = out + "/logs/report.txt";
  auto t0 = std::chrono::steady_clock::now();
  const int code = run_child(exe, {"report", out, "--since", since}, log);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  line("report", code == 0 ? "ok" : fmt::format("FAILED (exit {})", code), secs,
       code == 0 ? out + "/report.html" : "see " + log);
  {
    SuiteStepResult row;
    row.kind = SuiteRowKind::kReport;
    row.name = "report";
    row.state = code == 0 ? "ok" : "failed";
    row.exit_code = code;
    row.wall_time_s = secs;
    row.html = out + "/report.html";
    row.markdown = out + "/report.md";
    rows.push_back(std::move(row));
  }
  if (code != 0) ++failed;
  write_manifest(out, ctx.files);

  // A headline per probe: the first fact the report found.
  if (!o.quiet && code == 0) {
    const core::Report rep = core::build_report(core::collect_evidence({out}), report_probes(), since);
    ctx.out << "\nheadlines\n";
    for (const auto& sec : rep.sections) {
      if (sec.facts.empty()) continue;
      const auto& f = sec.facts.front();
      std::string v = f.value.size() > 90 ? f.value.substr(0, 87) + "..." : f.value;
      ctx.out << fmt::format("  {:<15} {}: {}\n", sec.source.substr(0, sec.source.size() - 5),
                             f.label, v);
    }
  }
  ctx.out << fmt::format(
      "\n{} ok, {} said no, {} failed, {} skipped. Open {}/report.html in a browser; {}/report.md "
      "is "
      "the text summary.\n",
      static_cast<int64_t>(rows.size()) - failed - said_no - skipped, said_no, failed, skipped,
      out, out);
  ctx.evidence.results() = to_json(results);
  if (failed > 0) {
    ctx.evidence.diagnose(core::Severity::kError, "suite_failed",
                          fmt::format("{} step(s) failed: see {}/logs/", failed, out));
  }
  if (said_no > 0) {
    ctx.evidence.diagnose(core::Severity::kWarning, "suite_said_no",
                          fmt::format("{} probe(s) said no (exit 3)", said_no));
  }
  return failed + said_no == 0 ? core::Outcome::kOk : core::Outcome::kNo;
}

}  // namespace

void register_suite(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<SuiteOptions>();
  CLI::App* cmd = app.add_subcommand(
      "suite", "The main job: every probe on embedded defaults into one folder, then the report");
  cmd->add_option("--out", o->out, "Folder for the evidence files, logs and the report")
      ->capture_default_str();
  CLI::Option* fixtures_opt = cmd->add_option("--fixtures", o->fixtures,
                  "tprobe's committed fixtures (parity, kernels, lora-gate inputs). Default: the "
                  "installed <bindir>/../share/tprobe/fixtures, else this source tree's "
                  "tests/fixtures");
  cmd->add_option("--device", o->device,
                  "Where the measured steps (profile, levers) run: auto (cuda when the torch "
                  "module reports a usable CUDA device, else cpu), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "No headline per probe");
  cmd->add_option("--skip", o->skip,
                  "Steps not to run (comma list of step names, e.g. profile,levers)")
      ->delimiter(',');
  // Every file the children write is checked against the suite's own --json and its fixtures.
  auto declare = [o, fixtures_opt](core::OutputGuard& guard) {
    if (o->out.empty()) fail_usage("--out: the path is empty; give a folder");
    if (fixtures_opt->count() > 0 && o->fixtures.empty())
      fail_usage("--fixtures: the path is empty; give a folder (or leave the option out)");
    // The fixtures found without --fixtures are inputs too (a given --fixtures is one already).
    if (o->fixtures.empty()) {
      const FixturesChoice f = fixtures_for("", self_exe());
      if (!f.path.empty()) guard.input("fixtures (" + f.source + ")", f.path);
    }
    for (const std::string& f : suite_files()) guard.reserved("--out", o->out + "/" + f);
  };
  set.add(
      cmd, [o](RunContext& ctx) { return run(*o, ctx); }, Needs::kCore,
      {{"--fixtures"}, {}, declare});
}

// Not a step of itself; its evidence gets the report's generic section.
ProbeInfo suite_probe() { return {"suite", register_suite}; }

}  // namespace tprobe::probes
