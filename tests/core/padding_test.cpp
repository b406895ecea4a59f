// Padding analysis: a hand-worked dataset, the loss-head formula, and invariants on random data.
#include "tprobe/core/data/padding.hpp"

#include <gtest/gtest.h>

#include "test_datasets.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/data/padding_report.hpp"
#include "tprobe/core/base/rng.hpp"

namespace tprobe::core {
namespace {

LengthDataset make(std::vector<int64_t> lengths, std::vector<uint32_t> source,
                   std::vector<std::string> names) {
  LengthDataset ds;
  ds.name = "literal";
  ds.format = "test";
  ds.lengths = std::move(lengths);
  ds.source = std::move(source);
  ds.source_names = std::move(names);
  return ds;
}

using testing_support::random_dataset;

// lengths 3 5 2 8 4, sources a a b b a, max_seq_len 6, micro-batch 2, file order:
//   truncated: 3 5 2 6 4 (the 8 loses 2 tokens, source b)
//   micro-batches (3,5) w5 -> 10, (2,6) w6 -> 12, (4) w4 -> 4: padded 26, real 20, pad 6
//   pad per source: a: 5-3 = 2; b: 6-2 = 4
TEST(Padding, HandWorkedDataset) {
  PaddingOptions o;
  o.micro_batch = 2;
  o.max_seq_len = 6;
  o.vocab = 10;
  o.ce_chunk = 4;
  PaddingReport r = analyze_padding(make({3, 5, 2, 8, 4}, {0, 0, 1, 1, 0}, {"a", "b"}), o);
  EXPECT_EQ(r.micro_batches, 3);
  EXPECT_EQ(r.widths, (std::vector<int64_t>{5, 6, 4}));
  EXPECT_EQ(r.rows, (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(r.padded_tokens, 26);
  EXPECT_EQ(r.breakdown.total.real_tokens, 20);
  EXPECT_EQ(r.breakdown.total.dataset_tokens, 22);
  EXPECT_EQ(r.pad_tokens, 6);
  EXPECT_DOUBLE_EQ(r.waste_ratio, 6.0 / 26.0);
  // widths sorted 4 5 6: p50 = rank 2 = 5, p90 = rank 3 = 6
  EXPECT_EQ(r.width.p50, 5);
  EXPECT_EQ(r.width.p90, 6);
  EXPECT_EQ(r.width.max, 6);
  EXPECT_EQ(r.at_max_width, 1);
  // raw lengths sorted 2 3 4 5 8: mean 4.4, p50 = rank 3 = 4, p90 = rank 5 = 8
  EXPECT_EQ(r.lengths.min, 2);
  EXPECT_DOUBLE_EQ(r.lengths.mean, 4.4);
  EXPECT_EQ(r.lengths.p50, 4);
  EXPECT_EQ(r.lengths.p90, 8);
  EXPECT_EQ(r.lengths.max, 8);
  const auto& a = r.breakdown.sources[0];
  const auto& b = r.breakdown.sources[1];
  EXPECT_EQ(a.records, 3);
  EXPECT_EQ(a.dataset_tokens, 12);
  EXPECT_EQ(a.truncated_records, 0);
  EXPECT_EQ(a.pad_tokens, 2);
  EXPECT_EQ(b.records, 2);
  EXPECT_EQ(b.dataset_tokens, 10);
  EXPECT_EQ(b.real_tokens, 8);
  EXPECT_EQ(b.max_length, 8);
  EXPECT_EQ(b.truncated_records, 1);
  EXPECT_EQ(b.truncated_tokens, 2);
  EXPECT_EQ(b.pad_tokens, 4);
  // log2 bins: [2,4): 2 3; [4,8): 5 4; [8,16): 8
  ASSERT_EQ(r.histogram.size(), 3u);
  EXPECT_EQ(r.histogram[0].lo, 2);
  EXPECT_EQ(r.histogram[0].hi, 4);
  EXPECT_EQ(r.histogram[0].records, 2);
  EXPECT_EQ(r.histogram[0].tokens, 5);
  EXPECT_EQ(r.histogram[1].records, 2);
  EXPECT_EQ(r.histogram[1].tokens, 9);
  EXPECT_EQ(r.histogram[2].lo, 8);
  EXPECT_EQ(r.histogram[2].tokens, 8);
  // Loss head: widest micro-batch (2,6): 2 x 6 = 12 tokens; vocab 10, chunk 4.
  EXPECT_EQ(r.loss.widest_rows, 2);
  EXPECT_EQ(r.loss.widest_width, 6);
  EXPECT_EQ(r.loss.widest_tokens, 12);
  EXPECT_EQ(r.loss.chunk_logits_bf16_bytes, 4 * 10 * 2);
  EXPECT_EQ(r.loss.chunk_logits_fp32_bytes, 4 * 10 * 4);
  EXPECT_EQ(r.loss.naive_ce_transient_bytes, 12 * 10 * 14);

  Json j = to_json(r);
  EXPECT_EQ(j["waste_ratio"], 6.0 / 26.0);
  EXPECT_EQ(j["real_tokens"], 20);
  EXPECT_EQ(j["padded_tokens"], 26);
  EXPECT_EQ(j["truncation"]["truncated_tokens"], 2);
  EXPECT_EQ(j["truncation"]["per_source"][1]["source"], "b");
  EXPECT_EQ(j["truncation"]["per_source"][1]["truncated_records"], 1);
  EXPECT_DOUBLE_EQ(j["truncation"]["per_source"][1]["tokens_ratio"].get<double>(), 0.2);
  EXPECT_EQ(padding_tables(r).size(), 4u);
}

TEST(Padding, NaiveCeMatchesThePostMortemLossHead) {
  // docs/findings.md#f9: one 8,192-token row at vocab 262,144 = 2.1 G logits, ~28 GiB naive CE.
  LossHead h = loss_head(262144, 4096, 1, 8192);
  EXPECT_EQ(h.widest_logits, 2147483648LL);
  EXPECT_EQ(h.naive_ce_transient_bytes, 28LL << 30);
  EXPECT_EQ(h.chunk_logits_bf16_bytes, 2LL << 30);
  EXPECT_EQ(h.chunk_logits_fp32_bytes, 4LL << 30);
}

TEST(Padding, ShuffledOrderIsSeededAndMicroBatchOneHasNoWaste) {
  LengthDataset ds = random_dataset(5, 501, 3, 4000);
  PaddingOptions o;
  o.order = BatchOrder::kShuffled;
  o.seed = 11;
  PaddingReport a = analyze_padding(ds, o), b = analyze_padding(ds, o);
  EXPECT_EQ(a.widths, b.widths);
  o.seed = 12;
  EXPECT_NE(analyze_padding(ds, o).widths, a.widths);
  o.micro_batch = 1;
  PaddingReport one = analyze_padding(ds, o);
  EXPECT_EQ(one.pad_tokens, 0);
  EXPECT_EQ(one.waste_ratio, 0.0);
}

TEST(Padding, InvariantsOnRandomDatasets) {
  Rng pick(99);
  for (uint64_t trial = 0; trial < 40; ++trial) {
    const std::size_t n = 1 + pick.uniform(700);
    LengthDataset ds = random_dataset(trial, n, 1 + static_cast<uint32_t>(pick.uniform(5)),
                                      1 + static_cast<int64_t>(pick.uniform(9000)));
    PaddingOptions o;
    o.micro_batch = 1 + static_cast<int64_t>(pick.uniform(8));
    o.max_seq_len = 1 + static_cast<int64_t>(pick.uniform(9000));
    o.order = pick.uniform(2) ? BatchOrder::kShuffled : BatchOrder::kSequential;
    o.seed = trial;
    PaddingReport r = analyze_padding(ds, o);
    SourceStats sum;
    for (const auto& s : r.breakdown.sources) {
      sum.records += s.records;
      sum.dataset_tokens += s.dataset_tokens;
      sum.real_tokens += s.real_tokens;
      sum.truncated_records += s.truncated_records;
      sum.truncated_tokens += s.truncated_tokens;
      sum.pad_tokens += s.pad_tokens;
      EXPECT_EQ(s.dataset_tokens - s.real_tokens, s.truncated_tokens);
    }
    const auto& t = r.breakdown.total;
    EXPECT_EQ(sum.records, t.records);
    EXPECT_EQ(sum.records, static_cast<int64_t>(n));
    EXPECT_EQ(sum.dataset_tokens, t.dataset_tokens);
    EXPECT_EQ(sum.real_tokens, t.real_tokens);
    EXPECT_EQ(sum.truncated_records, t.truncated_records);
    EXPECT_EQ(sum.truncated_tokens, t.truncated_tokens);
    EXPECT_EQ(sum.pad_tokens, r.pad_tokens);
    EXPECT_EQ(r.padded_tokens, t.real_tokens + r.pad_tokens);
    int64_t rows = 0, padded = 0;
    for (std::size_t i = 0; i < r.widths.size(); ++i) {
      rows += r.rows[i];
      padded += r.rows[i] * r.widths[i];
      EXPECT_LE(r.widths[i], o.max_seq_len);
    }
    EXPECT_EQ(rows, static_cast<int64_t>(n));
    EXPECT_EQ(padded, r.padded_tokens);
    EXPECT_GE(r.waste_ratio, 0.0);
    EXPECT_LE(r.waste_ratio, 1.0);
    int64_t hist_records = 0, hist_tokens = 0;
    for (const auto& b : r.histogram) {
      hist_records += b.records;
      hist_tokens += b.tokens;
      EXPECT_EQ(b.hi, 2 * b.lo);
    }
    EXPECT_EQ(hist_records, t.records);
    EXPECT_EQ(hist_tokens, t.dataset_tokens);
    EXPECT_LE(r.width.p50, r.width.p90);
    EXPECT_LE(r.width.p90, r.width.p99);
    EXPECT_LE(r.width.p99, r.width.max);
    EXPECT_GE(r.at_max_width, 1);
    EXPECT_EQ(r.loss.widest_tokens, r.loss.widest_rows * r.loss.widest_width);
  }
}

TEST(Padding, NonsenseOptionsAreUsageErrors) {
  LengthDataset ds = make({1, 2}, {0, 0}, {""});
  PaddingOptions o;
  o.micro_batch = 0;
  EXPECT_THROW(analyze_padding(ds, o), UsageError);
  o = PaddingOptions{};
  o.max_seq_len = 0;
  EXPECT_THROW(analyze_padding(ds, o), UsageError);
  o = PaddingOptions{};
  o.vocab = -1;
  EXPECT_THROW(analyze_padding(ds, o), UsageError);
  EXPECT_THROW(parse_batch_order("random"), UsageError);
}

}  // namespace
}  // namespace tprobe::core
