// Least squares by Householder QR, nested-model F-tests, leave-one-out, the scaling analysis.
#include "tprobe/core/cost/scaling_fit.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/median.hpp"
#include "tprobe/core/base/table.hpp"

namespace tprobe::core {
namespace {

// Least-squares solution of X·beta ≈ y (n rows, p columns, n ≥ p).
struct Lsq {
  bool full_rank = false;
  std::vector<double> beta;
  std::vector<std::vector<double>> xtx_inv;  // (XᵀX)⁻¹ in the original (unscaled) units
  std::vector<double> leverage;              // h_ii, the diagonal of the hat matrix
};

// Householder QR of the column-scaled design. Scaling each column to unit max makes w and w²
// (2e3 vs 3e8 at 16k tokens) comparable, so the rank test and R's conditioning mean something.
Lsq least_squares(const std::vector<std::vector<double>>& cols, const std::vector<double>& y) {
  const size_t p = cols.size();
  const size_t n = y.size();
  Lsq out;
  if (n < p || p == 0) return out;
  std::vector<double> scale(p, 1.0);
  std::vector<std::vector<double>> a = cols;  // a[j][i]: column j, row i
  for (size_t j = 0; j < p; ++j) {
    double m = 0;
    for (double v : a[j]) m = std::max(m, std::fabs(v));
    if (m == 0) return out;
    scale[j] = m;
    for (double& v : a[j]) v /= m;
  }
  std::vector<double> qty = y;
  std::vector<double> diag(p, 0.0);
  for (size_t k = 0; k < p; ++k) {
    double norm = 0;
    for (size_t i = k; i < n; ++i) norm = std::hypot(norm, a[k][i]);
    if (norm == 0) return out;
    double alpha = a[k][k] > 0 ? -norm : norm;
    // v = x - alpha·e1, stored in a[k][k..n); H = I - 2 v vᵀ / (vᵀv).
    a[k][k] -= alpha;
    double vtv = 0;
    for (size_t i = k; i < n; ++i) vtv += a[k][i] * a[k][i];
    auto reflect = [&](std::vector<double>& x) {
      double dot = 0;
      for (size_t i = k; i < n; ++i) dot += a[k][i] * x[i];
      double f = 2 * dot / vtv;
      for (size_t i = k; i < n; ++i) x[i] -= f * a[k][i];
    };
    for (size_t j = k + 1; j < p; ++j) reflect(a[j]);
    reflect(qty);
    diag[k] = alpha;
  }
  // R: diag on the diagonal, a[j][k] (k < j) above it.
  auto r = [&](size_t row, size_t col) { return row == col ? diag[row] : a[col][row]; };
  double rmax = 0;
  for (double d : diag) rmax = std::max(rmax, std::fabs(d));
  for (double d : diag) {
    if (std::fabs(d) <= 1e-10 * rmax) return out;
  }
  std::vector<double> bs(p, 0.0);
  for (size_t ii = p; ii-- > 0;) {
    double s = qty[ii];
    for (size_t j = ii + 1; j < p; ++j) s -= r(ii, j) * bs[j];
    bs[ii] = s / r(ii, ii);
  }
  // R⁻¹ (upper triangular), then (RᵀR)⁻¹ = R⁻¹ R⁻ᵀ, then undo the scaling.
  std::vector<std::vector<double>> rinv(p, std::vector<double>(p, 0.0));
  for (size_t col = 0; col < p; ++col) {
    for (size_t ii = col + 1; ii-- > 0;) {
      double s = ii == col ? 1.0 : 0.0;
      for (size_t j = ii + 1; j <= col; ++j) s -= r(ii, j) * rinv[j][col];
      rinv[ii][col] = s / r(ii, ii);
    }
  }
  out.xtx_inv.assign(p, std::vector<double>(p, 0.0));
  for (size_t i = 0; i < p; ++i) {
    for (size_t j = 0; j < p; ++j) {
      double s = 0;
      for (size_t k = std::max(i, j); k < p; ++k) s += rinv[i][k] * rinv[j][k];
      out.xtx_inv[i][j] = s / (scale[i] * scale[j]);
    }
  }
  // Leverages from the scaled design, h_ii = |R⁻ᵀ x_i|², for the closed-form leave-one-out.
  out.leverage.assign(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    double h = 0;
    for (size_t k = 0; k < p; ++k) {
      double z = 0;
      for (size_t j = 0; j <= k; ++j) z += rinv[j][k] * cols[j][i] / scale[j];
      h += z * z;
    }
    out.leverage[i] = h;
  }
  out.beta.resize(p);
  for (size_t j = 0; j < p; ++j) out.beta[j] = bs[j] / scale[j];
  out.full_rank = true;
  return out;
}

int count_distinct_widths(const std::vector<FitPoint>& points) {
  std::set<double> w;
  for (const auto& p : points) w.insert(p.width);
  return static_cast<int>(w.size());
}

std::string parameter_names(FitModel model) {
  switch (model) {
    case FitModel::kA: return "A";
    case FitModel::kAB: return "A and B";
    case FitModel::kAC: return "A and C";
    case FitModel::kABC: return "A, B and C";
  }
  return "?";
}

ModelFit fit_core(const std::vector<FitPoint>& points, FitModel model) {
  ModelFit fit;
  fit.model = model;
  fit.points = static_cast<int>(points.size());
  fit.parameters = parameter_count(model);
  fit.distinct_widths = count_distinct_widths(points);
  if (fit.distinct_widths < fit.parameters) {
    fit.refusal = fmt::format(
        "model {} has {} parameter{} ({}) and needs at least {} distinct widths to determine "
        "them; got {}: through fewer widths than parameters a whole family of curves fits "
        "equally well, so no coefficient would mean anything",
        to_string(model), fit.parameters, fit.parameters == 1 ? "" : "s", parameter_names(model),
        fit.parameters, fit.distinct_widths);
    return fit;
  }
  std::vector<std::vector<double>> cols;
  std::vector<double> y;
  for (const auto& p : points) y.push_back(p.seconds);
  auto column = [&](auto f) {
    std::vector<double> c;
    for (const auto& p : points) c.push_back(f(p.width));
    cols.push_back(std::move(c));
  };
  if (has_constant(model)) column([](double) { return 1.0; });
  column([](double w) { return w; });
  if (has_quadratic(model)) column([](double w) { return w * w; });
  Lsq lsq = least_squares(cols, y);
  bool finite = true;
  for (double b : lsq.beta) finite = finite && std::isfinite(b);
  if (lsq.full_rank && !finite) {
    // Inputs are range-checked, so this is a numerically hopeless design; a NaN coefficient
    // must not be reported as a fit.
    fit.refusal = fmt::format("model {}: the least-squares solution is not finite; the points "
                              "are numerically degenerate",
                              to_string(model));
    return fit;
  }
  if (!lsq.full_rank) {
    fit.refusal = fmt::format("model {}: the widths do not separate its terms numerically "
                              "(rank-deficient design); use widths further apart",
                              to_string(model));
    return fit;
  }
  fit.determined = true;
  fit.dof = fit.points - fit.parameters;
  fit.exact = fit.dof == 0;
  size_t j = 0;
  size_t ic = 0, ia = 0, ib = 0;
  if (has_constant(model)) { ic = j; fit.c.value = lsq.beta[j++]; }
  ia = j; fit.a.value = lsq.beta[j++];
  if (has_quadratic(model)) { ib = j; fit.b.value = lsq.beta[j++]; }
  for (const auto& p : points) {
    WidthTerms t = fit.at(p.width);
    fit.rss += (p.seconds - t.predicted_s) * (p.seconds - t.predicted_s);
  }
  if (fit.dof > 0) {
    double s2 = fit.rss / fit.dof;
    fit.residual_std_s = std::sqrt(s2);
    auto se = [&](size_t k) { return std::sqrt(std::max(0.0, s2 * lsq.xtx_inv[k][k])); };
    fit.a.std_error = se(ia);
    if (has_quadratic(model)) fit.b.std_error = se(ib);
    if (has_constant(model)) fit.c.std_error = se(ic);
  }
  for (const auto& p : points) {
    WidthTerms t = fit.at(p.width);
    PointFit pf;
    pf.width = p.width;
    pf.seconds = p.seconds;
    pf.predicted_s = t.predicted_s;
    pf.residual_s = p.seconds - t.predicted_s;
    pf.residual_ratio = pf.residual_s / p.seconds;
    pf.constant_s = t.constant_s;
    pf.linear_s = t.linear_s;
    pf.quadratic_s = t.quadratic_s;
    pf.quadratic_share = t.quadratic_share;
    fit.per_point.push_back(pf);
  }
  if (has_quadratic(model) && fit.b.value != 0) fit.crossover_width = fit.a.value / fit.b.value;
  // Leave-one-out: the prediction of the fit without point i misses it by e_i / (1 − h_ii)
  // (the deleted-residual identity of linear least squares, exact, O(n) instead of n refits).
  // Only reported when every reduced fit is determined, i.e. no point is the last one at a
  // width that the model needs; otherwise some point could not be predicted at all.
  std::map<double, int> at_width;
  for (const auto& p : points) at_width[p.width] += 1;
  bool loo_defined = fit.points >= 2;
  for (const auto& p : points) {
    if (at_width[p.width] == 1 && fit.distinct_widths - 1 < fit.parameters) loo_defined = false;
  }
  for (size_t i = 0; loo_defined && i < points.size(); ++i) {
    loo_defined = 1.0 - lsq.leverage[i] > 1e-12;  // numerically a lone point
  }
  if (loo_defined) {
    double sum2 = 0, maxabs = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      double e = fit.per_point[i].residual_s / (1.0 - lsq.leverage[i]);
      fit.per_point[i].loo_error_s = e;
      fit.per_point[i].loo_predicted_s = points[i].seconds - e;
      sum2 += e * e;
      maxabs = std::max(maxabs, std::fabs(e));
    }
    fit.loo_rms_s = std::sqrt(sum2 / static_cast<double>(points.size()));
    fit.loo_max_abs_s = maxabs;
  }
  return fit;
}


}  // namespace

