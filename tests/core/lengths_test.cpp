// The length-dataset reader (every format, gzip, every broken input), the synthetic corpus, RNG.
#include "tprobe/core/io/lengths.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <set>

#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/rng.hpp"

namespace tprobe::core {
namespace {

std::string write_file(const std::string& name, const std::string& text) {
  static const std::string dir = testing_support::temp_dir();
  std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string write_gz(const std::string& name, const std::string& text) {
  static const std::string dir = testing_support::temp_dir();
  std::string path = dir + "/" + name;
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(f);
  return path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs the reader and returns its error message ("" when it did not throw).
std::string error_of(const std::string& path, LengthFormat format = LengthFormat::kAuto) {
  try {
    read_lengths(path, format);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kError) << e.what();
    return e.what();
  }
  return "";
}

void expect_error(const std::string& name, const std::string& text, const std::string& where,
                  const std::string& phrase, LengthFormat format = LengthFormat::kAuto) {
  std::string path = write_file(name, text);
  std::string msg = error_of(path, format);
  EXPECT_NE(msg.find(path + ":" + where), std::string::npos) << "message: " << msg;
  EXPECT_NE(msg.find(phrase), std::string::npos) << "message: " << msg;
}

TEST(Rng, SplitMix64MatchesTheReferenceOutput) {
  uint64_t state = 0;
  EXPECT_EQ(splitmix64(state), 0xe220a8397b1dcdafULL);  // published first output for seed 0
  EXPECT_EQ(state, 0x9e3779b97f4a7c15ULL);
}

TEST(Rng, SameSeedSameStreamAndBoundedDrawsStayInRange) {
  Rng a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
  Rng r(1);
  std::set<uint64_t> seen;
  for (int i = 0; i < 5000; ++i) {
    uint64_t v = r.uniform(6);
    ASSERT_LT(v, 6u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_EQ(r.uniform(1), 0u);
}

TEST(Rng, ShuffleIsAPermutation) {
  std::vector<int> v(100);
  for (int i = 0; i < 100; ++i) v[static_cast<std::size_t>(i)] = i;
  Rng r(3);
  shuffle(v.begin(), v.end(), r);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sorted[static_cast<std::size_t>(i)], i);
  EXPECT_NE(v, sorted);
}

TEST(Lengths, ReadsJsonlWithLengthInputIdsAndSources) {
  std::string path = write_file(
      "a.jsonl",
      "{\"length\": 5, \"source\": \"a\"}\n"
      "{\"input_ids\": [1, 2, 3], \"source\": \"b\"}\n"
      "\n"
      "{\"length\": 7}\n"
      "{\"length\": 2, \"input_ids\": [9, 9], \"source\": \"a\", \"extra\": {\"x\": [1, 2]}}\r\n");
  LengthDataset ds = read_lengths(path);
  EXPECT_EQ(ds.format, "jsonl");
  EXPECT_EQ(ds.lengths, (std::vector<int64_t>{5, 3, 7, 2}));
  EXPECT_EQ(ds.source_names, (std::vector<std::string>{"a", "b", ""}));
  EXPECT_EQ(ds.source, (std::vector<uint32_t>{0, 1, 2, 0}));
}

// The hand-parsed common line and the SAX fallback must agree: key order, spacing, escapes and
// UTF-8 (SAX), and a length-only line. Repeated keys are refused (below).
TEST(Lengths, CommonAndGeneralJsonlLinesAgree) {
  std::string path = write_file(
      "mixed.jsonl",
      "{\"source\":\"x\",\"length\":12}\n"
      "{ \"length\" : 7 , \"source\" : \"x\" }\n"
      "{\"length\": 5, \"source\": \"y\"}\n"
      "{\"length\": 3, \"source\": \"caf\\u00e9\"}\n"
      "{\"length\": 4, \"source\": \"caf\xC3\xA9\"}\n"
      "{\"length\": 10}\n"
      "{\"length\": 2147483647}\n");
  LengthDataset ds = read_lengths(path);
  EXPECT_EQ(ds.lengths, (std::vector<int64_t>{12, 7, 5, 3, 4, 10, 2147483647}));
  EXPECT_EQ(ds.source_names, (std::vector<std::string>{"x", "y", "caf\xC3\xA9", ""}));
  EXPECT_EQ(ds.source, (std::vector<uint32_t>{0, 0, 1, 2, 2, 3, 3}));
  // nlohmann reads "012" as 0 and stops: an error either way, at line 1.
  expect_error("lead0.jsonl", "{\"length\": 012}\n", "1:", "length");
  expect_error("comma.jsonl", "{\"length\": 1,}\n", "1:", "malformed JSON");
  expect_error("utf8.jsonl", "{\"length\": 1, \"source\": \"\xC3\"}\n", "1:", "malformed JSON");
  // A repeated field is refused, not resolved to one of its values (the fast path and the SAX
  // path alike).
  expect_error("dup.jsonl", "{\"length\": 5, \"source\": \"a\", \"source\": \"y\"}\n", "1:",
               "key 'source' appears twice");
  expect_error("dup2.jsonl", "{\"length\": 5, \"length\": 5}\n", "1:", "key 'length' appears twice");
}

TEST(Lengths, ReadsCsvWithQuotedFieldsAndAnyColumnOrder) {
  LengthDataset ds =
      read_lengths(write_file("a.csv", "length,source\n10,x\n\"20\",\"y,z\"\n 30 , x\n"));
  EXPECT_EQ(ds.format, "csv");
  EXPECT_EQ(ds.lengths, (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(ds.source_names, (std::vector<std::string>{"x", "y,z"}));
  EXPECT_EQ(ds.source, (std::vector<uint32_t>{0, 1, 0}));
  LengthDataset swapped = read_lengths(write_file("b.csv", "source,length\nq,4\n"));
  EXPECT_EQ(swapped.lengths, (std::vector<int64_t>{4}));
  EXPECT_EQ(swapped.source_names, (std::vector<std::string>{"q"}));
  LengthDataset only = read_lengths(write_file("c.csv", "length\n8\n9\n"));
  EXPECT_EQ(only.lengths, (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(only.source_names, (std::vector<std::string>{""}));
}

TEST(Lengths, SkipsAUtf8ByteOrderMark) {
  LengthDataset ds = read_lengths(write_file("bom.jsonl", "\xEF\xBB\xBF{\"length\": 4}\n"));
  EXPECT_EQ(ds.format, "jsonl");
  EXPECT_EQ(ds.lengths, (std::vector<int64_t>{4}));
}

TEST(Lengths, ReadsPlainTextOneLengthPerLine) {
  LengthDataset ds = read_lengths(write_file("a.txt", "3\n  4 \r\n\n+5\n6"));
  EXPECT_EQ(ds.format, "text");
  EXPECT_EQ(ds.lengths, (std::vector<int64_t>{3, 4, 5, 6}));
  EXPECT_EQ(ds.source, (std::vector<uint32_t>{0, 0, 0, 0}));
}

TEST(Lengths, ReadsGzipTheSameAsPlain) {
  std::string text;
  for (int i = 1; i <= 30000; ++i) {
    text += "{\"length\": " + std::to_string(i % 977 + 1) + ", \"source\": \"s" +
            std::to_string(i % 3) + "\"}\n";
  }
  LengthDataset plain = read_lengths(write_file("big.jsonl", text));
  LengthDataset gz = read_lengths(write_gz("big.jsonl.gz", text));
  EXPECT_EQ(gz.lengths, plain.lengths);
  EXPECT_EQ(gz.source, plain.source);
  EXPECT_EQ(gz.lengths.size(), 30000u);
}

TEST(Lengths, TruncatedGzipIsAnError) {
  std::string text;
  for (int i = 1; i <= 50000; ++i) text += std::to_string(i % 1000 + 1) + "\n";
  std::string full = read_bytes(write_gz("t.txt.gz", text));
  ASSERT_GT(full.size(), 1000u);
  std::string path = write_file("cut.txt.gz", full.substr(0, full.size() * 2 / 3));
  std::string msg = error_of(path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  // Cutting only the 8-byte trailer (CRC + size) must be caught too.
  std::string path2 = write_file("trailer.txt.gz", full.substr(0, full.size() - 4));
  EXPECT_NE(error_of(path2).find("truncated"), std::string::npos) << error_of(path2);
}

TEST(Lengths, BrokenTextNamesFileAndLine) {
  expect_error("n1.txt", "3\nabc4\n", "2:", "not an integer", LengthFormat::kText);
  expect_error("n2.txt", "3\n1.5\n", "2:", "not an integer");
  expect_error("n3.txt", "3\n4\n0\n", "3:", "length is 0");
  expect_error("n4.txt", "-4\n", "1:", "negative");
  expect_error("n5.txt", "99999999999999999999\n", "1:", "out of range");
  expect_error("n6.txt", "3000000000\n", "1:", "above the maximum");
  expect_error("n7.txt", "abc\n", "1:", "neither a length");
  expect_error("n8.txt", "5\n6 7\n", "2:", "not an integer");
}

TEST(Lengths, BrokenJsonlNamesFileAndLine) {
  expect_error("j1.jsonl", "{\"length\": 3}\n{\"source\": \"a\"}\n", "2:", "missing field");
  expect_error("j2.jsonl", "{\"length\": 3\n", "1:", "malformed JSON");
  expect_error("j3.jsonl", "{\"length\": \"3\"}\n", "1:", "string");
  expect_error("j4.jsonl", "{\"length\": 2.5}\n", "1:", "not an integer");
  expect_error("j5.jsonl", "{\"length\": -1}\n", "1:", "negative");
  expect_error("j6.jsonl", "{\"length\": 0}\n", "1:", "length is 0");
  expect_error("j7.jsonl", "[1, 2]\n", "1:", "array", LengthFormat::kJsonl);
  expect_error("j8.jsonl", "{\"input_ids\": []}\n", "1:", "empty");
  expect_error("j9.jsonl", "{\"input_ids\": [[1, 2]]}\n", "1:", "flat");
  expect_error("j10.jsonl", "{\"length\": 3, \"input_ids\": [1]}\n", "1:", "disagrees");
  expect_error("j11.jsonl", "{\"length\": 3, \"source\": 5}\n", "1:", "source");
  expect_error("j12.jsonl", "{\"length\": 3} trailing\n", "1:", "malformed JSON");
  expect_error("j13.jsonl", "{\"length\": 3}\n7\n", "2:", "not a JSON object",
               LengthFormat::kJsonl);
  expect_error("j14.jsonl", "{\"length\": 18446744073709551615}\n", "1:", "above the maximum");
  expect_error("j15.jsonl", "{\"length\": null}\n", "1:", "null");
  // Issue 46: a NUL byte ended nlohmann's input, so the record after it was never read.
  const std::string nul(1, '\0');
  expect_error("j16.jsonl", "{\"length\": 3}\n{\"length\": 4}" + nul + "{\"length\": 5}\n", "2:",
               "a NUL byte at column 14");
  expect_error("j17.jsonl", "{\"length\": 3, \"source\": \"a" + nul + "b\"}\n", "1:",
               "a NUL byte at column 27");
  expect_error("j18.jsonl", "{\"length\": 3}" + nul + "\n", "1:", "a NUL byte");
}

// The negative control of j16-j18: a NUL written as JSON writes it (\u0000, in a source name)
// and trailing whitespace are still read.
TEST(Lengths, EscapedNulAndTrailingSpaceInAJsonlLineAreRead) {
  const std::string path =
      write_file("ok-nul.jsonl", "{\"length\": 3, \"source\": \"a\\u0000b\"} \t\r\n{\"length\": 4}\n");
  LengthDataset d = read_lengths(path);
  ASSERT_EQ(d.lengths.size(), 2u);
  EXPECT_EQ(d.lengths[0], 3);
  EXPECT_EQ(d.lengths[1], 4);
}

TEST(Lengths, BrokenCsvNamesFileAndLine) {
  expect_error("c1.csv", "a,b\n1,2\n", "1:", "no 'length' column");
  expect_error("c2.csv", "length,source\n5,a\n5\n", "3:", "expected 2 CSV fields, got 1");
  expect_error("c3.csv", "length,source\nx,a\n", "2:", "not an integer");
  expect_error("c4.csv", "length,source\n,a\n", "2:", "missing length");
  expect_error("c5.csv", "length,source\n5,\"a\n", "2:", "unbalanced quotes");
}

TEST(Lengths, EmptyInputsAreErrors) {
  for (const char* text : {"", "\n\n  \n"}) {
    std::string path = write_file("empty.txt", text);
    std::string msg = error_of(path);
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("no records"), std::string::npos) << msg;
  }
  std::string header_only = write_file("h.csv", "length,source\n");
  EXPECT_NE(error_of(header_only).find("only a CSV header"), std::string::npos);
  std::string missing = error_of("/nonexistent/dir/lengths.txt");
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
  EXPECT_NE(missing.find("/nonexistent/dir/lengths.txt"), std::string::npos) << missing;
}

TEST(Lengths, PercentileIsNearestRank) {
  std::vector<int64_t> v{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(percentile_sorted(v, 50), 5);   // rank ceil(5.0) = 5
  EXPECT_EQ(percentile_sorted(v, 90), 9);   // rank 9
  EXPECT_EQ(percentile_sorted(v, 99), 10);  // rank ceil(9.9) = 10
  EXPECT_EQ(percentile_sorted(v, 10), 1);
  EXPECT_EQ(percentile_sorted(v, 11), 2);  // rank ceil(1.1) = 2
  EXPECT_EQ(percentile_sorted({7}, 1), 7);
  EXPECT_THROW(percentile_sorted({}, 50), Error);
}

TEST(Synthetic, IsDeterministicAndShapedLikeThePostMortemCorpus) {
  LengthDataset a = load_dataset("synthetic");
  LengthDataset b = synthetic_corpus();
  EXPECT_EQ(a.lengths, b.lengths);
  EXPECT_EQ(a.source, b.source);
  ASSERT_EQ(a.records(), static_cast<std::size_t>(kSyntheticRecords));
  EXPECT_EQ(a.source_names.size(), 6u);
  int64_t mn = INT64_MAX, mx = 0, sum = 0;
  std::vector<int64_t> long_per_source(a.source_names.size(), 0);
  for (std::size_t i = 0; i < a.records(); ++i) {
    mn = std::min(mn, a.lengths[i]);
    mx = std::max(mx, a.lengths[i]);
    sum += a.lengths[i];
    if (a.lengths[i] > 8192) ++long_per_source[a.source[i]];
  }
  EXPECT_GE(mn, 142);
  EXPECT_EQ(mx, 16384);
  double mean = static_cast<double>(sum) / static_cast<double>(a.records());
  EXPECT_GT(mean, 2000.0);
  EXPECT_LT(mean, 3500.0);
  // Everything beyond 8,192 tokens is dialogue (length correlates with source).
  for (std::size_t s = 0; s < a.source_names.size(); ++s) {
    bool dialogue = a.source_names[s].rfind("dialogue", 0) == 0;
    if (dialogue) {
      EXPECT_GT(long_per_source[s], 0) << a.source_names[s];
    } else {
      EXPECT_EQ(long_per_source[s], 0) << a.source_names[s];
    }
  }
  EXPECT_NE(synthetic_corpus(1000, 1).lengths, synthetic_corpus(1000, 2).lengths);
}

TEST(Synthetic, SpecSelectsSizeAndRejectsNonsense) {
  LengthDataset ds = load_dataset("synthetic:100");
  EXPECT_EQ(ds.records(), 100u);
  EXPECT_EQ(ds.name, "synthetic:100");
  // A prefix of the default corpus: the same seed draws the same first records.
  LengthDataset full = synthetic_corpus();
  EXPECT_TRUE(std::equal(ds.lengths.begin(), ds.lengths.end(), full.lengths.begin()));
  EXPECT_THROW(load_dataset("synthetic:0"), UsageError);
  EXPECT_THROW(load_dataset("synthetic:12x"), UsageError);
  EXPECT_THROW(load_dataset("synthetic:"), UsageError);
  EXPECT_THROW(parse_length_format("parquet"), UsageError);
}

}  // namespace
}  // namespace tprobe::core
