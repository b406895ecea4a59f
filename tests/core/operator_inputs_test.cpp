// The operator's inputs, torch-free: the forced routing (core/step/routing), the evidence fields'
// one home (core/evidence), the dataset's token ids (read_record_ids) and a point's batch built
// from them (dataset_batch), with SHA-256 from libcrypto.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/host_memory.hpp"
#include "tprobe/core/base/sha256.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/data/dataset_batch.hpp"
#include "tprobe/core/evidence/operator_inputs.hpp"
#include "tprobe/core/evidence/profile_point.hpp"
#include "tprobe/core/evidence/step_memory.hpp"
#include "tprobe/core/io/lengths.hpp"
#include "tprobe/core/step/routing.hpp"

namespace tprobe::core {
namespace {

// The Zipf shares computed another way: bisection on the scale c of Σ min(1, c·p_e) = k, in long
// double.
std::vector<long double> shares_by_bisection(int64_t experts, int64_t k, double s) {
  std::vector<long double> p(static_cast<std::size_t>(experts));
  for (std::size_t e = 0; e < p.size(); ++e) p[e] = std::pow(static_cast<long double>(e + 1), -s);
  auto total = [&](long double c) {
    long double t = 0;
    for (long double x : p) t += std::min<long double>(1, c * x);
    return t;
  };
  long double lo = 0, hi = 1;
  while (total(hi) < k) hi *= 2;
  for (int i = 0; i < 200; ++i) {
    const long double mid = (lo + hi) / 2;
    (total(mid) < k ? lo : hi) = mid;
  }
  for (long double& x : p) x = std::min<long double>(1, hi * x);
  return p;
}

std::vector<int64_t> counts_of(const std::vector<int32_t>& a, int64_t experts) {
  std::vector<int64_t> c(static_cast<std::size_t>(experts), 0);
  for (int32_t e : a) ++c.at(static_cast<std::size_t>(e));
  return c;
}

void expect_distinct_per_token(const std::vector<int32_t>& a, int64_t tokens, int64_t k) {
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<int32_t> seen(a.begin() + t * k, a.begin() + (t + 1) * k);
    ASSERT_EQ(static_cast<int64_t>(seen.size()), k) << "token " << t;
  }
}

TEST(Routing, BalancedPutsEveryExpertWithinOneTokenOfTheOthers) {
  for (const auto& [tokens, experts, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {64, 8, 2}, {63, 8, 2}, {1000, 128, 8}, {5, 8, 8}, {1, 4, 1}, {7, 3, 2}}) {
    Routing r;
    r.kind = RoutingKind::kBalanced;
    const std::vector<int32_t> a = forced_assignment(tokens, experts, k, r);
    ASSERT_EQ(static_cast<int64_t>(a.size()), tokens * k);
    expect_distinct_per_token(a, tokens, k);
    const std::vector<int64_t> c = counts_of(a, experts);
    EXPECT_LE(*std::max_element(c.begin(), c.end()) - *std::min_element(c.begin(), c.end()), 1)
        << tokens << " " << experts << " " << k;
  }
}

TEST(Routing, ZipfSharesAreTheCappedProportionalOnes) {
  for (double s : {0.5, 1.0, 1.2, 1.5, 3.0}) {
    for (const auto& [experts, k] : std::vector<std::pair<int64_t, int64_t>>{{8, 2}, {128, 8}, {4, 3}}) {
      const std::vector<double> got = routing_shares(experts, k, parse_routing(fmt::format("zipf:{}", s), "--routing"));
      const std::vector<long double> want = shares_by_bisection(experts, k, s);
      double sum = 0;
      for (std::size_t e = 0; e < got.size(); ++e) {
        EXPECT_NEAR(got[e], static_cast<double>(want[e]), 1e-9) << s << " " << experts << " " << e;
        EXPECT_LE(got[e], 1.0 + 1e-12);
        sum += got[e];
      }
      EXPECT_NEAR(sum, static_cast<double>(k), 1e-9);
    }
  }
}

TEST(Routing, ZipfAssignmentCountsAreTheSharesOfTheTokensWithKDistinctExperts) {
  const int64_t tokens = 4096, experts = 128, k = 8;
  for (double s : {0.5, 1.0, 1.5}) {
    const Routing r = parse_routing(fmt::format("zipf:{}", s), "--routing");
    const std::vector<int32_t> a = forced_assignment(tokens, experts, k, r);
    expect_distinct_per_token(a, tokens, k);
    const std::vector<int64_t> c = counts_of(a, experts);
    const std::vector<long double> want = shares_by_bisection(experts, k, s);
    for (std::size_t e = 0; e < c.size(); ++e)
      EXPECT_LE(std::abs(static_cast<long double>(c[e]) - tokens * want[e]), 1.0L) << s << " " << e;
    // max / mean is E·π_max / k, the value the law implies.
    const LoadSummary sum = summarize_load(c);
    EXPECT_NEAR(sum.max_over_mean, static_cast<double>(experts * want[0] / k), 0.01) << s;
  }
}

TEST(Routing, SpellingsAndRefusals) {
  EXPECT_EQ(to_string(parse_routing("computed", "--routing")), "computed");
  EXPECT_EQ(to_string(parse_routing("balanced", "--routing")), "balanced");
  EXPECT_EQ(to_string(parse_routing("zipf:1.2", "--routing")), "zipf:1.2");
  EXPECT_EQ(parse_routing("zipf:0.5", "--routing").zipf_s, 0.5);  // negative control
  for (const char* bad : {"zipf:", "zipf:0", "zipf:-1", "zipf:nan", "zipf:inf", "zipf:17",
                          "zipf:1.2x", "zipf", "skewed", "", "Balanced"}) {
    try {
      parse_routing(bad, "--routing");
      ADD_FAILURE() << bad << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--routing"), std::string::npos) << e.what();
    }
  }
  Routing computed;
  EXPECT_THROW(forced_assignment(4, 8, 2, computed), Error);
  Routing balanced;
  balanced.kind = RoutingKind::kBalanced;
  EXPECT_THROW(forced_assignment(4, 8, 9, balanced), Error);  // k > experts
  EXPECT_THROW(forced_assignment(0, 8, 2, balanced), Error);
}

TEST(Routing, LoadSummaryByHand) {
  const LoadSummary s = summarize_load({0, 2, 4, 2});
  EXPECT_DOUBLE_EQ(s.max_over_mean, 2.0);
  EXPECT_NEAR(s.cv, std::sqrt(2.0) / 2.0, 1e-15);  // variance (4 + 0 + 4 + 0) / 4, mean 2
  EXPECT_EQ(s.zero_experts, (std::vector<int64_t>{0}));
  const LoadSummary even = summarize_load({3, 3, 3});
  EXPECT_DOUBLE_EQ(even.max_over_mean, 1.0);
  EXPECT_DOUBLE_EQ(even.cv, 0.0);
  EXPECT_TRUE(even.zero_experts.empty());
}

TEST(EvidenceFields, RoundTripTypedReadsAndTheDocsList) {
  ExpertLoadLayer e;
  e.layer = 3;
  e.tokens = {5, 0, 7};
  e.max_over_mean = 1.75;
  e.cv = 0.5;
  e.zero_experts = {1};
  const Json j = evidence::to_json(e);
  EXPECT_EQ(j.at("layer"), 3);
  EXPECT_TRUE(j.at("experts_kernel_s").is_null());
  const ExpertLoadLayer back = evidence::from_json<ExpertLoadLayer>(j, "e.json results");
  EXPECT_EQ(evidence::to_json(back), j);
  Json absent = j;
  absent.erase("experts_kernel_s");  // an optional field may be absent
  EXPECT_FALSE(evidence::from_json<ExpertLoadLayer>(absent, "e").experts_kernel_s.has_value());
  Json missing = j;
  missing.erase("tokens");
  try {
    evidence::from_json<ExpertLoadLayer>(missing, "e.json results.points[0].expert_load[0]");
    ADD_FAILURE() << "a missing field was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("missing field 'tokens'"), std::string::npos) << err.what();
  }
  Json wrong = j;
  wrong["tokens"][1] = "x";
  try {
    evidence::from_json<ExpertLoadLayer>(wrong, "e");
    ADD_FAILURE() << "a string token count was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("e.tokens[1]"), std::string::npos) << err.what();
  }
  PointTokens t;
  t.records = {{0, 1}, {2}};
  t.sha256 = "ab";
  EXPECT_EQ(evidence::to_json(evidence::from_json<PointTokens>(evidence::to_json(t), "t")),
            evidence::to_json(t));
  // The docs' field list is the tables' (docs/profile.md holds these rows as they are).
  std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/profile.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  const std::vector<std::pair<std::string, std::vector<evidence::FieldDoc>>> lists = {
      {"points[].tokens.", evidence::field_docs<PointTokens>("points[].tokens.")},
      {"points[].", evidence::field_docs<ExpertLoad>("points[].")},
      {"load.", evidence::field_docs<LoadFigures>("load.")},
      {"points[].", evidence::field_docs<PointFigures>("points[].")},
      {"", evidence::field_docs<StepFigures>()},
      {"points[].memory.", evidence::field_docs<StepMemory>("points[].memory.")},
      {"points[].memory.timeline.samples[].",
       evidence::field_docs<MemorySample>("points[].memory.timeline.samples[].")}};
  for (const auto& [prefix, docs] : lists) {
    ASSERT_FALSE(docs.empty());
    for (const evidence::FieldDoc& d : docs) {
      const std::string row = evidence::field_rows({d});
      EXPECT_NE(doc.find(row), std::string::npos) << "docs/profile.md lacks the row:\n" << row;
    }
  }
}

// A derived field added after evidence was written: `.absent_ok()` reads that evidence, and a
// file that has the field is still checked against what the other fields make of it.
struct Doubled {
  int64_t n = 0;
};
auto evidence_fields(const Doubled*) {
  return std::make_tuple(
      evidence::field("n", &Doubled::n, "", "a count"),
      evidence::derived<Doubled>("twice", +[](const Doubled& d) { return Json(2 * d.n); },
                                 "integer", "", "n doubled")
          .absent_ok());
}

TEST(EvidenceFields, ADerivedFieldAbsentOkReadsOlderEvidenceAndChecksNewer) {
  EXPECT_EQ(evidence::to_json(Doubled{3}), (Json{{"n", 3}, {"twice", 6}}));
  EXPECT_EQ(evidence::from_json<Doubled>(Json{{"n", 3}}, "d").n, 3);  // from before the field
  EXPECT_EQ(evidence::from_json<Doubled>(Json{{"n", 3}, {"twice", 6}}, "d").n, 3);
  try {
    evidence::from_json<Doubled>(Json{{"n", 3}, {"twice", 7}}, "d");
    ADD_FAILURE() << "a derived field that does not match was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'twice' is 7 but the other fields make it 6"),
              std::string::npos)
        << e.what();
  }
}

