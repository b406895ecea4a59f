// scaling-fit: batch selection, sample reduction, model choice, fit, verdicts; JSON and table views.
#include "tprobe/core/cost/scaling_fit_report.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/median.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {
namespace {

// Widths are token counts: written as integers (every reader checks they are).
Json tokens(double width) { return static_cast<int64_t>(std::llround(width)); }

std::string pm(const Coefficient& c, int digits = 4) {
  return c.std_error ? fmt::format("{} ± {}", format_sci(c.value, digits), format_sci(*c.std_error, 1))
                     : format_sci(c.value, digits);
}

std::string curve_text(FitModel m) {
  switch (m) {
    case FitModel::kA: return "t(w) = A·w";
    case FitModel::kAB: return "t(w) = A·w + B·w²";
    case FitModel::kAC: return "t(w) = C + A·w";
    case FitModel::kABC: return "t(w) = C + A·w + B·w²";
  }
  return "?";
}

Json terms_json(const WidthTerms& t) {
  return Json{{"width", tokens(t.width)},
              {"predicted_s", t.predicted_s},
              {"constant_s", t.constant_s},
              {"linear_s", t.linear_s},
              {"quadratic_s", t.quadratic_s},
              {"quadratic_share", t.quadratic_share}};
}

}  // namespace

ScalingFitReport analyze_scaling(ScalingFitInput input) {
  ScalingFitReport r;
  const bool is_auto = input.model == "auto";
  std::optional<FitModel> requested = parse_fit_model(input.model);
  if (!is_auto && !requested) {
    fail_usage("fit form '{}' is not one of A, AB, AC, ABC, auto", input.model);
  }
  // NaN compares false with both ends of a range check, so test the range the positive way.
  if (!(input.alpha >= 1e-6 && input.alpha <= 0.5)) {
    fail_usage("alpha {}: must be a significance level in [1e-06, 0.5]", input.alpha);
  }
  for (int64_t w : input.at_widths) {
    if (w < 1) fail_usage("prediction width {} is not positive", w);
  }
  r.input = input;
  std::vector<FitPoint> points = input.points;
  r.batch = select_batch(points, input.batch, &r.dropped, input.batch_option);
  r.fitted_points = input.samples == SampleMode::kMedian ? median_per_width(points) : points;
  for (const auto& s : input.skipped) {
    r.diagnostics.push_back({Severity::kInfo, "point_skipped", "not fitted: " + s});
  }
  for (const auto& d : r.dropped) {
    r.diagnostics.push_back({Severity::kInfo, "point_other_batch", "not fitted: " + d});
  }
  FitModel model = requested.value_or(FitModel::kAB);
  if (is_auto) {
    r.selection = select_model(r.fitted_points, input.alpha);
    if (!r.selection->possible) {
      r.refused = true;
    r.outcome = Outcome::kNo;
      r.outcome = Outcome::kNo;
      r.refusal = r.selection->refusal;
      r.diagnostics.push_back({Severity::kError, "auto_refused", r.refusal});
      return r;
    }
    model = r.selection->chosen;
  }
  ModelFit fit = fit_model(r.fitted_points, model);
  if (!fit.determined) {
    r.refused = true;
    r.outcome = Outcome::kNo;
    r.refusal = fit.refusal;
    r.diagnostics.push_back({Severity::kError, "underdetermined", r.refusal});
    r.fit = fit;
    return r;
  }
  if (fit.exact) {
    r.diagnostics.push_back(
        {Severity::kWarning, "exact_fit",
         fmt::format("{} points for {} parameters: the curve passes through every point, so there "
                     "are no error bars and the fit tests nothing; measure another width",
                     fit.points, fit.parameters)});
  }
  r.fixed_term = fixed_term_verdict(r.fitted_points, input.alpha);
  for (int64_t w : input.at_widths) r.at.push_back(fit.at(static_cast<double>(w)));
  if (input.widths) {
    r.weighted = weighted_quadratic_share(fit, *input.widths);
    if (input.widths->micro_batch && r.batch != 0 && *input.widths->micro_batch != r.batch) {
      r.diagnostics.push_back(
          {Severity::kWarning, "batch_mismatch",
           fmt::format("{} was made at micro-batch {} but the fit is at batch {}: the weighted "
                       "share applies this batch's curve to those widths",
                       input.widths->path, *input.widths->micro_batch, r.batch)});
    }
  }
  r.fit = std::move(fit);
  return r;
}

