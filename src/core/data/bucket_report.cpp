// Views of a BucketReport: the evidence `results`, the sweep table and the emitted order.
#include "tprobe/core/data/bucket_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/data/padding_report.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {

namespace {

Json stat_json(const SeedStat& s) { return {{"mean", s.mean}, {"min", s.min}, {"max", s.max}}; }

Json metrics_json(const OrderMetrics& m) {
  Json j;
  j["micro_batches"] = m.micro_batches;
  j["real_tokens"] = m.real_tokens;
  j["padded_tokens"] = m.padded_tokens;
  j["waste_ratio"] = m.waste_ratio;
  j["zero_pad_micro_batches"] = m.zero_pad_micro_batches;
  j["zero_pad_share"] = m.zero_pad_share;
  j["windows"] = m.windows;
  j["sources_per_window"] = {{"mean", m.sources_per_window_mean},
                             {"min", m.sources_per_window_min},
                             {"p10", m.sources_per_window_p10}};
  j["predicted_time_s"] = m.predicted_time_s ? Json(*m.predicted_time_s) : Json(nullptr);
  return j;
}

Json row_json(const SweepRow& row, bool baseline) {
  Json j;
  if (!baseline) j["bucket"] = row.bucket;
  j["waste_ratio"] = row.waste_ratio.mean;
  j["padded_tokens"] = row.padded_tokens.mean;
  j["zero_pad_share"] = row.zero_pad_share.mean;
  j["sources_per_window"] = {
      {"mean", row.spw_mean.mean}, {"min", row.spw_min}, {"p10", row.spw_p10.mean}};
  j["predicted_time_s"] = row.predicted_time_s ? Json(row.predicted_time_s->mean) : Json(nullptr);
  if (!baseline) j["saving_ratio"] = row.saving_ratio ? Json(*row.saving_ratio) : Json(nullptr);
  Json spread;
  spread["waste_ratio"] = stat_json(row.waste_ratio);
  spread["padded_tokens"] = stat_json(row.padded_tokens);
  spread["zero_pad_share"] = stat_json(row.zero_pad_share);
  spread["sources_per_window_mean"] = stat_json(row.spw_mean);
  spread["sources_per_window_p10"] = stat_json(row.spw_p10);
  spread["predicted_time_s"] =
      row.predicted_time_s ? stat_json(*row.predicted_time_s) : Json(nullptr);
  j["over_seeds"] = std::move(spread);
  j["micro_batch_set_fingerprint"] = fmt::format("{:016x}", row.fingerprint);
  Json per = Json::array();
  for (std::size_t k = 0; k < row.per_seed.size(); ++k) {
    Json m = metrics_json(row.per_seed[k]);
    Json withseed;
    withseed["seed"] = row.seeds[k];
    for (auto it = m.begin(); it != m.end(); ++it) withseed[it.key()] = it.value();
    per.push_back(std::move(withseed));
  }
  j["per_seed"] = std::move(per);
  return j;
}

SeedStat stat_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  return {number(j, "mean", where), number(j, "min", where), number(j, "max", where)};
}

// Also the chosen order's block, which carries `bucket` and `seed` beside the metrics.
OrderMetrics metrics_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  OrderMetrics m;
  m.micro_batches = integer(j, "micro_batches", where, 0);
  m.real_tokens = integer(j, "real_tokens", where, 0);
  m.padded_tokens = integer(j, "padded_tokens", where, 0);
  m.waste_ratio = number(j, "waste_ratio", where);
  m.zero_pad_micro_batches = integer(j, "zero_pad_micro_batches", where, 0);
  m.zero_pad_share = number(j, "zero_pad_share", where);
  m.windows = integer(j, "windows", where, 0);
  const Json& spw = object(j, "sources_per_window", where);
  const std::string sw = where + " sources_per_window";
  m.sources_per_window_mean = number(spw, "mean", sw);
  m.sources_per_window_min = integer(spw, "min", sw, 0);
  m.sources_per_window_p10 = integer(spw, "p10", sw, 0);
  m.predicted_time_s = nullable_number(j, "predicted_time_s", where);
  return m;
}

