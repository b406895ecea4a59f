// A file read as a byte stream, gunzipped when it starts with the gzip magic (internal to
// tprobe_core): the one place the dataset reader and the trace reader decode files.
//
// zlib's gzread is not used: it silently ignores bytes after the last gzip member, and a file
// whose second half is not gzip is a broken file, not a shorter one (issue 23: `kernels` took
// gzip followed by garbage that `padding` refused). Members concatenated as gzip allows are read
// one after another. POSIX calls only (code beside libtorch does not use std::filesystem).
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tprobe::core::detail {

class DecodedFile {
 public:
  static constexpr std::size_t kRawBytes = std::size_t{1} << 17;

  // Takes ownership of `fd` (open for reading); `path` names the file in messages.
  DecodedFile(int fd, std::string path);
  ~DecodedFile();
  DecodedFile(const DecodedFile&) = delete;
  DecodedFile& operator=(const DecodedFile&) = delete;

  // Up to `size` decoded bytes into `buf`; 0 only at the end of the file. Throws tprobe::Error
  // naming the file, `where` (e.g. "after line 7") and what is wrong: a read error, a gzip stream
  // that ends early, corrupt gzip data, bytes that are not gzip after a complete member.
  std::size_t read(char* buf, std::size_t size, const std::string& where);

  bool gzip() const { return gzip_; }

 private:
  bool read_raw(const std::string& where);
  [[noreturn]] void fail_trailing(uint64_t at) const;

  std::string path_;
  int fd_ = -1;
  bool gzip_ = false;
  z_stream z_{};
  std::vector<char> raw_;  // file bytes (gzip input, or the first bytes of a plain file)
  std::size_t raw_end_ = 0;
  uint64_t raw_total_ = 0;     // file bytes read so far
  bool member_done_ = false;   // the current gzip member has ended
  uint64_t member_start_ = 0;  // file offset of the current member
  uint64_t member_out_ = 0;    // bytes the current member decoded to
};

// A whole plain-or-gzip file (by content: bytes after the last gzip member refused) as text, at
// most 1 GiB decoded, so that a gzip bomb is an error, not an OOM; a FIFO yields to a signal
// (input_file.hpp); growth that fails is "out of memory reading PATH (N bytes asked)". `what`
// names the file's kind in errors ("a raw trace of one step", "an evidence file").
std::string read_decoded_file(const std::string& path, const char* what);

}  // namespace tprobe::core::detail
