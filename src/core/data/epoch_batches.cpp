// The epoch's micro-batches under each sampler (docs/levers.md, "The epoch").
#include "tprobe/core/data/epoch_batches.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/data/bucket.hpp"
#include "tprobe/core/data/padding.hpp"
#include "tprobe/core/io/order_file.hpp"

namespace tprobe::core {

int64_t EpochMicroBatch::real_tokens() const {
  int64_t n = 0;
  for (int64_t r : rows) n += r;
  return n;
}

int64_t EpochMicroBatch::padded_tokens() const {
  return static_cast<int64_t>(rows.size()) * width;
}

EpochSampler parse_epoch_sampler(const std::string& text, const std::string& option) {
  EpochSampler s;
  s.spelling = text;
  if (text == "sequential") return s;
  if (text == "shuffled") {
    s.kind = EpochSamplerKind::kShuffled;
    return s;
  }
  if (text == "packed") {
    s.kind = EpochSamplerKind::kPacked;
    return s;
  }
  if (text.rfind("bucket:", 0) == 0) {
    const std::string n = text.substr(7);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (n.empty() || ec != std::errc() || p != n.data() + n.size() || v < 1) {
      fail_usage("{} '{}': bucket:N needs a whole number of records N >= 1", option, text);
    }
    s.kind = EpochSamplerKind::kBucket;
    s.bucket = v;
    return s;
  }
  if (text.rfind("order:", 0) == 0) {
    if (text.size() == 6) fail_usage("{} '{}': order:FILE needs a file", option, text);
    s.kind = EpochSamplerKind::kOrder;
    s.order_path = text.substr(6);
    return s;
  }
  fail_usage("{} '{}': expected sequential, shuffled, bucket:N, order:FILE or packed", option, text);
}

std::vector<EpochMicroBatch> pack_rows(const std::vector<int64_t>& lengths,
                                       const std::vector<uint32_t>& order, int64_t width,
                                       int64_t rows_per_batch) {
  std::vector<EpochMicroBatch> out;
  EpochMicroBatch mb;
  mb.width = width;
  mb.packed = true;
  int64_t fill = 0;
  auto close_row = [&] {
    if (fill == 0) return;
    mb.rows.push_back(fill);
    fill = 0;
    if (static_cast<int64_t>(mb.rows.size()) == rows_per_batch) {
      out.push_back(mb);
      mb.rows.clear();
      mb.samples.clear();
      mb.records.clear();
    }
  };
  for (uint32_t r : order) {
    const int64_t len = lengths[r];
    if (len < 1 || len > width) fail("record {} of {} tokens does not fit a row of {}", r, len, width);
    if (fill + len > width) close_row();
    fill += len;
    mb.samples.push_back(len);
    mb.records.push_back(r);
  }
  close_row();
  if (!mb.rows.empty()) out.push_back(mb);
  return out;
}

namespace {

std::vector<EpochMicroBatch> padded(const MicroBatchOrder& order, const std::vector<int64_t>& eff) {
  std::vector<EpochMicroBatch> out;
  out.reserve(order.micro_batches());
  for (std::size_t i = 0; i < order.micro_batches(); ++i) {
    EpochMicroBatch mb;
    for (uint64_t k = order.starts[i]; k < order.starts[i + 1]; ++k) {
      mb.rows.push_back(eff[order.records[k]]);
      mb.records.push_back(static_cast<uint32_t>(order.records[k]));
      mb.width = std::max(mb.width, mb.rows.back());
    }
    mb.samples = mb.rows;
    out.push_back(std::move(mb));
  }
  return out;
}

}  // namespace

EpochBatches epoch_batches(const LengthDataset& ds, const EpochBatchOptions& o) {
  if (o.micro_batch < 1) fail_usage("micro-batch {}: must be >= 1", o.micro_batch);
  if (o.max_seq_len < 1) fail_usage("max_seq_len {}: must be >= 1", o.max_seq_len);
  EpochBatches out;
  out.sampler = o.sampler.spelling;
  out.records = static_cast<int64_t>(ds.records());
  const std::vector<int64_t> eff = truncate_lengths(ds.lengths, o.max_seq_len);
  for (std::size_t i = 0; i < eff.size(); ++i) {
    if (eff[i] < ds.lengths[i]) ++out.truncated_records;
  }
  switch (o.sampler.kind) {
    case EpochSamplerKind::kSequential:
    case EpochSamplerKind::kShuffled: {
      const BatchOrder bo = o.sampler.kind == EpochSamplerKind::kSequential ? BatchOrder::kSequential
                                                                           : BatchOrder::kShuffled;
      out.micro_batches = padded(plain_order(ds.records(), o.micro_batch, bo, o.seed), eff);
      out.rule = bo == BatchOrder::kSequential
                     ? "file order cut into consecutive micro-batches (padding's sequential loader)"
                     : fmt::format("a Fisher-Yates shuffle of the records (seed {}) cut into "
                                   "consecutive micro-batches (padding's shuffled loader)",
                                   o.seed);
      break;
    }
    case EpochSamplerKind::kBucket:
      if (o.sampler.bucket < o.micro_batch) {
        fail_usage("bucket size {} is below the micro-batch {}", o.sampler.bucket, o.micro_batch);
      }
      out.micro_batches =
          padded(bucket_order(sort_by_length(eff), o.sampler.bucket, o.micro_batch, o.seed), eff);
      out.rule = fmt::format("bucket's bucket-to-pair, shuffle-to-mix sampler, bucket {} seed {} "
                             "(the order `tprobe bucket --bucket {} --sampler-seed {}` emits)",
                             o.sampler.bucket, o.seed, o.sampler.bucket, o.seed);
      break;
    case EpochSamplerKind::kOrder: {
      const OrderFile f = read_order_file(o.sampler.order_path);
      if (f.records != out.records) {
        fail("{}: written for a dataset of {} records; this one has {}", f.path, f.records,
             out.records);
      }
      if (f.micro_batch != o.micro_batch) {
        fail("{}: cut into micro-batches of {}; the step's batch is {}", f.path, f.micro_batch,
             o.micro_batch);
      }
      if (f.max_seq_len != o.max_seq_len) {
        fail("{}: its widths are under max_seq_len {}; this epoch truncates at {}", f.path,
             f.max_seq_len, o.max_seq_len);
      }
      MicroBatchOrder order;
      order.records = f.records_in_order;
      order.starts = f.starts;
      out.micro_batches = padded(order, eff);
      for (std::size_t i = 0; i < out.micro_batches.size(); ++i) {
        if (out.micro_batches[i].width != f.widths[i]) {
          fail("{}: micro-batch {} states width {}, its records are {} wide in this dataset "
               "(another dataset?)",
               f.path, i, f.widths[i], out.micro_batches[i].width);
        }
      }
      out.rule = fmt::format("the order in {} (tprobe bucket --emit-order)", f.path);
      break;
    }
    case EpochSamplerKind::kPacked: {
      std::vector<uint32_t> order(ds.records());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
      out.micro_batches = pack_rows(eff, order, o.max_seq_len, o.micro_batch);
      out.rule = fmt::format(
          "records in file order packed next-fit into rows of {} tokens (a record that does "
          "not fit what is left of the row opens the next one; records longer than {} are "
          "truncated first), {} rows per micro-batch, positions reset and attention kept inside "
          "each record",
          o.max_seq_len, o.max_seq_len, o.micro_batch);
      break;
    }
  }
  for (const EpochMicroBatch& mb : out.micro_batches) {
    out.real_tokens += mb.real_tokens();
    out.padded_tokens += mb.padded_tokens();
  }
  return out;
}

}  // namespace tprobe::core
