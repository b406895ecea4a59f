// Views of a PaddingReport: the evidence `results` and the tables `tprobe padding` prints.
#include "tprobe/core/data/padding_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/math_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {

namespace {

using detail::ratio;

// The report's length figure draws at most this many bars (docs/report.md).
constexpr std::size_t kMaxHistogramBars = 64;

std::string source_label(const std::string& name) { return name.empty() ? "(none)" : name; }

std::string bar(int64_t value, int64_t max, int width) {
  if (max <= 0 || value <= 0) return "";
  int64_t n = (value * width + max - 1) / max;  // any non-empty bin shows at least one mark
  return std::string(static_cast<std::size_t>(n), '#');
}

}  // namespace

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

LengthSummary summary_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  LengthSummary s;
  s.min = integer(j, "min", where, 0);
  s.mean = number(j, "mean", where);
  s.max = integer(j, "max", where, 0);
  s.p50 = integer(j, "p50", where, 0);
  s.p90 = integer(j, "p90", where, 0);
  s.p99 = integer(j, "p99", where, 0);
  return s;
}
}  // namespace

SourceStats source_stats_from_json(const Json& row, bool with_padding, const std::string& where) {
  using namespace json_read;
  SourceStats s;
  s.name = nullable_string(row, "source", where).value_or("");
  s.records = integer(row, "records", where, 0);
  s.dataset_tokens = integer(row, "dataset_tokens", where, 0);
  s.real_tokens = integer(row, "real_tokens", where, 0);
  s.max_length = integer(row, "max_length", where, 0);
  s.truncated_records = integer(row, "truncated_records", where, 0);
  s.truncated_tokens = integer(row, "truncated_tokens", where, 0);
  if (with_padding) s.pad_tokens = integer(row, "pad_tokens", where, 0);
  return s;
}

void dataset_from_json(const Json& results, const std::string& where, bool with_padding,
                       std::string& name, std::string& format, SourceBreakdown& breakdown) {
  using namespace json_read;
  const Json& ds = object(results, "dataset", where);
  const std::string dw = where + " dataset";
  name = string(ds, "name", dw);
  format = string(ds, "format", dw);
  SourceStats& t = breakdown.total;
  t.name = "total";  // source_breakdown's name for it
  t.records = integer(results, "records", where, 0);
  t.dataset_tokens = integer(results, "dataset_tokens", where, 0);
  t.real_tokens = integer(results, "real_tokens", where, 0);
  const Json& rows = array(results, "per_source", where);
  breakdown.sources.clear();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    breakdown.sources.push_back(
        source_stats_from_json(rows[i], with_padding, at(where, "per_source", i)));
    t.max_length = std::max(t.max_length, breakdown.sources.back().max_length);
  }
  // The block repeats two totals; a file whose copies disagree was edited by hand.
  if (integer(ds, "records", dw, 0) != t.records) {
    fail("{}: records {} but dataset.records {}", where, t.records, integer(ds, "records", dw));
  }
  if (integer(ds, "sources", dw, 0) != static_cast<int64_t>(rows.size())) {
    fail("{}: dataset.sources {} but per_source has {} rows", where, integer(ds, "sources", dw),
         rows.size());
  }
}

int64_t truncation_from_json(const Json& results, const std::string& where,
                             SourceBreakdown& breakdown) {
  using namespace json_read;
  const Json& tr = object(results, "truncation", where);
  const std::string tw = where + " truncation";
  breakdown.total.truncated_records = integer(tr, "truncated_records", tw, 0);
  breakdown.total.truncated_tokens = integer(tr, "truncated_tokens", tw, 0);
  // per_source rows and the ratios re-derive from the rows read from results.per_source.
  return integer(tr, "max_seq_len", tw, 1);
}

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
  // The loader that cut the micro-batches: rows per micro-batch and order.
  j["batch"] = r.options.micro_batch;
  j["sampler"] = to_string(r.options.order);
  j["sampler_seed"] =
      r.options.order == BatchOrder::kShuffled ? Json(r.options.seed) : Json(nullptr);
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
      {"widest_micro_batch",
       {{"rows", h.widest_rows}, {"width", h.widest_width}, {"tokens", h.widest_tokens}}},
      {"widest_logits", h.widest_logits},
      {"naive_ce_transient_bytes", h.naive_ce_transient_bytes},
      {"naive_ce_bytes_per_logit", kNaiveCeBytesPerLogit},
      {"naive_ce_formula",
       "tokens * vocab * (2 bf16 logits + 4 fp32 upcast + 4 saved softcap input + 4 "
       "softmax/grad)"}};
  Json hist = Json::array();
  for (const auto& b : r.histogram) {
    hist.push_back({{"lo", b.lo}, {"hi", b.hi}, {"records", b.records}, {"tokens", b.tokens}});
  }
  j["histogram"] = std::move(hist);
  j["micro_batch_widths"] = r.widths;
  j["micro_batch_rows"] = r.rows;
  return j;
}

