// Internal to tprobe_core: the lines of a plain or gzip file, streamed (the dataset reader and
// the order-file reader read through it).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/decoded_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"

namespace tprobe::core::detail {

inline constexpr std::size_t kMaxLineBytes = std::size_t{64} << 20;  // a "line" beyond this is not text

// Lines of a plain or gzip file (gzip detected from the magic bytes, members concatenated as
// gzip allows, bytes after the last member refused: base/decoded_file.hpp), streamed through fixed
// buffers. Counts lines from 1; strips a trailing '\r'.
class LineReader {
  static constexpr std::size_t kBufferBytes = std::size_t{1} << 17;

 public:
  // `what` names the file's kind in the open error ("dataset", "order file").
  explicit LineReader(const std::string& path, const char* what = "dataset")
      : path_(path), buf_(kBufferBytes) {
    const int fd = open_input(path);  // a FIFO does not hold a signal off (input_file.hpp)
    if (fd < 0) fail("cannot open {} '{}': {}", what, path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      ::close(fd);
      fail("cannot open {} '{}': it is a directory", what, path);
    }
    file_ = std::make_unique<detail::DecodedFile>(fd, path);
  }

  int64_t line_number() const { return line_; }
  // Decoded bytes taken so far (the lines returned and the part of the next one read).
  uint64_t bytes_read() const { return before_ + pos_; }

  // Next line into `out`; false at the end of the file.
  bool next(std::string& out) {
    out.clear();
    bool any = false;
    for (;;) {
      if (pos_ == end_) {
        if (!refill()) {
          if (!any) return false;
          break;
        }
      }
      const char* begin = buf_.data() + pos_;
      const void* nl = std::memchr(begin, '\n', end_ - pos_);
      std::size_t take = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - begin)
                            : end_ - pos_;
      out.append(begin, take);
      any = true;
      if (out.size() > kMaxLineBytes) {
        fail("{}:{}: line longer than {} bytes (not a text file?)", path_, line_ + 1,
             kMaxLineBytes);
      }
      pos_ += take;
      if (nl) {
        ++pos_;
        break;
      }
    }
    ++line_;
    if (!out.empty() && out.back() == '\r') out.pop_back();
    return true;
  }

 private:
  bool refill() {
    before_ += end_;
    pos_ = 0;
    end_ = file_->read(buf_.data(), buf_.size(), fmt::format("after line {}", line_));
    return end_ > 0;
  }

  std::string path_;
  std::unique_ptr<detail::DecodedFile> file_;
  std::vector<char> buf_;  // decoded bytes
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  int64_t line_ = 0;
  uint64_t before_ = 0;  // bytes of the buffers before this one
};

}  // namespace tprobe::core::detail