const char* to_string(FitModel model) {
  switch (model) {
    case FitModel::kA: return "A";
    case FitModel::kAB: return "AB";
    case FitModel::kAC: return "AC";
    case FitModel::kABC: return "ABC";
  }
  return "?";
}

std::optional<FitModel> parse_fit_model(std::string_view text) {
  std::string up;
  for (char ch : text) up.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
  if (up == "A") return FitModel::kA;
  if (up == "AB") return FitModel::kAB;
  if (up == "AC") return FitModel::kAC;
  if (up == "ABC") return FitModel::kABC;
  return std::nullopt;
}

int parameter_count(FitModel model) {
  return 1 + (has_quadratic(model) ? 1 : 0) + (has_constant(model) ? 1 : 0);
}
bool has_quadratic(FitModel model) { return model == FitModel::kAB || model == FitModel::kABC; }
bool has_constant(FitModel model) { return model == FitModel::kAC || model == FitModel::kABC; }

WidthTerms ModelFit::at(double width) const {
  WidthTerms t;
  t.width = width;
  t.constant_s = c.value;
  t.linear_s = a.value * width;
  t.quadratic_s = b.value * width * width;
  t.predicted_s = t.constant_s + t.linear_s + t.quadratic_s;
  t.quadratic_share = t.predicted_s != 0 ? t.quadratic_s / t.predicted_s : 0.0;
  return t;
}

