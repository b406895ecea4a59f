// The epoch's prediction, its sampled estimate and the views (docs/levers.md, "The epoch").
#include "tprobe/core/cost/epoch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/rng.hpp"
#include "tprobe/core/cost/flops.hpp"
#include "tprobe/core/cost/scaling_fit.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {

ShapeWork shape_work(const EpochMicroBatch& s, bool packs) {
  ShapeWork w;
  if (packs) {
    for (int64_t l : s.samples) {
      const auto d = static_cast<double>(l);
      w.tokens += d;
      w.len2 += d * d;
    }
    return w;
  }
  const auto rows = static_cast<double>(s.rows.size());
  const auto width = static_cast<double>(s.width);
  w.tokens = rows * width;
  w.len2 = rows * width * width;
  return w;
}

StepCurve fit_step_curve(const std::vector<CurvePoint>& points) {
  StepCurve c;
  c.points = static_cast<int>(points.size());
  if (points.empty()) {
    c.refusal = "no unpadded point of this configuration ran";
    return c;
  }
  c.batch = points.front().batch;
  std::vector<FitPoint> fp;
  for (const CurvePoint& p : points) {
    if (p.batch != c.batch) {
      fail_usage("step curve: points of batch {} and {} (one configuration's points share a batch)",
                 c.batch, p.batch);
    }
    if (p.batch < 1 || p.width < 1 || !(p.seconds > 0)) {
      fail_usage("step curve: a point needs batch, width and seconds > 0 (got {}x{}, {} s)",
                 p.batch, p.width, p.seconds);
    }
    fp.push_back({static_cast<double>(p.width), p.seconds, p.batch, ""});
  }
  const std::vector<FitPoint> med = median_per_width(fp);
  c.distinct_widths = static_cast<int>(med.size());
  if (c.distinct_widths < 2) {
    c.refusal = fmt::format(
        "underdetermined: {} measured width{} of this configuration; the curve needs 2 (form AB) "
        "or 3 (form ABC) — give more --widths",
        c.distinct_widths, c.distinct_widths == 1 ? "" : "s");
    return c;
  }
  const FitModel form = c.distinct_widths >= 3 ? FitModel::kABC : FitModel::kAB;
  const ModelFit fit = fit_model(med, form);
  c.form = to_string(form);
  if (!fit.determined) {
    c.refusal = "underdetermined: " + fit.refusal;
    return c;
  }
  c.determined = true;
  c.exact = fit.exact;
  c.a_s_per_token = fit.a.value;
  c.b_s_per_token2 = fit.b.value;
  c.c_s = fit.c.value;
  const auto b = static_cast<double>(c.batch);
  c.fixed_s = fit.c.value;
  c.per_token_s = fit.a.value / b;
  c.per_len2_s = fit.b.value / b;
  return c;
}

int64_t optimizer_steps(int64_t micro_batches, int64_t accumulation) {
  if (accumulation < 1) fail_usage("accumulation {}: must be >= 1", accumulation);
  if (micro_batches <= 0) return 0;
  return (micro_batches + accumulation - 1) / accumulation;
}

EpochPrediction predict_epoch(const StepCurve& curve, const std::vector<EpochMicroBatch>& shapes,
                              bool packs, int64_t accumulation) {
  if (!curve.determined) fail("predict_epoch: the curve is not determined ({})", curve.refusal);
  EpochPrediction p;
  p.micro_batches = static_cast<int64_t>(shapes.size());
  p.accumulation = accumulation;
  p.optimizer_steps = optimizer_steps(p.micro_batches, accumulation);
  p.per_micro_batch_s.reserve(shapes.size());
  for (const EpochMicroBatch& s : shapes) {
    const double t = curve.seconds(shape_work(s, packs));
    p.per_micro_batch_s.push_back(t);
    p.seconds += t;
  }
  p.hours = p.seconds / 3600.0;
  return p;
}

