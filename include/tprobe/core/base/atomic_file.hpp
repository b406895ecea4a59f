// Writing output files so that a crash never leaves half of one behind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tprobe::core {

// A file written under a temporary name beside `path` and renamed over it by commit(); destroyed
// without commit(), it removes the temporary. Every failure throws tprobe::Error naming `path`.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // pwrite at `offset`, retried until complete.
  void write_at(const void* data, uint64_t size, uint64_t offset);
  // Sets the file size; growing it leaves a hole (no bytes written), which sparse outputs use.
  void resize(uint64_t size);
  // chmod 0644, fsync, close, rename over `path`.
  void commit();

 private:
  [[noreturn]] void abort_with(const char* what);

  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  int slot_ = -1;  // interrupt.hpp's registry of temporaries
};

// Writes `contents` to `path` through an AtomicFile.
void write_file_atomic(const std::string& path, std::string_view contents);

}  // namespace tprobe::core
