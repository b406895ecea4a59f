// A temporary directory removed with everything in it, for the model tests. POSIX only: the
// libtorch.so of the PyTorch 2.11 wheel exports its own copy of std::filesystem::remove_all, which
// wins symbol resolution over libstdc++'s and crashes (docs/gpu-host.md).
#pragma once

#include <ftw.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tprobe::testing {

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& stem = "tprobe_model") {
    const char* base = std::getenv("TMPDIR");
    path = std::string(base && *base ? base : "/tmp") + "/" + stem + ".XXXXXX";
    if (!mkdtemp(path.data())) throw std::runtime_error("mkdtemp failed");
  }
  ~TempDir() {
    nftw(
        path.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& str() const { return path; }
};

}  // namespace tprobe::testing
