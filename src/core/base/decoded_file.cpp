// A plain or gzip file as a decoded byte stream (see decoded_file.hpp).
#include "base/decoded_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/out_of_memory.hpp"

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/base/interrupt.hpp"

namespace tprobe::core::detail {

namespace {
std::string prefix(const std::string& path, const std::string& where) {
  return where.empty() ? path + ": " : path + ": " + where + ": ";
}
}  // namespace

DecodedFile::DecodedFile(int fd, std::string path)
    : path_(std::move(path)), fd_(fd), raw_(kRawBytes) {
  while (raw_end_ < 2 && read_raw("")) {
  }
  gzip_ = raw_end_ >= 2 && static_cast<unsigned char>(raw_[0]) == 0x1f &&
          static_cast<unsigned char>(raw_[1]) == 0x8b;
  if (gzip_) {
    if (inflateInit2(&z_, 15 + 16) != Z_OK) {
      ::close(fd_);
      fail("{}: cannot start gzip decoding (out of memory)", path_);
    }
    z_.next_in = reinterpret_cast<Bytef*>(raw_.data());
    z_.avail_in = static_cast<uInt>(raw_end_);
  }
}

DecodedFile::~DecodedFile() {
  if (gzip_) inflateEnd(&z_);
  if (fd_ >= 0) ::close(fd_);
}

bool DecodedFile::read_raw(const std::string& where) {
  // read_input: a FIFO or pipe waits in poll() slices, and a signal stops the read (Interrupted).
  const std::size_t n = read_input(fd_, raw_.data() + raw_end_, raw_.size() - raw_end_,
                                   where.empty() ? path_ : path_ + ": " + where);
  raw_total_ += static_cast<uint64_t>(n);
  raw_end_ += n;
  return n > 0;
}

std::size_t DecodedFile::read(char* buf, std::size_t size, const std::string& where) {
  if (size == 0) return 0;
  throw_if_interrupted();  // a gzip member can decode for long between two file reads
  if (!gzip_) {
    if (raw_end_ > 0) {  // the bytes read to look for the gzip magic
      const std::size_t n = std::min(size, raw_end_);
      std::memcpy(buf, raw_.data(), n);
      std::memmove(raw_.data(), raw_.data() + n, raw_end_ - n);
      raw_end_ -= n;
      return n;
    }
    return read_input(fd_, buf, size, where.empty() ? path_ : path_ + ": " + where);
  }
  const uInt out_size = static_cast<uInt>(std::min<std::size_t>(size, std::size_t{1} << 30));
  for (;;) {
    if (z_.avail_in == 0) {
      raw_end_ = 0;
      if (read_raw(where)) {
        z_.next_in = reinterpret_cast<Bytef*>(raw_.data());
        z_.avail_in = static_cast<uInt>(raw_end_);
      } else if (member_done_) {
        return 0;  // the last member ended exactly at the end of the file
      } else {
        fail("{}the gzip stream ends early (truncated gzip file?)", prefix(path_, where));
      }
    }
    if (member_done_) {
      // More bytes after a complete member: another member, or garbage.
      const uint64_t at = raw_total_ - z_.avail_in;
      if (*z_.next_in != 0x1f) fail_trailing(at);
      inflateReset(&z_);
      member_done_ = false;
      member_start_ = at;
      member_out_ = 0;
    }
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = out_size;
    const int ret = inflate(&z_, Z_NO_FLUSH);
    const std::size_t produced = out_size - z_.avail_out;
    member_out_ += produced;
    if (ret == Z_STREAM_END) {
      member_done_ = true;
    } else if (ret == Z_DATA_ERROR && member_start_ > 0 && member_out_ == 0) {
      fail_trailing(member_start_);
    } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
      fail("{}corrupt gzip data: {}", prefix(path_, where),
           z_.msg != nullptr ? z_.msg : "inflate failed");
    }
    if (produced > 0) return produced;
  }
}

void DecodedFile::fail_trailing(uint64_t at) const {
  struct stat st {};
  const uint64_t rest = ::fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) >= at
                            ? static_cast<uint64_t>(st.st_size) - at
                            : 0;
  fail("{}: {} bytes of data that are not gzip follow the gzip stream at byte {} (a damaged or "
       "concatenated file?)",
       path_, rest, at);
}

std::string read_decoded_file(const std::string& path, const char* what) {
  constexpr std::size_t kMaxBytes = std::size_t{1} << 30;
  const int fd = open_input(path);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail("{}: is a directory, not {}", path, what);
  }
  DecodedFile file(fd, path);
  std::string text;
  std::vector<char> buf(std::size_t{1} << 16);
  while (const std::size_t n = file.read(buf.data(), buf.size(), "")) {
    append_growing(text, buf.data(), n, path);
    if (text.size() > kMaxBytes) {
      fail("{}: larger than {} bytes (uncompressed): not {}", path, kMaxBytes, what);
    }
  }
  return text;
}

}  // namespace tprobe::core::detail