uint64_t fingerprint_from_json(const Json& j, const std::string& where) {
  const std::string hex = json_read::string(j, "micro_batch_set_fingerprint", where);
  uint64_t v = 0;
  bool ok = hex.size() == 16;
  for (char ch : hex) {
    const int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
    ok = ok && d >= 0;
    v = v << 4 | static_cast<uint64_t>(d < 0 ? 0 : d);
  }
  if (!ok) {
    fail("{}: field 'micro_batch_set_fingerprint' must be 16 lower-case hex digits, got '{}'",
         where, hex.substr(0, 40));
  }
  return v;
}

// The mean of every figure is read from over_seeds, which also holds its spread; the top-level
// copies of the means are the same numbers.
SweepRow row_from_json(const Json& j, bool baseline, const std::string& where) {
  using namespace json_read;
  SweepRow row;
  if (!baseline) row.bucket = integer(j, "bucket", where, 1);
  const Json& spread = object(j, "over_seeds", where);
  const std::string ow = where + " over_seeds";
  row.waste_ratio = stat_from_json(object(spread, "waste_ratio", ow), ow + " waste_ratio");
  row.padded_tokens = stat_from_json(object(spread, "padded_tokens", ow), ow + " padded_tokens");
  row.zero_pad_share =
      stat_from_json(object(spread, "zero_pad_share", ow), ow + " zero_pad_share");
  row.spw_mean = stat_from_json(object(spread, "sources_per_window_mean", ow),
                                ow + " sources_per_window_mean");
  row.spw_p10 = stat_from_json(object(spread, "sources_per_window_p10", ow),
                               ow + " sources_per_window_p10");
  if (!field(spread, "predicted_time_s", ow).is_null()) {
    row.predicted_time_s =
        stat_from_json(object(spread, "predicted_time_s", ow), ow + " predicted_time_s");
  }
  row.spw_min = integer(object(j, "sources_per_window", where), "min",
                        where + " sources_per_window", 0);
  if (!baseline) row.saving_ratio = nullable_number(j, "saving_ratio", where);
  row.fingerprint = fingerprint_from_json(j, where);
  const Json& per = array(j, "per_seed", where);
  for (std::size_t k = 0; k < per.size(); ++k) {
    const std::string pw = at(where, "per_seed", k);
    row.seeds.push_back(unsigned_integer(per[k], "seed", pw));
    row.per_seed.push_back(metrics_from_json(per[k], pw));
  }
  return row;
}

}  // namespace

Json to_json(const BucketReport& r) {
  const auto& o = r.options;
  Json j;
  put_dataset_json(j, r.dataset, r.format, r.breakdown);
  j["batch"] = o.micro_batch;
  j["accum"] = o.accum;
  j["interrupted"] = r.interrupted;
  j["sweep_sizes_measured"] = r.sweep.size();
  if (r.sweep.empty()) {  // interrupted before the first bucket size: nothing was chosen
    j["padded_tokens"] = nullptr;
    j["waste_ratio"] = nullptr;
    j["chosen"] = nullptr;
    j["micro_batch_widths"] = Json::array();
  } else {
    j["padded_tokens"] = r.chosen.padded_tokens;
    j["waste_ratio"] = r.chosen.waste_ratio;
    j["chosen"] = {{"bucket", r.chosen_bucket}, {"seed", o.seed}};
    j["micro_batch_widths"] = r.chosen_widths;
    const Json chosen = metrics_json(r.chosen);
    for (auto it = chosen.begin(); it != chosen.end(); ++it) j["chosen"][it.key()] = it.value();
  }
  j["truncation"] = truncation_json(r.breakdown, o.max_seq_len);
  Json per = Json::array();
  for (const auto& s : r.breakdown.sources) per.push_back(to_json(s, false));
  j["per_source"] = std::move(per);
  if (o.cost) {
    j["cost_model"] = {
        {"a_s_per_token", o.cost->a_s_per_token},
        {"b_s_per_token2", o.cost->b_s_per_token2},
        {"c_s", o.cost->c_s},
        {"origin", o.cost->origin},
        {"formula", "t(w) = c_s + a_s_per_token*w + b_s_per_token2*w^2 per micro-batch"}};
  } else {
    j["cost_model"] = nullptr;
  }
  Json base = row_json(r.baseline, true);
  Json baseline;
  baseline["order"] = to_string(o.baseline);
  for (auto it = base.begin(); it != base.end(); ++it) baseline[it.key()] = it.value();
  j["baseline"] = std::move(baseline);
  Json sweep = Json::array();
  for (const auto& row : r.sweep) sweep.push_back(row_json(row, false));
  j["sweep"] = std::move(sweep);
  j["noop_sweep"] = r.noop_sweep;
  if (!r.emit_order.empty()) j["emit_order"] = r.emit_order;
  return j;
}

