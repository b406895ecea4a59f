// Least squares by Householder QR, nested-model F-tests, leave-one-out, and the point readers.
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Strict numeric parsing: the whole field, finite.
std::optional<double> parse_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A measured step time tprobe fits: below a nanosecond or above eleven days per step it is a
// unit mistake or a corrupt file, and near the double limit the sums of squares overflow.
constexpr double kMinStepSeconds = 1e-9;
constexpr double kMaxStepSeconds = 1e6;
bool plausible_seconds(double v) {
  return std::isfinite(v) && v >= kMinStepSeconds && v <= kMaxStepSeconds;
}

// A positive integer no larger than 2^31 (a width or batch, not a count of everything).
std::optional<int64_t> parse_positive_int(const std::string& s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  for (char ch : s) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
  }
  int64_t v = std::stoll(s);
  if (v < 1 || v > (int64_t{1} << 31)) return std::nullopt;
  return v;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = line.find(sep, start);
    out.push_back(trim(std::string_view(line).substr(start, pos - start)));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string format_g(double v) { return fmt::format("{:.4g}", v); }

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
        "--model auto needs at least 4 distinct widths, got {}: it decides between A, B and C by "
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
    dropped.push_back(fmt::format("{} (F = {}, p = {})", weakest->term, format_g(weakest->f),
                                  format_g(weakest->p_value)));
    cur = weakest->reduced;
    if (cur == FitModel::kA) break;
  }
  sel.chosen = cur;
  std::vector<std::string> kept;
  for (const auto& t : last_round) {
    kept.push_back(fmt::format("{} (F = {}, p = {})", t.term, format_g(t.f), format_g(t.p_value)));
  }
  sel.reason = fmt::format(
      "chose {} by backward elimination from ABC with F-tests at alpha = {}: {}{}{}.",
      to_string(cur), format_g(alpha),
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
        format_g(abc.c.value));
    return v;
  }
  v.testable = true;
  v.c_std_error_s = abc.c.std_error;
  FTest t = f_test(fit_model(points, FitModel::kAB), abc, alpha);
  v.f = t.f;
  v.p_value = t.p_value;
  v.needed = t.significant;
  v.verdict = fmt::format("C = {} s ± {} s: {} (F = {}, p = {})", format_g(abc.c.value),
                          format_g(abc.c.std_error.value_or(0)),
                          !t.significant ? "not needed, the step is not launch-bound"
                          : abc.c.value > 0 ? "needed, a fixed per-step cost is real"
                                            : "significant but negative: not a fixed cost, the "
                                              "curve bends more than A·w + B·w² allows",
                          format_g(t.f), format_g(t.p_value));
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

int64_t WidthDistribution::micro_batches() const {
  int64_t n = 0;
  for (const auto& w : widths) n += w.count;
  return n;
}

WidthDistribution read_width_distribution(const std::string& path) {
  Json doc = read_evidence_file(path, "");
  WidthDistribution d;
  d.path = path;
  const std::string name = doc["schema"]["name"].get<std::string>();
  if (name != "tprobe.padding" && name != "tprobe.bucket") {
    fail("'{}' holds '{}' evidence; --widths-from reads tprobe.padding or tprobe.bucket evidence",
         path, name);
  }
  d.probe = name.substr(7);
  const Json& res = doc["results"];
  std::map<int64_t, int64_t> counts;
  int64_t total = 0;
  auto width_of = [&](const Json& v, const std::string& where) -> int64_t {
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 31)) {
      fail("'{}': {} is not a positive integer width (at most 2^31)", path, where);
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
      int64_t& slot = counts[w];
      if (__builtin_add_overflow(slot, e["count"].get<int64_t>(), &slot) ||
          __builtin_add_overflow(total, e["count"].get<int64_t>(), &total)) {
        fail("'{}': {}.count: the micro-batch counts add up past 2^63", path, where);
      }
    }
  } else {
    fail("'{}' ({} evidence) has no micro-batch width distribution: looked for "
         "results.micro_batch_widths and results.width_histogram (`tprobe padding --json` "
         "writes the first)",
         path, name);
  }
  for (const auto& [w, n] : counts) {
    if (n > 0) d.widths.push_back({w, n});
  }
  if (d.widths.empty()) fail("'{}': {} holds no micro-batches", path, d.key);
  const Json& inv = doc.contains("invocation") ? doc["invocation"] : Json();
  if (inv.is_object() && inv.contains("options") && inv["options"].is_object() &&
      inv["options"].contains("micro-batch") && inv["options"]["micro-batch"].is_number_integer()) {
    d.micro_batch = inv["options"]["micro-batch"].get<int64_t>();
  }
  return d;
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

FitPoint parse_point(std::string_view text, const std::string& origin) {
  std::string s(text);
  size_t colon = s.find(':');
  if (colon == std::string::npos) {
    fail_usage("{}: '{}' is not WIDTH:SECONDS (e.g. 2048:1.776)", origin, detail::printable(s));
  }
  auto w = parse_positive_int(trim(s.substr(0, colon)));
  auto t = parse_double(trim(s.substr(colon + 1)));
  if (!w) {
    fail_usage("{}: width '{}' is not a positive integer", origin,
               detail::printable(s.substr(0, colon)));
  }
  if (!t || !plausible_seconds(*t)) {
    fail_usage("{}: seconds '{}' is not a step time in [{:g}, {:g}] s", origin,
               detail::printable(s.substr(colon + 1)), kMinStepSeconds, kMaxStepSeconds);
  }
  FitPoint p;
  p.width = static_cast<double>(*w);
  p.seconds = *t;
  p.origin = origin;
  return p;
}

