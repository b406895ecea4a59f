// A measured point's micro-batch built from the user's own tokens (`profile --dataset`): the
// records the epoch's sampler puts in its first micro-batch at the point's batch and width, their
// input_ids as they are (no BOS added), each row right-padded to the width.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/data/epoch_batches.hpp"
#include "tprobe/core/evidence/operator_inputs.hpp"
#include "tprobe/core/io/lengths.hpp"

namespace tprobe::core {

// "filled" (profile's default): records in file order fill each row end to end, the one that
// reaches the width cut there (its rest dropped), the next row starting with the next record, so
// every row is full. Else one of the epoch's samplers (core::parse_epoch_sampler), whose rows
// may fall short of the width and are then right-padded.
inline constexpr const char* kFilledSampler = "filled";

struct DatasetBatchRequest {
  std::string path;        // the JSONL file the lengths were read from
  bool filled = true;      // kFilledSampler; false: `sampler`
  EpochSampler sampler;    // sequential, shuffled, bucket:N, order:FILE or packed
  uint64_t seed = 0;       // the sampler's
  int64_t batch = 2;       // rows
  int64_t width = 2048;    // tokens per row: records are truncated to it
  int64_t pad_id = 0;
  int64_t vocab_size = 0;  // every id must be below it
};

struct DatasetBatch {
  std::vector<int64_t> ids;      // batch × width, row-major
  std::vector<int64_t> lengths;  // each row's real tokens; empty when every row is full
  PointTokens tokens;            // the evidence: records per row, the digest
};

// The sampler's first micro-batch under `r` (epoch_batches with micro_batch = batch and
// max_seq_len = width). Throws Error when it has fewer than `batch` rows (the dataset is too
// small), and what epoch_batches and read_record_ids throw.
DatasetBatch dataset_batch(const LengthDataset& lengths, const DatasetBatchRequest& r);

}  // namespace tprobe::core