BucketReport bucket_report_from_json(const Json& results, const std::string& where) {
  using namespace json_read;
  BucketReport r;
  BucketOptions& o = r.options;
  dataset_from_json(results, where, false, r.dataset, r.format, r.breakdown);
  o.max_seq_len = truncation_from_json(results, where, r.breakdown);
  o.micro_batch = integer(results, "batch", where, 1);
  o.accum = integer(results, "accum", where, 1);
  r.interrupted = boolean(results, "interrupted", where);
  if (!field(results, "cost_model", where).is_null()) {
    const Json& c = object(results, "cost_model", where);
    const std::string cw = where + " cost_model";
    o.cost = CostModel{number(c, "a_s_per_token", cw), number(c, "b_s_per_token2", cw),
                       number(c, "c_s", cw), string(c, "origin", cw)};
  }
  const Json& base = object(results, "baseline", where);
  o.baseline = enum_value(base, "order", where + " baseline",
                          {BatchOrder::kSequential, BatchOrder::kShuffled});
  r.baseline = row_from_json(base, true, where + " baseline");
  const Json& sweep = array(results, "sweep", where);
  for (std::size_t i = 0; i < sweep.size(); ++i) {
    r.sweep.push_back(row_from_json(sweep[i], false, at(where, "sweep", i)));
    o.sweep.push_back(r.sweep.back().bucket);
  }
  o.seeds = static_cast<int64_t>(r.baseline.seeds.size());
  if (!r.baseline.seeds.empty()) o.seed = r.baseline.seeds.front();
  const int64_t measured = integer(results, "sweep_sizes_measured", where, 0);
  if (measured != static_cast<int64_t>(sweep.size())) {
    fail("{}: sweep_sizes_measured {} but sweep has {} rows", where, measured, sweep.size());
  }
  if (!r.sweep.empty()) {
    const Json& chosen = object(results, "chosen", where);
    const std::string cw = where + " chosen";
    r.chosen_bucket = integer(chosen, "bucket", cw, 1);
    o.seed = unsigned_integer(chosen, "seed", cw);
    r.chosen = metrics_from_json(chosen, cw);
  }
  r.chosen_widths = integers(results, "micro_batch_widths", where, 1, kMaxRecordLength);
  r.noop_sweep = boolean(results, "noop_sweep", where);
  if (const Json* e = optional(results, "emit_order")) {
    if (!e->is_string() || e->get<std::string>().empty()) {
      fail("{}: field 'emit_order' must be a non-empty string (the order's file)", where);
    }
    r.emit_order = e->get<std::string>();
  }
  return r;
}

