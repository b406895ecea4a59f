#include "tprobe/core/data/dataset_batch.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/sha256.hpp"

namespace tprobe::core {

DatasetBatch dataset_batch(const LengthDataset& lengths, const DatasetBatchRequest& r) {
  if (r.vocab_size < 1) fail("dataset batch: vocabulary of {} ids", r.vocab_size);
  if (r.batch < 1 || r.width < 1) fail("dataset batch: {}x{}", r.batch, r.width);
  EpochBatches epoch;
  if (r.filled) {
    EpochMicroBatch mb;
    mb.width = r.width;
    mb.packed = true;
    int64_t fill = 0;
    for (std::size_t i = 0; i < lengths.records() && static_cast<int64_t>(mb.rows.size()) < r.batch; ++i) {
      const int64_t take = std::min(lengths.lengths[i], r.width - fill);
      mb.samples.push_back(take);
      mb.records.push_back(static_cast<uint32_t>(i));
      fill += take;
      if (fill == r.width) {
        mb.rows.push_back(fill);
        fill = 0;
      }
    }
    epoch.micro_batches.push_back(std::move(mb));
  } else {
    EpochBatchOptions o;
    o.sampler = r.sampler;
    o.micro_batch = r.batch;
    o.max_seq_len = r.width;
    o.seed = r.seed;
    epoch = epoch_batches(lengths, o);
  }
  if (epoch.micro_batches.empty() ||
      static_cast<int64_t>(epoch.micro_batches.front().rows.size()) < r.batch) {
    fail("{}: the {} sampler makes {} row(s) of width {} from its {} records; the point needs {}",
         r.path, r.filled ? kFilledSampler : r.sampler.spelling,
         epoch.micro_batches.empty() ? 0 : epoch.micro_batches.front().rows.size(), r.width,
         lengths.records(), r.batch);
  }
  const EpochMicroBatch& mb = epoch.micro_batches.front();
  std::vector<int64_t> wanted(mb.records.begin(), mb.records.end());
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  const std::vector<std::vector<int64_t>> ids = read_record_ids(r.path, wanted, r.vocab_size - 1);
  auto ids_of = [&](uint32_t record) -> const std::vector<int64_t>& {
    const auto at = std::lower_bound(wanted.begin(), wanted.end(), static_cast<int64_t>(record));
    return ids[static_cast<std::size_t>(at - wanted.begin())];
  };
  DatasetBatch out;
  PointTokens& t = out.tokens;
  t.dataset = r.path;
  t.sampler = r.filled ? kFilledSampler : r.sampler.spelling;
  t.sampler_seed = static_cast<int64_t>(r.seed);
  t.pad_id = r.pad_id;
  out.ids.assign(static_cast<std::size_t>(r.batch * r.width), r.pad_id);
  // Samples go to rows in order: a padded sampler one per row, packing as many as fill each row.
  std::size_t sample = 0;
  bool padded = false;
  for (int64_t row = 0; row < r.batch; ++row) {
    const int64_t fill = mb.rows[static_cast<std::size_t>(row)];
    std::vector<int64_t> records;
    int64_t at = 0;
    while (at < fill && sample < mb.samples.size()) {
      const uint32_t record = mb.records[sample];
      const std::vector<int64_t>& src = ids_of(record);
      const int64_t take = std::min<int64_t>(mb.samples[sample], r.width - at);
      if (static_cast<int64_t>(src.size()) < take)
        fail("{}: record {} has {} input_ids, fewer than its length {}", r.path, record, src.size(),
             take);
      std::copy(src.begin(), src.begin() + take,
                out.ids.begin() + static_cast<std::ptrdiff_t>(row * r.width + at));
      at += take;
      records.push_back(record);
      ++sample;
    }
    if (at != fill) fail("dataset batch: row {} filled {} of its {} tokens", row, at, fill);
    t.records.push_back(std::move(records));
    t.row_tokens.push_back(fill);
    if (fill < r.width) padded = true;
  }
  if (padded) out.lengths = t.row_tokens;
  t.sha256 = sha256_hex_int64_le(out.ids);
  return out;
}

}  // namespace tprobe::core
