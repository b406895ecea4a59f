// Padding analysis: how many of the tokens a loader feeds are padding, and what the loss costs.
#include "tprobe/core/data/padding.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/rng.hpp"
#include "tprobe/core/base/table.hpp"

namespace tprobe::core {
namespace {

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) fail("{} overflows 64 bits ({} x {})", what, a, b);
  return out;
}

int floor_log2(int64_t v) { return 63 - __builtin_clzll(static_cast<unsigned long long>(v)); }

std::string source_label(const std::string& name) { return name.empty() ? "(none)" : name; }

std::string bar(int64_t value, int64_t max, int width) {
  if (max <= 0 || value <= 0) return "";
  int64_t n = (value * width + max - 1) / max;  // any non-empty bin shows at least one mark
  return std::string(static_cast<std::size_t>(n), '#');
}

}  // namespace

BatchOrder parse_batch_order(const std::string& text) {
  if (text == "sequential") return BatchOrder::kSequential;
  if (text == "shuffled") return BatchOrder::kShuffled;
  fail_usage("--order '{}' is not one of sequential, shuffled", text);
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
  if (o.micro_batch < 1) fail_usage("--micro-batch must be at least 1, got {}", o.micro_batch);
  if (o.micro_batch > 65536) fail_usage("--micro-batch {} is above 65,536", o.micro_batch);
  if (o.max_seq_len < 1) fail_usage("--max-seq-len must be at least 1, got {}", o.max_seq_len);
  if (o.max_seq_len > kMaxRecordLength) {
    fail_usage("--max-seq-len {} is above {}", o.max_seq_len, kMaxRecordLength);
  }
  if (o.vocab < 1 || o.vocab > (int64_t{1} << 24)) {
    fail_usage("--vocab must be in [1, 16,777,216], got {}", o.vocab);
  }
  if (o.ce_chunk < 1 || o.ce_chunk > (int64_t{1} << 24)) {
    fail_usage("--ce-chunk must be in [1, 16,777,216] tokens, got {}", o.ce_chunk);
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

  const std::vector<uint32_t> order = record_order(ds.records(), o.order, o.seed);
  const auto mb = static_cast<std::size_t>(o.micro_batch);
  const std::size_t n = order.size();
  r.widths.reserve((n + mb - 1) / mb);
  r.rows.reserve((n + mb - 1) / mb);
  int64_t widest_tokens = -1;
  for (std::size_t start = 0; start < n; start += mb) {
    const std::size_t end = std::min(n, start + mb);
    int64_t width = 0;
    for (std::size_t k = start; k < end; ++k) {
      width = std::max(width, std::min(ds.lengths[order[k]], o.max_seq_len));
    }
    const auto rows = static_cast<int64_t>(end - start);
    for (std::size_t k = start; k < end; ++k) {
      const uint32_t rec = order[k];
      r.breakdown.sources[ds.source[rec]].pad_tokens +=
          width - std::min(ds.lengths[rec], o.max_seq_len);
    }
    r.widths.push_back(width);
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

Json to_json(const SourceStats& s, bool with_padding) {
  Json j;
  j["source"] = s.name.empty() ? Json(nullptr) : Json(s.name);
  j["records"] = s.records;
  j["dataset_tokens"] = s.dataset_tokens;
  j["real_tokens"] = s.real_tokens;
  j["max_length"] = s.max_length;
  j["truncated_records"] = s.truncated_records;
  j["truncated_tokens"] = s.truncated_tokens;
  if (with_padding) j["pad_tokens"] = s.pad_tokens;
  return j;
}

namespace {
double ratio(int64_t a, int64_t b) {
  return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
}

Json truncation_row(const SourceStats& s) {
  Json j;
  j["source"] = s.name.empty() ? Json(nullptr) : Json(s.name);
  j["records"] = s.records;
  j["dataset_tokens"] = s.dataset_tokens;
  j["truncated_records"] = s.truncated_records;
  j["truncated_tokens"] = s.truncated_tokens;
  j["records_ratio"] = ratio(s.truncated_records, s.records);
  j["tokens_ratio"] = ratio(s.truncated_tokens, s.dataset_tokens);
  return j;
}

Json summary_json(const LengthSummary& s) {
  return {{"min", s.min}, {"mean", s.mean}, {"max", s.max},
          {"p50", s.p50}, {"p90", s.p90},   {"p99", s.p99}};
}
}  // namespace

Json truncation_json(const SourceBreakdown& b, int64_t max_seq_len) {
  Json j;
  j["max_seq_len"] = max_seq_len;
  j["truncated_records"] = b.total.truncated_records;
  j["truncated_tokens"] = b.total.truncated_tokens;
  j["records_ratio"] = ratio(b.total.truncated_records, b.total.records);
  j["tokens_ratio"] = ratio(b.total.truncated_tokens, b.total.dataset_tokens);
  Json rows = Json::array();
  for (const auto& s : b.sources) rows.push_back(truncation_row(s));
  j["per_source"] = std::move(rows);
  return j;
}

void put_dataset_json(Json& j, const std::string& name, const std::string& format,
                      const SourceBreakdown& breakdown) {
  j["dataset"] = {{"name", name},
                  {"format", format},
                  {"records", breakdown.total.records},
                  {"sources", breakdown.sources.size()}};
  j["records"] = breakdown.total.records;
  j["dataset_tokens"] = breakdown.total.dataset_tokens;
  j["real_tokens"] = breakdown.total.real_tokens;
}

Json to_json(const PaddingReport& r) {
  Json j;
  put_dataset_json(j, r.dataset, r.format, r.breakdown);
  j["padded_tokens"] = r.padded_tokens;
  j["pad_tokens"] = r.pad_tokens;
  j["waste_ratio"] = r.waste_ratio;
  j["micro_batches"] = r.micro_batches;
  j["lengths"] = summary_json(r.lengths);
  Json width = summary_json(r.width);
  width["at_max_count"] = r.at_max_width;
  j["width"] = std::move(width);
  j["truncation"] = truncation_json(r.breakdown, r.options.max_seq_len);
  Json per = Json::array();
  for (const auto& s : r.breakdown.sources) per.push_back(to_json(s, true));
  j["per_source"] = std::move(per);
  const LossHead& h = r.loss;
  j["loss_head"] = {
      {"vocab", h.vocab},
      {"ce_chunk_tokens", h.ce_chunk},
      {"chunk_logits", h.chunk_logits},
      {"chunk_logits_bf16_bytes", h.chunk_logits_bf16_bytes},
      {"chunk_logits_fp32_bytes", h.chunk_logits_fp32_bytes},
      {"chunk_ce_transient_bytes", h.chunk_ce_transient_bytes},
      {"widest_micro_batch", {{"rows", h.widest_rows}, {"width", h.widest_width},
                              {"tokens", h.widest_tokens}}},
      {"widest_logits", h.widest_logits},
      {"naive_ce_transient_bytes", h.naive_ce_transient_bytes},
      {"naive_ce_bytes_per_logit", kNaiveCeBytesPerLogit},
      {"naive_ce_formula",
       "tokens * vocab * (2 bf16 logits + 4 fp32 upcast + 4 saved softcap input + 4 softmax/grad)"}};
  Json hist = Json::array();
  for (const auto& b : r.histogram) {
    hist.push_back({{"lo", b.lo}, {"hi", b.hi}, {"records", b.records}, {"tokens", b.tokens}});
  }
  j["histogram"] = std::move(hist);
  j["micro_batch_widths"] = r.widths;
  j["micro_batch_rows"] = r.rows;
  return j;
}

std::string render(const PaddingReport& r) {
  const auto& o = r.options;
  const auto& t = r.breakdown.total;
  std::string out;
  Table summary(fmt::format("padding: {} ({}), micro-batch {}, {} order{}, max_seq_len {}",
                            r.dataset, r.format, o.micro_batch, to_string(o.order),
                            o.order == BatchOrder::kShuffled ? fmt::format(" (seed {})", o.seed)
                                                             : std::string(),
                            format_count(o.max_seq_len)));
  summary.column("", Align::kLeft).column("value");
  summary.row({"records", format_count(t.records)});
  summary.row({"sources", format_count(static_cast<int64_t>(r.breakdown.sources.size()))});
  summary.row({"dataset tokens", format_count(t.dataset_tokens)});
  summary.row({"length min / mean / max", fmt::format("{} / {:.0f} / {}", format_count(r.lengths.min),
                                                      r.lengths.mean, format_count(r.lengths.max))});
  summary.row({"length p50 / p90 / p99", fmt::format("{} / {} / {}", format_count(r.lengths.p50),
                                                     format_count(r.lengths.p90),
                                                     format_count(r.lengths.p99))});
  summary.separator();
  summary.row({"real tokens (after truncation)", format_count(t.real_tokens)});
  summary.row({"micro-batches", format_count(r.micro_batches)});
  summary.row({"padded tokens", format_count(r.padded_tokens)});
  summary.row({"padding tokens", format_count(r.pad_tokens)});
  summary.row({"padding waste", format_percent(r.waste_ratio)});
  summary.row({"width p50 / p90 / p99", fmt::format("{} / {} / {}", format_count(r.width.p50),
                                                    format_count(r.width.p90),
                                                    format_count(r.width.p99))});
  summary.row({"micro-batches at max width",
               fmt::format("{} at {}", format_count(r.at_max_width), format_count(r.width.max))});
  summary.separator();
  summary.row({"truncated samples", fmt::format("{} ({})", format_count(t.truncated_records),
                                                format_percent(ratio(t.truncated_records, t.records)))});
  summary.row({"truncated tokens", fmt::format("{} ({})", format_count(t.truncated_tokens),
                                               format_percent(ratio(t.truncated_tokens,
                                                                    t.dataset_tokens)))});
  out += summary.render() + "\n";

  Table src("per source (truncation: share of the source's own samples / tokens)");
  src.column("source", Align::kLeft)
      .column("records")
      .column("tokens")
      .column("token share")
      .column("max len")
      .column("pad tokens")
      .column("trunc samples")
      .column("trunc tokens");
  auto add = [&](const SourceStats& s, const std::string& label) {
    src.row({label, format_count(s.records), format_count(s.dataset_tokens),
             format_percent(ratio(s.dataset_tokens, t.dataset_tokens)), format_count(s.max_length),
             format_count(s.pad_tokens),
             fmt::format("{} ({})", format_count(s.truncated_records),
                         format_percent(ratio(s.truncated_records, s.records))),
             fmt::format("{} ({})", format_count(s.truncated_tokens),
                         format_percent(ratio(s.truncated_tokens, s.dataset_tokens)))});
  };
  for (const auto& s : r.breakdown.sources) add(s, source_label(s.name));
  src.separator();
  add(t, "total");
  out += src.render() + "\n";

  Table hist("length histogram (log2 bins, before truncation)");
  hist.column("length", Align::kLeft).column("records").column("tokens").column("", Align::kLeft);
  int64_t most = 0;
  for (const auto& b : r.histogram) most = std::max(most, b.records);
  for (const auto& b : r.histogram) {
    hist.row({fmt::format("[{}, {})", format_count(b.lo), format_count(b.hi)),
              format_count(b.records), format_count(b.tokens), bar(b.records, most, 40)});
  }
  out += hist.render() + "\n";

  const LossHead& h = r.loss;
  Table loss(fmt::format("loss head: vocab {}, CE chunk {} tokens", format_count(h.vocab),
                         format_count(h.ce_chunk)));
  loss.column("", Align::kLeft).column("value");
  loss.row({"logits per CE chunk, bf16", format_bytes(static_cast<double>(h.chunk_logits_bf16_bytes))});
  loss.row({"logits per CE chunk, fp32 upcast",
            format_bytes(static_cast<double>(h.chunk_logits_fp32_bytes))});
  loss.row({"widest micro-batch", fmt::format("{} x {} = {} tokens", h.widest_rows,
                                              format_count(h.widest_width),
                                              format_count(h.widest_tokens))});
  loss.row({"naive (unchunked) CE transient",
            format_bytes(static_cast<double>(h.naive_ce_transient_bytes))});
  loss.note(fmt::format("naive CE = tokens x vocab x {} bytes (bf16 logits 2 + fp32 upcast 4 + "
                        "saved softcap input 4 + softmax/grad 4)",
                        kNaiveCeBytesPerLogit));
  out += loss.render();
  return out;
}

}  // namespace tprobe::core