ModelFit fit_model(const std::vector<FitPoint>& points, FitModel model) {
  return fit_core(points, model);
}

double regularized_incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  // Continued fraction (modified Lentz), which converges fast for x < (a+1)/(a+b+2);
  // the symmetry I_x(a,b) = 1 - I_{1-x}(b,a) covers the rest.
  if (x > (a + 1) / (a + b + 2)) return 1 - regularized_incomplete_beta(b, a, 1 - x);
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                           a * std::log(x) + b * std::log1p(-x);
  const double tiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    double m2 = 2.0 * m;
    double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + num * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + num / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + num * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + num / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_front) * h / a;
}

double f_distribution_sf(double f, double d1, double d2) {
  if (std::isnan(f)) return 1;
  if (f <= 0) return 1;
  if (std::isinf(f)) return 0;
  return regularized_incomplete_beta(d2 / 2, d1 / 2, d2 / (d2 + d1 * f));
}

FTest f_test(const ModelFit& reduced, const ModelFit& full, double alpha) {
  FTest t;
  t.reduced = reduced.model;
  t.full = full.model;
  t.term = has_constant(full.model) && !has_constant(reduced.model) ? "C" : "B";
  t.df_num = full.parameters - reduced.parameters;
  t.df_den = full.dof;
  double gain = std::max(0.0, reduced.rss - full.rss);
  // Sums of squares at roundoff level count as zero: an exact fit of noise-free data.
  double scale = 0;
  for (const auto& p : full.per_point) scale += p.seconds * p.seconds;
  double floor = 1e-24 * scale;
  if (t.df_den <= 0 || t.df_num <= 0) {
    t.f = std::numeric_limits<double>::quiet_NaN();
    t.p_value = 1;
  } else if (full.rss <= floor) {
    t.f = gain <= floor ? 0.0 : std::numeric_limits<double>::infinity();
    t.p_value = gain <= floor ? 1.0 : 0.0;
  } else {
    t.f = (gain / t.df_num) / (full.rss / t.df_den);
    t.p_value = f_distribution_sf(t.f, t.df_num, t.df_den);
  }
  t.significant = t.p_value < alpha;
  return t;
}

