// safetensors header validation, checked pread access to the data, and the atomic writer.
#include "tprobe/core/io/safetensors.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "base/out_of_memory.hpp"
#include "base/strict_json.hpp"
#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"

namespace tprobe::core {

namespace {

struct DTypeRow {
  DType dtype;
  const char* name;
  int64_t size;
};

constexpr DTypeRow kDTypes[] = {
    {DType::kBool, "BOOL", 1},      {DType::kU8, "U8", 1},          {DType::kI8, "I8", 1},
    {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1}, {DType::kI16, "I16", 2},
    {DType::kU16, "U16", 2},        {DType::kF16, "F16", 2},        {DType::kBF16, "BF16", 2},
    {DType::kI32, "I32", 4},        {DType::kU32, "U32", 4},        {DType::kF32, "F32", 4},
    {DType::kI64, "I64", 8},        {DType::kU64, "U64", 8},        {DType::kF64, "F64", 8},
};

const DTypeRow& row_of(DType dtype) {
  for (const auto& r : kDTypes) {
    if (r.dtype == dtype) return r;
  }
  fail("internal: unknown dtype enumerator {}", static_cast<int>(dtype));
}

// Returns false on overflow.
bool checked_numel(const std::vector<int64_t>& shape, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

// Reads exactly `size` bytes at `offset`; false on a short read.
bool pread_all(int fd, void* buf, std::size_t size, uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

std::string json_kind(const Json& v) { return v.type_name(); }

}  // namespace

const char* to_string(DType dtype) { return row_of(dtype).name; }

std::optional<DType> parse_dtype(std::string_view text) {
  for (const auto& r : kDTypes) {
    if (text == r.name) return r.dtype;
  }
  return std::nullopt;
}

int64_t dtype_size(DType dtype) { return row_of(dtype).size; }

bool dtype_is_supported(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32;
}

std::optional<DType> dtype_from_torch_name(std::string_view name) {
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float16") return DType::kF16;
  if (name == "float32") return DType::kF32;
  return std::nullopt;
}

int64_t TensorMeta::numel() const {
  int64_t n = 0;
  if (!checked_numel(shape, &n)) fail("tensor '{}': shape overflows int64", name);
  return n;
}

uint64_t TensorMeta::nbytes() const {
  return static_cast<uint64_t>(numel()) * static_cast<uint64_t>(dtype_size(dtype));
}

SafetensorsHeader parse_safetensors_header(std::string_view json_text, uint64_t data_size,
                                           const std::string& path) {
  // A duplicate tensor name (or entry field) would make the file mean two things.
  Json doc = detail::parse_json_strict(json_text, path + " (safetensors header)");
  if (!doc.is_object()) {
    fail("{}: safetensors header must be a JSON object, got {}", path, json_kind(doc));
  }

  SafetensorsHeader header;
  for (const auto& [name, entry] : doc.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("{}: __metadata__ must be an object of strings", path);
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) {
          fail("{}: __metadata__ value '{}' must be a string, got {}", path, k, json_kind(v));
        }
        header.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (name.empty()) fail("{}: a tensor has an empty name", path);
    if (!entry.is_object()) {
      fail("{}: tensor '{}': entry must be an object, got {}", path, name, json_kind(entry));
    }
    TensorInfo t;
    t.name = name;
    auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) {
      fail("{}: tensor '{}': missing or non-string 'dtype'", path, name);
    }
    auto parsed = parse_dtype(dt->get<std::string>());
    if (!parsed) fail("{}: tensor '{}': unknown dtype '{}'", path, name, dt->get<std::string>());
    t.dtype = *parsed;
    auto sh = entry.find("shape");
    if (sh == entry.end() || !sh->is_array()) {
      fail("{}: tensor '{}': missing or non-array 'shape'", path, name);
    }
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) {
        fail("{}: tensor '{}': shape entries must be non-negative integers, got {}", path, name,
             d.dump());
      }
      uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(INT64_MAX)) {
        fail("{}: tensor '{}': shape entry {} is too large", path, name, v);
      }
      t.shape.push_back(static_cast<int64_t>(v));
    }
    auto off = entry.find("data_offsets");
    if (off == entry.end() || !off->is_array() || off->size() != 2 ||
        !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
      fail("{}: tensor '{}': 'data_offsets' must be [begin, end] non-negative integers", path,
           name);
    }
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.end < t.begin) {
      fail("{}: tensor '{}': data_offsets end {} is before begin {}", path, name, t.end, t.begin);
    }
    int64_t numel = 0;
    uint64_t want = 0;
    if (!checked_numel(t.shape, &numel) ||
        __builtin_mul_overflow(static_cast<uint64_t>(numel),
                               static_cast<uint64_t>(dtype_size(t.dtype)), &want)) {
      fail("{}: tensor '{}': shape byte size overflows", path, name);
    }
    if (t.end - t.begin != want) {
      fail("{}: tensor '{}': shape [{}] of {} needs {} bytes but data_offsets [{}, {}] span {}",
           path, name, fmt::join(t.shape, ", "), to_string(t.dtype), want, t.begin, t.end,
           t.end - t.begin);
    }
    if (t.end > data_size) {
      fail(
          "{}: tensor '{}': data_offsets [{}, {}] run past the data section ({} bytes): the "
          "file is truncated or the offsets are wrong",
          path, name, t.begin, t.end, data_size);
    }
    header.tensors.push_back(std::move(t));
  }

  // Overlaps, holes and trailing bytes: walk the tensors in offset order.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(header.tensors.size());
  for (const auto& t : header.tensors) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (t->begin < cursor) {
      fail("{}: tensor '{}' (bytes [{}, {})) overlaps tensor '{}' (bytes [{}, {}))", path, t->name,
           t->begin, t->end, previous->name, previous->begin, previous->end);
    }
    if (t->begin > cursor) {
      fail(
          "{}: tensor '{}' starts at byte {} but the previous tensor ends at {}: the data "
          "section has a hole",
          path, t->name, t->begin, cursor);
    }
    cursor = t->end;
    previous = t;
  }
  if (cursor != data_size) {
    fail(
        "{}: the tensors cover {} bytes of a {}-byte data section: {} trailing bytes belong to "
        "no tensor",
        path, cursor, data_size, data_size - cursor);
  }
  return header;
}

