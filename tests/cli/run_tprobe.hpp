// Runs the built tprobe binary in a child process and captures what it printed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace tprobe::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

RunResult run_tprobe(const std::vector<std::string>& args);

// How the child runs: environment variables set in it, and where its standard output goes.
struct RunOptions {
  std::vector<std::pair<std::string, std::string>> env;
  std::string stdout_path;    // "" : captured (RunResult::out); else this file, e.g. /dev/full
  bool close_stdout = false;  // standard output closed (fd 1) when tprobe starts
};
RunResult run_tprobe(const std::vector<std::string>& args, const RunOptions& options);

// Runs tprobe and sends it `signal` after `delay_s` seconds (if it is still running then).
RunResult run_tprobe_signalled(const std::vector<std::string>& args, double delay_s, int signal);

// Several runs started together from this thread, each sent `signal` after `delay_s` seconds;
// `seconds` is each one's wall time from its start to its exit.
struct SignalledRun {
  RunResult r;
  double seconds = 0;
};
std::vector<SignalledRun> run_tprobes_signalled(const std::vector<std::vector<std::string>>& runs,
                                                double delay_s, int signal);

// A run with `--json PATH` appended, and the evidence it wrote (null when none).
struct JsonRun {
  RunResult r;
  nlohmann::json doc;
  bool written = false;
};
JsonRun run_json(std::vector<std::string> args);

// A fresh empty directory under the test temp dir.
std::string make_temp_dir();
std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);
bool file_exists(const std::string& path);

}  // namespace tprobe::testing
