// Inputs that yield to a signal (see input_file.hpp).
#include "tprobe/core/base/input_file.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/out_of_memory.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"

namespace tprobe::core {

namespace {
constexpr int kPollSliceMs = 100;
}  // namespace

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

int open_input(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  return fd;
}

std::size_t read_input(int fd, char* buf, std::size_t size, const std::string& path) {
  const int flags = ::fcntl(fd, F_GETFL);
  const bool waits = flags >= 0 && (flags & O_NONBLOCK) != 0;
  for (;;) {
    if (waits) {
      // Only a read that can wait checks: a regular file's read always ends, and code that runs
      // after the signal (the suite reading its interrupted child's evidence) still reads files.
      throw_if_interrupted();
      // A FIFO with no writer yet reads 0 bytes at once: only poll() tells data or a hang-up
      // (the writer closed: the end) from nothing yet.
      struct pollfd p {fd, POLLIN, 0};
      const int k = ::poll(&p, 1, kPollSliceMs);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) fail("{}: cannot read: {}", path, std::strerror(errno));
      if (k == 0) continue;
    }
    const ssize_t n = ::read(fd, buf, size);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) fail("{}: cannot read: {}", path, std::strerror(errno));
    return static_cast<std::size_t>(n);
  }
}

std::string read_input_file(const std::string& path, const char* what, std::size_t max_bytes) {
  const int fd = open_input(path);
  if (fd < 0) fail("cannot open {} '{}': {}", what, path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    fail("cannot open {} '{}': it is a directory", what, path);
  }
  // Grown to the file's size first, then by doubling (base/out_of_memory.hpp), so that an
  // allocation that fails names the bytes it asked for.
  const std::string what_path = fmt::format("{} '{}'", what, path);
  std::string text;
  if (S_ISREG(st.st_mode) && st.st_size > 0 && static_cast<std::size_t>(st.st_size) <= max_bytes) {
    const auto want = static_cast<std::size_t>(st.st_size) + 1;
    detail::allocating(what_path, want, [&] { text.reserve(want); });
  }
  char buf[1 << 16];
  while (const std::size_t n = read_input(fd, buf, sizeof buf, path)) {
    if (text.size() + n > max_bytes) {
      fail("{} is larger than {} bytes: not a file tprobe reads whole", what_path, max_bytes);
    }
    detail::append_growing(text, buf, n, what_path);
  }
  return text;
}

}  // namespace tprobe::core
