// Temporary file + fsync + rename, so readers see the old file or the whole new one.
#include "tprobe/core/base/atomic_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"

namespace tprobe::core {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) fail("cannot write an output file with an empty path");
  tmp_ = path_ + ".tmp.XXXXXX";
  fd_ = ::mkstemp(tmp_.data());
  if (fd_ < 0) fail("cannot create a temporary file beside '{}': {}", path_, std::strerror(errno));
  slot_ = register_temporary(tmp_);  // so a second SIGINT/SIGTERM can remove it before exiting
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
  unregister_temporary(slot_);
}

void AtomicFile::abort_with(const char* what) {
  int err = errno;
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  fail("cannot write '{}' ({}): {}", path_, what, std::strerror(err));
}

void AtomicFile::write_at(const void* data, uint64_t size, uint64_t offset) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    auto chunk = static_cast<std::size_t>(std::min<uint64_t>(size, uint64_t{1} << 30));
    ssize_t n = ::pwrite(fd_, p, chunk, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      abort_with("write");
    }
    p += n;
    size -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

void AtomicFile::resize(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) abort_with("ftruncate");
}

void AtomicFile::commit() {
  if (::fchmod(fd_, 0644) != 0) abort_with("chmod");
  if (::fsync(fd_) != 0) abort_with("fsync");
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    fail("cannot write '{}' (close): {}", path_, std::strerror(err));
  }
  // Never renamed over a FIFO, a device or a folder (the output guard refuses them up front; this
  // holds for every writer).
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    ::unlink(tmp_.c_str());
    fail("cannot write '{}': it exists and is not a regular file", path_);
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    fail("cannot write '{}' (rename): {}", path_, std::strerror(err));
  }
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFile file(path);
  file.write_at(contents.data(), contents.size(), 0);
  file.commit();
}

}  // namespace tprobe::core