std::vector<Table> bucket_tables(const BucketReport& r) {
  const auto& o = r.options;
  Table t(
      fmt::format("bucket: {} ({} records), micro-batch {}, accum {}, max_seq_len {}, "
                  "{} seed{} from {}",
                  r.dataset, format_count(r.breakdown.total.records), o.micro_batch, o.accum,
                  format_count(o.max_seq_len), o.seeds, o.seeds == 1 ? "" : "s", o.seed));
  t.column("order", Align::kLeft)
      .column("waste")
      .column("±")
      .column("padded tokens")
      .column("zero-pad mb")
      .column("src/window mean")
      .column("min")
      .column("p10")
      .column("predicted time")
      .column("saving");
  auto add = [&](const SweepRow& row, const std::string& label) {
    t.row({label, format_percent(row.waste_ratio.mean),
           format_percent((row.waste_ratio.max - row.waste_ratio.min) / 2, 2),
           format_count(static_cast<int64_t>(std::llround(row.padded_tokens.mean))),
           format_percent(row.zero_pad_share.mean), fmt::format("{:.2f}", row.spw_mean.mean),
           fmt::format("{}", row.spw_min), fmt::format("{:.1f}", row.spw_p10.mean),
           row.predicted_time_s ? format_seconds(row.predicted_time_s->mean) : "-",
           row.saving_ratio ? format_percent(*row.saving_ratio) : "-"});
  };
  add(r.baseline, fmt::format("baseline ({})", to_string(o.baseline)));
  t.separator();
  for (const auto& row : r.sweep) {
    add(row, fmt::format("bucket {}{}", row.bucket, row.bucket == r.chosen_bucket ? " *" : ""));
  }
  t.note(
      fmt::format("± is half the spread (max - min) of the waste over seeds; * marks the chosen "
                  "order (bucket {}, seed {}).",
                  r.chosen_bucket, o.seed));
  if (o.cost) {
    t.note(fmt::format("predicted time: sum over micro-batches of {} + {}*w + {}*w^2 s (from {}).",
                       format_sci(o.cost->c_s), format_sci(o.cost->a_s_per_token),
                       format_sci(o.cost->b_s_per_token2), o.cost->origin));
  } else {
    t.note(r.cost_hint.empty() ? "predicted time: no cost model given." : r.cost_hint);
  }
  if (r.interrupted) {
    t.note(fmt::format("INTERRUPTED: {} of {} bucket sizes measured before the signal",
                       r.sweep.size(), o.sweep.size()));
  }
  if (r.noop_sweep) {
    t.note(
        "!!! NO-OP SWEEP: every bucket size produced the same micro-batches; the sweep "
        "measured nothing (docs/bucket.md).");
  }
  return {t};
}

std::string order_jsonl(const LengthDataset& ds, const BucketOptions& o, int64_t bucket) {
  const std::vector<int64_t> eff = truncate_lengths(ds.lengths, o.max_seq_len);
  const MicroBatchOrder ord = bucket_order(sort_by_length(eff), bucket, o.micro_batch, o.seed);
  Json header;
  header["schema"] = "tprobe.bucket-order";
  header["version"] = 1;
  header["dataset"] = ds.name;
  header["records"] = ds.records();
  header["micro_batches"] = ord.micro_batches();
  header["micro_batch"] = o.micro_batch;
  header["accum"] = o.accum;
  header["bucket"] = bucket;
  header["seed"] = o.seed;
  header["max_seq_len"] = o.max_seq_len;
  header["sampler"] =
      "sort by (truncated length, index); buckets of `bucket` records; "
      "Fisher-Yates in each bucket; micro-batches; global Fisher-Yates";
  header["rng"] = "xoshiro256** seeded through splitmix64";
  header["record_index"] = "0-based position of the record in the dataset";
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "{}\n", header.dump());
  const std::vector<int64_t> widths = micro_batch_widths(ord, eff);
  for (std::size_t i = 0; i < ord.micro_batches(); ++i) {
    fmt::format_to(std::back_inserter(buf),
                   "{{\"micro_batch\":{},\"window\":{},\"width\":{},\"records\":[", i,
                   i / static_cast<std::size_t>(o.accum), widths[i]);
    for (uint64_t k = ord.starts[i]; k < ord.starts[i + 1]; ++k) {
      fmt::format_to(std::back_inserter(buf), k == ord.starts[i] ? "{}" : ",{}", ord.records[k]);
    }
    fmt::format_to(std::back_inserter(buf), "]}}\n");
  }
  return fmt::to_string(buf);
}

