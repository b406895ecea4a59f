// Temporary file + fsync + rename, so readers see the old file or the whole new one.
#include "tprobe/core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "tprobe/core/error.hpp"

namespace tprobe::core {

void write_file_atomic(const std::string& path, std::string_view contents) {
  if (path.empty()) fail("cannot write an output file with an empty path");
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail("cannot create a temporary file beside '{}': {}", path, std::strerror(errno));
  auto cleanup_and_fail = [&](const char* what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail("cannot write '{}' ({}): {}", path, what, std::strerror(err));
  };
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      cleanup_and_fail("write");
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) cleanup_and_fail("chmod");
  if (::fsync(fd) != 0) cleanup_and_fail("fsync");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write '{}' (close): {}", path, std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write '{}' (rename): {}", path, std::strerror(err));
  }
}

}  // namespace tprobe::core