EpochFlops epoch_flops(const ModelConfig& config, const std::vector<EpochMicroBatch>& shapes,
                       AttentionPath path, const std::vector<std::string>& lora_targets,
                       int64_t lora_rank, bool gradient_checkpointing) {
  EpochFlops out;
  // Equal shapes count alike: the key is the request's sorted lengths and width.
  std::unordered_map<std::string, std::pair<double, double>> memo;
  for (const EpochMicroBatch& s : shapes) {
    FlopsRequest r;
    r.path = path;
    r.lora_targets = lora_targets;
    r.lora_rank = lora_rank;
    r.gradient_checkpointing = gradient_checkpointing;
    if (s.packed) {
      r.lengths = s.samples;
      r.width = *std::max_element(s.samples.begin(), s.samples.end());
    } else {
      r.lengths = s.rows;
      r.width = s.width;
    }
    r.batch = static_cast<int64_t>(r.lengths.size());
    std::vector<int64_t> key_lengths = r.lengths;
    std::sort(key_lengths.begin(), key_lengths.end());
    const std::string key = fmt::format("{}:{}", r.width, fmt::join(key_lengths, ","));
    auto it = memo.find(key);
    if (it == memo.end()) {
      const FlopsReport f = count_flops(config, r);
      it = memo.emplace(key, std::make_pair(total(f.intended_total), total(f.performed_total)))
               .first;
    }
    out.intended += it->second.first;
    out.performed += it->second.second;
  }
  return out;
}