namespace {

// Bytes up to the end of the JSON object `text` starts with (strings and escapes respected), or
// npos when it does not start with '{' or the object does not close inside `text`.
std::size_t json_object_end(std::string_view text) {
  std::size_t i = text.find_first_not_of(" \t\r\n");
  if (i == std::string_view::npos || text[i] != '{') return std::string_view::npos;
  int depth = 0;
  bool in_string = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;  // owns the descriptor from here: closed if open() throws
  file.path_ = path;
  file.fd_ = open_input(path);  // a FIFO is opened without waiting, then refused below
  const int fd = file.fd_;
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path);

  file.file_size_ = static_cast<uint64_t>(st.st_size);
  file.mtime_sec_ = static_cast<int64_t>(st.st_mtim.tv_sec);
  file.mtime_nsec_ = static_cast<int64_t>(st.st_mtim.tv_nsec);
  if (file.file_size_ < 8) {
    fail("{}: truncated: {} bytes, shorter than the 8-byte header length", path, file.file_size_);
  }
  unsigned char prefix[8];
  if (!pread_all(fd, prefix, 8, 0)) {
    file.check_unchanged();  // a file cut short since the fstat above says so
    fail("{}: cannot read the header length", path);
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];  // little-endian u64
  if (n > kMaxSafetensorsHeaderBytes) {
    fail("{}: header length {} bytes is absurd (limit {} bytes): not a safetensors file?", path, n,
         kMaxSafetensorsHeaderBytes);
  }
  if (n > file.file_size_ - 8) {
    fail("{}: header length {} bytes is longer than the rest of the file ({} bytes): truncated",
         path, n, file.file_size_ - 8);
  }
  if (n < 2) fail("{}: header length {} is too short for a JSON object", path, n);
  file.header_size_ = n;
  std::string text = detail::allocating(path, n, [&] {
    return std::string(static_cast<std::size_t>(n), '\0');
  });
  if (!pread_all(fd, text.data(), text.size(), 8)) {
    file.check_unchanged();
    fail("{}: cannot read the header", path);
  }
  // The header is read as the size above promised: a file rewritten meanwhile is not validated
  // against a size it no longer has.
  file.check_unchanged();
  // A length that runs past the header's JSON object into the data would otherwise be reported
  // as a JSON error on data bytes: say what is wrong, the length.
  const std::size_t object_end = json_object_end(text);
  if (object_end != std::string::npos &&
      text.find_first_not_of(" \t\r\n", object_end) != std::string::npos) {
    fail("{}: header length {} bytes runs past the header's JSON object, which ends after {} "
         "bytes: the length field is wrong (or the file was rewritten in place)",
         path, n, object_end);
  }
  SafetensorsHeader header = parse_safetensors_header(text, file.file_size_ - 8 - n, path);
  file.metadata_ = std::move(header.metadata);
  file.tensors_ = std::move(header.tensors);
  for (std::size_t i = 0; i < file.tensors_.size(); ++i) file.index_[file.tensors_[i].name] = i;

  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    file_size_ = other.file_size_;
    header_size_ = other.header_size_;
    metadata_ = std::move(other.metadata_);
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    fd_ = other.fd_;
    mtime_sec_ = other.mtime_sec_;
    mtime_nsec_ = other.mtime_nsec_;
    other.fd_ = -1;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::tensor(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) fail("{}: no tensor named '{}'", path_, name);
  return *t;
}