PaddingReport padding_report_from_json(const Json& results, const std::string& where) {
  using namespace json_read;
  PaddingReport r;
  PaddingOptions& o = r.options;
  dataset_from_json(results, where, true, r.dataset, r.format, r.breakdown);
  o.micro_batch = integer(results, "batch", where, 1);
  o.order = enum_value(results, "sampler", where, {BatchOrder::kSequential, BatchOrder::kShuffled});
  if (field(results, "sampler_seed", where).is_null()) {
    o.seed = 0;
  } else {
    o.seed = unsigned_integer(results, "sampler_seed", where);
  }
  o.max_seq_len = truncation_from_json(results, where, r.breakdown);
  r.padded_tokens = integer(results, "padded_tokens", where, 0);
  r.pad_tokens = integer(results, "pad_tokens", where, 0);
  r.breakdown.total.pad_tokens = r.pad_tokens;
  r.waste_ratio = number(results, "waste_ratio", where);
  r.micro_batches = integer(results, "micro_batches", where, 0);
  r.lengths = summary_from_json(object(results, "lengths", where), where + " lengths");
  const Json& width = object(results, "width", where);
  r.width = summary_from_json(width, where + " width");
  r.at_max_width = integer(width, "at_max_count", where + " width", 0);

  const Json& lh = object(results, "loss_head", where);
  const std::string lw = where + " loss_head";
  LossHead& h = r.loss;
  h.vocab = o.vocab = integer(lh, "vocab", lw, 1);
  h.ce_chunk = o.ce_chunk = integer(lh, "ce_chunk_tokens", lw, 1);
  h.chunk_logits = integer(lh, "chunk_logits", lw, 0);
  h.chunk_logits_bf16_bytes = integer(lh, "chunk_logits_bf16_bytes", lw, 0);
  h.chunk_logits_fp32_bytes = integer(lh, "chunk_logits_fp32_bytes", lw, 0);
  h.chunk_ce_transient_bytes = integer(lh, "chunk_ce_transient_bytes", lw, 0);
  const Json& widest = object(lh, "widest_micro_batch", lw);
  const std::string ww = lw + " widest_micro_batch";
  h.widest_rows = integer(widest, "rows", ww, 0);
  h.widest_width = integer(widest, "width", ww, 0);
  h.widest_tokens = integer(widest, "tokens", ww, 0);
  h.widest_logits = integer(lh, "widest_logits", lw, 0);
  h.naive_ce_transient_bytes = integer(lh, "naive_ce_transient_bytes", lw, 0);
  // naive_ce_bytes_per_logit and naive_ce_formula are constants of this tprobe, not data.

  const Json& hist = array(results, "histogram", where);
  for (std::size_t i = 0; i < hist.size(); ++i) {
    const std::string hw = at(where, "histogram", i);
    HistogramBin b;
    b.lo = integer(hist[i], "lo", hw, 1, kMaxRecordLength);
    b.hi = integer(hist[i], "hi", hw, b.lo + 1);
    b.records = integer(hist[i], "records", hw, 0);
    b.tokens = integer(hist[i], "tokens", hw, 0);
    r.histogram.push_back(b);
  }
  r.widths = integers(results, "micro_batch_widths", where, 1, kMaxRecordLength);
  r.rows = integers(results, "micro_batch_rows", where, 1);
  if (r.rows.size() != r.widths.size() ||
      static_cast<int64_t>(r.widths.size()) != r.micro_batches) {
    fail("{}: micro_batches {} but {} micro_batch_widths and {} micro_batch_rows", where,
         r.micro_batches, r.widths.size(), r.rows.size());
  }
  return r;
}