Json to_json(const ScalingFitReport& r) {
  Json out;
  out["model"] = r.fit && r.fit->determined ? Json(to_string(r.fit->model)) : Json(nullptr);
  out["model_requested"] = r.input.model;
  out["fit_status"] = r.refused ? "refused" : (r.fit && r.fit->exact ? "exact" : "ok");
  out["refusal"] = r.refused ? Json(r.refusal) : Json(nullptr);
  out["batch"] = r.batch != 0 ? Json(r.batch) : Json(nullptr);
  out["samples"] = r.input.samples == SampleMode::kMedian ? "median" : "raw";
  out["alpha"] = r.input.alpha;
  if (r.selection) {
    Json tests = Json::array();
    for (const auto& t : r.selection->tests) {
      tests.push_back({{"reduced", to_string(t.reduced)},
                       {"full", to_string(t.full)},
                       {"term", t.term},
                       {"f", std::isfinite(t.f) ? Json(t.f) : Json(nullptr)},
                       {"df_num", t.df_num},
                       {"df_den", t.df_den},
                       {"p_value", t.p_value},
                       {"significant", t.significant}});
    }
    out["selection"] = {{"method", "backward elimination by nested-model F-tests"},
                        {"possible", r.selection->possible},
                        {"reason", r.selection->possible ? Json(r.selection->reason) : Json(nullptr)},
                        {"tests", tests}};
  } else {
    out["selection"] = nullptr;
  }
  const bool fitted = r.fit && r.fit->determined;
  Json coef = Json::object(), se = Json::object();
  if (fitted) {
    coef["a_s_per_token"] = r.fit->a.value;
    se["a_s_per_token"] = json_or_null(r.fit->a.std_error);
    // B is always written (0 when the model has no quadratic term) so that readers such as
    // `bucket --scaling-fit` can take A and B from any fit; C only where it was fitted.
    coef["b_s_per_token2"] = r.fit->b.value;
    se["b_s_per_token2"] = json_or_null(r.fit->b.std_error);
    if (has_constant(r.fit->model)) {
      coef["c_s"] = r.fit->c.value;
      se["c_s"] = json_or_null(r.fit->c.std_error);
    }
  }
  out["coefficients"] = coef;
  out["std_errors"] = se;
  out["degrees_of_freedom"] = fitted ? Json(r.fit->dof) : Json(nullptr);
  out["distinct_widths"] = r.fit ? Json(r.fit->distinct_widths) : Json(nullptr);
  out["rss_s2"] = fitted ? Json(r.fit->rss) : Json(nullptr);
  out["residual_std_s"] = fitted ? json_or_null(r.fit->residual_std_s) : Json(nullptr);
  out["crossover_width"] = fitted ? json_or_null(r.fit->crossover_width) : Json(nullptr);
  out["loo_rms_s"] = fitted ? json_or_null(r.fit->loo_rms_s) : Json(nullptr);
  out["loo_max_abs_s"] = fitted ? json_or_null(r.fit->loo_max_abs_s) : Json(nullptr);
  Json points = Json::array();
  if (fitted) {
    for (size_t i = 0; i < r.fit->per_point.size(); ++i) {
      const PointFit& p = r.fit->per_point[i];
      points.push_back({{"width", tokens(p.width)},
                        {"seconds", p.seconds},
                        {"predicted_s", p.predicted_s},
                        {"residual_s", p.residual_s},
                        {"residual_ratio", p.residual_ratio},
                        {"constant_s", p.constant_s},
                        {"linear_s", p.linear_s},
                        {"quadratic_s", p.quadratic_s},
                        {"quadratic_share", p.quadratic_share},
                        {"loo_predicted_s", json_or_null(p.loo_predicted_s)},
                        {"loo_error_s", json_or_null(p.loo_error_s)},
                        {"origin", r.fitted_points[i].origin}});
    }
  } else {
    for (const auto& p : r.fitted_points) {
      points.push_back({{"width", tokens(p.width)}, {"seconds", p.seconds}, {"origin", p.origin}});
    }
  }
  out["points"] = points;
  if (r.fixed_term) {
    const auto& v = *r.fixed_term;
    out["fixed_term"] = {{"testable", v.testable},
                         {"outcome", v.outcome},
                         {"c_s", json_or_null(v.c_s)},
                         {"c_std_error_s", json_or_null(v.c_std_error_s)},
                         {"f", v.f && std::isfinite(*v.f) ? Json(*v.f) : Json(nullptr)},
                         {"p_value", json_or_null(v.p_value)},
                         {"c_low_s", json_or_null(v.c_low_s)},
                         {"c_high_s", json_or_null(v.c_high_s)},
                         {"material_s", json_or_null(v.material_s)},
                         {"needed", v.needed},
                         {"verdict", v.verdict}};
  } else {
    out["fixed_term"] = nullptr;
  }
  Json at = Json::array();
  for (const auto& t : r.at) at.push_back(terms_json(t));
  out["at"] = at;
  if (r.weighted && r.input.widths) {
    const auto& d = *r.input.widths;
    Json hist = Json::array();
    for (const auto& w : d.widths) hist.push_back({{"width", w.width}, {"count", w.count}});
    out["widths_from"] = {{"path", d.path},
                          {"probe", d.probe},
                          {"key", d.key},
                          {"micro_batch", d.micro_batch ? Json(*d.micro_batch) : Json(nullptr)},
                          {"micro_batches", r.weighted->micro_batches},
                          {"mean_width", r.weighted->mean_width},
                          {"predicted_total_s", r.weighted->predicted_total_s},
                          {"quadratic_total_s", r.weighted->quadratic_total_s},
                          {"quadratic_share", r.weighted->quadratic_share},
                          {"width_histogram", hist}};
  } else {
    out["widths_from"] = nullptr;
  }
  // Every point as read, before batch selection and --samples, so medians can be re-derived.
  Json raw = Json::array();
  for (const auto& p : r.input.points) {
    raw.push_back({{"width", tokens(p.width)},
                   {"seconds", p.seconds},
                   {"batch", p.batch != 0 ? Json(p.batch) : Json(nullptr)},
                   {"origin", p.origin}});
  }
  out["input_points"] = raw;
  out["dropped"] = r.dropped;
  out["skipped"] = r.input.skipped;
  return out;
}