// The views' field-by-field tables: one row per field that is a scalar for every item and set
// for one at least, in table order, each cell by the field's unit.
TEST(EvidenceFields, FieldCellsAreTheScalarFieldsByUnit) {
  PointFigures a, b;
  a.point = StepPoint(2, 16);
  b.point = StepPoint(4, 32, {32, 32, 32, 8});
  b.memory_measured = true;
  b.peak_allocated_bytes = int64_t{3} << 30;
  b.peak_reserved_bytes = int64_t{4} << 30;
  a.step_s = b.step_s = {0.5, 0.25};
  const std::vector<evidence::FieldCells> rows = evidence::field_cells<PointFigures>({&a, &b});
  std::vector<std::string> keys;
  for (const auto& r : rows) keys.push_back(r.doc.path);
  auto row = [&](const std::string& k) -> const evidence::FieldCells* {
    for (const auto& r : rows)
      if (r.doc.path == k) return &r;
    return nullptr;
  };
  ASSERT_TRUE(row("batch") && row("real_tokens") && row("peak_allocated_bytes") && row("traced"));
  EXPECT_EQ(row("batch")->cells, (std::vector<std::string>{"2", "4"}));
  EXPECT_EQ(row("real_tokens")->cells, (std::vector<std::string>{"32", "104"}));
  EXPECT_EQ(row("peak_allocated_bytes")->cells, (std::vector<std::string>{"-", "3.00 GiB"}));
  EXPECT_EQ(row("traced")->cells, (std::vector<std::string>{"no", "no"}));
  // Lists (samples_s, lengths once one item has them), objects (step) and fields null for every
  // item (message, oom_tried_bytes) are not rows; the rest keep the table's order.
  for (const char* k : {"samples_s", "lengths", "step", "message", "oom_tried_bytes"})
    EXPECT_EQ(row(k), nullptr) << k;
  EXPECT_LT(std::find(keys.begin(), keys.end(), "batch"), std::find(keys.begin(), keys.end(), "outcome"));
  // A time by its unit, a ratio as a number.
  const std::vector<evidence::FieldDoc> docs = {{"t", "number", "s", ""}, {"r", "number", "", ""}};
  const auto cells = evidence::field_cells(docs, {Json{{"t", 0.0123}, {"r", 0.5}}});
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].cells.front(), format_seconds(0.0123));
  EXPECT_EQ(cells[1].cells.front(), "0.5");
}

