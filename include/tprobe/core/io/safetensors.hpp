// safetensors files: a header reader that checks every offset against the file, a data reader
// (pread into owned or caller-provided memory, never a mapping), and a small atomic writer (tiny
// test checkpoints, LoRA adapters).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tprobe::core {

// Every dtype the safetensors format defines. tprobe computes with BF16/F16/F32 only; the others
// are read, sized and reported, never crashed on.
enum class DType {
  kBool,
  kU8,
  kI8,
  kF8E4M3,
  kF8E5M2,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kI64,
  kU64,
  kF64
};

const char* to_string(DType dtype);  // the safetensors spelling: "BF16", "F8_E4M3", ...
std::optional<DType> parse_dtype(std::string_view text);
int64_t dtype_size(DType dtype);       // bytes per element
bool dtype_is_supported(DType dtype);  // BF16, F16, F32: what the model can load
// "bfloat16" / "float16" / "float32" (config.json's dtype names) -> DType; nullopt otherwise.
std::optional<DType> dtype_from_torch_name(std::string_view name);

// A tensor's identity without its data: what headers carry and what analysis needs.
struct TensorMeta {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;

  int64_t numel() const;    // product of shape (1 for a scalar)
  uint64_t nbytes() const;  // numel * dtype_size
};

// One header entry. Offsets are relative to the start of the data section (the spec's
// data_offsets), so the bytes live at file offset data_start + begin.
struct TensorInfo : TensorMeta {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Read-only view of bytes someone else owns (a tensor's bytes read into a buffer).
struct ByteSpan {
  const std::byte* data = nullptr;
  std::size_t size = 0;
};

// Headers larger than this are refused (the reference implementation uses the same limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1024 * 1024;

// One .safetensors file. open() reads and validates only the header (a few pread calls) and
// keeps the file open; tensor bytes are read with pread only when asked for, into memory the
// caller owns (read_into, read_data) or gets (read). The file is never memory-mapped: a mapped
// file that shrinks kills the process with SIGBUS (issue 46). Every read is checked: a short read
// (the file ended early), or a size or modification time after the read other than what open()
// saw, is the Error "<path> changed while it was read: <what>", and a read error names the file.
// Validation: file at least 8 bytes; header length <= 100 MB and within the file; header is a
// JSON object; each entry has a known dtype, a non-negative shape and data_offsets [begin, end]
// with end - begin == numel * dtype size; names unique; no offset beyond the data section;
// no two tensors overlap; no holes and no trailing bytes (the spec requires a fully indexed
// buffer). Every failure is a tprobe::Error naming the file and, where there is one, the tensor.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t header_size() const { return header_size_; }     // the JSON header's length
  uint64_t data_start() const { return 8 + header_size_; }  // file offset of the data section
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // In header (file) order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;    // nullptr when absent
  const TensorInfo& tensor(std::string_view name) const;  // throws naming file and tensor

  // The tensor's bytes, read into a new buffer (allocation failure: "out of memory reading ...").
  std::vector<std::byte> read(std::string_view name) const;
  // The tensor's bytes into `dst`, which holds `size` bytes; `size` must be the tensor's byte size
  // (an internal Error otherwise). No alignment is asked of `dst`.
  void read_into(std::string_view name, void* dst, std::size_t size) const;
  // `size` bytes of the data section from `offset` (relative to data_start(), as a tensor's
  // begin is) into `dst`: one tensor, part of one, or several adjacent ones in a single read
  // (a staging buffer's). The span must lie inside the data section (an Error otherwise).
  void read_data(uint64_t offset, void* dst, std::size_t size) const;

 private:
  SafetensorsFile() = default;
  // The file as open() saw it, or the Error "changed while it was read".
  void check_unchanged() const;

  std::string path_;
  uint64_t file_size_ = 0;
  uint64_t header_size_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
  int fd_ = -1;
  int64_t mtime_sec_ = 0;  // st_mtim at open()
  int64_t mtime_nsec_ = 0;
};

// Parses and validates a header (the JSON text between the length prefix and the data section)
// against a data section of `data_size` bytes. `path` is used in messages only. Exposed so
// broken headers can be tested without files.
struct SafetensorsHeader {
  std::map<std::string, std::string> metadata;
  std::vector<TensorInfo> tensors;
};
SafetensorsHeader parse_safetensors_header(std::string_view json_text, uint64_t data_size,
                                           const std::string& path);

// A tensor to write. `data` may be null: the bytes are then zeros and the file is left sparse
// (ftruncate), which is how tests build 50 GB checkpoints with real headers in no time.
struct TensorToWrite {
  TensorMeta meta;
  const void* data = nullptr;  // nbytes() bytes, or null for zeros
};

// Writes a safetensors file atomically (temporary file beside `path`, fsync, rename). Tensors
// are placed in descending element size (then in the given order) so every tensor is aligned;
// the header is padded with spaces to a multiple of 8. Throws tprobe::Error on duplicate names,
// empty names or a write failure; nothing is left at `path` on failure.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace tprobe::core