namespace {

namespace jr = json_read;

FitModel fit_model_field(const Json& j, const char* key, const std::string& where) {
  const std::string text = jr::string(j, key, where);
  const std::optional<FitModel> m = parse_fit_model(text);
  if (!m) {
    fail("{}: field '{}' must be one of A, AB, AC, ABC, got \"{}\"", where, key,
         detail::printable(text, 20));
  }
  return *m;
}

WidthTerms terms_from_json(const Json& j, const std::string& w) {
  WidthTerms t;
  t.width = jr::number(j, "width", w);
  t.predicted_s = jr::number(j, "predicted_s", w);
  t.constant_s = jr::number(j, "constant_s", w);
  t.linear_s = jr::number(j, "linear_s", w);
  t.quadratic_s = jr::number(j, "quadratic_s", w);
  t.quadratic_share = jr::number(j, "quadratic_share", w);
  return t;
}

ModelSelection selection_from_json(const Json& j, const std::string& w) {
  ModelSelection s;
  s.possible = jr::boolean(j, "possible", w);
  s.reason = jr::nullable_string(j, "reason", w).value_or("");
  const Json& tests = jr::array(j, "tests", w);
  for (std::size_t i = 0; i < tests.size(); ++i) {
    const std::string tw = jr::at(w, "tests", i);
    FTest t;
    t.reduced = fit_model_field(tests[i], "reduced", tw);
    t.full = fit_model_field(tests[i], "full", tw);
    t.term = jr::string(tests[i], "term", tw);
    // A non-finite F is written as null.
    t.f = jr::nullable_number(tests[i], "f", tw).value_or(std::numeric_limits<double>::quiet_NaN());
    t.df_num = static_cast<int>(jr::integer(tests[i], "df_num", tw, 0, 1 << 30));
    t.df_den = static_cast<int>(jr::integer(tests[i], "df_den", tw, 0, 1 << 30));
    t.p_value = jr::number(tests[i], "p_value", tw);
    t.significant = jr::boolean(tests[i], "significant", tw);
    s.tests.push_back(std::move(t));
  }
  return s;
}

FixedTermVerdict fixed_term_from_json(const Json& j, const std::string& w) {
  FixedTermVerdict v;
  v.testable = jr::boolean(j, "testable", w);
  v.outcome = jr::string(j, "outcome", w);
  v.c_s = jr::nullable_number(j, "c_s", w);
  v.c_std_error_s = jr::nullable_number(j, "c_std_error_s", w);
  v.f = jr::nullable_number(j, "f", w);
  v.p_value = jr::nullable_number(j, "p_value", w);
  v.c_low_s = jr::nullable_number(j, "c_low_s", w);
  v.c_high_s = jr::nullable_number(j, "c_high_s", w);
  v.material_s = jr::nullable_number(j, "material_s", w);
  v.needed = jr::boolean(j, "needed", w);
  v.verdict = jr::string(j, "verdict", w);
  return v;
}

}  // namespace

