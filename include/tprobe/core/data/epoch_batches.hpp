// The micro-batches of one epoch over a length dataset under a sampler: what `tprobe levers
// --dataset` predicts and samples (docs/levers.md, "The epoch"). The samplers are padding's plain
// loader, bucket's bucket-to-pair sampler, an order `bucket --emit-order` wrote, and packing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/io/lengths.hpp"

namespace tprobe::core {

enum class EpochSamplerKind { kSequential, kShuffled, kBucket, kOrder, kPacked };

struct EpochSampler {
  EpochSamplerKind kind = EpochSamplerKind::kSequential;
  int64_t bucket = 0;      // kBucket: records per bucket
  std::string order_path;  // kOrder: the file
  std::string spelling;    // as given: "sequential", "bucket:2", "order:FILE", "packed"
};
// "sequential" | "shuffled" | "bucket:N" (N ≥ 1) | "order:FILE" | "packed"; anything else is a
// usage error naming `option`.
EpochSampler parse_epoch_sampler(const std::string& text, const std::string& option);

// One micro-batch as the harness feeds it. Padded samplers: one record per row, `rows[i]` its
// real tokens, the rest of the `width` right-padding, and samples == rows. Packed: each row
// holds one or more whole records end to end (positions reset per record, attention kept inside
// each), `rows[i]` the row's filled tokens ≤ width, `samples` every record's length in row order.
struct EpochMicroBatch {
  int64_t width = 0;
  std::vector<int64_t> rows;
  std::vector<int64_t> samples;
  bool packed = false;
  std::vector<uint32_t> records;  // the dataset record of each sample, in the same order
  int64_t real_tokens() const;
  int64_t padded_tokens() const;  // rows × width
};

struct EpochBatchOptions {
  EpochSampler sampler;
  int64_t micro_batch = 2;   // records (padded samplers) or rows (packed) per micro-batch
  int64_t max_seq_len = 0;   // records truncated to this; the packed rows' width
  uint64_t seed = 0;         // shuffled and bucket (the same seed gives bucket's order)
};

struct EpochBatches {
  std::string sampler;  // the spelling
  std::string rule;     // one sentence: how the micro-batches were built
  int64_t records = 0, truncated_records = 0;
  int64_t real_tokens = 0, padded_tokens = 0;
  std::vector<EpochMicroBatch> micro_batches;
};

// Throws UsageError for a non-positive micro-batch or max_seq_len; for an order file, what
// read_order_file throws, and tprobe::Error when the file was written for another dataset (its
// record count), another micro-batch size or truncation, or states a width its records do not
// have under that truncation.
EpochBatches epoch_batches(const LengthDataset& dataset, const EpochBatchOptions& options);

// Packing alone (next-fit, in the given record order): a record goes at the end of the current
// row when it fits in what is left of `width`, else it opens the next row; `rows_per_batch` rows
// make a micro-batch (the last may have fewer). `lengths` are already truncated to `width`.
std::vector<EpochMicroBatch> pack_rows(const std::vector<int64_t>& lengths,
                                       const std::vector<uint32_t>& order, int64_t width,
                                       int64_t rows_per_batch);

}  // namespace tprobe::core
