// fork/exec runner for end-to-end CLI tests.
#include "run_tprobe.hpp"

#include <ftw.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace tprobe::testing {

namespace {

pid_t start_tprobe(const std::vector<std::string>& args, const std::string& out_path,
                   const std::string& err_path, const RunOptions& options = {}) {
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const std::string& to = options.stdout_path.empty() ? out_path : options.stdout_path;
    if (!freopen(to.c_str(), "w", stdout) || !freopen(err_path.c_str(), "w", stderr)) _exit(127);
    if (options.close_stdout) ::close(STDOUT_FILENO);
    for (const auto& [name, value] : options.env) setenv(name.c_str(), value.c_str(), 1);
    // No LeakSanitizer in the children: its stop-the-world tracer crashed (signal 11,
    // "LeakSanitizer has encountered a fatal error", exit 134) at the exit of a parity child
    // refusing its reference, under this fork/exec harness on a loaded machine only, not run by
    // hand. Appended to the caller's options (the test preset's detect_leaks=1 included: the last
    // value wins), so that ASan and UBSan stay as the caller set them; the unit and model tests
    // check leaks in-process. No registration of the globals either (report_globals=0): ASan
    // poisoned the redzones of the binary's ~100 MB of instrumented globals at every start
    // (`tprobe --help`: 0.20 s and 114 MB with it, 0.07 s and 28 MB without; docs/fuzzing.md).
    // Heap and stack checks stay on, and the unit, fuzz-corpus and model tests, which drive the
    // same readers in-process, keep the globals' checks.
    const char* asan = std::getenv("ASAN_OPTIONS");
    const std::string options_now = asan ? std::string(asan) + ":" : std::string();
    setenv("ASAN_OPTIONS", (options_now + "detect_leaks=0:report_globals=0").c_str(), 1);
    std::vector<char*> argv;
    std::string bin = TPROBE_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

RunResult result_of(int status, const std::string& out_path, const std::string& err_path) {
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(out_path);
  r.err = read_text(err_path);
  return r;
}

RunResult finish(pid_t pid, const std::string& out_path, const std::string& err_path) {
  int status = 0;
  waitpid(pid, &status, 0);
  return result_of(status, out_path, err_path);
}

}  // namespace

RunResult run_tprobe(const std::vector<std::string>& args) {
  std::string dir = make_temp_dir();
  std::string out_path = dir + "/stdout", err_path = dir + "/stderr";
  return finish(start_tprobe(args, out_path, err_path), out_path, err_path);
}

RunResult run_tprobe(const std::vector<std::string>& args, const RunOptions& options) {
  std::string dir = make_temp_dir();
  std::string out_path = dir + "/stdout", err_path = dir + "/stderr";
  return finish(start_tprobe(args, out_path, err_path, options), out_path, err_path);
}

RunResult run_tprobe_signalled(const std::vector<std::string>& args, double delay_s, int signal) {
  std::string dir = make_temp_dir();
  std::string out_path = dir + "/stdout", err_path = dir + "/stderr";
  const pid_t pid = start_tprobe(args, out_path, err_path);
  ::usleep(static_cast<useconds_t>(delay_s * 1e6));
  ::kill(pid, signal);  // a no-op if it has already exited (it is a zombie until waited for)
  return finish(pid, out_path, err_path);
}

std::vector<SignalledRun> run_tprobes_signalled(const std::vector<std::vector<std::string>>& runs,
                                                double delay_s, int signal) {
  struct Started {
    pid_t pid;
    std::string out, err;
    std::chrono::steady_clock::time_point t0;
  };
  std::vector<Started> started;
  for (const auto& args : runs) {
    const std::string dir = make_temp_dir();
    Started s{0, dir + "/stdout", dir + "/stderr", std::chrono::steady_clock::now()};
    s.pid = start_tprobe(args, s.out, s.err);
    started.push_back(s);
  }
  ::usleep(static_cast<useconds_t>(delay_s * 1e6));
  for (const Started& s : started) ::kill(s.pid, signal);
  // Reaped in any order as they exit, so that each one's time is its own.
  std::vector<SignalledRun> out(started.size());
  for (size_t left = started.size(); left > 0; --left) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    for (size_t i = 0; i < started.size(); ++i) {
      if (started[i].pid != pid) continue;
      out[i].seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started[i].t0).count();
      out[i].r = result_of(status, started[i].out, started[i].err);
    }
  }
  return out;
}

JsonRun run_json(std::vector<std::string> args) {
  const std::string path = make_temp_dir() + "/evidence.json";
  args.push_back("--json");
  args.push_back(path);
  JsonRun run;
  run.r = run_tprobe(args);
  run.written = file_exists(path);
  if (run.written) run.doc = nlohmann::json::parse(read_text(path));
  return run;
}

namespace {

std::vector<std::string>& temp_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

int open_entry(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_D) ::chmod(path, 0700);  // a test may have made it unwritable
  return 0;
}

int remove_entry(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_DP) {
    ::rmdir(path);
  } else {
    ::unlink(path);
  }
  return 0;
}

// At the test process's exit: its temporary folders go, unless a test failed (then they stay for
// a look, and the failure's output names them) or TPROBE_KEEP_TEST_DIRS is set.
void remove_temp_dirs() {
  const char* keep = std::getenv("TPROBE_KEEP_TEST_DIRS");
  if ((keep && *keep) || ::testing::UnitTest::GetInstance()->Failed()) return;
  for (const std::string& d : temp_dirs()) {
    // Directories first made writable so their entries can be unlinked, then removed depth-first.
    ::nftw(d.c_str(), open_entry, 16, FTW_PHYS);
    ::nftw(d.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
}

}  // namespace

std::string make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/tprobe-test.XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  if (temp_dirs().empty()) std::atexit(remove_temp_dirs);
  temp_dirs().push_back(tmpl);
  return tmpl;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace tprobe::testing