ScalingFitReport scaling_fit_report_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  ScalingFitReport r;
  const std::optional<std::string> model = jr::nullable_string(j, "model", where);
  r.input.model = jr::string(j, "model_requested", where);
  if (r.input.model != "auto" && !parse_fit_model(r.input.model)) {
    fail("{}: field 'model_requested' must be one of A, AB, AC, ABC, auto, got \"{}\"", where,
         detail::printable(r.input.model, 20));
  }
  const std::size_t status = jr::choice(j, "fit_status", where, {"ok", "exact", "refused"});
  r.refused = status == 2;
  // A fitted model and a refusal exclude each other: a file that says both was edited.
  if (r.refused == model.has_value()) {
    fail("{}: fit_status '{}' with model {}", where, jr::string(j, "fit_status", where),
         model ? detail::printable(*model, 20) : "null");
  }
  if (r.refused) {
    r.refusal = jr::string(j, "refusal", where);
    r.outcome = Outcome::kNo;
  }
  r.batch = jr::nullable_integer(j, "batch", where, 1).value_or(0);
  const bool median = jr::choice(j, "samples", where, {"median", "raw"}) == 0;
  r.input.samples = median ? SampleMode::kMedian : SampleMode::kRaw;
  r.input.alpha = jr::number(j, "alpha", where);

  if (!jr::field(j, "selection", where).is_null()) {
    r.selection = selection_from_json(jr::object(j, "selection", where), where + ".selection");
    if (!r.selection->possible) r.selection->refusal = r.refusal;
  }

  const std::optional<int64_t> distinct =
      jr::nullable_integer(j, "distinct_widths", where, 0, 1 << 30);
  const Json& coef = jr::object(j, "coefficients", where);
  const Json& se = jr::object(j, "std_errors", where);
  const std::string cw = where + ".coefficients", sw = where + ".std_errors";
  if (model) {
    ModelFit f;
    f.model = fit_model_field(j, "model", where);
    f.determined = true;
    f.exact = status == 1;
    f.parameters = parameter_count(f.model);
    if (!distinct) fail("{}: field 'distinct_widths' is null for a fitted model", where);
    f.distinct_widths = static_cast<int>(*distinct);
    f.a = {jr::number(coef, "a_s_per_token", cw), jr::nullable_number(se, "a_s_per_token", sw)};
    f.b = {jr::number(coef, "b_s_per_token2", cw), jr::nullable_number(se, "b_s_per_token2", sw)};
    if (has_constant(f.model)) {
      f.c = {jr::number(coef, "c_s", cw), jr::nullable_number(se, "c_s", sw)};
    } else if (jr::optional(coef, "c_s")) {
      // Not written for a model without C; read when present so that a cost reader sees it.
      f.c.value = jr::number(coef, "c_s", cw);
    }
    f.dof = static_cast<int>(jr::integer(j, "degrees_of_freedom", where, 0, 1 << 30));
    f.rss = jr::number(j, "rss_s2", where);
    f.residual_std_s = jr::nullable_number(j, "residual_std_s", where);
    f.crossover_width = jr::nullable_number(j, "crossover_width", where);
    f.loo_rms_s = jr::nullable_number(j, "loo_rms_s", where);
    f.loo_max_abs_s = jr::nullable_number(j, "loo_max_abs_s", where);
    r.fit = std::move(f);
  } else if (distinct) {
    // An underdetermined fit: only its refusal and the widths it had.
    ModelFit f;
    f.determined = false;
    f.refusal = r.refusal;
    f.distinct_widths = static_cast<int>(*distinct);
    r.fit = std::move(f);
  }

  const Json& points = jr::array(j, "points", where);
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string w = jr::at(where, "points", i);
    const Json& p = points[i];
    FitPoint fp;
    fp.width = jr::number(p, "width", w);
    fp.seconds = jr::number(p, "seconds", w);
    fp.origin = jr::string(p, "origin", w);
    if (model) {
      PointFit pf;
      pf.width = fp.width;
      pf.seconds = fp.seconds;
      pf.predicted_s = jr::number(p, "predicted_s", w);
      pf.residual_s = jr::number(p, "residual_s", w);
      pf.residual_ratio = jr::number(p, "residual_ratio", w);
      pf.constant_s = jr::number(p, "constant_s", w);
      pf.linear_s = jr::number(p, "linear_s", w);
      pf.quadratic_s = jr::number(p, "quadratic_s", w);
      pf.quadratic_share = jr::number(p, "quadratic_share", w);
      pf.loo_predicted_s = jr::nullable_number(p, "loo_predicted_s", w);
      pf.loo_error_s = jr::nullable_number(p, "loo_error_s", w);
      r.fit->per_point.push_back(pf);
    }
    r.fitted_points.push_back(std::move(fp));
  }
  if (r.fit) r.fit->points = static_cast<int>(r.fitted_points.size());

  if (!jr::field(j, "fixed_term", where).is_null()) {
    r.fixed_term = fixed_term_from_json(jr::object(j, "fixed_term", where), where + ".fixed_term");
  }
  const Json& at = jr::array(j, "at", where);
  for (std::size_t i = 0; i < at.size(); ++i) {
    r.at.push_back(terms_from_json(at[i], jr::at(where, "at", i)));
    r.input.at_widths.push_back(std::llround(r.at.back().width));
  }

  if (!jr::field(j, "widths_from", where).is_null()) {
    const Json& wf = jr::object(j, "widths_from", where);
    const std::string w = where + ".widths_from";
    WidthDistribution d;
    d.path = jr::string(wf, "path", w);
    d.probe = jr::string(wf, "probe", w);
    d.key = jr::string(wf, "key", w);
    d.micro_batch = jr::nullable_integer(wf, "micro_batch", w, 1);
    const Json& hist = jr::array(wf, "width_histogram", w);
    for (std::size_t i = 0; i < hist.size(); ++i) {
      const std::string hw = jr::at(w, "width_histogram", i);
      d.widths.push_back(
          {jr::integer(hist[i], "width", hw, 1), jr::integer(hist[i], "count", hw, 1)});
    }
    WeightedShare s;
    s.micro_batches = jr::integer(wf, "micro_batches", w, 0);
    s.mean_width = jr::number(wf, "mean_width", w);
    s.predicted_total_s = jr::number(wf, "predicted_total_s", w);
    s.quadratic_total_s = jr::number(wf, "quadratic_total_s", w);
    s.quadratic_share = jr::number(wf, "quadratic_share", w);
    r.input.widths = std::move(d);
    r.weighted = s;
  }

  const Json& raw = jr::array(j, "input_points", where);
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string w = jr::at(where, "input_points", i);
    FitPoint p;
    p.width = jr::number(raw[i], "width", w);
    p.seconds = jr::number(raw[i], "seconds", w);
    p.batch = jr::nullable_integer(raw[i], "batch", w, 1).value_or(0);
    p.origin = jr::string(raw[i], "origin", w);
    r.input.points.push_back(std::move(p));
  }
  r.dropped = jr::strings(j, "dropped", where);
  r.input.skipped = jr::strings(j, "skipped", where);
  return r;
}

