// Temporary directories for tests that write files.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tprobe::testing_support {

inline std::string temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/tprobe-unit.XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

}  // namespace tprobe::testing_support
