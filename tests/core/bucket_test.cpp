// The bucket sampler: exact small cases, the re-sorting trap, coverage and sweep invariants.
#include "tprobe/core/data/bucket.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "test_paths.hpp"
#include "tprobe/core/data/bucket_report.hpp"
#include "test_datasets.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/rng.hpp"

namespace tprobe::core {
namespace {

using Batches = std::multiset<std::vector<uint32_t>>;

// The micro-batches of an order as a set of sorted member lists (order-free).
Batches batch_set(const MicroBatchOrder& o) {
  Batches out;
  for (std::size_t i = 0; i < o.micro_batches(); ++i) {
    std::vector<uint32_t> m(o.records.begin() + static_cast<std::ptrdiff_t>(o.starts[i]),
                            o.records.begin() + static_cast<std::ptrdiff_t>(o.starts[i + 1]));
    std::sort(m.begin(), m.end());
    out.insert(m);
  }
  return out;
}

using testing_support::random_dataset;

// A deliberately wrong sampler: like bucket_order but re-sorts each bucket after shuffling it.
MicroBatchOrder resorting_sampler(const std::vector<int64_t>& lengths, int64_t bucket,
                                  int64_t micro_batch, uint64_t seed) {
  std::vector<uint32_t> sorted = sort_by_length(lengths);
  Rng rng(seed);
  std::vector<std::vector<uint32_t>> batches;
  for (std::size_t lo = 0; lo < sorted.size(); lo += static_cast<std::size_t>(bucket)) {
    std::size_t hi = std::min(sorted.size(), lo + static_cast<std::size_t>(bucket));
    std::vector<uint32_t> b(sorted.begin() + static_cast<std::ptrdiff_t>(lo),
                            sorted.begin() + static_cast<std::ptrdiff_t>(hi));
    shuffle(b.begin(), b.end(), rng);
    std::stable_sort(b.begin(), b.end(),
                     [&](uint32_t x, uint32_t y) { return lengths[x] < lengths[y]; });
    for (std::size_t s = 0; s < b.size(); s += static_cast<std::size_t>(micro_batch)) {
      batches.emplace_back(b.begin() + static_cast<std::ptrdiff_t>(s),
                           b.begin() + static_cast<std::ptrdiff_t>(std::min(
                                           b.size(), s + static_cast<std::size_t>(micro_batch))));
    }
  }
  shuffle(batches.begin(), batches.end(), rng);
  MicroBatchOrder out;
  out.starts.push_back(0);
  for (const auto& b : batches) {
    out.records.insert(out.records.end(), b.begin(), b.end());
    out.starts.push_back(out.records.size());
  }
  return out;
}

TEST(Bucket, SortByLengthBreaksTiesByIndex) {
  EXPECT_EQ(sort_by_length({5, 3, 5, 1, 3}), (std::vector<uint32_t>{3, 1, 4, 0, 2}));
  // Lengths too large for the counting sort take the comparison path; same contract.
  EXPECT_EQ(sort_by_length({2000000000, 1, 2000000000, 7}), (std::vector<uint32_t>{1, 3, 0, 2}));
}

// lengths 9 1 8 2 7 3 -> sorted records 1 3 5 4 2 0 (lengths 1 2 3 7 8 9). Bucket = micro-batch
// = 2 pairs neighbours: {1,3} w2, {4,5} w7, {0,2} w9: padded 2*(2+7+9) = 36, real 30.
TEST(Bucket, BucketEqualToMicroBatchPairsSortedNeighboursForEverySeed) {
  const std::vector<int64_t> len{9, 1, 8, 2, 7, 3};
  const Batches expected{{1, 3}, {4, 5}, {0, 2}};
  for (uint64_t seed = 0; seed < 10; ++seed) {
    MicroBatchOrder o = bucket_order(sort_by_length(len), 2, 2, seed);
    EXPECT_EQ(batch_set(o), expected) << "seed " << seed;
    OrderMetrics m = measure_order(o, len, std::vector<uint32_t>(6, 0), 1, 1, std::nullopt);
    EXPECT_EQ(m.padded_tokens, 36);
    EXPECT_EQ(m.real_tokens, 30);
    EXPECT_DOUBLE_EQ(m.waste_ratio, 6.0 / 36.0);
  }
  // 36 is the minimum over all 15 ways to pair six records.
  std::vector<uint32_t> idx{0, 1, 2, 3, 4, 5};
  int64_t best = INT64_MAX;
  do {
    int64_t padded = 0;
    for (int k = 0; k < 6; k += 2) padded += 2 * std::max(len[idx[k]], len[idx[k + 1]]);
    best = std::min(best, padded);
  } while (std::next_permutation(idx.begin(), idx.end()));
  EXPECT_EQ(best, 36);
}

// The test that catches a sampler which re-sorts inside buckets: with one bucket holding every
// record, the in-bucket shuffle must pair records randomly, not as sorted neighbours.
TEST(Bucket, NeverReSortsInsideABucket) {
  std::vector<int64_t> len(64);
  for (std::size_t i = 0; i < len.size(); ++i) len[i] = static_cast<int64_t>(1000 - 7 * i);
  const std::vector<uint32_t> sorted = sort_by_length(len);
  const Batches neighbours = batch_set(bucket_order(sorted, 2, 2, 0));
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const Batches got = batch_set(bucket_order(sorted, 64, 2, seed));
    EXPECT_NE(got, neighbours) << "seed " << seed;
    int adjacent = 0;
    for (const auto& b : got) adjacent += (b[1] - b[0] == 1);  // lengths fall with the index
    EXPECT_LT(adjacent, 16) << "seed " << seed;
  }
  // The wrong sampler collapses: every bucket size gives the neighbours pairing.
  EXPECT_EQ(batch_set(resorting_sampler(len, 64, 2, 0)), neighbours);
}

TEST(Bucket, NoOpSweepDetectorFlagsAResortingSamplerAndNotTheRealOne) {
  LengthDataset ds = random_dataset(4, 3000, 4, 8000);
  std::vector<uint64_t> wrong, right;
  const std::vector<uint32_t> sorted = sort_by_length(ds.lengths);
  for (int64_t b : {2, 8, 32, 128, 512}) {
    wrong.push_back(
        micro_batch_set_fingerprint(resorting_sampler(ds.lengths, b, 2, 0), ds.lengths));
    right.push_back(micro_batch_set_fingerprint(bucket_order(sorted, b, 2, 0), ds.lengths));
  }
  EXPECT_TRUE(is_noop_sweep(wrong));
  EXPECT_FALSE(is_noop_sweep(right));
  EXPECT_FALSE(is_noop_sweep({5}));  // one bucket size cannot vary anything
  BucketOptions o;
  o.seeds = 1;
  BucketReport r = analyze_bucket(ds, o);
  EXPECT_FALSE(r.noop_sweep);
  for (std::size_t i = 1; i < r.sweep.size(); ++i) {
    EXPECT_NE(r.sweep[i].fingerprint, r.sweep[0].fingerprint);
  }
}

TEST(Bucket, ADatasetThatAdmitsOnePairingMakesANoOpSweep) {
  LengthDataset ds;
  ds.name = "two";
  ds.lengths = {5, 9, 5, 5};  // any bucket size: the pairs (5,5) and (5,9)
  ds.source = {0, 0, 0, 0};
  ds.source_names = {""};
  BucketOptions o;
  o.sweep = {2, 8, 32};
  BucketReport r = analyze_bucket(ds, o);
  EXPECT_TRUE(r.noop_sweep);
  EXPECT_TRUE(to_json(r)["noop_sweep"].get<bool>());
  const std::vector<Table> tables = bucket_tables(r);
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_NE(tables[0].render().find("NO-OP SWEEP"), std::string::npos);
}

TEST(Bucket, MeasureOrderHandWorked) {
  // micro-batches {0,1} {2,3} {4}; lengths 3 5 2 2 4; sources 0 1 0 0 1; accum 2
  //   widths 5, 2, 4 -> padded 10 + 4 + 4 = 18, real 16; zero-pad: {2,3} and the single {4}
  //   windows: {mb0, mb1} sources {0,1} = 2; {mb2} sources {1} = 1
  //   t(w) = 2 + w + 0.5 w^2: t(5) = 19.5, t(2) = 6, t(4) = 14 -> 39.5
  MicroBatchOrder o;
  o.records = {0, 1, 2, 3, 4};
  o.starts = {0, 2, 4, 5};
  CostModel c;
  c.a_s_per_token = 1;
  c.b_s_per_token2 = 0.5;
  c.c_s = 2;
  OrderMetrics m = measure_order(o, {3, 5, 2, 2, 4}, {0, 1, 0, 0, 1}, 2, 2, c);
  EXPECT_EQ(m.micro_batches, 3);
  EXPECT_EQ(m.padded_tokens, 18);
  EXPECT_EQ(m.real_tokens, 16);
  EXPECT_DOUBLE_EQ(m.waste_ratio, 2.0 / 18.0);
  EXPECT_EQ(m.zero_pad_micro_batches, 2);
  EXPECT_DOUBLE_EQ(m.zero_pad_share, 2.0 / 3.0);
  EXPECT_EQ(m.windows, 2);
  EXPECT_DOUBLE_EQ(m.sources_per_window_mean, 1.5);
  EXPECT_EQ(m.sources_per_window_min, 1);
  EXPECT_EQ(m.sources_per_window_p10, 1);
  ASSERT_TRUE(m.predicted_time_s.has_value());
  EXPECT_DOUBLE_EQ(*m.predicted_time_s, 39.5);
}

TEST(Bucket, CostModelReproducesThePostMortemFit) {
  // docs/findings.md#f1: A = 6.8715e-4, B = 8.8509e-8 fit 2x2048 at 1.776 s, 2x16384 at 35.017 s.
  CostModel c = parse_cost("6.8715e-4,8.8509e-8");
  EXPECT_NEAR(c.seconds(2048), 1.776, 0.003);
  EXPECT_NEAR(c.seconds(8192), 11.570, 0.003);
  EXPECT_NEAR(c.seconds(16384), 35.017, 0.003);
  EXPECT_EQ(c.c_s, 0.0);
  EXPECT_EQ(parse_cost("1,2,3").c_s, 3.0);
  for (const char* bad : {"1", "1,2,3,4", "a,b", "-1,2", "1,,2", "nan,1", "1,inf", ""}) {
    EXPECT_THROW(parse_cost(bad), UsageError) << bad;
  }
}

// The cost read from scaling-fit evidence: evidence_round_trip_cost_test.cpp (ScalingFitCost).

TEST(Bucket, EveryOrderCoversEveryRecordExactlyOnce) {
  Rng pick(17);
  for (uint64_t trial = 0; trial < 60; ++trial) {
    const std::size_t n = 1 + pick.uniform(400);
    const int64_t mb = 1 + static_cast<int64_t>(pick.uniform(5));
    const int64_t b = mb + static_cast<int64_t>(pick.uniform(40));  // multiples or not
    LengthDataset ds = random_dataset(trial, n, 3, 500);
    const std::vector<uint32_t> sorted = sort_by_length(ds.lengths);
    std::vector<uint32_t> pos(n);
    for (std::size_t k = 0; k < n; ++k) pos[sorted[k]] = static_cast<uint32_t>(k);
    MicroBatchOrder o = bucket_order(sorted, b, mb, trial);
    {
      std::vector<int> seen(n, 0);
      for (uint32_t r : o.records) ++seen[r];
      for (std::size_t r = 0; r < n; ++r) ASSERT_EQ(seen[r], 1) << "record " << r;
    }
    for (std::size_t i = 0; i < o.micro_batches(); ++i) {
      const auto size = static_cast<int64_t>(o.starts[i + 1] - o.starts[i]);
      ASSERT_GE(size, 1);
      ASSERT_LE(size, mb);
      // every member of a micro-batch comes from the same bucket of the sorted order
      const uint32_t bucket = pos[o.records[o.starts[i]]] / static_cast<uint32_t>(b);
      for (uint64_t k = o.starts[i]; k < o.starts[i + 1]; ++k) {
        ASSERT_EQ(pos[o.records[k]] / static_cast<uint32_t>(b), bucket);
      }
    }
    MicroBatchOrder plain = plain_order(n, mb, BatchOrder::kShuffled, trial);
    std::vector<int> seen(n, 0);
    for (uint32_t r : plain.records) ++seen[r];
    for (std::size_t r = 0; r < n; ++r) ASSERT_EQ(seen[r], 1);
  }
}

TEST(Bucket, SweepInvariantsOnRandomDatasets) {
  for (uint64_t trial = 0; trial < 8; ++trial) {
    LengthDataset ds = random_dataset(100 + trial, 4000 + trial * 37, 5, 6000);
    BucketOptions o;
    o.micro_batch = 2;
    o.accum = 4;
    o.max_seq_len = 5000;
    o.seeds = 3;
    o.baseline = BatchOrder::kShuffled;
    o.cost = parse_cost("1e-3,1e-7,0.01");
    BucketReport r = analyze_bucket(ds, o);
    ASSERT_EQ(r.sweep.front().bucket, 2);
    const double min_waste = r.sweep.front().waste_ratio.mean;
    // Sorted pairing is optimal, so bucket = micro-batch has the minimum waste for any seed.
    for (const auto& row : r.sweep) {
      for (const auto& m : row.per_seed) {
        EXPECT_GE(m.waste_ratio + 1e-12, min_waste);
        EXPECT_GE(m.waste_ratio, 0.0);
        EXPECT_LE(m.waste_ratio, 1.0);
        EXPECT_GE(m.zero_pad_share, 0.0);
        EXPECT_LE(m.zero_pad_share, 1.0);
        EXPECT_EQ(m.real_tokens, r.breakdown.total.real_tokens);
        EXPECT_GE(m.sources_per_window_min, 1);
        EXPECT_LE(m.sources_per_window_mean, 5.0);
        EXPECT_LE(m.sources_per_window_min, m.sources_per_window_p10);
      }
      // Bucketing never pads more than the plain shuffled loader, beyond seed noise.
      EXPECT_LE(row.waste_ratio.mean, r.baseline.waste_ratio.mean + 0.01) << row.bucket;
      ASSERT_TRUE(row.saving_ratio.has_value());
      EXPECT_GT(*row.saving_ratio, 0.0) << row.bucket;
    }
    for (std::size_t i = 1; i < r.sweep.size(); ++i) {
      EXPECT_LE(r.sweep[i - 1].waste_ratio.mean, r.sweep[i].waste_ratio.mean + 0.005);
    }
    EXPECT_FALSE(r.noop_sweep);
    EXPECT_EQ(r.chosen_bucket, 2);  // the tightest bucket wins on a quadratic cost
  }
}

TEST(Bucket, GlobalShuffleMixesSourcesEvenWhenLengthFollowsSource) {
  // Source s holds lengths in [1000 s + 1, 1000 s + 1000]: sorting alone would fill a window
  // from one source; the global shuffle must mix them.
  LengthDataset ds;
  ds.name = "correlated";
  ds.source_names = {"a", "b", "c", "d"};
  Rng rng(1);
  for (int i = 0; i < 4000; ++i) {
    uint32_t s = static_cast<uint32_t>(rng.uniform(4));
    ds.source.push_back(s);
    ds.lengths.push_back(1000 * s + 1 + static_cast<int64_t>(rng.uniform(1000)));
  }
  BucketOptions o;
  o.accum = 8;
  o.seeds = 2;
  BucketReport r = analyze_bucket(ds, o);
  for (const auto& row : r.sweep) EXPECT_GT(row.spw_mean.mean, 3.0) << row.bucket;
  // Without the global shuffle (sorted micro-batches in order) windows are single-source.
  MicroBatchOrder unshuffled = plain_order(ds.records(), 2, BatchOrder::kSequential, 0);
  unshuffled.records = sort_by_length(ds.lengths);
  OrderMetrics m = measure_order(unshuffled, ds.lengths, ds.source, 4, 8, std::nullopt);
  EXPECT_LT(m.sources_per_window_mean, 1.1);
}

TEST(Bucket, OrderJsonlHasHeaderAndCoversEveryRecord) {
  LengthDataset ds = random_dataset(8, 101, 2, 300);
  BucketOptions o;
  o.accum = 3;
  o.seed = 42;
  std::string text = order_jsonl(ds, o, 8);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  Json header = Json::parse(lines.at(0));
  EXPECT_EQ(header["schema"], "tprobe.bucket-order");
  EXPECT_EQ(header["seed"], 42);
  EXPECT_EQ(header["bucket"], 8);
  EXPECT_EQ(header["records"], 101);
  ASSERT_EQ(lines.size(), header["micro_batches"].get<std::size_t>() + 1);
  std::vector<int> seen(101, 0);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    Json mb = Json::parse(lines[i]);
    EXPECT_EQ(mb["micro_batch"], i - 1);
    EXPECT_EQ(mb["window"], (i - 1) / 3);
    int64_t width = 0;
    for (const auto& r : mb["records"]) {
      ++seen[r.get<std::size_t>()];
      width = std::max(width, ds.lengths[r.get<std::size_t>()]);
    }
    EXPECT_EQ(mb["width"], width);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
  EXPECT_EQ(order_jsonl(ds, o, 8), text);  // deterministic
}

TEST(Bucket, DefaultSweepRaisesSizesBelowTheMicroBatch) {
  EXPECT_EQ(default_sweep(1), (std::vector<int64_t>{2, 8, 32, 128, 512}));
  EXPECT_EQ(default_sweep(2), (std::vector<int64_t>{2, 8, 32, 128, 512}));
  EXPECT_EQ(default_sweep(4), (std::vector<int64_t>{4, 8, 32, 128, 512}));
  EXPECT_EQ(default_sweep(64), (std::vector<int64_t>{64, 128, 512}));
  EXPECT_EQ(default_sweep(1000), (std::vector<int64_t>{1000}));
}

TEST(Bucket, NonsenseOptionsAreUsageErrors) {
  LengthDataset ds = random_dataset(1, 10, 1, 10);
  BucketOptions o;
  o.micro_batch = 0;
  EXPECT_THROW(analyze_bucket(ds, o), UsageError);
  o = BucketOptions{};
  o.micro_batch = 4;
  o.sweep = {2, 8};  // a bucket smaller than the micro-batch
  EXPECT_THROW(analyze_bucket(ds, o), UsageError);
  o.sweep.clear();  // none given: the default sweep, raised to the micro-batch
  EXPECT_EQ(analyze_bucket(ds, o).options.sweep, default_sweep(4));
  o = BucketOptions{};
  o.bucket = 1;
  EXPECT_THROW(analyze_bucket(ds, o), UsageError);
  o = BucketOptions{};
  o.accum = 0;
  EXPECT_THROW(analyze_bucket(ds, o), UsageError);
  o = BucketOptions{};
  o.seeds = 0;
  EXPECT_THROW(analyze_bucket(ds, o), UsageError);
}

}  // namespace
}  // namespace tprobe::core
