// Reads the order file `tprobe bucket --emit-order` writes (docs/bucket.md), bounds-checked.
#include "tprobe/core/io/order_file.hpp"

#include <fmt/format.h>

#include <limits>

#include "base/out_of_memory.hpp"
#include "base/strict_json.hpp"
#include "io/line_reader.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"

namespace tprobe::core {
namespace {

[[noreturn]] void fail_line(const std::string& path, int64_t line, const std::string& what) {
  fail("{}:{}: {}", path, line, what);
}

// A required integer member of `obj` in [lo, hi].
int64_t integer(const Json& obj, const char* key, int64_t lo, int64_t hi, const std::string& path,
                int64_t line) {
  auto it = obj.find(key);
  if (it == obj.end()) fail_line(path, line, fmt::format("missing field '{}'", key));
  if (!it->is_number_integer()) fail_line(path, line, fmt::format("'{}' is not an integer", key));
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    fail_line(path, line, fmt::format("'{}' is {}: outside {} .. {}", key, it->get<uint64_t>(), lo, hi));
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    fail_line(path, line, fmt::format("'{}' is {}: outside {} .. {}", key, v, lo, hi));
  }
  return v;
}

}  // namespace

namespace {

OrderFile read_order_from(detail::LineReader& reader, const std::string& path) {
  OrderFile out;
  out.path = path;
  std::string line;
  bool header = false;
  int64_t expected_batches = 0;
  std::vector<bool> seen;
  constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();
  while (reader.next(line)) {
    const int64_t n = reader.line_number();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const Json obj = detail::parse_json_strict(line, fmt::format("{}:{}", path, n));
    if (!obj.is_object()) fail_line(path, n, "not a JSON object");
    if (!header) {
      auto schema = obj.find("schema");
      if (schema == obj.end() || !schema->is_string() || *schema != "tprobe.bucket-order") {
        fail_line(path, n, "not a tprobe.bucket-order header (the first line `tprobe bucket "
                           "--emit-order` writes)");
      }
      if (integer(obj, "version", 1, 1, path, n) != 1) fail_line(path, n, "unknown version");
      out.records = integer(obj, "records", 1, std::numeric_limits<uint32_t>::max(), path, n);
      expected_batches = integer(obj, "micro_batches", 1, out.records, path, n);
      out.micro_batch = integer(obj, "micro_batch", 1, out.records, path, n);
      out.max_seq_len = integer(obj, "max_seq_len", 1, kMaxInt, path, n);
      if (auto d = obj.find("dataset"); d != obj.end() && d->is_string()) {
        out.dataset = d->get<std::string>();
      }
      // Sized by the header's count: an allocation that fails says so with its bytes.
      detail::allocating(path, static_cast<uint64_t>(out.records) / 8 + 1,
                         [&] { seen.assign(static_cast<std::size_t>(out.records), false); });
      out.starts.push_back(0);
      header = true;
      continue;
    }
    const auto index = static_cast<int64_t>(out.widths.size());
    if (index >= expected_batches) {
      fail_line(path, n, fmt::format("more micro-batch lines than the header's {}",
                                     expected_batches));
    }
    const int64_t mb = integer(obj, "micro_batch", 0, kMaxInt, path, n);
    if (mb != index) {
      fail_line(path, n, fmt::format("micro_batch {} out of sequence (expected {})", mb, index));
    }
    const int64_t width = integer(obj, "width", 1, kMaxInt, path, n);
    auto recs = obj.find("records");
    if (recs == obj.end() || !recs->is_array()) {
      fail_line(path, n, "missing 'records' array");
    }
    if (recs->empty()) fail_line(path, n, "an empty micro-batch");
    if (static_cast<int64_t>(recs->size()) > out.micro_batch) {
      fail_line(path, n, fmt::format("{} records in a micro-batch of {}", recs->size(),
                                     out.micro_batch));
    }
    for (const Json& r : *recs) {
      if (!r.is_number_integer()) fail_line(path, n, "a record index that is not an integer");
      const bool too_big = r.is_number_unsigned() && r.get<uint64_t>() >= static_cast<uint64_t>(out.records);
      const int64_t v = too_big ? out.records : r.get<int64_t>();
      if (too_big || v < 0 || v >= out.records) {
        fail_line(path, n, fmt::format("record index {} outside 0 .. {}", r.dump(), out.records - 1));
      }
      if (seen[static_cast<std::size_t>(v)]) {
        fail_line(path, n, fmt::format("record {} appears twice in the order", v));
      }
      seen[static_cast<std::size_t>(v)] = true;
      detail::room_for_one(out.records_in_order, path);
      out.records_in_order.push_back(static_cast<uint32_t>(v));
    }
    detail::room_for_one(out.starts, path);
    detail::room_for_one(out.widths, path);
    out.starts.push_back(out.records_in_order.size());
    out.widths.push_back(width);
  }
  if (!header) fail("{}: empty order file (no tprobe.bucket-order header)", path);
  if (static_cast<int64_t>(out.widths.size()) != expected_batches) {
    fail("{}: {} micro-batch lines, the header says {} (a truncated file?)", path,
         out.widths.size(), expected_batches);
  }
  if (static_cast<int64_t>(out.records_in_order.size()) != out.records) {
    for (std::size_t i = 0; i < seen.size(); ++i) {
      if (!seen[i]) {
        fail("{}: the order leaves out record {} ({} of {} records listed): not an epoch", path, i,
             out.records_in_order.size(), out.records);
      }
    }
  }
  return out;
}

}  // namespace

OrderFile read_order_file(const std::string& path) {
  detail::LineReader reader(path, "order file");
  return detail::reading(path, [&] { return reader.bytes_read(); },
                         [&] { return read_order_from(reader, path); });
}

}  // namespace tprobe::core
