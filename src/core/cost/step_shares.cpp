// Fit share vs parts share, decomposed into measured terms (step_shares.hpp says how).
#include "tprobe/core/cost/step_shares.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"

namespace tprobe::core {

namespace {

// The series fitted with `model` at the check's widths, each width weighted by its repeats (as
// the step's fit over every repeat weighs it).
std::optional<ModelFit> fit_series(const ShareCheckInput& in, const std::vector<double>& y) {
  std::vector<FitPoint> points;
  for (size_t i = 0; i < in.widths.size(); ++i) {
    for (int r = 0; r < std::max(1, in.repeats[i]); ++r)
      points.push_back({in.widths[i], y[i], 0, ""});
  }
  ModelFit f = fit_model(points, in.model);
  if (!f.determined) return std::nullopt;
  return f;
}

double quadratic_at(const ModelFit& f, double w) { return f.b.value * w * w; }

}  // namespace

ShareCheck check_quadratic_shares(const ShareCheckInput& in) {
  ShareCheck c;
  c.model = in.model;
  c.threshold = in.threshold;
  const size_t n = in.widths.size();
  if (in.step_s.size() != n || in.repeats.size() != n)
    fail("check_quadratic_shares: {} widths, {} step times, {} repeat counts", n, in.step_s.size(),
         in.repeats.size());
  for (const auto& p : in.parts) {
    if (p.seconds.size() != n) fail("check_quadratic_shares: series {} has {} values for {} widths",
                                    p.name, p.seconds.size(), n);
    if (p.quadratic) c.quadratic_parts.push_back(p.name);
  }
  if (!has_quadratic(in.model)) {
    c.refusal = fmt::format("the step's fit form {} has no quadratic term", to_string(in.model));
    return c;
  }
  auto step = fit_series(in, in.step_s);
  if (!step) {
    c.refusal = fmt::format("{} traced width(s): too few for the {} fit", n, to_string(in.model));
    return c;
  }
  std::vector<double> remainder(in.step_s);
  std::vector<ModelFit> fits;
  for (const auto& p : in.parts) {
    for (size_t i = 0; i < n; ++i) remainder[i] -= p.seconds[i];
    fits.push_back(*fit_series(in, p.seconds));
  }
  const ModelFit rest = *fit_series(in, remainder);
  c.determined = true;
  for (size_t i = 0; i < n; ++i) {
    const double w = in.widths[i];
    const double t = in.step_s[i];
    const double t_hat = step->at(w).predicted_s;
    ShareCheckRow row;
    row.width = w;
    row.fit_quadratic_share = quadratic_at(*step, w) / t_hat;
    for (size_t p = 0; p < in.parts.size(); ++p) {
      const PartSeries& s = in.parts[p];
      const double q = quadratic_at(fits[p], w) / t_hat;
      if (s.quadratic) {
        row.parts_quadratic_share += s.seconds[i] / t;
        row.terms.push_back({"linear term and residual of " + s.name, -(s.seconds[i] / t - q)});
      } else {
        row.terms.push_back({"quadratic growth of " + s.name, q});
      }
    }
    row.terms.push_back({"quadratic growth of the remainder (step - traced kernels: idle, host "
                         "waits, overlap)",
                         quadratic_at(rest, w) / t_hat});
    row.difference = row.fit_quadratic_share - row.parts_quadratic_share;
    std::sort(row.terms.begin(), row.terms.end(), [](const ShareTerm& a, const ShareTerm& b) {
      return std::fabs(a.share) > std::fabs(b.share);
    });
    row.explained = true;  // the terms add up to the difference by construction
    c.rows.push_back(std::move(row));
  }
  return c;
}

Json to_json(const ShareCheck& c) {
  Json out;
  out["determined"] = c.determined;
  out["refusal"] = c.refusal.empty() ? Json(nullptr) : Json(c.refusal);
  out["model"] = to_string(c.model);
  out["threshold_ratio"] = c.threshold;
  out["quadratic_parts"] = c.quadratic_parts;
  out["rows"] = Json::array();
  for (const auto& r : c.rows) {
    Json terms = Json::array();
    for (const auto& t : r.terms) terms.push_back({{"term", t.name}, {"share_ratio", t.share}});
    out["rows"].push_back({{"width", r.width},
                           {"fit_quadratic_share_ratio", r.fit_quadratic_share},
                           {"parts_quadratic_share_ratio", r.parts_quadratic_share},
                           {"difference_ratio", r.difference},
                           {"within_threshold", std::fabs(r.difference) <= c.threshold},
                           {"terms", std::move(terms)}});
  }
  return out;
}

ShareCheck share_check_from_json(const Json& j, const std::string& where) {
  namespace jr = json_read;
  if (!j.is_object()) fail("{} must be an object", where);
  ShareCheck c;
  c.determined = jr::boolean(j, "determined", where);
  const std::optional<std::string> refusal = jr::nullable_string(j, "refusal", where);
  if (refusal) {
    if (refusal->empty()) fail("{}.refusal: empty (written null when there is none)", where);
    c.refusal = *refusal;
  }
  c.model = jr::enum_value(j, "model", where,
                           {FitModel::kA, FitModel::kAB, FitModel::kAC, FitModel::kABC});
  c.threshold = jr::number(j, "threshold_ratio", where);
  if (c.threshold < 0) fail("{}.threshold_ratio: negative", where);
  c.quadratic_parts = jr::strings(j, "quadratic_parts", where);
  const Json& rows = jr::array(j, "rows", where);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string w = jr::at(where, "rows", i);
    const Json& x = rows[i];
    ShareCheckRow r;
    r.width = jr::number(x, "width", w);
    r.fit_quadratic_share = jr::number(x, "fit_quadratic_share_ratio", w);
    r.parts_quadratic_share = jr::number(x, "parts_quadratic_share_ratio", w);
    r.difference = jr::number(x, "difference_ratio", w);
    if (jr::boolean(x, "within_threshold", w) != (std::fabs(r.difference) <= c.threshold))
      fail("{}.within_threshold: not what difference_ratio and the threshold say", w);
    const Json& terms = jr::array(x, "terms", w);
    for (std::size_t k = 0; k < terms.size(); ++k) {
      const std::string tw = jr::at(w, "terms", k);
      r.terms.push_back({jr::string(terms[k], "term", tw), jr::number(terms[k], "share_ratio", tw)});
    }
    r.explained = true;  // not written: check_quadratic_shares sets it on every row it writes
    c.rows.push_back(std::move(r));
  }
  return c;
}

}  // namespace tprobe::core