void SafetensorsFile::check_unchanged() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("{}: cannot stat: {}", path_, std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) != file_size_) {
    fail("{} changed while it was read: it is {} bytes now, {} when it was opened", path_,
         static_cast<uint64_t>(st.st_size), file_size_);
  }
  if (static_cast<int64_t>(st.st_mtim.tv_sec) != mtime_sec_ ||
      static_cast<int64_t>(st.st_mtim.tv_nsec) != mtime_nsec_) {
    fail("{} changed while it was read: its modification time is not the one it had when it was "
         "opened",
         path_);
  }
}

void SafetensorsFile::read_data(uint64_t offset, void* dst, std::size_t size) const {
  if (fd_ < 0) fail("{}: the file is not open", path_);
  const uint64_t data_size = file_size_ - data_start();
  if (offset > data_size || size > data_size - offset) {
    fail("{}: bytes [{}, {}) are outside the data section ({} bytes)", path_, offset,
         offset + static_cast<uint64_t>(size), data_size);
  }
  auto* p = static_cast<char*>(dst);
  uint64_t at = data_start() + offset;
  std::size_t left = size;
  while (left > 0) {
    const ssize_t n = ::pread(fd_, p, left, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("{}: cannot read bytes at offset {}: {}", path_, at, std::strerror(errno));
    if (n == 0) {
      fail("{} changed while it was read: it ends at byte {}, before the {} bytes the header "
           "promised",
           path_, at, file_size_);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
    at += static_cast<uint64_t>(n);
  }
  // After the read, not only before: bytes read from a file rewritten in place (same size) would
  // otherwise pass as the tensor's.
  check_unchanged();
}

void SafetensorsFile::read_into(std::string_view name, void* dst, std::size_t size) const {
  const TensorInfo& t = tensor(name);
  if (static_cast<uint64_t>(size) != t.end - t.begin) {
    fail("internal: reading tensor '{}' of {} ({} bytes) into {} bytes", name, path_,
         t.end - t.begin, size);
  }
  read_data(t.begin, dst, size);
}

std::vector<std::byte> SafetensorsFile::read(std::string_view name) const {
  const TensorInfo& t = tensor(name);
  const uint64_t n = t.end - t.begin;
  std::vector<std::byte> out = detail::allocating(
      fmt::format("{}: tensor '{}'", path_, name), n,
      [&] { return std::vector<std::byte>(static_cast<std::size_t>(n)); });
  read_data(t.begin, out.data(), out.size());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (t.meta.name.empty()) fail("{}: cannot write a tensor with an empty name", path);
    if (t.meta.name == "__metadata__") fail("{}: '__metadata__' is not a tensor name", path);
    if (!names.insert(t.meta.name).second) {
      fail("{}: tensor '{}' given twice", path, t.meta.name);
    }
    for (int64_t d : t.meta.shape) {
      if (d < 0) fail("{}: tensor '{}' has a negative dimension", path, t.meta.name);
    }
  }
  // Placement: descending element size keeps every tensor naturally aligned.
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return dtype_size(tensors[a].meta.dtype) > dtype_size(tensors[b].meta.dtype);
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<uint64_t> begin(tensors.size());
  uint64_t cursor = 0;
  for (std::size_t i : order) {
    const TensorMeta& m = tensors[i].meta;
    begin[i] = cursor;
    cursor += m.nbytes();
    header[m.name] = {
        {"dtype", to_string(m.dtype)}, {"shape", m.shape}, {"data_offsets", {begin[i], cursor}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t data_start = 8 + text.size();
  const uint64_t total = data_start + cursor;

  AtomicFile file(path);
  unsigned char prefix[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  file.write_at(prefix, 8, 0);
  file.write_at(text.data(), text.size(), 8);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].data) {
      file.write_at(tensors[i].data, tensors[i].meta.nbytes(), data_start + begin[i]);
    }
  }
  // Zero tensors stay holes: extending the file with ftruncate writes nothing.
  file.resize(total);
  file.commit();
}

}  // namespace tprobe::core
