// Token-length datasets: the streamed file reader, the embedded synthetic corpus, order statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tprobe::core {

// One record per sequence: its token length and the data source it came from. Columnar, so a
// million records cost 12 bytes each.
struct LengthDataset {
  std::string name;    // the path, or "synthetic"
  std::string format;  // "jsonl", "csv", "text" or "synthetic"
  std::vector<int64_t> lengths;           // tokens per record, file order, every one >= 1
  std::vector<uint32_t> source;           // per record: index into source_names
  std::vector<std::string> source_names;  // first-appearance order; "" = the record named none

  std::size_t records() const { return lengths.size(); }
};

enum class LengthFormat { kAuto, kJsonl, kCsv, kText };

// "auto", "jsonl", "csv", "text"; anything else is a usage error.
LengthFormat parse_length_format(const std::string& text);

// Longest accepted record: a length above this is a corrupt file, not a sequence.
inline constexpr int64_t kMaxRecordLength = 2147483647;

// Streams `path` (plain or gzip, detected from the bytes) line by line; never holds the file.
// Formats: JSONL ({"length": N} or {"input_ids": [...]}, optional "source"), CSV with a header
// naming `length` (and optionally `source`), or text with one length per line. kAuto decides
// from the first non-blank line. Blank lines are skipped. Throws tprobe::Error naming the file
// and line for a non-integer, zero, negative or oversized length, a missing field, a malformed
// line, a truncated or corrupt gzip stream, or a file with no records.
LengthDataset read_lengths(const std::string& path, LengthFormat format = LengthFormat::kAuto);

// The input_ids of the records `wanted` (indices in read_lengths' numbering: non-blank lines,
// 0-based; ascending, no repeats) of a JSONL dataset, plain or gzip, streamed: only those records'
// ids are held. Throws UsageError when the file is not JSONL (CSV and text hold no ids), and Error
// naming the file and line for a wanted record without input_ids, an id outside 0..max_id, a
// malformed line, or a record index past the file's end.
std::vector<std::vector<int64_t>> read_record_ids(const std::string& path,
                                                  const std::vector<int64_t>& wanted,
                                                  int64_t max_id);

// The embedded default corpus. SYNTHETIC: drawn from fixed per-source length distributions
// (src/core/lengths.cpp) with a fixed seed, shaped like the post-mortem's corpus
// (docs/padding.md): six sources, long-tailed lengths from 142 to 16,384, the long ones all
// dialogue. Records are interleaved across sources, as in a pre-mixed training file.
inline constexpr int64_t kSyntheticRecords = 20982;
inline constexpr uint64_t kSyntheticSeed = 1729;
// synthetic:N is refused above this (a usage error naming it) rather than left to the allocator:
// 1.2 GB of records, 100x the largest benchmark (docs/benchmarks.md).
inline constexpr int64_t kMaxSyntheticRecords = 100000000;
LengthDataset synthetic_corpus(int64_t records = kSyntheticRecords,
                               uint64_t seed = kSyntheticSeed);

// --dataset: "synthetic" (the embedded corpus), "synthetic:N" (N records of it, for
// benchmarks), or a file path. A malformed synthetic spec is a usage error.
LengthDataset load_dataset(const std::string& spec, LengthFormat format = LengthFormat::kAuto);

// Nearest-rank percentile of an ascending vector: the value at rank ceil(p/100 * n), 1-based.
// p in (0, 100]; `sorted` must be non-empty.
int64_t percentile_sorted(const std::vector<int64_t>& sorted, int percent);

}  // namespace tprobe::core
