// Padding analysis: how many of the tokens a loader feeds are padding, and what the loss costs.
#include "tprobe/core/data/padding.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/rng.hpp"

namespace tprobe::core {
namespace {

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) fail("{} overflows 64 bits ({} x {})", what, a, b);
  return out;
}

int floor_log2(int64_t v) { return 63 - __builtin_clzll(static_cast<unsigned long long>(v)); }

}  // namespace

BatchOrder parse_batch_order(const std::string& text) {
  if (text == "sequential") return BatchOrder::kSequential;
  if (text == "shuffled") return BatchOrder::kShuffled;
  fail_usage("--sampler '{}' is not one of sequential, shuffled", text);
}

const char* to_string(BatchOrder order) {
  return order == BatchOrder::kSequential ? "sequential" : "shuffled";
}

std::vector<int64_t> truncate_lengths(const std::vector<int64_t>& lengths, int64_t max_seq_len) {
  std::vector<int64_t> out(lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) out[i] = std::min(lengths[i], max_seq_len);
  return out;
}

std::vector<uint32_t> record_order(std::size_t records, BatchOrder order, uint64_t seed) {
  std::vector<uint32_t> idx(records);
  std::iota(idx.begin(), idx.end(), 0U);
  if (order == BatchOrder::kShuffled) {
    Rng rng(seed);
    shuffle(idx.begin(), idx.end(), rng);
  }
  return idx;
}

MicroBatchOrder plain_order(std::size_t records, int64_t micro_batch, BatchOrder order,
                            uint64_t seed) {
  MicroBatchOrder out;
  out.records = record_order(records, order, seed);
  const auto mb = static_cast<std::size_t>(micro_batch);
  out.starts.reserve(records / mb + 2);
  for (std::size_t s = 0; s < records; s += mb) out.starts.push_back(s);
  out.starts.push_back(records);
  return out;
}

std::vector<int64_t> micro_batch_widths(const MicroBatchOrder& order,
                                        const std::vector<int64_t>& lengths) {
  std::vector<int64_t> widths;
  widths.reserve(order.micro_batches());
  for (std::size_t m = 0; m < order.micro_batches(); ++m) {
    int64_t w = 0;
    for (uint64_t k = order.starts[m]; k < order.starts[m + 1]; ++k) {
      w = std::max(w, lengths[order.records[k]]);
    }
    widths.push_back(w);
  }
  return widths;
}

SourceBreakdown source_breakdown(const LengthDataset& ds, int64_t max_seq_len) {
  SourceBreakdown out;
  out.sources.resize(ds.source_names.size());
  for (std::size_t s = 0; s < ds.source_names.size(); ++s) out.sources[s].name = ds.source_names[s];
  for (std::size_t i = 0; i < ds.records(); ++i) {
    const int64_t len = ds.lengths[i];
    const int64_t kept = std::min(len, max_seq_len);
    for (SourceStats* st : {&out.sources[ds.source[i]], &out.total}) {
      st->records += 1;
      st->dataset_tokens += len;
      st->real_tokens += kept;
      st->max_length = std::max(st->max_length, len);
      if (len > max_seq_len) {
        st->truncated_records += 1;
        st->truncated_tokens += len - kept;
      }
    }
  }
  out.total.name = "total";
  return out;
}

LengthSummary summarize(std::vector<int64_t> values) {
  if (values.empty()) fail("cannot summarise an empty list");
  std::sort(values.begin(), values.end());
  LengthSummary s;
  s.min = values.front();
  s.max = values.back();
  long double sum = 0;
  for (int64_t v : values) sum += static_cast<long double>(v);
  s.mean = static_cast<double>(sum / static_cast<long double>(values.size()));
  s.p50 = percentile_sorted(values, 50);
  s.p90 = percentile_sorted(values, 90);
  s.p99 = percentile_sorted(values, 99);
  return s;
}

std::vector<HistogramBin> log2_histogram(const std::vector<int64_t>& lengths) {
  if (lengths.empty()) return {};
  auto [mn, mx] = std::minmax_element(lengths.begin(), lengths.end());
  const int lo = floor_log2(*mn), hi = floor_log2(*mx);
  std::vector<HistogramBin> bins(static_cast<std::size_t>(hi - lo + 1));
  for (int k = lo; k <= hi; ++k) {
    auto& b = bins[static_cast<std::size_t>(k - lo)];
    b.lo = int64_t{1} << k;
    b.hi = int64_t{1} << (k + 1);
  }
  for (int64_t v : lengths) {
    auto& b = bins[static_cast<std::size_t>(floor_log2(v) - lo)];
    b.records += 1;
    b.tokens += v;
  }
  return bins;
}

