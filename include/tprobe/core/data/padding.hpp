// Padding analysis of a length dataset: waste, widths, truncation per source, loss-head memory.
// Views are in padding_report.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/io/lengths.hpp"

namespace tprobe::core {

enum class BatchOrder { kSequential, kShuffled };
BatchOrder parse_batch_order(const std::string& text);  // "sequential" | "shuffled", else usage
const char* to_string(BatchOrder order);

// Lengths after truncation to max_seq_len (what a trainer actually batches).
std::vector<int64_t> truncate_lengths(const std::vector<int64_t>& lengths, int64_t max_seq_len);

// Record indices in the order a plain loader feeds them: file order, or a seeded Fisher-Yates
// permutation of it.
std::vector<uint32_t> record_order(std::size_t records, BatchOrder order, uint64_t seed);

// Micro-batches in the order a trainer consumes them: micro-batch i holds
// records[starts[i] .. starts[i+1]).
struct MicroBatchOrder {
  std::vector<uint32_t> records;
  std::vector<uint64_t> starts;  // micro_batches() + 1 entries
  std::size_t micro_batches() const { return starts.empty() ? 0 : starts.size() - 1; }
};

// A plain loader: record_order() cut into consecutive micro-batches of `micro_batch` records
// (the last one may be short).
MicroBatchOrder plain_order(std::size_t records, int64_t micro_batch, BatchOrder order,
                            uint64_t seed);

// The padded width of every micro-batch: its longest member's length in `lengths`.
std::vector<int64_t> micro_batch_widths(const MicroBatchOrder& order,
                                        const std::vector<int64_t>& lengths);

// Per data source (and, in `total`, the whole dataset). Token counts are exact integers so rows
// sum to the total.
struct SourceStats {
  std::string name;        // "" when the records named no source
  int64_t records = 0;
  int64_t dataset_tokens = 0;     // before truncation
  int64_t real_tokens = 0;        // after truncation: what reaches the model
  int64_t max_length = 0;         // before truncation
  int64_t truncated_records = 0;  // records longer than max_seq_len
  int64_t truncated_tokens = 0;   // tokens cut off them: dataset_tokens - real_tokens
  int64_t pad_tokens = 0;         // padding added beside this source's records (padding only)
};

struct SourceBreakdown {
  std::vector<SourceStats> sources;  // dataset.source_names order
  SourceStats total;
};
SourceBreakdown source_breakdown(const LengthDataset& dataset, int64_t max_seq_len);

// Order statistics of a length list (nearest-rank percentiles).
struct LengthSummary {
  int64_t min = 0;
  double mean = 0.0;
  int64_t max = 0;
  int64_t p50 = 0;
  int64_t p90 = 0;
  int64_t p99 = 0;
};
LengthSummary summarize(std::vector<int64_t> values);

// log2 bins: bin k counts lengths in [2^k, 2^(k+1)); every bin from the shortest record's to the
// longest's is present, empty ones included.
struct HistogramBin {
  int64_t lo = 0;  // inclusive
  int64_t hi = 0;  // exclusive
  int64_t records = 0;
  int64_t tokens = 0;
};
std::vector<HistogramBin> log2_histogram(const std::vector<int64_t>& lengths);

// Loss-head memory (docs/findings.md#f9). Naive CE keeps, per logit: the bf16 logits (2 bytes), the
// fp32 upcast (4), the fp32 input saved for the softcap tanh's backward (4) and the fp32
// softmax / its gradient (4): kNaiveCeBytesPerLogit = 14. One 8,192-token row at vocab 262,144
// is 2.1 G logits, 28 GiB.
inline constexpr int64_t kNaiveCeBytesPerLogit = 14;
struct LossHead {
  int64_t vocab = 0;
  int64_t ce_chunk = 0;                 // tokens per CE chunk
  int64_t chunk_logits = 0;             // ce_chunk * vocab
  int64_t chunk_logits_bf16_bytes = 0;  // 2 bytes each
  int64_t chunk_logits_fp32_bytes = 0;  // 4 bytes each, after the upcast
  int64_t chunk_ce_transient_bytes = 0;  // 14 bytes each: the chunked loss's own transient
  int64_t widest_rows = 0;              // the micro-batch with the most padded tokens
  int64_t widest_width = 0;
  int64_t widest_tokens = 0;            // rows * width
  int64_t widest_logits = 0;            // widest_tokens * vocab
  int64_t naive_ce_transient_bytes = 0;  // 14 * widest_logits
};
LossHead loss_head(int64_t vocab, int64_t ce_chunk, int64_t widest_rows, int64_t widest_width);

struct PaddingOptions {
  int64_t micro_batch = 2;
  BatchOrder order = BatchOrder::kSequential;
  uint64_t seed = 0;
  int64_t max_seq_len = 16384;
  int64_t vocab = 262144;
  int64_t ce_chunk = 4096;
};
// Throws UsageError for values that make no sense (micro-batch < 1, ...).
void validate(const PaddingOptions& options);

struct PaddingReport {
  std::string dataset;
  std::string format;
  PaddingOptions options;
  SourceBreakdown breakdown;  // per source, pad_tokens filled
  LengthSummary lengths;      // before truncation
  std::vector<HistogramBin> histogram;  // before truncation
  int64_t micro_batches = 0;
  int64_t padded_tokens = 0;  // sum over micro-batches of rows * width
  int64_t pad_tokens = 0;     // padded_tokens - real tokens
  double waste_ratio = 0.0;   // pad_tokens / padded_tokens
  std::vector<int64_t> widths;  // per micro-batch, in batch order (raw data)
  std::vector<int64_t> rows;    // per micro-batch (all micro_batch but possibly the last)
  LengthSummary width;          // over micro-batches
  int64_t at_max_width = 0;     // micro-batches whose width is the largest width
  LossHead loss;
  std::vector<Diagnostic> diagnostics;  // none today
  Outcome outcome = Outcome::kOk;       // a measurement is never a "no"
};

PaddingReport analyze_padding(const LengthDataset& dataset, const PaddingOptions& options);
}  // namespace tprobe::core