namespace {

// Evidence written before the typed readers: the widths by key, the rows per micro-batch from
// the invocation (the old spelling "micro-batch" too).
void legacy_widths_from_json(const Json& doc, const std::string& path, const std::string& name,
                        WidthDistribution& d, std::map<int64_t, int64_t>& counts) {
  const Json& res = doc["results"];
  auto width_of = [&](const Json& v, const std::string& where) -> int64_t {
    if (!v.is_number_integer() || v.get<int64_t>() < 1) {
      fail("'{}': {} is not a positive integer width", path, where);
    }
    return v.get<int64_t>();
  };
  if (res.contains("micro_batch_widths")) {
    d.key = "results.micro_batch_widths";
    const Json& a = res["micro_batch_widths"];
    if (!a.is_array()) fail("'{}': results.micro_batch_widths is not an array", path);
    for (size_t i = 0; i < a.size(); ++i) {
      counts[width_of(a[i], fmt::format("results.micro_batch_widths[{}]", i))] += 1;
    }
  } else if (res.contains("width_histogram")) {
    d.key = "results.width_histogram";
    const Json& a = res["width_histogram"];
    if (!a.is_array()) fail("'{}': results.width_histogram is not an array", path);
    for (size_t i = 0; i < a.size(); ++i) {
      const Json& e = a[i];
      std::string where = fmt::format("results.width_histogram[{}]", i);
      if (!e.is_object() || !e.contains("width") || !e.contains("count")) {
        fail("'{}': {} is not an object with width and count", path, where);
      }
      int64_t w = width_of(e["width"], where + ".width");
      if (!e["count"].is_number_integer() || e["count"].get<int64_t>() < 0) {
        fail("'{}': {}.count is not a non-negative integer", path, where);
      }
      counts[w] += e["count"].get<int64_t>();
    }
  } else {
    fail(
        "'{}' ({} evidence) has no micro-batch width distribution: looked for "
        "results.micro_batch_widths and results.width_histogram (`tprobe padding --json` "
        "writes the first)",
        path, name);
  }
  const Json* inv = json_read::optional(doc, "invocation");
  const Json* options = inv ? json_read::optional(*inv, "options") : nullptr;
  if (options && options->is_object()) {
    // --batch; "micro-batch" in evidence written before one spelling per fact.
    for (const char* key : {"batch", "micro-batch"}) {
      if (options->contains(key) && (*options)[key].is_number_integer()) {
        d.micro_batch = (*options)[key].get<int64_t>();
        break;
      }
    }
  }
}

}  // namespace