ScalingFitReport read_scaling_fit_evidence(const std::string& path) {
  const Json doc = read_evidence_file(path, "scaling-fit");
  return scaling_fit_report_from_json(jr::object(doc, "results", "'" + path + "'"),
                                      "'" + path + "': results");
}

FittedCost fitted_cost(const ScalingFitReport& r, const std::string& path) {
  if (!r.fit || !r.fit->determined) {
    fail("'{}': the scaling fit was refused ({}): it has no coefficients for a cost model", path,
         r.refusal);
  }
  auto cost = [&](const char* key, double v) {
    // A fitted coefficient can come out negative on noisy points; as a cost it would predict
    // negative time for some widths, so it is refused like a negative --cost.
    if (v < 0) {
      fail("'{}': results.coefficients.{} is negative ({:g}); a cost model needs non-negative "
           "coefficients (refit with another form, or give the cost coefficients)",
           path, key, v);
    }
    return v;
  };
  FittedCost c;
  c.a_s_per_token = cost("a_s_per_token", r.fit->a.value);
  c.b_s_per_token2 = cost("b_s_per_token2", r.fit->b.value);
  c.c_s = cost("c_s", r.fit->c.value);
  return c;
}

std::vector<Table> scaling_fit_tables(const ScalingFitReport& r) {
  std::vector<Table> tables;
  const std::string batch = r.batch ? fmt::format("batch {}", r.batch) : "batch not stated";
  const std::string samples = r.input.samples == SampleMode::kMedian ? "medians" : "raw samples";
  if (r.refused) {
    Table t(fmt::format("scaling fit REFUSED ({}, {} fitted point{}, {})", batch,
                        r.fitted_points.size(), r.fitted_points.size() == 1 ? "" : "s", samples));
    t.column("width").column("seconds");
    for (const auto& p : r.fitted_points) {
      t.row({format_count(static_cast<int64_t>(p.width)), format_seconds(p.seconds)});
    }
    t.note("refused: see the error below; nothing was fitted");
    tables.push_back(std::move(t));
    return tables;
  }
  const ModelFit& f = *r.fit;
  Table coef(fmt::format("scaling fit: {}  ({}, {} points, {}, {} dof)", curve_text(f.model), batch,
                         f.points, samples, f.dof));
  coef.column("term", Align::kLeft).column("value ± std. error").column("unit", Align::kLeft);
  coef.row({"A", pm(f.a), "s/token"});
  if (has_quadratic(f.model)) coef.row({"B", pm(f.b), "s/token²"});
  if (has_constant(f.model)) coef.row({"C", pm(f.c), "s"});
  if (f.exact) coef.note("exact fit: as many points as parameters, no error bars, nothing tested");
  if (r.selection) coef.note(r.selection->reason);
  if (r.fixed_term) coef.note("fixed term: " + r.fixed_term->verdict);
  if (f.crossover_width) {
    coef.note(fmt::format("crossover A/B = {} tokens: the quadratic term dominates above it",
                          format_count(static_cast<int64_t>(std::llround(*f.crossover_width)))));
  }
  if (f.residual_std_s) coef.note("residual std. error " + format_seconds(*f.residual_std_s));
  if (f.loo_rms_s) {
    coef.note(fmt::format("leave-one-out prediction error: rms {}, max {}", format_seconds(*f.loo_rms_s),
                          format_seconds(*f.loo_max_abs_s)));
  }
  tables.push_back(std::move(coef));

  Table pts("per point");
  pts.column("width").column("measured").column("predicted").column("residual")
      .column("resid %").column("linear").column("quadratic").column("quad share")
      .column("LOO error");
  // The evidence holds every point; the human view stops after a screenful.
  constexpr size_t kMaxRows = 40;
  for (size_t i = 0; i < f.per_point.size() && i < kMaxRows; ++i) {
    const PointFit& p = f.per_point[i];
    pts.row({format_count(static_cast<int64_t>(p.width)), format_seconds(p.seconds),
             format_seconds(p.predicted_s), format_seconds(p.residual_s),
             format_percent(p.residual_ratio, 2), format_seconds(p.linear_s),
             format_seconds(p.quadratic_s), format_percent(p.quadratic_share),
             p.loo_error_s ? format_seconds(*p.loo_error_s) : "-"});
  }
  if (f.per_point.size() > kMaxRows) {
    pts.note(fmt::format("... {} more points in the evidence file (results.points)",
                         f.per_point.size() - kMaxRows));
  }
  tables.push_back(std::move(pts));

  if (!r.at.empty()) {
    Table at("predicted at the requested widths");
    at.column("width").column("predicted").column("linear").column("quadratic").column("quad share");
    for (const auto& t : r.at) {
      at.row({format_count(static_cast<int64_t>(t.width)), format_seconds(t.predicted_s),
              format_seconds(t.linear_s), format_seconds(t.quadratic_s),
              format_percent(t.quadratic_share)});
    }
    tables.push_back(std::move(at));
  }
  if (r.weighted && r.input.widths) {
    const auto& d = *r.input.widths;
    Table w(fmt::format("quadratic share over the widths of {} ({})", d.path, d.key));
    w.column("micro-batches").column("mean width").column("predicted total").column("quadratic")
        .column("quad share");
    w.row({format_count(r.weighted->micro_batches),
           format_count(static_cast<int64_t>(std::llround(r.weighted->mean_width))),
           format_seconds(r.weighted->predicted_total_s),
           format_seconds(r.weighted->quadratic_total_s),
           format_percent(r.weighted->quadratic_share)});
    w.note("share of the summed predicted step time spent in the B·w² term");
    tables.push_back(std::move(w));
  }
  return tables;
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

// t(w) = C + A w + B w^2 sampled for drawing.
void scaling_fit_report_section(SectionBuilder& c) {
  const Json& r = c.results();
  c.fact("fit", string_at(r, "fit_status") + ", model " + string_at(r, "model"),
         {"fit_status", "model"}, string_at(r, "fit_status") == "refused");
  auto a = number_at(r, "coefficients.a_s_per_token");
  auto b = number_at(r, "coefficients.b_s_per_token2");
  auto cc = number_at(r, "coefficients.c_s");
  if (a) c.fact("A (linear)", format_sci(*a) + " s/token", "coefficients.a_s_per_token");
  if (b) c.fact("B (quadratic)", format_sci(*b) + " s/token²", "coefficients.b_s_per_token2");
  if (cc) c.fact("C (fixed)", format_seconds(*cc), "coefficients.c_s");
  if (auto x = number_at(r, "crossover_width"))
    c.fact("crossover A/B", format_count(std::llround(*x)) + " tokens", "crossover_width");
  if (auto q = number_at(r, "widths_from.quadratic_share")) {
    c.fact("quadratic share over the real width distribution", format_percent(*q),
           "widths_from.quadratic_share");
  }
  std::string verdict = string_at(r, "fixed_term.verdict");
  if (!verdict.empty()) c.note("fixed term: " + verdict);

  const Json* pts = array_at(r, "input_points");
  if (!pts) {
    c.absent("input_points", "the step-time figure");
    return;
  }
  std::map<double, std::vector<double>> by_width;
  for (const auto& p : *pts) {
    auto w = number_at(p, "width"), s = number_at(p, "seconds");
    if (w && s) by_width[*w].push_back(*s);
  }
  ChartSeries measured;
  measured.label = "measured (median, bar: min–max of repeats)";
  double wmax = 0;
  for (const auto& [w, v] : by_width) {
    measured.x.push_back(w);
    measured.y.push_back(median(v));
    measured.y_low.push_back(*std::min_element(v.begin(), v.end()));
    measured.y_high.push_back(*std::max_element(v.begin(), v.end()));
    wmax = std::max(wmax, w);
  }
  XYChart chart;
  chart.title = "Step time against sequence width";
  chart.x_label = "width (tokens per sequence)";
  chart.y_label = "step time (s)";
  if (a && b) {
    ChartSeries total, lin, quad;
    total.kind = lin.kind = quad.kind = ChartSeries::Kind::kLine;
    total.label = "fit t(w) = " + std::string(cc ? "C + " : "") + "A·w + B·w²";
    lin.label = "linear part A·w";
    quad.label = "quadratic part B·w² (attention)";
    total.color = 0;
    lin.color = 2;
    quad.color = 1;
    lin.dashed = quad.dashed = true;
    for (int i = 0; i <= 60; ++i) {
      const double w = wmax * i / 60.0;
      total.x.push_back(w), lin.x.push_back(w), quad.x.push_back(w);
      total.y.push_back(cc.value_or(0) + *a * w + *b * w * w);
      lin.y.push_back(*a * w);
      quad.y.push_back(*b * w * w);
    }
    chart.series = {total, lin, quad};
    if (auto x = number_at(r, "crossover_width"); x && *x > 0 && *x < wmax) {
      chart.markers.push_back({true, *x, "A/B = " + axis_number(std::round(*x))});
    }
  } else {
    c.note("no coefficients (the fit was refused): only the measured points are drawn");
  }
  measured.color = 6;
  chart.series.push_back(measured);
  c.figure(
      "time", chart.title, render_svg(chart),
      {"input_points[].width/seconds", "coefficients", "crossover_width"},
      "Measured steps with the fitted curve split into its linear and quadratic terms; where the "
      "dashed orange curve overtakes the green one, attention dominates.");
  if (const Json* fp = array_at(r, "points")) {
    ReportTable t;
    t.id = "tab-scaling-fit-points";
    t.title = "Per point";
    t.fields = {SectionBuilder::field_name("points[]")};
    t.header = {"width",  "measured",  "predicted",      "residual",
                "linear", "quadratic", "quadratic share"};
    for (const auto& p : *fp) {
      t.rows.push_back({axis_number(number_at(p, "width").value_or(0)),
                        format_seconds(number_at(p, "seconds").value_or(0)),
                        format_seconds(number_at(p, "predicted_s").value_or(0)),
                        format_seconds(number_at(p, "residual_s").value_or(0)),
                        format_seconds(number_at(p, "linear_s").value_or(0)),
                        format_seconds(number_at(p, "quadratic_s").value_or(0)),
                        pct(number_at(p, "quadratic_share"))});
    }
    c.table(std::move(t));
  }
}
}  // namespace tprobe::core