std::vector<FitPoint> read_points_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open points file '{}'", path);
  std::vector<FitPoint> out;
  std::string line;
  int64_t lineno = 0;
  size_t columns = 0;  // fixed by the header or the first data row
  bool seen_row = false;
  constexpr size_t kMaxLine = 4096;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.size() > kMaxLine) fail("{}:{}: line longer than {} bytes", path, lineno, kMaxLine);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    std::vector<std::string> f = split(t, ',');
    if (!seen_row && !parse_double(f[0])) {
      // A header: it must name the columns this reader understands, in order.
      bool ok = (f.size() == 2 || f.size() == 3) && f[0] == "width" && f[1] == "seconds" &&
                (f.size() == 2 || f[2] == "batch");
      if (!ok) {
        fail("{}:{}: header '{}' is not 'width,seconds' or 'width,seconds,batch'", path, lineno,
             detail::printable(t));
      }
      columns = f.size();
      seen_row = true;
      continue;
    }
    seen_row = true;
    if (f.size() != 2 && f.size() != 3) {
      fail("{}:{}: expected width,seconds[,batch] (2 or 3 fields), got {}", path, lineno, f.size());
    }
    if (columns != 0 && f.size() != columns) {
      fail("{}:{}: {} fields where earlier rows have {}", path, lineno, f.size(), columns);
    }
    columns = f.size();
    FitPoint p;
    auto w = parse_positive_int(f[0]);
    if (!w) {
      fail("{}:{}: width '{}' is not a positive integer", path, lineno, detail::printable(f[0]));
    }
    auto s = parse_double(f[1]);
    if (!s || !plausible_seconds(*s)) {
      fail("{}:{}: seconds '{}' is not a step time in [{:g}, {:g}] s", path, lineno,
           detail::printable(f[1]),
           kMinStepSeconds, kMaxStepSeconds);
    }
    p.width = static_cast<double>(*w);
    p.seconds = *s;
    if (f.size() == 3) {
      auto b = parse_positive_int(f[2]);
      if (!b) {
        fail("{}:{}: batch '{}' is not a positive integer", path, lineno,
             detail::printable(f[2]));
      }
      p.batch = *b;
    }
    p.origin = fmt::format("{}:{}", path, lineno);
    out.push_back(std::move(p));
  }
  if (in.bad()) fail("error reading points file '{}'", path);
  if (out.empty()) fail("points file '{}' has no data rows", path);
  return out;
}

std::vector<FitPoint> read_points_profile(const std::string& path,
                                          std::vector<std::string>* skipped) {
  Json doc = read_evidence_file(path, "profile");
  const Json& res = doc["results"];
  if (!res.contains("points") || !res["points"].is_array()) {
    fail("'{}': results.points is missing or not an array", path);
  }
  const Json& pts = res["points"];
  std::vector<FitPoint> out;
  for (size_t i = 0; i < pts.size(); ++i) {
    const Json& p = pts[i];
    std::string where = fmt::format("results.points[{}]", i);
    if (!p.is_object()) fail("'{}': {} is not an object", path, where);
    auto int_field = [&](const char* key) {
      if (!p.contains(key) || !p[key].is_number_integer() || p[key].get<int64_t>() < 1) {
        fail("'{}': {}.{} is missing or not a positive integer", path, where, key);
      }
      return p[key].get<int64_t>();
    };
    int64_t batch = int_field("batch");
    int64_t width = int_field("width");
    if (!p.contains("outcome") || !p["outcome"].is_string()) {
      fail("'{}': {}.outcome is missing or not a string", path, where);
    }
    std::string outcome = p["outcome"].get<std::string>();
    if (outcome != "ok") {
      if (skipped) {
        std::string msg = p.contains("message") && p["message"].is_string()
                              ? ": " + p["message"].get<std::string>() : "";
        skipped->push_back(fmt::format("{} {} (batch {}, width {}): {}{}", path, where, batch,
                                       width, outcome, msg));
      }
      continue;
    }
    if (!p.contains("samples_s") || !p["samples_s"].is_array() || p["samples_s"].empty()) {
      fail("'{}': {}.samples_s is missing, not an array, or empty", path, where);
    }
    const Json& samples = p["samples_s"];
    for (size_t k = 0; k < samples.size(); ++k) {
      const Json& s = samples[k];
      if (!s.is_number() || !plausible_seconds(s.get<double>())) {
        fail("'{}': {}.samples_s[{}] is not a step time in [{:g}, {:g}] s", path, where, k,
             kMinStepSeconds, kMaxStepSeconds);
      }
      FitPoint fp;
      fp.width = static_cast<double>(width);
      fp.seconds = s.get<double>();
      fp.batch = batch;
      fp.origin = fmt::format("{} {}.samples_s[{}]", path, where, k);
      out.push_back(std::move(fp));
    }
  }
  return out;
}

int64_t select_batch(std::vector<FitPoint>& points, std::optional<int64_t> batch,
                     std::vector<std::string>* dropped) {
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
    fail("the points are at {} different batches ({}): a fit is at one batch, choose it with "
         "--batch",
         seen.size(), fmt::join(seen, ", "));
  }
  return seen.empty() ? 0 : *seen.begin();
}

}  // namespace tprobe::core
