// The bucket-to-pair, shuffle-to-mix sampler, its sweep over bucket size, and the cost model.
// Views are in bucket_report.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/io/lengths.hpp"
#include "tprobe/core/data/padding.hpp"

namespace tprobe::core {

// Time of one micro-batch of padded width w: t(w) = C + A*w + B*w^2 (docs/bucket.md). The
// coefficients only apply at the micro-batch size they were measured with.
struct CostModel {
  double a_s_per_token = 0.0;
  double b_s_per_token2 = 0.0;
  double c_s = 0.0;
  std::string origin;  // "--cost" or the scaling-fit file it came from
  double seconds(int64_t width) const {
    const auto w = static_cast<double>(width);
    return c_s + a_s_per_token * w + b_s_per_token2 * w * w;
  }
};
// "A,B" or "A,B,C": finite, non-negative numbers; anything else is a usage error.
CostModel parse_cost(const std::string& text);
// A scaling-fit evidence file's coefficients are read by core/cost (fitted_cost, in
// scaling_fit_report.hpp), a layer above this one: `tprobe bucket --scaling-fit` joins the two.

// Record indices sorted by (length, index): the sampler's first step.
std::vector<uint32_t> sort_by_length(const std::vector<int64_t>& lengths);

// The sampler, exactly: cut `sorted` (from sort_by_length over truncated lengths) into
// consecutive buckets of `bucket` records; Fisher-Yates each bucket with Rng(seed), in bucket
// order, and cut it into micro-batches of `micro_batch` (a bucket's last one may be short); then
// Fisher-Yates all micro-batches with the same Rng. Nothing is re-sorted inside a bucket: a
// re-sort would make every bucket size produce the same micro-batches (the no-op-sweep trap).
MicroBatchOrder bucket_order(const std::vector<uint32_t>& sorted, int64_t bucket,
                             int64_t micro_batch, uint64_t seed);

// What one order costs. Windows are `accum` consecutive micro-batches (the last may be short).
struct OrderMetrics {
  int64_t micro_batches = 0;
  int64_t real_tokens = 0;
  int64_t padded_tokens = 0;
  double waste_ratio = 0.0;
  int64_t zero_pad_micro_batches = 0;  // every row exactly as long as the micro-batch is wide
  double zero_pad_share = 0.0;
  int64_t windows = 0;
  double sources_per_window_mean = 0.0;
  int64_t sources_per_window_min = 0;
  int64_t sources_per_window_p10 = 0;
  std::optional<double> predicted_time_s;  // sum of t(width) over micro-batches
};
OrderMetrics measure_order(const MicroBatchOrder& order, const std::vector<int64_t>& lengths,
                           const std::vector<uint32_t>& source, std::size_t source_count,
                           int64_t accum, const std::optional<CostModel>& cost);

// A hash of the multiset of micro-batch shapes (each micro-batch as its sorted member lengths),
// independent of the micro-batches' order and of which of several equal-length records sits
// where. Two bucket sizes with the same fingerprint produced the same micro-batches as far as
// padding and time can tell: a sampler that re-sorts inside buckets gives every bucket size the
// fingerprint of one global sort.
uint64_t micro_batch_set_fingerprint(const MicroBatchOrder& order,
                                     const std::vector<int64_t>& lengths);

// True when there are at least two fingerprints and all are equal: the sweep varied nothing.
bool is_noop_sweep(const std::vector<uint64_t>& fingerprints);

struct BucketOptions {
  int64_t micro_batch = 2;
  int64_t accum = 8;
  int64_t max_seq_len = 16384;
  std::vector<int64_t> sweep;  // empty: default_sweep(micro_batch)
  int64_t seeds = 3;
  uint64_t seed = 0;
  BatchOrder baseline = BatchOrder::kSequential;
  int64_t bucket = 0;  // the order to choose/emit; 0 = the sweep's best
  std::optional<CostModel> cost;
};
void validate(const BucketOptions& options);

// The sweep when none is given: 2, 8, 32, 128, 512, with sizes below the micro-batch replaced by
// the micro-batch itself (so micro-batch 4 alone sweeps 4, 8, 32, 128, 512).
std::vector<int64_t> default_sweep(int64_t micro_batch);

// Mean over seeds, and the spread (max - min).
struct SeedStat {
  double mean = 0.0;
  double min = 0.0;
  double max = 0.0;
};

struct SweepRow {
  int64_t bucket = 0;  // 0 for the baseline row
  std::vector<uint64_t> seeds;
  std::vector<OrderMetrics> per_seed;
  SeedStat waste_ratio;
  SeedStat padded_tokens;
  SeedStat zero_pad_share;
  SeedStat spw_mean;
  SeedStat spw_p10;
  int64_t spw_min = 0;  // minimum over every seed's windows
  std::optional<SeedStat> predicted_time_s;
  std::optional<double> saving_ratio;  // 1 - mean time / baseline mean time
  uint64_t fingerprint = 0;            // of the first seed's micro-batch set
};

struct BucketReport {
  std::string dataset;
  std::string format;
  BucketOptions options;
  SourceBreakdown breakdown;
  SweepRow baseline;
  std::vector<SweepRow> sweep;
  bool noop_sweep = false;  // with a `noop_sweep` warning in diagnostics
  // Shown under the table when no cost model was given: how to give one (the probe knows its
  // option names; core does not).
  std::string cost_hint;
  // A SIGINT/SIGTERM stopped the sweep: `sweep` holds the sizes measured before it (maybe none,
  // and then nothing is chosen).
  bool interrupted = false;
  int64_t chosen_bucket = 0;
  OrderMetrics chosen;  // chosen bucket, first seed: the order --emit-order writes
  std::vector<int64_t> chosen_widths;  // per micro-batch of that order, in order (raw data)
  std::string emit_order;  // the file that order was written to (--emit-order); "" when none
  std::vector<Diagnostic> diagnostics;
  Outcome outcome = Outcome::kOk;  // a sweep is never a "no"
};

// options.sweep empty: default_sweep(options.micro_batch); the report holds the sweep as analysed
// (ascending, duplicates dropped).
BucketReport analyze_bucket(const LengthDataset& dataset, const BucketOptions& options);
}  // namespace tprobe::core