std::vector<int64_t> draw_without_replacement(int64_t population, int64_t count, uint64_t seed) {
  if (population < 0 || count < 0 || count > population) {
    fail_usage("draw {} of {}: needs 0 <= count <= population", count, population);
  }
  Rng rng(seed);
  std::unordered_map<int64_t, int64_t> moved;  // the virtual array's entries that are not i
  auto at = [&](int64_t i) {
    auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<int64_t> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.uniform(static_cast<uint64_t>(population - i)));
    const int64_t vi = at(i), vj = at(j);
    out.push_back(vj);
    moved[j] = vi;
    moved[i] = vj;
  }
  return out;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0.5 && p < 1) || !(df >= 1)) {
    fail_usage("t quantile: needs 0.5 < p < 1 and df >= 1 (got p = {}, df = {})", p, df);
  }
  // Two-sided tail P(|T| > t) = I_{df/(df+t²)}(df/2, 1/2), decreasing in t.
  const double tail = 2 * (1 - p);
  auto two_sided = [df](double t) {
    return regularized_incomplete_beta(df / 2, 0.5, df / (df + t * t));
  };
  double lo = 0, hi = 1;
  while (two_sided(hi) > tail) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (two_sided(mid) > tail ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

namespace {

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

EpochEstimate estimate_epoch(const std::vector<double>& measured,
                             const std::vector<double>& predicted, int64_t population,
                             std::optional<double> predicted_total_s) {
  if (!predicted.empty() && predicted.size() != measured.size()) {
    fail_usage("estimate: {} measured and {} predicted micro-batches", measured.size(),
               predicted.size());
  }
  EpochEstimate e;
  e.population = population;
  e.n = static_cast<int64_t>(measured.size());
  if (e.n == 0 || population < e.n) return e;
  const auto n = static_cast<double>(e.n), M = static_cast<double>(population);
  const double mean = mean_of(measured);
  e.expansion_s = M * mean;
  const double fpc = 1 - n / M;
  if (e.n >= 2) {
    e.t = student_t_quantile(0.975, n - 1);
    double ss = 0;
    for (double x : measured) ss += (x - mean) * (x - mean);
    e.expansion_half_s = *e.t * M * std::sqrt(fpc * (ss / (n - 1)) / n);
  }
  if (!predicted.empty() && predicted_total_s) {
    double sm = 0, sp = 0;
    for (std::size_t i = 0; i < measured.size(); ++i) {
      sm += measured[i];
      sp += predicted[i];
    }
    if (sp > 0) {
      e.ratio = sm / sp;
      e.ratio_s = *e.ratio * *predicted_total_s;
      if (e.n >= 2) {
        double se2 = 0;
        for (std::size_t i = 0; i < measured.size(); ++i) {
          const double r = measured[i] - *e.ratio * predicted[i];
          se2 += r * r;
        }
        e.ratio_half_s = *e.t * M * std::sqrt(fpc * (se2 / (n - 1)) / n);
      }
    }
  }
  return e;
}

double pilot_spread(const std::vector<double>& measured, const std::vector<double>& predicted) {
  if (measured.size() < 2) return 0;
  const auto n = static_cast<double>(measured.size());
  const double mean = mean_of(measured);
  if (!(mean > 0)) return 0;
  double ss = 0;
  if (!predicted.empty() && predicted.size() == measured.size()) {
    double sm = 0, sp = 0;
    for (std::size_t i = 0; i < measured.size(); ++i) {
      sm += measured[i];
      sp += predicted[i];
    }
    const double r = sp > 0 ? sm / sp : 0;
    for (std::size_t i = 0; i < measured.size(); ++i) {
      const double e = measured[i] - r * predicted[i];
      ss += e * e;
    }
  } else {
    for (double x : measured) ss += (x - mean) * (x - mean);
  }
  return std::sqrt(ss / (n - 1)) / mean;
}

int64_t planned_samples(double cv, int64_t pilot, double target, int64_t cap, int64_t population) {
  if (pilot < 2 || !(target > 0) || cap < 1 || population < 1) {
    fail_usage("planned samples: needs a pilot of >= 2, a target > 0, a cap and a population");
  }
  const int64_t upper = std::min(cap, population);
  const double t = student_t_quantile(0.975, static_cast<double>(pilot - 1));
  const double n0 = std::pow(t * cv / target, 2);
  const double n = n0 / (1 + n0 / static_cast<double>(population));
  const auto need = static_cast<int64_t>(std::ceil(n - 1e-9));
  return std::clamp<int64_t>(std::max(need, pilot), std::min(pilot, upper), upper);
}

// ---- views ----

namespace {

std::string hours(double s) { return fmt::format("{:.3g} h", s / 3600.0); }

}  // namespace

Json to_json(const EpochReport& r) {
  Json j;
  j["dataset"] = r.dataset;
  j["records"] = r.records;
  j["truncated_records"] = r.truncated_records;
  j["sampler"] = r.sampler;
  j["rule"] = r.rule;
  j["micro_batch"] = r.micro_batch;
  j["max_seq_len"] = r.max_seq_len;
  j["accumulation"] = r.accumulation;
  j["seed"] = r.seed;
  j["micro_batches"] = r.micro_batches;
  j["real_tokens"] = r.real_tokens;
  j["padded_tokens"] = r.padded_tokens;
  j["waste_ratio"] =
      r.padded_tokens > 0 ? 1.0 - static_cast<double>(r.real_tokens) / static_cast<double>(r.padded_tokens) : 0.0;
  j["zero_pad_micro_batches"] = r.zero_pad_micro_batches;
  j["optimizer_steps"] = r.micro_batches > 0 ? optimizer_steps(r.micro_batches, r.accumulation) : 0;
  j["sampling"] = {{"requested", r.requested_samples},
                   {"pilot", r.pilot},
                   {"cap", r.cap},
                   {"target_relative_half_width", r.target},
                   {"confidence", 0.95},
                   {"draw", "uniform without replacement, Rng(seed) partial Fisher-Yates"}};
  j["loss_head"] = r.loss_head_note;
  Json configs = Json::array();
  for (const EpochConfigRow& c : r.configs) {
    Json row = {{"lever", c.lever},   {"setting", c.setting}, {"attn", c.attn},
                {"packs", c.packs},   {"status", c.status},   {"note", c.note}};
    if (c.curve.determined) {
      row["curve"] = {{"form", c.curve.form},
                      {"batch", c.curve.batch},
                      {"points", c.curve.points},
                      {"distinct_widths", c.curve.distinct_widths},
                      {"exact", c.curve.exact},
                      {"c_s", c.curve.c_s},
                      {"a_s_per_token", c.curve.a_s_per_token},
                      {"b_s_per_token2", c.curve.b_s_per_token2},
                      {"fixed_s", c.curve.fixed_s},
                      {"per_token_s", c.curve.per_token_s},
                      {"per_len2_s", c.curve.per_len2_s},
                      {"formula", "t = fixed_s + per_token_s*tokens + per_len2_s*len2"}};
    } else {
      row["curve"] = nullptr;
    }
    if (c.prediction) {
      row["predicted"] = {{"seconds", c.prediction->seconds},
                          {"hours", c.prediction->hours},
                          {"micro_batches", c.prediction->micro_batches},
                          {"accumulation", c.prediction->accumulation},
                          {"optimizer_steps", c.prediction->optimizer_steps}};
    } else {
      row["predicted"] = nullptr;
    }
    row["flops"] = c.flops ? Json{{"intended", c.flops->intended}, {"performed", c.flops->performed}}
                           : Json(nullptr);
    Json m;
    m["measured"] = c.measured;
    m["note"] = c.measure_note;
    m["pilot"] = c.pilot;
    m["planned"] = c.planned;
    m["pilot_cv"] = json_or_null(c.pilot_cv);
    m["sample"] = c.sample;
    m["outcomes"] = c.sample_outcomes;
    m["measured_s"] = c.sample_measured_s;
    m["predicted_s"] = c.sample_predicted_s;
    if (c.estimate) {
      const EpochEstimate& e = *c.estimate;
      m["n"] = e.n;
      m["population"] = e.population;
      m["t"] = json_or_null(e.t);
      m["expansion_s"] = e.expansion_s;
      m["expansion_half_s"] = json_or_null(e.expansion_half_s);
      m["ratio"] = json_or_null(e.ratio);
      m["ratio_s"] = json_or_null(e.ratio_s);
      m["ratio_half_s"] = json_or_null(e.ratio_half_s);
      m["estimate_s"] = e.estimate_s();
      m["half_s"] = json_or_null(e.half_s());
      m["estimate_hours"] = e.estimate_s() / 3600.0;
      m["half_hours"] = e.half_s() ? Json(*e.half_s() / 3600.0) : Json(nullptr);
      m["estimator"] = e.ratio_s ? "ratio" : "expansion";
    } else {
      m["estimate_s"] = nullptr;
      m["half_s"] = nullptr;
    }
    m["agree"] = c.agree ? Json(*c.agree) : Json(nullptr);
    row["sampled"] = m;
    configs.push_back(std::move(row));
  }
  j["configs"] = configs;
  return j;
}

namespace {

namespace jr = json_read;

StepCurve curve_from_json(const Json& j, const std::string& w) {
  StepCurve c;
  c.determined = true;
  c.form = jr::string(j, "form", w);
  c.batch = jr::integer(j, "batch", w, 0);
  c.points = static_cast<int>(jr::integer(j, "points", w, 0, std::numeric_limits<int>::max()));
  c.distinct_widths =
      static_cast<int>(jr::integer(j, "distinct_widths", w, 0, std::numeric_limits<int>::max()));
  c.exact = jr::boolean(j, "exact", w);
  c.c_s = jr::number(j, "c_s", w);
  c.a_s_per_token = jr::number(j, "a_s_per_token", w);
  c.b_s_per_token2 = jr::number(j, "b_s_per_token2", w);
  c.fixed_s = jr::number(j, "fixed_s", w);
  c.per_token_s = jr::number(j, "per_token_s", w);
  c.per_len2_s = jr::number(j, "per_len2_s", w);
  return c;
}

EpochPrediction prediction_from_json(const Json& j, const std::string& w) {
  EpochPrediction p;
  p.seconds = jr::number(j, "seconds", w);
  p.hours = jr::number(j, "hours", w);
  p.micro_batches = jr::integer(j, "micro_batches", w, 0);
  p.accumulation = jr::integer(j, "accumulation", w, 1);
  p.optimizer_steps = jr::integer(j, "optimizer_steps", w, 0);
  return p;
}

EpochEstimate estimate_from_json(const Json& m, const std::string& w) {
  EpochEstimate e;
  e.population = jr::integer(m, "population", w, 0);
  e.n = jr::integer(m, "n", w, 0, e.population);
  e.t = jr::nullable_number(m, "t", w);
  e.expansion_s = jr::number(m, "expansion_s", w);
  e.expansion_half_s = jr::nullable_number(m, "expansion_half_s", w);
  e.ratio = jr::nullable_number(m, "ratio", w);
  e.ratio_s = jr::nullable_number(m, "ratio_s", w);
  e.ratio_half_s = jr::nullable_number(m, "ratio_half_s", w);
  return e;
}

EpochConfigRow epoch_config_from_json(const Json& j, const std::string& w) {
  EpochConfigRow c;
  c.lever = jr::string(j, "lever", w);
  c.setting = jr::string(j, "setting", w);
  c.attn = jr::string(j, "attn", w);
  c.packs = jr::boolean(j, "packs", w);
  c.status = jr::string(j, "status", w);
  c.note = jr::string(j, "note", w);
  if (!jr::field(j, "curve", w).is_null())
    c.curve = curve_from_json(jr::object(j, "curve", w), w + ".curve");
  if (!jr::field(j, "predicted", w).is_null())
    c.prediction = prediction_from_json(jr::object(j, "predicted", w), w + ".predicted");
  if (!jr::field(j, "flops", w).is_null()) {
    const Json& f = jr::object(j, "flops", w);
    c.flops = EpochFlops{jr::number(f, "intended", w + ".flops"),
                         jr::number(f, "performed", w + ".flops")};
  }
  const Json& m = jr::object(j, "sampled", w);
  const std::string mw = w + ".sampled";
  c.measured = jr::boolean(m, "measured", mw);
  c.measure_note = jr::string(m, "note", mw);
  c.pilot = jr::integer(m, "pilot", mw, 0);
  c.planned = jr::integer(m, "planned", mw, 0);
  c.pilot_cv = jr::nullable_number(m, "pilot_cv", mw);
  c.sample = jr::integers(m, "sample", mw, 0);
  c.sample_outcomes = jr::strings(m, "outcomes", mw);
  c.sample_measured_s = jr::numbers(m, "measured_s", mw);
  c.sample_predicted_s = jr::numbers(m, "predicted_s", mw);
  if (!jr::field(m, "estimate_s", mw).is_null()) c.estimate = estimate_from_json(m, mw);
  c.agree = jr::nullable_boolean(m, "agree", mw);
  return c;
}

}  // namespace

EpochReport epoch_report_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  EpochReport r;
  r.dataset = jr::string(j, "dataset", where);
  r.records = jr::integer(j, "records", where, 0);
  r.truncated_records = jr::integer(j, "truncated_records", where, 0, r.records);
  r.sampler = jr::string(j, "sampler", where);
  r.rule = jr::string(j, "rule", where);
  r.micro_batch = jr::integer(j, "micro_batch", where, 0);
  r.max_seq_len = jr::integer(j, "max_seq_len", where, 0);
  r.accumulation = jr::integer(j, "accumulation", where, 1);
  r.seed = jr::unsigned_integer(j, "seed", where);
  r.micro_batches = jr::integer(j, "micro_batches", where, 0);
  r.real_tokens = jr::integer(j, "real_tokens", where, 0);
  r.padded_tokens = jr::integer(j, "padded_tokens", where, 0);
  r.zero_pad_micro_batches = jr::integer(j, "zero_pad_micro_batches", where, 0, r.micro_batches);
  // Written beside what it follows from: a file where it does not follow was edited.
  const int64_t steps = r.micro_batches > 0 ? optimizer_steps(r.micro_batches, r.accumulation) : 0;
  if (jr::integer(j, "optimizer_steps", where) != steps)
    fail("{}: optimizer_steps is not ceil(micro_batches / accumulation)", where);
  const Json& s = jr::object(j, "sampling", where);
  const std::string sw = where + ".sampling";
  r.requested_samples = jr::integer(s, "requested", sw, 0);
  r.pilot = jr::integer(s, "pilot", sw, 0);
  r.cap = jr::integer(s, "cap", sw, 0);
  r.target = jr::number(s, "target_relative_half_width", sw);
  r.loss_head_note = jr::string(j, "loss_head", where);
  const Json& configs = jr::array(j, "configs", where);
  for (std::size_t i = 0; i < configs.size(); ++i)
    r.configs.push_back(epoch_config_from_json(configs[i], jr::at(where, "configs", i)));
  return r;
}

std::vector<Table> epoch_tables(const EpochReport& r) {
  Table t(fmt::format("The epoch: {} ({} records), sampler {}, micro-batch {}, max_seq_len {}, "
                      "accumulation {}",
                      r.dataset, format_count(r.records), r.sampler, r.micro_batch,
                      format_count(r.max_seq_len), r.accumulation));
  t.column("lever", Align::kLeft)
      .column("setting", Align::kLeft)
      .column("predicted")
      .column("measured (sample)")
      .column("±95 %")
      .column("n")
      .column("agree", Align::kLeft)
      .column("steps")
      .column("FLOPs (performed)");
  for (const EpochConfigRow& c : r.configs) {
    std::string pred = c.status == "predicted" && c.prediction ? hours(c.prediction->seconds)
                                                               : c.status;
    std::string meas = "-", half = "-", n = "-", agree = "-";
    if (c.estimate && c.estimate->n > 0) {
      meas = hours(c.estimate->estimate_s());
      if (auto h = c.estimate->half_s()) half = hours(*h);
      n = fmt::format("{}/{}", c.estimate->n, format_count(c.estimate->population));
    } else if (!c.measure_note.empty()) {
      meas = c.measure_note;
    }
    if (c.agree) agree = *c.agree ? "yes" : "no";
    t.row({c.lever, c.setting.empty() ? "(baseline)" : c.setting, pred, meas, half, n, agree,
           c.prediction ? format_count(c.prediction->optimizer_steps) : "-",
           c.flops ? fmt::format("{:.3e}", c.flops->performed) : "-"});
  }
  t.note(fmt::format("{} micro-batches ({}); padding {} of {} tokens; {} zero-pad micro-batches.",
                     format_count(r.micro_batches), r.rule,
                     format_count(r.padded_tokens - r.real_tokens), format_count(r.padded_tokens),
                     format_count(r.zero_pad_micro_batches)));
  t.note("predicted: the configuration's step curve (fitted to its measured unpadded points) "
         "summed over every micro-batch. measured: the ratio estimate from uniformly sampled "
         "micro-batches run one by one, with its 95 % interval; agree: the prediction lies in it.");
  for (const EpochConfigRow& c : r.configs) {
    if (!c.note.empty()) t.note(fmt::format("{} {}: {}", c.lever, c.setting, c.note));
  }
  if (!r.loss_head_note.empty()) t.note(r.loss_head_note);
  return {t};
}

void epoch_report_section(SectionBuilder& c, const EpochReport& e) {
  c.fact("epoch", fmt::format("{}, sampler {}: {} micro-batches, accumulation {}", e.dataset,
                              e.sampler, e.micro_batches, e.accumulation),
         {"epoch.dataset", "epoch.sampler", "epoch.micro_batches", "epoch.accumulation"});
  BarChart ch;
  ch.title = "Epoch hours per configuration: predicted and measured on sampled micro-batches";
  ch.value_label = "GPU hours per epoch";
  ch.series = {"predicted", "measured"};
  ch.width = 860;
  ch.note_room = 300;  // "measured 0.0367 ± 0.00751 h, disagrees" beside the longest bar
  ch.highlight_label = "the prediction lies outside the measured interval";
  for (const EpochConfigRow& row : e.configs) {
    const std::string label = row.lever + (row.setting.empty() ? "" : " " + row.setting);
    // The hours as to_json writes them (predicted.hours, sampled.estimate_hours, half_hours);
    // plain doubles, 0 where absent (gcc 12 misreads optional<double> here as uninitialised).
    const double pred = row.prediction ? row.prediction->hours : 0.0;
    const double meas = row.estimate ? row.estimate->estimate_s() / 3600.0 : 0.0;
    const bool has_half = row.estimate && row.estimate->half_s();
    const double half = has_half ? *row.estimate->half_s() / 3600.0 : 0.0;
    std::string note = row.prediction ? "" : row.status;
    if (row.estimate) {
      note += fmt::format("{}measured {:.3g}{} h", note.empty() ? "" : "; ", meas,
                          has_half ? fmt::format(" ± {:.3g}", half) : std::string());
      if (row.agree) note += *row.agree ? ", agrees" : ", disagrees";
    }
    const bool disagree = row.agree && !*row.agree;
    ch.items.push_back({label, {pred, meas}, disagree, note});
  }
  c.figure("epoch", ch.title, render_svg(ch),
           {"epoch.configs[].predicted.hours", "epoch.configs[].sampled.estimate_hours",
            "epoch.configs[].sampled.half_hours", "epoch.configs[].sampled.agree"},
           "Per configuration: the epoch predicted from its step curve, and estimated from sampled "
           "micro-batches measured one by one (± its 95 % interval beside the bar). A bar at zero "
           "was not predicted or not measured (the note says which).");
}

}  // namespace tprobe::core