ModelSelection select_model(const std::vector<FitPoint>& points, double alpha) {
  ModelSelection sel;
  int distinct = count_distinct_widths(points);
  if (distinct < 4) {
    sel.refusal = fmt::format(
        "the auto fit form needs at least 4 distinct widths, got {}: it decides between A, B and C by "
        "testing whether each term explains more than the residual noise, and the largest model "
        "(3 parameters) must leave at least one degree of freedom over the widths to be tested; "
        "through {} width{} a model of {} parameter{} fits exactly and tests nothing",
        distinct, distinct, distinct == 1 ? "" : "s", distinct, distinct == 1 ? "" : "s");
    return sel;
  }
  sel.possible = true;
  FitModel cur = FitModel::kABC;
  std::vector<std::string> dropped;
  std::vector<FTest> last_round;
  while (true) {
    ModelFit full = fit_model(points, cur);
    std::vector<FTest> round;
    if (has_constant(cur)) {
      FitModel red = cur == FitModel::kABC ? FitModel::kAB : FitModel::kA;
      round.push_back(f_test(fit_model(points, red), full, alpha));
    }
    if (has_quadratic(cur)) {
      FitModel red = cur == FitModel::kABC ? FitModel::kAC : FitModel::kA;
      round.push_back(f_test(fit_model(points, red), full, alpha));
    }
    for (const auto& t : round) sel.tests.push_back(t);
    const FTest* weakest = nullptr;
    for (const auto& t : round) {
      if (!t.significant && (!weakest || t.p_value > weakest->p_value)) weakest = &t;
    }
    if (!weakest) {
      last_round = round;
      break;
    }
    dropped.push_back(fmt::format("{} (F = {}, p = {})", weakest->term, format_g4(weakest->f),
                                  format_g4(weakest->p_value)));
    cur = weakest->reduced;
    if (cur == FitModel::kA) break;
  }
  sel.chosen = cur;
  std::vector<std::string> kept;
  for (const auto& t : last_round) {
    kept.push_back(fmt::format("{} (F = {}, p = {})", t.term, format_g4(t.f), format_g4(t.p_value)));
  }
  sel.reason = fmt::format(
      "chose {} by backward elimination from ABC with F-tests at alpha = {}: {}{}{}.",
      to_string(cur), format_g4(alpha),
      dropped.empty() ? "dropped nothing" : "dropped " + fmt::format("{}", fmt::join(dropped, ", then ")),
      kept.empty() ? "" : "; kept ",
      kept.empty() ? "" : fmt::format("{}", fmt::join(kept, " and ")));
  return sel;
}

