// The epoch (docs/levers.md, "The epoch"): the micro-batches of each sampler, the order file read
// back bounds-checked, and the arithmetic — prediction, optimizer steps, the sampled estimate and
// its interval — against numbers worked out by hand in the comments (not by the code).
#include "tprobe/core/cost/epoch.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <set>

#include "test_datasets.hpp"
#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/data/bucket.hpp"
#include "tprobe/core/data/bucket_report.hpp"
#include "tprobe/core/data/epoch_batches.hpp"
#include "tprobe/core/io/order_file.hpp"

namespace tprobe::core {
namespace {

// File order 3 5 2 8 4 7 1 (7 records, 30 tokens).
LengthDataset hand_dataset() {
  LengthDataset ds;
  ds.name = "hand";
  ds.format = "text";
  ds.lengths = {3, 5, 2, 8, 4, 7, 1};
  ds.source.assign(ds.lengths.size(), 0);
  ds.source_names = {""};
  return ds;
}

const std::vector<EpochMicroBatch>& shapes_of(const EpochBatches& b) { return b.micro_batches; }

EpochBatches batches(const LengthDataset& ds, const std::string& sampler, int64_t micro_batch,
                     int64_t max_seq_len, uint64_t seed = 0) {
  EpochBatchOptions o;
  o.sampler = parse_epoch_sampler(sampler, "--sampler");
  o.micro_batch = micro_batch;
  o.max_seq_len = max_seq_len;
  o.seed = seed;
  return epoch_batches(ds, o);
}

// The curve t = 0.5 s + 0.1 s/token + 0.01 s/token².
StepCurve hand_curve() {
  StepCurve c;
  c.determined = true;
  c.fixed_s = 0.5;
  c.per_token_s = 0.1;
  c.per_len2_s = 0.01;
  return c;
}

TEST(EpochArithmetic, SequentialPaddedEpochWorkedByHand) {
  // Pairs in file order: {3,5} w5, {2,8} w8, {4,7} w7, {1} w1.
  const EpochBatches b = batches(hand_dataset(), "sequential", 2, 8);
  ASSERT_EQ(b.micro_batches.size(), 4u);
  EXPECT_EQ(b.real_tokens, 30);
  EXPECT_EQ(b.padded_tokens, 10 + 16 + 14 + 1);  // 41
  const auto shapes = shapes_of(b);
  // A padded path computes every row at the width: tokens = rows·w, len2 = rows·w².
  //   {3,5}: 10 tokens, 50  -> 0.5 + 1.0 + 0.50 = 2.00
  //   {2,8}: 16 tokens, 128 -> 0.5 + 1.6 + 1.28 = 3.38
  //   {4,7}: 14 tokens, 98  -> 0.5 + 1.4 + 0.98 = 2.88
  //   {1}:    1 token,  1   -> 0.5 + 0.1 + 0.01 = 0.61
  //   sum 8.87 s; accumulation 3: ceil(4 / 3) = 2 optimizer steps.
  const EpochPrediction p = predict_epoch(hand_curve(), shapes, false, 3);
  ASSERT_EQ(p.per_micro_batch_s.size(), 4u);
  EXPECT_NEAR(p.per_micro_batch_s[0], 2.00, 1e-12);
  EXPECT_NEAR(p.per_micro_batch_s[1], 3.38, 1e-12);
  EXPECT_NEAR(p.per_micro_batch_s[2], 2.88, 1e-12);
  EXPECT_NEAR(p.per_micro_batch_s[3], 0.61, 1e-12);
  EXPECT_NEAR(p.seconds, 8.87, 1e-12);
  EXPECT_NEAR(p.hours, 8.87 / 3600, 1e-15);
  EXPECT_EQ(p.optimizer_steps, 2);
  // A path that packs computes the real tokens only: tokens = Σ len, len2 = Σ len².
  //   {3,5}: 8, 34 -> 1.64; {2,8}: 10, 68 -> 2.18; {4,7}: 11, 65 -> 2.25; {1}: 0.61; sum 6.68.
  const EpochPrediction q = predict_epoch(hand_curve(), shapes, true, 1);
  EXPECT_NEAR(q.seconds, 6.68, 1e-12);
  EXPECT_EQ(q.optimizer_steps, 4);
}

TEST(EpochArithmetic, PackedRowsWorkedByHand) {
  // Next-fit into rows of 8, 2 rows per micro-batch: [3 5] (8) | 2 opens row 2, 8 does not fit
  // -> [2] (2); mb0 = rows 8, 2, samples 3 5 2. [8] | [4], 7 does not fit: mb1 = rows 8, 4,
  // samples 8 4. [7 1] (8): mb2 = rows 8, samples 7 1.
  const EpochBatches b = batches(hand_dataset(), "packed", 2, 8);
  ASSERT_EQ(b.micro_batches.size(), 3u);
  EXPECT_EQ(b.micro_batches[0].rows, (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(b.micro_batches[0].samples, (std::vector<int64_t>{3, 5, 2}));
  EXPECT_EQ(b.micro_batches[1].rows, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(b.micro_batches[1].samples, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(b.micro_batches[2].rows, (std::vector<int64_t>{8}));
  EXPECT_EQ(b.micro_batches[2].samples, (std::vector<int64_t>{7, 1}));
  EXPECT_EQ(b.real_tokens, 30);
  EXPECT_EQ(b.padded_tokens, 5 * 8);
  // Packed on a path that packs: {3,5,2}: 10, 38 -> 1.88; {8,4}: 12, 80 -> 2.50;
  // {7,1}: 8, 50 -> 1.80; sum 6.18 s; accumulation 2: 2 steps.
  const EpochPrediction p = predict_epoch(hand_curve(), shapes_of(b), true, 2);
  EXPECT_NEAR(p.seconds, 6.18, 1e-12);
  EXPECT_EQ(p.optimizer_steps, 2);
}

TEST(EpochArithmetic, CurveFromMeasuredPointsWorkedByHand) {
  // Batch 2, t(w) = 0.2 w + 0.02 w²: t(4) = 0.8 + 0.32 = 1.12, t(8) = 1.6 + 1.28 = 2.88.
  // Two widths: form AB, exact; per token A/2 = 0.1, per len² B/2 = 0.01, no fixed term.
  const StepCurve ab = fit_step_curve({{2, 4, 1.12}, {2, 8, 2.88}});
  ASSERT_TRUE(ab.determined) << ab.refusal;
  EXPECT_EQ(ab.form, "AB");
  EXPECT_TRUE(ab.exact);
  EXPECT_NEAR(ab.per_token_s, 0.1, 1e-9);
  EXPECT_NEAR(ab.per_len2_s, 0.01, 1e-9);
  EXPECT_NEAR(ab.fixed_s, 0, 1e-12);
  // Plus C = 0.5: t(4) = 1.62, t(8) = 3.38, t(16) = 0.5 + 3.2 + 5.12 = 8.82; three widths: ABC.
  const StepCurve abc = fit_step_curve({{2, 4, 1.62}, {2, 8, 3.38}, {2, 16, 8.82}, {2, 8, 3.38}});
  ASSERT_TRUE(abc.determined) << abc.refusal;
  EXPECT_EQ(abc.form, "ABC");
  EXPECT_EQ(abc.distinct_widths, 3);
  EXPECT_NEAR(abc.fixed_s, 0.5, 1e-9);
  EXPECT_NEAR(abc.per_token_s, 0.1, 1e-9);
  EXPECT_NEAR(abc.per_len2_s, 0.01, 1e-9);
  // One width cannot say how time grows: refused, not invented.
  const StepCurve one = fit_step_curve({{2, 8, 3.0}, {2, 8, 3.1}});
  EXPECT_FALSE(one.determined);
  EXPECT_NE(one.refusal.find("underdetermined"), std::string::npos) << one.refusal;
  EXPECT_FALSE(fit_step_curve({}).determined);
  EXPECT_THROW(fit_step_curve({{2, 4, 1.0}, {4, 8, 2.0}}), UsageError);
  EXPECT_THROW(predict_epoch(one, {}, false, 1), Error);
}

TEST(EpochArithmetic, OptimizerSteps) {
  EXPECT_EQ(optimizer_steps(10491, 8), 1312);  // 1311 full windows + one of 3
  EXPECT_EQ(optimizer_steps(16, 8), 2);
  EXPECT_EQ(optimizer_steps(1, 8), 1);
  EXPECT_EQ(optimizer_steps(0, 8), 0);
  EXPECT_THROW(optimizer_steps(4, 0), UsageError);
}

TEST(EpochSampling, StudentQuantilesMatchTables) {
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.302653, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 7), 2.364624, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 10), 2.228139, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 30), 2.042272, 1e-6);
  EXPECT_THROW(student_t_quantile(0.4, 3), UsageError);
  EXPECT_THROW(student_t_quantile(0.975, 0), UsageError);
}

TEST(EpochSampling, IntervalOfAGivenSampleWorkedByHand) {
  // 3 of M = 10 micro-batches measured 2, 4, 7 s.
  // Expansion: mean 13/3, estimate 10·13/3 = 43.333 s; s² = ((2−13/3)² + (4−13/3)² +
  // (7−13/3)²)/2 = (5.4444 + 0.1111 + 7.1111)/2 = 6.3333; fpc 1 − 3/10 = 0.7;
  // se = 10·sqrt(0.7·6.3333/3) = 10·1.21564 = 12.1564; t(0.975, 2) = 4.302653; half = 52.3048.
  const EpochEstimate plain = estimate_epoch({2, 4, 7}, {}, 10, std::nullopt);
  EXPECT_NEAR(plain.expansion_s, 43.3333, 1e-3);
  ASSERT_TRUE(plain.expansion_half_s);
  EXPECT_NEAR(*plain.expansion_half_s, 52.3048, 1e-3);
  EXPECT_FALSE(plain.ratio_s);
  EXPECT_NEAR(plain.estimate_s(), 43.3333, 1e-3);
  // Ratio: predicted 1, 2, 3 s for them, 20 s for the whole epoch. R = 13/6 = 2.16667, estimate
  // 20·R = 43.3333 s; residuals 2 − 2.16667 = −0.16667, 4 − 4.33333 = −0.33333, 7 − 6.5 = 0.5:
  // Σe² = 0.027778 + 0.111111 + 0.25 = 0.388889, s_e² = 0.194444;
  // se = 10·sqrt(0.7·0.194444/3) = 10·0.213003 = 2.13003; half = 4.302653·2.13003 = 9.16478.
  const EpochEstimate r = estimate_epoch({2, 4, 7}, {1, 2, 3}, 10, 20.0);
  ASSERT_TRUE(r.ratio && r.ratio_s && r.ratio_half_s);
  EXPECT_NEAR(*r.ratio, 13.0 / 6.0, 1e-12);
  EXPECT_NEAR(*r.ratio_s, 43.3333, 1e-3);
  EXPECT_NEAR(*r.ratio_half_s, 9.16478, 1e-4);
  EXPECT_NEAR(*r.half_s(), 9.16478, 1e-4);
  // The whole epoch measured: no sampling error left.
  const EpochEstimate census = estimate_epoch({2, 4, 7}, {1, 2, 3}, 3, 6.0);
  EXPECT_NEAR(*census.ratio_half_s, 0, 1e-12);
  EXPECT_NEAR(*census.ratio_s, 13, 1e-12);
  // One micro-batch: an estimate, no interval.
  const EpochEstimate one = estimate_epoch({2}, {1}, 10, 20.0);
  EXPECT_FALSE(one.half_s());
  EXPECT_THROW(estimate_epoch({2, 3}, {1}, 10, 20.0), UsageError);
}

TEST(EpochSampling, PlannedSampleSizeWorkedByHand) {
  // t(0.975, 7) = 2.364624. cv 0.1, target 5 %: n0 = (2.364624·0.1/0.05)² = 22.366;
  // n = 22.366 / (1 + 22.366/1000) = 21.877 -> 22.
  EXPECT_EQ(planned_samples(0.1, 8, 0.05, 64, 1000), 22);
  // cv 0.2: n0 = 89.46, n = 82.12 -> 83, capped at 64.
  EXPECT_EQ(planned_samples(0.2, 8, 0.05, 64, 1000), 64);
  // cv 0.01: n0 = 0.22 -> the pilot itself, 8.
  EXPECT_EQ(planned_samples(0.01, 8, 0.05, 64, 1000), 8);
  // The finite epoch: cv 0.2 of M = 20: n0 = 89.46, n = 89.46 / (1 + 4.473) = 16.35 -> 17;
  // cv 0.5: n0 = 559.1, n = 559.1 / 28.96 = 19.31 -> 20, the whole epoch.
  EXPECT_EQ(planned_samples(0.2, 8, 0.05, 64, 20), 17);
  EXPECT_EQ(planned_samples(0.5, 8, 0.05, 64, 20), 20);
  // The pilot's spread: measured 2, 4, 6 (mean 4, s = 2): cv 0.5; against predictions 1, 2, 3
  // the residuals vanish: 0.
  EXPECT_NEAR(pilot_spread({2, 4, 6}, {}), 0.5, 1e-12);
  EXPECT_NEAR(pilot_spread({2, 4, 6}, {1, 2, 3}), 0.0, 1e-12);
}

TEST(EpochSampling, DrawIsUniformWithoutReplacementAndSeeded) {
  const std::vector<int64_t> d = draw_without_replacement(1000, 64, 7);
  ASSERT_EQ(d.size(), 64u);
  EXPECT_EQ(std::set<int64_t>(d.begin(), d.end()).size(), 64u);
  for (int64_t i : d) EXPECT_TRUE(i >= 0 && i < 1000);
  EXPECT_EQ(d, draw_without_replacement(1000, 64, 7));
  EXPECT_NE(d, draw_without_replacement(1000, 64, 8));
  // A shorter draw is the longer one's prefix: the pilot is part of the sample.
  const std::vector<int64_t> p = draw_without_replacement(1000, 8, 7);
  EXPECT_TRUE(std::equal(p.begin(), p.end(), d.begin()));
  std::vector<int64_t> all = draw_without_replacement(10, 10, 3);
  std::sort(all.begin(), all.end());
  std::vector<int64_t> iota(10);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(all, iota);
  EXPECT_THROW(draw_without_replacement(5, 6, 0), UsageError);
  // Uniform: over many seeds each of 10 indices is drawn about as often (3 of 10 per draw).
  std::vector<int> count(10, 0);
  for (uint64_t s = 0; s < 2000; ++s) {
    for (int64_t i : draw_without_replacement(10, 3, s)) ++count[static_cast<size_t>(i)];
  }
  for (int c : count) EXPECT_NEAR(c, 600, 90);
}

TEST(EpochSamplers, SpellingsAndRefusals) {
  EXPECT_EQ(parse_epoch_sampler("sequential", "--sampler").kind, EpochSamplerKind::kSequential);
  EXPECT_EQ(parse_epoch_sampler("shuffled", "--sampler").kind, EpochSamplerKind::kShuffled);
  EXPECT_EQ(parse_epoch_sampler("packed", "--sampler").kind, EpochSamplerKind::kPacked);
  EXPECT_EQ(parse_epoch_sampler("bucket:32", "--sampler").bucket, 32);
  EXPECT_EQ(parse_epoch_sampler("order:a/b.jsonl", "--sampler").order_path, "a/b.jsonl");
  for (const char* bad : {"bucket:", "bucket:0", "bucket:-2", "bucket:2x", "order:", "random", ""}) {
    EXPECT_THROW(parse_epoch_sampler(bad, "--sampler"), UsageError) << bad;
  }
  EXPECT_THROW(batches(hand_dataset(), "bucket:1", 2, 8), UsageError);  // below the micro-batch
  EXPECT_THROW(batches(hand_dataset(), "sequential", 0, 8), UsageError);
}

TEST(EpochSamplers, BucketEqualsTheBucketProbesOrder) {
  const LengthDataset ds = testing_support::random_dataset(5, 501, 3, 300);
  const std::vector<int64_t> eff = truncate_lengths(ds.lengths, 256);
  const MicroBatchOrder want = bucket_order(sort_by_length(eff), 8, 2, 3);
  const EpochBatches got = batches(ds, "bucket:8", 2, 256, 3);
  ASSERT_EQ(got.micro_batches.size(), want.micro_batches());
  const std::vector<int64_t> widths = micro_batch_widths(want, eff);
  for (std::size_t i = 0; i < want.micro_batches(); ++i) {
    std::vector<int64_t> rows;
    for (uint64_t k = want.starts[i]; k < want.starts[i + 1]; ++k) rows.push_back(eff[want.records[k]]);
    EXPECT_EQ(got.micro_batches[i].rows, rows) << i;
    EXPECT_EQ(got.micro_batches[i].width, widths[i]) << i;
  }
  EXPECT_GT(got.truncated_records, 0);
}

TEST(EpochSamplers, OrderFileRoundTripsTheEmittedOrder) {
  const LengthDataset ds = testing_support::random_dataset(9, 301, 2, 200);
  BucketOptions bo;
  bo.micro_batch = 2;
  bo.max_seq_len = 150;
  bo.seed = 4;
  const std::string path = testing_support::temp_dir() + "/order.jsonl";
  std::ofstream(path) << order_jsonl(ds, bo, 32);
  const EpochBatches from_file = batches(ds, "order:" + path, 2, 150);
  const EpochBatches direct = batches(ds, "bucket:32", 2, 150, 4);
  ASSERT_EQ(from_file.micro_batches.size(), direct.micro_batches.size());
  for (std::size_t i = 0; i < direct.micro_batches.size(); ++i) {
    EXPECT_EQ(from_file.micro_batches[i].rows, direct.micro_batches[i].rows) << i;
  }
  // Read against another truncation, another micro-batch, another dataset: refused, one line.
  EXPECT_THROW(batches(ds, "order:" + path, 2, 149), Error);
  EXPECT_THROW(batches(ds, "order:" + path, 4, 150), Error);
  LengthDataset other = ds;
  other.lengths.push_back(5);
  other.source.push_back(0);
  EXPECT_THROW(batches(other, "order:" + path, 2, 150), Error);
  LengthDataset changed = ds;
  for (int64_t& l : changed.lengths) l = l > 1 ? l - 1 : l;  // other widths
  try {
    batches(changed, "order:" + path, 2, 150);
    ADD_FAILURE() << "a width the records do not have was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("states width"), std::string::npos) << e.what();
  }
}

TEST(EpochSamplers, PackedRowsNeverExceedTheWidthAndKeepEveryToken) {
  for (uint64_t seed = 0; seed < 5; ++seed) {
    const LengthDataset ds = testing_support::random_dataset(seed, 400, 2, 700);
    const int64_t width = 512;
    const EpochBatches b = batches(ds, "packed", 3, width);
    const std::vector<int64_t> eff = truncate_lengths(ds.lengths, width);
    std::vector<int64_t> seen;
    int64_t real = 0;
    for (const EpochMicroBatch& mb : b.micro_batches) {
      EXPECT_TRUE(mb.packed);
      EXPECT_EQ(mb.width, width);
      EXPECT_GE(mb.rows.size(), 1u);
      EXPECT_LE(mb.rows.size(), 3u);
      int64_t filled = 0;
      for (int64_t r : mb.rows) {
        EXPECT_GE(r, 1);
        EXPECT_LE(r, width);
        filled += r;
      }
      EXPECT_EQ(filled, std::accumulate(mb.samples.begin(), mb.samples.end(), int64_t{0}));
      seen.insert(seen.end(), mb.samples.begin(), mb.samples.end());
      real += filled;
    }
    EXPECT_EQ(seen, eff) << "every record, whole and in file order";
    EXPECT_EQ(real, std::accumulate(eff.begin(), eff.end(), int64_t{0}));
    EXPECT_EQ(b.real_tokens, real);
  }
}

std::string write(const std::string& text) {
  static int n = 0;
  const std::string path = testing_support::temp_dir() + "/o" + std::to_string(n++) + ".jsonl";
  std::ofstream(path) << text;
  return path;
}

const char* kHeader =
    R"({"schema":"tprobe.bucket-order","version":1,"dataset":"hand","records":4,"micro_batches":2,"micro_batch":2,"max_seq_len":8})";

TEST(OrderFile, ReadsAWellFormedFile) {
  const OrderFile f = read_order_file(write(std::string(kHeader) + "\n" +
                                            R"({"micro_batch":0,"window":0,"width":5,"records":[2,0]})" "\n"
                                            R"({"micro_batch":1,"window":0,"width":9,"records":[1,3]})" "\n"));
  EXPECT_EQ(f.records, 4);
  EXPECT_EQ(f.micro_batch, 2);
  EXPECT_EQ(f.max_seq_len, 8);
  EXPECT_EQ(f.records_in_order, (std::vector<uint32_t>{2, 0, 1, 3}));
  EXPECT_EQ(f.starts, (std::vector<uint64_t>{0, 2, 4}));
  EXPECT_EQ(f.widths, (std::vector<int64_t>{5, 9}));
}

TEST(OrderFile, BrokenFilesAreRefusedWithOneLineNamingTheLine) {
  const std::string mb0 = R"({"micro_batch":0,"width":5,"records":[0,1]})";
  const std::string mb1 = R"({"micro_batch":1,"width":5,"records":[2,3]})";
  const std::string h = kHeader;
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"", "empty order file"},
      {mb0 + "\n", "not a tprobe.bucket-order header"},
      {R"({"schema":"tprobe.bucket-order","version":2,"records":4,"micro_batches":2,"micro_batch":2,"max_seq_len":8})" "\n",
       "'version' is 2"},
      {R"({"schema":"tprobe.bucket-order","version":1,"records":0,"micro_batches":2,"micro_batch":2,"max_seq_len":8})" "\n",
       "'records' is 0"},
      {R"({"schema":"tprobe.bucket-order","version":1,"records":4.5,"micro_batches":2,"micro_batch":2,"max_seq_len":8})" "\n",
       "'records' is not an integer"},
      {R"({"schema":"tprobe.bucket-order","version":1,"records":99999999999,"micro_batches":2,"micro_batch":2,"max_seq_len":8})" "\n",
       "outside 1 .. 4294967295"},
      {h + "\n[1,2]\n", ":2: not a JSON object"},
      {h + "\n{\"micro_batch\":0,\n", ":2:"},
      {h + "\n" + R"({"micro_batch":1,"width":5,"records":[0,1]})" "\n", "out of sequence"},
      {h + "\n" + R"({"micro_batch":0,"width":5,"records":[0,4]})" "\n", "record index 4 outside 0 .. 3"},
      {h + "\n" + R"({"micro_batch":0,"width":5,"records":[0,-1]})" "\n", "record index -1 outside"},
      {h + "\n" + R"({"micro_batch":0,"width":5,"records":[0,18446744073709551615]})" "\n", "outside 0 .. 3"},
      {h + "\n" + R"({"micro_batch":0,"width":5,"records":[0,"1"]})" "\n", "not an integer"},
      {h + "\n" + R"({"micro_batch":0,"width":5,"records":[0,0]})" "\n", "record 0 appears twice"},
      {h + "\n" + R"({"micro_batch":0,"width":5,"records":[]})" "\n", "an empty micro-batch"},
      {h + "\n" + R"({"micro_batch":0,"width":5,"records":[0,1,2]})" "\n", "3 records in a micro-batch of 2"},
      {h + "\n" + R"({"micro_batch":0,"width":0,"records":[0,1]})" "\n", "'width' is 0"},
      {h + "\n" + R"({"micro_batch":0,"records":[0,1]})" "\n", "missing field 'width'"},
      {h + "\n" + R"({"micro_batch":0,"width":5})" "\n", "missing 'records'"},
      {h + "\n" + mb0 + "\n", "1 micro-batch lines, the header says 2"},
      {h + "\n" + mb0 + "\n" + mb1 + "\n" + R"({"micro_batch":2,"width":5,"records":[3]})" "\n",
       "more micro-batch lines"},
      {h + "\n" + mb0 + "\n" + R"({"micro_batch":1,"width":5,"records":[2]})" "\n", "leaves out record 3"},
      {h + "\n" + R"({"micro_batch":0,"width":5,"records":[0,1],"width":6})" "\n", "appears twice in one JSON object"},
  };
  for (const Case& c : cases) {
    const std::string path = write(c.text);
    try {
      read_order_file(path);
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.expect), std::string::npos) << "got: " << msg << "\nfor: " << c.text;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(read_order_file("/nonexistent/order.jsonl"), Error);
}

}  // namespace
}  // namespace tprobe::core