std::vector<Table> padding_tables(const PaddingReport& r) {
  const auto& o = r.options;
  const auto& t = r.breakdown.total;
  std::vector<Table> out;
  Table summary(fmt::format(
      "padding: {} ({}), micro-batch {}, {} order{}, max_seq_len {}", r.dataset, r.format,
      o.micro_batch, to_string(o.order),
      o.order == BatchOrder::kShuffled ? fmt::format(" (seed {})", o.seed) : std::string(),
      format_count(o.max_seq_len)));
  summary.column("", Align::kLeft).column("value");
  summary.row({"records", format_count(t.records)});
  summary.row({"sources", format_count(static_cast<int64_t>(r.breakdown.sources.size()))});
  summary.row({"dataset tokens", format_count(t.dataset_tokens)});
  summary.row(
      {"length min / mean / max", fmt::format("{} / {:.0f} / {}", format_count(r.lengths.min),
                                              r.lengths.mean, format_count(r.lengths.max))});
  summary.row({"length p50 / p90 / p99",
               fmt::format("{} / {} / {}", format_count(r.lengths.p50), format_count(r.lengths.p90),
                           format_count(r.lengths.p99))});
  summary.separator();
  summary.row({"real tokens (after truncation)", format_count(t.real_tokens)});
  summary.row({"micro-batches", format_count(r.micro_batches)});
  summary.row({"padded tokens", format_count(r.padded_tokens)});
  summary.row({"padding tokens", format_count(r.pad_tokens)});
  summary.row({"padding waste", format_percent(r.waste_ratio)});
  summary.row(
      {"width p50 / p90 / p99", fmt::format("{} / {} / {}", format_count(r.width.p50),
                                            format_count(r.width.p90), format_count(r.width.p99))});
  summary.row({"micro-batches at max width",
               fmt::format("{} at {}", format_count(r.at_max_width), format_count(r.width.max))});
  summary.separator();
  summary.row(
      {"truncated samples", fmt::format("{} ({})", format_count(t.truncated_records),
                                        format_percent(ratio(t.truncated_records, t.records)))});
  summary.row({"truncated tokens",
               fmt::format("{} ({})", format_count(t.truncated_tokens),
                           format_percent(ratio(t.truncated_tokens, t.dataset_tokens)))});
  out.push_back(std::move(summary));

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
  out.push_back(std::move(src));

  Table hist("length histogram (log2 bins, before truncation)");
  hist.column("length", Align::kLeft).column("records").column("tokens").column("", Align::kLeft);
  int64_t most = 0;
  for (const auto& b : r.histogram) most = std::max(most, b.records);
  for (const auto& b : r.histogram) {
    hist.row({fmt::format("[{}, {})", format_count(b.lo), format_count(b.hi)),
              format_count(b.records), format_count(b.tokens), bar(b.records, most, 40)});
  }
  out.push_back(std::move(hist));

  const LossHead& h = r.loss;
  Table loss(fmt::format("loss head: vocab {}, CE chunk {} tokens", format_count(h.vocab),
                         format_count(h.ce_chunk)));
  loss.column("", Align::kLeft).column("value");
  loss.row(
      {"logits per CE chunk, bf16", format_bytes(static_cast<double>(h.chunk_logits_bf16_bytes))});
  loss.row({"logits per CE chunk, fp32 upcast",
            format_bytes(static_cast<double>(h.chunk_logits_fp32_bytes))});
  loss.row({"widest micro-batch",
            fmt::format("{} x {} = {} tokens", h.widest_rows, format_count(h.widest_width),
                        format_count(h.widest_tokens))});
  loss.row({"naive (unchunked) CE transient",
            format_bytes(static_cast<double>(h.naive_ce_transient_bytes))});
  loss.note(
      fmt::format("naive CE = tokens x vocab x {} bytes (bf16 logits 2 + fp32 upcast 4 + "
                  "saved softcap input 4 + softmax/grad 4)",
                  kNaiveCeBytesPerLogit));
  out.push_back(std::move(loss));
  return out;
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

void padding_report_section(SectionBuilder& c) {
  const Json& r = c.results();
  c.fact("padding waste", pct(number_at(r, "waste_ratio")), "waste_ratio",
         number_at(r, "waste_ratio").value_or(0) > 0.1);
  if (auto tr = number_at(r, "truncation.tokens_ratio")) {
    c.fact("truncated at " + string_at(r, "truncation.max_seq_len"),
           format_percent(*tr) + " of tokens, " + pct(number_at(r, "truncation.records_ratio")) +
               " of records",
           "truncation.tokens_ratio, records_ratio", *tr > 0.05);
  }
  if (auto l = number_at(r, "loss_head.naive_ce_transient_bytes")) {
    c.fact("naive CE transient (widest micro-batch)", format_bytes(*l),
           "loss_head.naive_ce_transient_bytes");
  }
  const Json* hist = array_at(r, "histogram");
  const Json* widths = array_at(r, "micro_batch_widths");
  if (!hist) {
    c.absent("histogram", "the length histogram");
    return;
  }
  BarChart chart;
  chart.title = "Sequence lengths and padded micro-batch widths";
  chart.value_label = "count";
  chart.series = {"records by real length", "micro-batches by padded width"};
  // The micro-batches per bin by binary search over the sorted widths: O((W + H) log W), where
  // scanning every bin for every width cost ~0.7 ms per bin (issue 46). A width counts in every
  // bin [lo, hi) that holds it, as before.
  std::vector<double> sorted_widths;
  if (widths) {
    sorted_widths.reserve(widths->size());
    for (const auto& w : *widths) {
      if (w.is_number() && std::isfinite(w.get<double>())) sorted_widths.push_back(w.get<double>());
    }
    std::sort(sorted_widths.begin(), sorted_widths.end());
  }
  auto widths_in = [&](double lo, double hi) {
    if (!(lo < hi)) return 0.0;
    auto from = std::lower_bound(sorted_widths.begin(), sorted_widths.end(), lo);
    auto to = std::lower_bound(from, sorted_widths.end(), hi);
    return static_cast<double>(to - from);
  };
  struct Bin {
    double lo, hi, records, micro_batches;
  };
  std::vector<Bin> bins;
  for (const auto& h : *hist) {
    auto lo = number_at(h, "lo"), hi = number_at(h, "hi"), n = number_at(h, "records");
    if (!lo || !hi || !n) continue;
    bins.push_back({*lo, *hi, *n, widths_in(*lo, *hi)});
  }
  // At most kMaxHistogramBars bars: more bins (a hand-made file; tprobe's own log2 bins are
  // about 32) are merged, consecutive ones in the file's order, into equal groups, so the figure
  // stays a figure and its size bounded. The caption says so.
  const std::size_t group = (bins.size() + kMaxHistogramBars - 1) / kMaxHistogramBars;
  for (std::size_t i = 0; i < bins.size(); i += std::max<std::size_t>(group, 1)) {
    Bin m = bins[i];
    for (std::size_t k = i + 1; k < bins.size() && k < i + group; ++k) {
      m.lo = std::min(m.lo, bins[k].lo);
      m.hi = std::max(m.hi, bins[k].hi);
      m.records += bins[k].records;
      m.micro_batches += bins[k].micro_batches;
    }
    chart.items.push_back({fmt::format("{} – {}", format_count(static_cast<int64_t>(m.lo)),
                                       format_count(static_cast<int64_t>(m.hi) - 1)),
                           {m.records, m.micro_batches},
                           false,
                           ""});
  }
  std::vector<FieldPath> fields = {"histogram[].lo/hi/records"};
  std::string caption =
      "Each row is a length bin (tokens). Blue: how many records have a real length in it. "
      "Orange: how many micro-batches are padded to a width in it";
  if (widths) {
    fields.push_back("micro_batch_widths[]");
    // results.batch; older files have the rows in the invocation only, under either spelling.
    std::string rows = string_at(r, "batch");
    for (const char* key : {"invocation.options.batch", "invocation.options.micro-batch"}) {
      if (rows.empty()) rows = string_at(c.document(), key);
    }
    caption += fmt::format(" ({} micro-batches of {} rows, the probe's order).",
                           format_count(static_cast<int64_t>(widths->size())), rows);
  } else {
    caption += ": not drawn, results.micro_batch_widths absent.";
  }
  if (group > 1) {
    caption += fmt::format(
        " The file has {} bins; they are drawn as {} bars of {} consecutive bins each (the last "
        "may hold fewer): the figure draws at most {} bars.",
        format_count(static_cast<int64_t>(bins.size())),
        format_count(static_cast<int64_t>(chart.items.size())),
        format_count(static_cast<int64_t>(group)), kMaxHistogramBars);
  }
  c.figure("lengths", chart.title, render_svg(chart), fields, caption);
  if (const Json* ps = array_at(r, "truncation.per_source")) {
    c.table(c.generic_table("tab-padding-truncation", "Truncation per source", *ps,
                            "truncation.per_source"));
  }
}
}  // namespace tprobe::core