WidthDistribution read_width_distribution(const std::string& path) {
  const Json doc = read_evidence_file(path, "");
  WidthDistribution d;
  d.path = path;
  const std::string name = doc["schema"]["name"].get<std::string>();
  if (name != "tprobe.padding" && name != "tprobe.bucket") {
    fail("'{}' holds '{}' evidence; a width distribution comes from tprobe.padding or "
         "tprobe.bucket evidence",
         path, name);
  }
  d.probe = name.substr(7);
  const Json& res = evidence_results(doc);
  std::map<int64_t, int64_t> counts;
  if (res.contains("batch")) {  // written with the typed readers: read the whole report
    const std::string where = fmt::format("'{}' results", path);
    std::vector<int64_t> widths;
    if (d.probe == "padding") {
      PaddingReport r = padding_report_from_json(res, where);
      widths = std::move(r.widths);
      d.micro_batch = r.options.micro_batch;
    } else {
      BucketReport r = bucket_report_from_json(res, where);
      widths = std::move(r.chosen_widths);
      d.micro_batch = r.options.micro_batch;
    }
    d.key = "results.micro_batch_widths";
    for (int64_t w : widths) counts[w] += 1;
  } else {
    legacy_widths_from_json(doc, path, name, d, counts);
  }
  for (const auto& [w, n] : counts) {
    if (n > 0) d.widths.push_back({w, n});
  }
  if (d.widths.empty()) fail("'{}': {} holds no micro-batches", path, d.key);
  return d;
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

void bucket_report_section(SectionBuilder& c) {
  const Json& r = c.results();
  c.fact("chosen bucket", string_at(r, "chosen.bucket"), "chosen.bucket");
  c.fact(
      "waste: sequential → chosen",
      pct(number_at(r, "baseline.waste_ratio")) + " → " + pct(number_at(r, "chosen.waste_ratio")),
      {"baseline.waste_ratio", "chosen.waste_ratio"});
  if (auto t0 = number_at(r, "baseline.predicted_time_s")) {
    if (auto t1 = number_at(r, "chosen.predicted_time_s")) {
      c.fact("predicted epoch time",
             format_seconds(*t0) + " → " + format_seconds(*t1) + " (" +
                 format_percent(1 - *t1 / *t0) + " saved)",
             {"baseline.predicted_time_s", "chosen.predicted_time_s"});
    }
  }
  if (const Json* noop = find_path(r, "noop_sweep"); noop && *noop == true) {
    c.fact("sweep", "NO-OP: every bucket size gave the same micro-batches", "noop_sweep", true);
  }
  const Json* sweep = array_at(r, "sweep");
  if (!sweep || sweep->empty()) {
    c.absent("sweep", "the bucket sweep figures");
    return;
  }
  struct Metric {
    const char* id;
    const char* title;
    const char* key;       // in each sweep row
    const char* seeds;     // over_seeds.<x>
    const char* baseline;  // results.baseline.<x>
    const char* y_label;
  };
  const Metric metrics[] = {
      {"waste", "Padding waste against bucket size", "waste_ratio", "waste_ratio", "waste_ratio",
       "padding waste (ratio of padded tokens)"},
      {"time", "Predicted epoch time against bucket size", "predicted_time_s", "predicted_time_s",
       "predicted_time_s", "predicted time (s)"},
      {"sources", "Data sources per accumulation window", "sources_per_window.mean",
       "sources_per_window_mean", "sources_per_window.mean", "distinct sources per window (mean)"},
  };
  for (const auto& m : metrics) {
    ChartSeries s;
    s.label = "bucket sampler (mean over seeds, bar: min–max)";
    bool spread = true;
    for (const auto& row : *sweep) {
      auto b = number_at(row, "bucket"), v = number_at(row, m.key);
      if (!b || !v) continue;
      s.x.push_back(*b);
      s.y.push_back(*v);
      auto lo = number_at(row, std::string("over_seeds.") + m.seeds + ".min");
      auto hi = number_at(row, std::string("over_seeds.") + m.seeds + ".max");
      if (lo && hi) {
        s.y_low.push_back(*lo);
        s.y_high.push_back(*hi);
      } else {
        spread = false;
      }
    }
    if (!spread) s.y_low.clear(), s.y_high.clear();
    if (s.x.empty()) {
      c.absent(std::string("sweep[].") + m.key, m.title);
      continue;
    }
    XYChart chart;
    chart.title = m.title;
    chart.x_label = "bucket size (records)";
    chart.y_label = m.y_label;
    chart.log2_x = true;
    ChartSeries joined = s;  // the same points, joined, to read the trend
    joined.kind = ChartSeries::Kind::kLine;
    joined.label = "";
    joined.y_low.clear();
    joined.y_high.clear();
    chart.series = {joined, s};
    if (auto base = number_at(r, std::string("baseline.") + m.baseline)) {
      chart.markers.push_back({false, *base, "sequential order: " + axis_number(*base)});
    }
    const std::vector<FieldPath> fields = {"sweep[].bucket", std::string("sweep[].") + m.key,
                                           std::string("baseline.") + m.baseline};
    c.figure(m.id, chart.title, render_svg(chart), fields,
             "One point per swept bucket size; the dashed line is the sequential "
             "order without bucketing.");
  }
}
}  // namespace tprobe::core