LossHead loss_head(int64_t vocab, int64_t ce_chunk, int64_t widest_rows, int64_t widest_width) {
  LossHead h;
  h.vocab = vocab;
  h.ce_chunk = ce_chunk;
  h.chunk_logits = checked_mul(ce_chunk, vocab, "CE chunk logits");
  h.chunk_logits_bf16_bytes = checked_mul(h.chunk_logits, 2, "CE chunk bytes");
  h.chunk_logits_fp32_bytes = checked_mul(h.chunk_logits, 4, "CE chunk bytes");
  h.chunk_ce_transient_bytes = checked_mul(h.chunk_logits, kNaiveCeBytesPerLogit, "CE chunk bytes");
  h.widest_rows = widest_rows;
  h.widest_width = widest_width;
  h.widest_tokens = checked_mul(widest_rows, widest_width, "widest micro-batch tokens");
  h.widest_logits = checked_mul(h.widest_tokens, vocab, "widest micro-batch logits");
  h.naive_ce_transient_bytes =
      checked_mul(h.widest_logits, kNaiveCeBytesPerLogit, "naive CE transient bytes");
  return h;
}

void validate(const PaddingOptions& o) {
  if (o.micro_batch < 1) fail_usage("--batch {}: must be at least 1 row per micro-batch", o.micro_batch);
  if (o.micro_batch > 65536) fail_usage("--batch {}: above 65,536 rows per micro-batch", o.micro_batch);
  if (o.max_seq_len < 1) fail_usage("max-seq-len {}: must be at least 1", o.max_seq_len);
  if (o.max_seq_len > kMaxRecordLength) {
    fail_usage("max-seq-len {}: above {}", o.max_seq_len, kMaxRecordLength);
  }
  if (o.vocab < 1 || o.vocab > (int64_t{1} << 24)) {
    fail_usage("vocab {}: must be in [1, 16,777,216]", o.vocab);
  }
  if (o.ce_chunk < 1 || o.ce_chunk > (int64_t{1} << 24)) {
    fail_usage("CE chunk {}: must be in [1, 16,777,216] tokens", o.ce_chunk);
  }
}

PaddingReport analyze_padding(const LengthDataset& ds, const PaddingOptions& o) {
  validate(o);
  if (ds.records() == 0) fail("dataset '{}' has no records", ds.name);
  PaddingReport r;
  r.dataset = ds.name;
  r.format = ds.format;
  r.options = o;
  r.breakdown = source_breakdown(ds, o.max_seq_len);
  r.lengths = summarize(ds.lengths);
  r.histogram = log2_histogram(ds.lengths);

  const std::vector<int64_t> eff = truncate_lengths(ds.lengths, o.max_seq_len);
  const MicroBatchOrder order = plain_order(ds.records(), o.micro_batch, o.order, o.seed);
  r.widths = micro_batch_widths(order, eff);
  r.rows.reserve(r.widths.size());
  int64_t widest_tokens = -1;
  for (std::size_t m = 0; m < order.micro_batches(); ++m) {
    const int64_t width = r.widths[m];
    const auto rows = static_cast<int64_t>(order.starts[m + 1] - order.starts[m]);
    for (uint64_t k = order.starts[m]; k < order.starts[m + 1]; ++k) {
      const uint32_t rec = order.records[k];
      r.breakdown.sources[ds.source[rec]].pad_tokens += width - eff[rec];
    }
    r.rows.push_back(rows);
    r.padded_tokens += rows * width;
    if (rows * width > widest_tokens) {
      widest_tokens = rows * width;
      r.loss.widest_rows = rows;
      r.loss.widest_width = width;
    }
  }
  r.micro_batches = static_cast<int64_t>(r.widths.size());
  r.pad_tokens = r.padded_tokens - r.breakdown.total.real_tokens;
  r.breakdown.total.pad_tokens = r.pad_tokens;
  r.waste_ratio = r.padded_tokens > 0
                      ? static_cast<double>(r.pad_tokens) / static_cast<double>(r.padded_tokens)
                      : 0.0;
  r.width = summarize(r.widths);
  r.at_max_width = std::count(r.widths.begin(), r.widths.end(), r.width.max);
  r.loss = loss_head(o.vocab, o.ce_chunk, r.loss.widest_rows, r.loss.widest_width);
  return r;
}

}  // namespace tprobe::core
