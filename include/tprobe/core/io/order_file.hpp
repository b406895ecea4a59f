// The micro-batch order `tprobe bucket --emit-order` writes (docs/bucket.md, "--emit-order
// format"), read back bounds-checked: the epoch of `tprobe levers --sampler order:FILE`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tprobe::core {

struct OrderFile {
  std::string path;
  std::string dataset;      // the header's dataset name (informational)
  int64_t records = 0;      // the dataset's record count the order was written for
  int64_t micro_batch = 0;  // records per micro-batch it was cut with
  int64_t max_seq_len = 0;  // the truncation its widths were computed under
  // Micro-batch i holds records[starts[i] .. starts[i+1]) (0-based dataset positions), in
  // training order; widths[i] is the width the file states for it.
  std::vector<uint32_t> records_in_order;
  std::vector<uint64_t> starts;
  std::vector<int64_t> widths;
  std::size_t micro_batches() const { return widths.size(); }
};

// Streams `path` (plain or gzip). Throws tprobe::Error naming the file and line for: a header
// that is not a tprobe.bucket-order version 1 object with integer `records` (1 ..
// 4,294,967,295), `micro_batches`, `micro_batch` and `max_seq_len` (≥ 1); a line that is not a JSON
// object; a `micro_batch` number out of sequence; a `records` array that is empty, longer than
// the header's `micro_batch`, or holds a non-integer, an index outside 0 .. records-1 or an
// index already seen; a missing or non-positive `width`; more or fewer micro-batch lines than
// the header says; an order that leaves a record out. A file that cannot be opened too.
OrderFile read_order_file(const std::string& path);

}  // namespace tprobe::core