FixedTermVerdict fixed_term_verdict(const std::vector<FitPoint>& points, double alpha) {
  FixedTermVerdict v;
  ModelFit abc = fit_model(points, FitModel::kABC);
  int distinct = count_distinct_widths(points);
  if (!abc.determined) {
    v.verdict = fmt::format("C cannot be estimated from {} distinct width{}: A, B and C need 3",
                            distinct, distinct == 1 ? "" : "s");
    return v;
  }
  v.c_s = abc.c.value;
  if (distinct < 4) {
    v.verdict = fmt::format(
        "C = {} s from an exact fit through 3 widths: untestable (a fourth width is needed to "
        "tell a fixed term from curvature)",
        format_g4(abc.c.value));
    return v;
  }
  v.testable = true;
  v.c_std_error_s = abc.c.std_error;
  FTest t = f_test(fit_model(points, FitModel::kAB), abc, alpha);
  v.f = t.f;
  v.p_value = t.p_value;
  // A verdict the next run repeats: both definite outcomes need C's two-sided confidence
  // interval at level 1 - alpha/5 (99 % at the default alpha) wholly on one side of what would
  // matter, 5 % of the quickest measured step. Two runs whose intervals each cover the true C
  // cannot then disagree; an interval across the line is undetermined.
  const double level = alpha / 5;
  double quickest = std::numeric_limits<double>::infinity();
  for (const auto& p : points) quickest = std::min(quickest, p.seconds);
  const double material = 0.05 * quickest;
  v.material_s = material;
  std::string why;
  if (t.df_den < 2 || !abc.c.std_error) {
    v.outcome = "undetermined";
    why = fmt::format("undetermined: {} widths leave the ABC fit one residual degree of freedom, "
                      "and F(1, 1) is too wide for the verdict to repeat on a second run; two "
                      "more widths are needed",
                      distinct);
  } else {
    // t_{1 - level/2, d}: t^2 follows F(1, d); the quantile by bisection on its upper tail.
    double lo = 0, hi = 1e8;
    for (int i = 0; i < 300; ++i) {
      const double mid = 0.5 * (lo + hi);
      (f_distribution_sf(mid, 1, t.df_den) > level ? lo : hi) = mid;
    }
    const double half = std::sqrt(hi) * *abc.c.std_error;
    const double c_lo = abc.c.value - half, c_hi = abc.c.value + half;
    v.c_low_s = c_lo;
    v.c_high_s = c_hi;
    const std::string ci = fmt::format("C in [{}, {}] s at {} %", format_g4(c_lo), format_g4(c_hi),
                                       format_g4(100 * (1 - level)));
    if (c_lo > material) {
      v.outcome = "needed";
      why = fmt::format("needed, a fixed per-step cost is real: {}, above 5 % of the quickest "
                        "step ({} s)",
                        ci, format_g4(material));
    } else if (c_hi < 0) {
      v.outcome = "negative";
      why = fmt::format("negative: {}: not a fixed cost, the curve bends more than A·w + B·w² "
                        "allows",
                        ci);
    } else if (c_hi < material && c_lo > -material) {
      v.outcome = "not needed";
      why = fmt::format("not needed, the step is not launch-bound: {}, within 5 % of the quickest "
                        "step ({} s)",
                        ci, format_g4(material));
    } else {
      v.outcome = "undetermined";
      why = fmt::format("undetermined: {} reaches across 5 % of the quickest step ({} s), so a "
                        "second run can fall on either side",
                        ci, format_g4(material));
    }
  }
  v.needed = v.outcome == "needed";
  v.verdict = fmt::format("C = {} s ± {} s: {} (F = {}, p = {}, {} residual degree{} of freedom)",
                          format_g4(abc.c.value), format_g4(abc.c.std_error.value_or(0)), why,
                          format_g4(t.f), format_g4(t.p_value), t.df_den, t.df_den == 1 ? "" : "s");
  return v;
}

std::vector<FitPoint> median_per_width(const std::vector<FitPoint>& points) {
  std::map<double, std::vector<const FitPoint*>> groups;
  for (const auto& p : points) groups[p.width].push_back(&p);
  std::vector<FitPoint> out;
  for (const auto& [w, group] : groups) {
    std::vector<double> secs;
    FitPoint m;
    m.width = w;
    m.batch = group.front()->batch;
    for (const FitPoint* p : group) secs.push_back(p->seconds);
    m.seconds = median(secs);
    m.origin = group.size() == 1 ? group.front()->origin
                                 : fmt::format("median of {} samples ({}, ...)", group.size(),
                                               group.front()->origin);
    out.push_back(std::move(m));
  }
  return out;
}

WeightedShare weighted_quadratic_share(const ModelFit& fit, const WidthDistribution& widths) {
  WeightedShare s;
  double wsum = 0;
  for (const auto& wc : widths.widths) {
    WidthTerms t = fit.at(static_cast<double>(wc.width));
    double n = static_cast<double>(wc.count);
    s.micro_batches += wc.count;
    s.predicted_total_s += n * t.predicted_s;
    s.quadratic_total_s += n * t.quadratic_s;
    wsum += n * static_cast<double>(wc.width);
  }
  if (s.predicted_total_s != 0) s.quadratic_share = s.quadratic_total_s / s.predicted_total_s;
  if (s.micro_batches > 0) s.mean_width = wsum / static_cast<double>(s.micro_batches);
  return s;
}

int64_t select_batch(std::vector<FitPoint>& points, std::optional<int64_t> batch,
                     std::vector<std::string>* dropped, const std::string& batch_option) {
  if (batch) {
    std::vector<FitPoint> kept;
    for (auto& p : points) {
      if (p.batch != 0 && p.batch != *batch) {
        if (dropped) {
          dropped->push_back(fmt::format("{}: batch {}, not {}", p.origin, p.batch, *batch));
        }
        continue;
      }
      p.batch = *batch;
      kept.push_back(std::move(p));
    }
    points = std::move(kept);
    return *batch;
  }
  std::set<int64_t> seen;
  for (const auto& p : points) {
    if (p.batch != 0) seen.insert(p.batch);
  }
  if (seen.size() > 1) {
    fail("the points are at {} different batches ({}): a fit is at one batch; choose it with {}",
         seen.size(), fmt::join(seen, ", "), batch_option);
  }
  return seen.empty() ? 0 : *seen.begin();
}

}  // namespace tprobe::core