TEST(Sha256, LibcryptoMatchesTheStandardVectors) {
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // int64 little-endian: 1 is the bytes 01 00 00 00 00 00 00 00.
  const unsigned char one[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(sha256_hex_int64_le({1}), sha256_hex(one, 8));
}

TEST(HostMemory, RssAnonFromAStatusText) {
  EXPECT_EQ(parse_rss_anon("Name:\tx\nRssAnon:\t  1234 kB\nRssFile: 5 kB\n"), 1234 * 1024);
  EXPECT_FALSE(parse_rss_anon("Name: x\nRssFile: 5 kB\n").has_value());
  EXPECT_FALSE(parse_rss_anon("RssAnon: kB\n").has_value());
  EXPECT_FALSE(parse_rss_anon("RssAnon: 12 MB\n").has_value());
  EXPECT_FALSE(parse_rss_anon("XRssAnon: 12 kB\n").has_value());
  const auto now = rss_anon_bytes();
  ASSERT_TRUE(now.has_value());
  RssAnonPeak peak(1);
  std::vector<char> big(64 << 20, 1);  // 64 MiB touched: the peak must see it
  volatile char sink = big[12345];
  (void)sink;
  const auto p = peak.peak();
  ASSERT_TRUE(p.has_value());
  EXPECT_GE(*p, *now + (48 << 20));
}

std::string write_jsonl(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(DatasetTokens, ReadRecordIdsTakesOnlyTheWantedRecordsAndRefusesBrokenOnes) {
  const std::string dir = testing_support::temp_dir();
  const std::string ok = write_jsonl(
      dir, "ok.jsonl",
      "{\"input_ids\": [1, 2, 3]}\n\n{\"input_ids\": [4, 5], \"source\": \"a\"}\n"
      "{\"length\": 2, \"input_ids\": [6, 7]}\n");
  EXPECT_EQ(read_record_ids(ok, {0, 2}, 99),
            (std::vector<std::vector<int64_t>>{{1, 2, 3}, {6, 7}}));
  EXPECT_EQ(read_record_ids(ok, {1}, 99), (std::vector<std::vector<int64_t>>{{4, 5}}));
  auto refused = [&](const std::string& path, std::vector<int64_t> wanted, int64_t max_id,
                     const std::string& words) {
    try {
      read_record_ids(path, wanted, max_id);
      ADD_FAILURE() << path << " accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  refused(ok, {0}, 2, "input_ids[2] is 3: a token id must be in 0..2");
  refused(ok, {3}, 99, "record 3 asked for, but the file holds 3 records");
  refused(ok, {2, 1}, 99, "ascend");
  refused(write_jsonl(dir, "neg.jsonl", "{\"input_ids\": [1, -4]}\n"), {0}, 99, "is -4");
  refused(write_jsonl(dir, "len.jsonl", "{\"length\": 5}\n"), {0}, 99, "has no input_ids");
  refused(write_jsonl(dir, "big.jsonl", "{\"input_ids\": [18446744073709551615]}\n"), {0}, 99,
          "a token id must be in 0..99");
  refused(write_jsonl(dir, "float.jsonl", "{\"input_ids\": [1.5]}\n"), {0}, 99, "expected token ids");
  refused(write_jsonl(dir, "cut.jsonl", "{\"input_ids\": [1, 2\n"), {0}, 99, "malformed JSON");
  try {
    read_record_ids(write_jsonl(dir, "l.csv", "length\n5\n"), {0}, 99);
    ADD_FAILURE() << "CSV accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("input_ids"), std::string::npos) << e.what();
  }
}

TEST(DatasetTokens, FilledRowsAreTheRecordsEndToEndCutAtTheWidthWithTheirDigest) {
  const std::string dir = testing_support::temp_dir();
  const std::string path = write_jsonl(dir, "d.jsonl",
                                       "{\"input_ids\": [10, 11, 12]}\n"
                                       "{\"input_ids\": [20, 21, 22, 23, 24, 25]}\n"
                                       "{\"input_ids\": [30]}\n"
                                       "{\"input_ids\": [40, 41, 42, 43]}\n");
  const LengthDataset lengths = read_lengths(path);
  DatasetBatchRequest r;
  r.path = path;
  r.batch = 2;
  r.width = 4;
  r.pad_id = 0;
  r.vocab_size = 100;
  const DatasetBatch b = dataset_batch(lengths, r);
  // Row 0: 10 11 12 then 20 (cut); row 1: the next record, 30, then 40 41 42 (cut).
  EXPECT_EQ(b.ids, (std::vector<int64_t>{10, 11, 12, 20, 30, 40, 41, 42}));
  EXPECT_TRUE(b.lengths.empty());
  EXPECT_EQ(b.tokens.records, (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(b.tokens.sampler, "filled");
  EXPECT_EQ(b.tokens.sha256, sha256_hex_int64_le(b.ids));
  // The sequential sampler: one record per row, right-padded with the pad id.
  r.filled = false;
  r.sampler = parse_epoch_sampler("sequential", "--sampler");
  r.pad_id = 7;
  r.width = 5;
  const DatasetBatch s = dataset_batch(lengths, r);
  EXPECT_EQ(s.ids, (std::vector<int64_t>{10, 11, 12, 7, 7, 20, 21, 22, 23, 24}));
  EXPECT_EQ(s.lengths, (std::vector<int64_t>{3, 5}));
  EXPECT_NE(s.tokens.sha256, b.tokens.sha256);
  // Too few records for the rows: one line saying so.
  r.batch = 9;
  try {
    dataset_batch(lengths, r);
    ADD_FAILURE() << "9 rows from 4 records";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the point needs 9"), std::string::npos) << e.what();
  }
  r.filled = true;
  r.batch = 4;
  r.width = 4;  // 14 tokens make 3 full rows of 4
  EXPECT_THROW(dataset_batch(lengths, r), Error);
}

}  // namespace
}  // namespace tprobe::core
