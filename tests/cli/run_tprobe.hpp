// Runs the built tprobe binary in a child process and captures what it printed.
#pragma once

#include <string>
#include <vector>

namespace tprobe::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

RunResult run_tprobe(const std::vector<std::string>& args);

// A fresh empty directory under the test temp dir.
std::string make_temp_dir();
std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);
bool file_exists(const std::string& path);

}  // namespace tprobe::testing
