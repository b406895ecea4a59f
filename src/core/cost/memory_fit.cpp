// Peak memory against the micro-batch shape: the exact singularity test, modified Gram–Schmidt in
// long double, the quadratic term's F-test, the edges of a budget and their check; JSON views.
#include "tprobe/core/cost/memory_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "base/checked_math.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/cost/scaling_fit.hpp"

namespace tprobe::core {
namespace {

__extension__ using Int128 = __int128;

// Below this share of b·w²'s spread left once b·w is projected out (1 − r² of the two columns)
// the design is numerically one line: the coefficients would be roundoff, not memory.
constexpr long double kMinIndependence = 1e-12L;

const char* peak_name(bool reserved) { return reserved ? "peak reserved" : "peak allocated"; }

int64_t fitted_peak(const MemoryFitPoint& p, bool reserved) {
  return reserved ? p.peak_reserved_bytes : p.peak_allocated_bytes;
}

std::string shape(int64_t batch, int64_t width) { return fmt::format("{}x{}", batch, width); }

std::string signed_bytes(double bytes) {
  return bytes >= 0 ? "+" + format_bytes(bytes) : format_bytes(bytes);
}

void check_batch(int64_t batch, const std::string& what) {
  if (batch < 1 || batch > kMaxMemoryFitBatch) {
    fail_usage("{}: batch {} is outside 1..{}", what, batch, kMaxMemoryFitBatch);
  }
}

void check_width(int64_t width, const std::string& what) {
  if (width < 1 || width > kMaxMemoryFitWidth) {
    fail_usage("{}: width {} is outside 1..{}", what, width, kMaxMemoryFitWidth);
  }
}

// `needs_peak`: the point is fitted or checked against a prediction, so the peak `reserved`
// names must be positive (an OOM point's may be 0: unknown).
void check_point(const MemoryFitPoint& p, const std::string& what, bool reserved) {
  check_batch(p.batch, what);
  check_width(p.width, what);
  if (p.peak_allocated_bytes < 0 || p.peak_reserved_bytes < 0) {
    fail_usage("{} ({}): a negative peak ({} allocated, {} reserved bytes)", what,
               shape(p.batch, p.width), p.peak_allocated_bytes, p.peak_reserved_bytes);
  }
  if (!p.oom && fitted_peak(p, reserved) <= 0) {
    fail_usage("{} ({}): ran without running out of memory but its {} is {} bytes; a measured "
               "peak is positive",
               what, shape(p.batch, p.width), peak_name(reserved), fitted_peak(p, reserved));
  }
  if (p.peak_allocated_bytes > 0 && p.peak_reserved_bytes > 0 &&
      p.peak_reserved_bytes < p.peak_allocated_bytes) {
    fail_usage("{} ({}): peak reserved {} is below peak allocated {}; the caching allocator "
               "reserves at least what it allocates",
               what, shape(p.batch, p.width), p.peak_reserved_bytes, p.peak_allocated_bytes);
  }
}

void check_usable(const MemoryFit& fit) {
  if (!fit.ok) fail("no memory fit to predict from: {}", fit.why_not);
  if (!std::isfinite(fit.c0) || !std::isfinite(fit.c1) || !std::isfinite(fit.c2)) {
    fail("memory fit coefficients are not finite (c0 = {}, c1 = {}, c2 = {})", fit.c0, fit.c1,
         fit.c2);
  }
}

// The design values of a range-checked shape: b·w ≤ 2^38 and b·w² ≤ 2^60, exact as int64 and as
// long double (64-bit mantissa). The checked products are a second guard, not the range check.
std::pair<int64_t, int64_t> design(int64_t batch, int64_t width) {
  int64_t tokens = detail::mul_or_refuse(batch, width, "memory model tokens b·w");
  int64_t token_width = detail::mul_or_refuse(tokens, width, "memory model b·w²");
  return {tokens, token_width};
}

// The prediction of a usable fit at a range-checked shape, in long double.
long double peak_at(const MemoryFit& fit, int64_t batch, int64_t width) {
  auto [x1, x2] = design(batch, width);
  return static_cast<long double>(fit.c0) +
         static_cast<long double>(fit.c1) * static_cast<long double>(x1) +
         static_cast<long double>(fit.c2) * static_cast<long double>(x2);
}

// Every (x1, x2) on one line, decided exactly: the cross product of (p_j − p_0) and (p_k − p_0)
// is zero for all k. Differences are below 2^60 and their products below 2^99.
bool all_collinear(const std::vector<std::pair<int64_t, int64_t>>& design_points) {
  const auto& p0 = design_points[0];
  size_t j = 1;
  while (j < design_points.size() && design_points[j] == p0) ++j;
  if (j == design_points.size()) return true;
  const Int128 dx = Int128{design_points[j].first} - p0.first;
  const Int128 dy = Int128{design_points[j].second} - p0.second;
  for (const auto& p : design_points) {
    const Int128 ex = Int128{p.first} - p0.first;
    const Int128 ey = Int128{p.second} - p0.second;
    if (dx * ey - dy * ex != 0) return false;
  }
  return true;
}


void quadratic_test(MemoryFit& fit, long double rss, long double independent_ss,
                    long double sum_y2) {
  QuadraticTermTest& t = fit.c2_test;
  t.dof = fit.dof;
  if (fit.dof <= 0) {
    t.why_not = fmt::format(
        "{} points determine c0, c1 and c2 exactly (0 residual degrees of freedom): the surface "
        "passes through every point, so nothing is left to test the b·w² term against",
        fit.points);
    t.verdict = fmt::format("c2 = {} bytes/(token·width): untestable; a fourth point (another "
                            "width or batch) is needed to tell whether the b·w² term is real",
                            format_g4(fit.c2));
    return;
  }
  t.testable = true;
  const long double s2 = rss / static_cast<long double>(fit.dof);
  t.c2_std_error = static_cast<double>(std::sqrt(s2 / independent_ss));
  // What c2 explains beyond c0 + c1·x1: c2² · |x2 ⊥ (1, x1)|², the F-statistic's numerator.
  const long double gain = static_cast<long double>(fit.c2) * fit.c2 * independent_ss;
  // Sums of squares at roundoff level are zero: points generated from known coefficients.
  const long double floor = 1e-24L * sum_y2;
  if (rss <= floor) {
    t.f = gain <= floor ? 0.0 : std::numeric_limits<double>::infinity();
    t.p_value = gain <= floor ? 1.0 : 0.0;
  } else {
    t.f = static_cast<double>(gain / s2);
    t.p_value = f_distribution_sf(*t.f, 1.0, static_cast<double>(fit.dof));
  }
  t.significant = *t.p_value < t.alpha;
  const std::string stats = fmt::format("F = {}, p = {}, {} residual degree{} of freedom",
                                        format_g4(*t.f), format_g4(*t.p_value), fit.dof,
                                        fit.dof == 1 ? "" : "s");
  const std::string head =
      fmt::format("c2 = {} ± {} bytes/(token·width)", format_g4(fit.c2), format_g4(*t.c2_std_error));
  if (!t.significant) {
    t.verdict = fmt::format("{}: not needed at alpha = {} ({}): c0 + c1·b·w explains the points "
                            "within their noise",
                            head, format_g4(t.alpha), stats);
  } else if (fit.c2 > 0) {
    t.verdict = fmt::format("{}: needed at alpha = {} ({}): the peak grows with b·w² beyond the "
                            "linear term",
                            head, format_g4(t.alpha), stats);
  } else {
    t.verdict = fmt::format("{}: significant but negative at alpha = {} ({}): not memory that "
                            "grows with the width; the peak bends down, and a prediction past the "
                            "measured range is optimistic",
                            head, format_g4(t.alpha), stats);
  }
}

void check_request(const MemoryEdgeRequest& r) {
  if (!std::isfinite(r.gpu_memory_bytes) || r.gpu_memory_bytes <= 0) {
    fail_usage("GPU memory {} bytes: must be a positive finite number", r.gpu_memory_bytes);
  }
  if (!std::isfinite(r.reserve_bytes) || r.reserve_bytes < 0) {
    fail_usage("reserve {} bytes: must be a finite number, 0 or more", r.reserve_bytes);
  }
  if (!(r.gpu_memory_bytes > r.reserve_bytes)) {
    fail_usage("GPU memory {} is not above the reserve {}: no budget is left",
               format_bytes(r.gpu_memory_bytes), format_bytes(r.reserve_bytes));
  }
  if (r.max_width < 1 || r.max_width > kMaxMemoryFitWidth) {
    fail_usage("largest width {} is outside 1..{}", r.max_width, kMaxMemoryFitWidth);
  }
  if (r.width_step < 1 || r.width_step > r.max_width) {
    fail_usage("width step {} is outside 1..{} (the largest width)", r.width_step, r.max_width);
  }
  if (r.max_batch < 1 || r.max_batch > kMaxMemoryFitBatch) {
    fail_usage("largest batch {} is outside 1..{}", r.max_batch, kMaxMemoryFitBatch);
  }
}

std::string budget_text(const MemoryEdgeRequest& r, double budget) {
  return fmt::format("the budget {} ({} − {} reserve)", format_bytes(budget),
                     format_bytes(r.gpu_memory_bytes), format_bytes(r.reserve_bytes));
}

// The clauses every found edge shares: past the measured range, contradicted by a measured OOM.
void qualify(const MemoryFit& fit, MemoryEdge& e, std::vector<std::string>& notes) {
  auto [x1, x2] = design(e.batch, e.width);
  e.extrapolated = x1 > fit.max_fitted_tokens || x2 > fit.max_fitted_token_width;
  if (e.extrapolated) {
    notes.push_back(fmt::format(
        "extrapolated: b·w = {} and b·w² = {} against at most {} and {} fitted", x1, x2,
        fit.max_fitted_tokens, fit.max_fitted_token_width));
  }
  for (const auto& p : fit.oom_points) {
    const bool inside = e.axis == "width" ? p.batch == e.batch && p.width <= e.width
                                          : p.width == e.width && p.batch <= e.batch;
    if (inside) {
      notes.push_back(fmt::format("a measured OOM at {} lies within this edge: the prediction "
                                  "contradicts it (was it on a GPU of another size?)",
                                  shape(p.batch, p.width)));
    }
  }
}

std::string join(const std::vector<std::string>& parts) {
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

MemoryFit fit_memory(const std::vector<MemoryFitPoint>& points, bool reserved, double alpha) {
  if (!(alpha >= 1e-6 && alpha <= 0.5)) {
    fail_usage("alpha {}: must be a significance level in [1e-06, 0.5]", alpha);
  }
  MemoryFit fit;
  fit.reserved = reserved;
  fit.c2_test.alpha = alpha;
  std::vector<std::pair<int64_t, int64_t>> xs;
  std::vector<int64_t> ys;
  std::set<int64_t> widths;
  std::set<std::pair<int64_t, int64_t>> distinct;
  for (size_t i = 0; i < points.size(); ++i) {
    const MemoryFitPoint& p = points[i];
    check_point(p, fmt::format("memory point {}", i + 1), reserved);
    if (p.oom) {
      fit.oom_points.push_back(p);
      ++fit.excluded_oom;
      continue;
    }
    xs.push_back(design(p.batch, p.width));
    ys.push_back(fitted_peak(p, reserved));
    widths.insert(p.width);
    distinct.insert(xs.back());
    fit.fitted_points.push_back(p);
    fit.fitted_indices.push_back(static_cast<int64_t>(i));
    fit.max_fitted_tokens = std::max(fit.max_fitted_tokens, xs.back().first);
    fit.max_fitted_token_width = std::max(fit.max_fitted_token_width, xs.back().second);
  }
  fit.points = static_cast<int64_t>(xs.size());
  fit.distinct_points = static_cast<int64_t>(distinct.size());
  if (fit.distinct_points < 3) {
    fit.why_not = fmt::format(
        "peak(b, w) = c0 + c1·(b·w) + c2·(b·w²) has 3 coefficients and needs at least 3 distinct "
        "(batch, width) points that did not run out of memory; got {} ({} point{} fitted, {} OOM "
        "excluded)",
        fit.distinct_points, fit.points, fit.points == 1 ? "" : "s", fit.excluded_oom);
    return fit;
  }
  if (all_collinear(xs)) {
    if (widths.size() == 1) {
      fit.why_not = fmt::format(
          "every fitted point is at width {0}, where b·w² = {0}·(b·w): the b·w² term cannot be "
          "told from the b·w term however many batches are measured (singular system); measure "
          "another width",
          *widths.begin());
    } else if (std::all_of(xs.begin(), xs.end(),
                           [&](const auto& x) { return x.first == xs.front().first; })) {
      fit.why_not = fmt::format(
          "every fitted point has b·w = {} tokens: the b·w term cannot be told from the constant "
          "(singular system); vary the token count",
          xs.front().first);
    } else {
      fit.why_not =
          "the fitted points' (b·w, b·w²) all lie on one line, so c0, c1 and c2 have no unique "
          "solution (singular system); add a point off that line, e.g. another width at one of "
          "the batches";
    }
    return fit;
  }
  // Centre the columns (the constant drops out), then modified Gram–Schmidt: u = x1 − mean,
  // v⊥ = (x2 − mean) minus its projection on u. Accuracy goes with the condition number of the
  // design, not its square as in the normal equations.
  const size_t n = xs.size();
  long double m1 = 0, m2 = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    m1 += xs[i].first;
    m2 += xs[i].second;
    my += ys[i];
  }
  m1 /= n;
  m2 /= n;
  my /= n;
  std::vector<long double> u(n), v(n), yc(n);
  long double uu = 0, uv = 0, uy = 0, vv = 0, sum_y2 = 0;
  for (size_t i = 0; i < n; ++i) {
    u[i] = xs[i].first - m1;
    v[i] = xs[i].second - m2;
    yc[i] = ys[i] - my;
    uu += u[i] * u[i];
    uv += u[i] * v[i];
    uy += u[i] * yc[i];
    vv += v[i] * v[i];
    sum_y2 += static_cast<long double>(ys[i]) * ys[i];
  }
  const long double a = uv / uu;  // uu > 0 and vv > 0: the points are not on one line
  const long double g = uy / uu;
  long double pp = 0, py = 0;
  for (size_t i = 0; i < n; ++i) {
    const long double vp = v[i] - a * u[i];
    pp += vp * vp;
    py += vp * (yc[i] - g * u[i]);
  }
  const long double independence = pp / vv;  // 1 − r² of b·w and b·w²
  if (!(independence >= kMinIndependence)) {
    fit.why_not = fmt::format(
        "the fitted points are numerically too close to one line in (b·w, b·w²) (1 − r² = {:.2e}, "
        "below {:.0e}): c1 and c2 would be roundoff; use widths or batches further apart",
        static_cast<double>(independence), static_cast<double>(kMinIndependence));
    return fit;
  }
  const long double c2 = py / pp;
  const long double c1 = g - c2 * a;
  const long double c0 = my - c1 * m1 - c2 * m2;
  fit.c0 = static_cast<double>(c0);
  fit.c1 = static_cast<double>(c1);
  fit.c2 = static_cast<double>(c2);
  if (!std::isfinite(fit.c0) || !std::isfinite(fit.c1) || !std::isfinite(fit.c2)) {
    fit.why_not = "the least-squares solution is not finite; the points are numerically degenerate";
    return fit;
  }
  fit.ok = true;
  fit.dof = fit.points - 3;
  fit.exact = fit.dof == 0;
  // Residuals against the coefficients as stored, so that they are what a reader recomputes.
  long double rss = 0, max_abs = 0;
  for (size_t i = 0; i < n; ++i) {
    const long double pred = static_cast<long double>(fit.c0) +
                             static_cast<long double>(fit.c1) * xs[i].first +
                             static_cast<long double>(fit.c2) * xs[i].second;
    const long double r = ys[i] - pred;
    fit.residuals_bytes.push_back(static_cast<double>(r));
    rss += r * r;
    max_abs = std::max(max_abs, std::fabs(r));
  }
  fit.max_abs_residual_bytes = static_cast<double>(max_abs);
  fit.rms_residual_bytes = static_cast<double>(std::sqrt(rss / n));
  if (fit.dof > 0) fit.residual_std_bytes = static_cast<double>(std::sqrt(rss / fit.dof));
  quadratic_test(fit, rss, pp, sum_y2);
  return fit;
}

double predict_peak(const MemoryFit& fit, int64_t batch, int64_t width) {
  check_usable(fit);
  check_batch(batch, "memory prediction");
  check_width(width, "memory prediction");
  return static_cast<double>(peak_at(fit, batch, width));
}

double marginal_sequence_bytes(const MemoryFit& fit, int64_t width) {
  check_usable(fit);
  check_width(width, "marginal sequence bytes");
  const long double w = static_cast<long double>(width);
  return static_cast<double>(static_cast<long double>(fit.c1) * w +
                             static_cast<long double>(fit.c2) * w * w);
}

MemoryEdge largest_width(const MemoryFit& fit, int64_t batch, const MemoryEdgeRequest& request) {
  check_usable(fit);
  check_request(request);
  check_batch(batch, "largest width");
  MemoryEdge e;
  e.axis = "width";
  e.batch = batch;
  e.step = request.width_step;
  e.reserved = fit.reserved;
  e.budget_bytes = request.gpu_memory_bytes - request.reserve_bytes;
  const long double budget = e.budget_bytes;
  const int64_t steps = request.max_width / request.width_step;
  // From the narrowest up, to the first step over the budget: a negative c2 bends the surface down
  // far past the measured range, where a search from the top would find a "fit" past an edge.
  int64_t found = 0;
  while (found < steps && peak_at(fit, batch, (found + 1) * request.width_step) <= budget) ++found;
  std::vector<std::string> notes;
  if (found == 0) {
    e.fits_nothing = true;
    e.predicted_peak_bytes = static_cast<double>(peak_at(fit, batch, request.width_step));
    e.note = fmt::format("fits nothing: even {} predicts {} of {}, over {}",
                         shape(batch, request.width_step), format_bytes(e.predicted_peak_bytes),
                         peak_name(fit.reserved), budget_text(request, e.budget_bytes));
    return e;
  }
  e.width = found * request.width_step;
  e.predicted_peak_bytes = static_cast<double>(peak_at(fit, batch, e.width));
  e.capped = found == steps;
  notes.push_back(fmt::format("largest width at batch {}: {} (a multiple of {}), predicting {} of "
                              "{} within {}",
                              batch, e.width, e.step, format_bytes(e.predicted_peak_bytes),
                              peak_name(fit.reserved), budget_text(request, e.budget_bytes)));
  if (e.width + e.step <= kMaxMemoryFitWidth) {
    e.next_predicted_peak_bytes = static_cast<double>(peak_at(fit, batch, e.width + e.step));
    if (!e.capped) {
      notes.push_back(fmt::format("the next step, {}, predicts {}", e.width + e.step,
                                  format_bytes(*e.next_predicted_peak_bytes)));
    }
  }
  if (e.capped) {
    notes.push_back(fmt::format("capped at the largest width searched ({}): the budget may allow "
                                "more",
                                e.width));
  }
  if (found > 1 && peak_at(fit, batch, request.width_step) > budget) {
    notes.push_back(fmt::format("yet width {} does not fit: the fitted peak falls with the width "
                                "below this edge (c1 = {} bytes/token)",
                                request.width_step, format_g4(fit.c1)));
  }
  qualify(fit, e, notes);
  e.note = join(notes);
  return e;
}

MemoryEdge largest_batch(const MemoryFit& fit, int64_t width, const MemoryEdgeRequest& request) {
  check_usable(fit);
  check_request(request);
  check_width(width, "largest batch");
  MemoryEdge e;
  e.axis = "batch";
  e.width = width;
  e.step = 1;
  e.reserved = fit.reserved;
  e.budget_bytes = request.gpu_memory_bytes - request.reserve_bytes;
  const long double budget = e.budget_bytes;
  int64_t found = 0;  // from one sequence up, as largest_width
  while (found < request.max_batch && peak_at(fit, found + 1, width) <= budget) ++found;
  std::vector<std::string> notes;
  if (found == 0) {
    e.fits_nothing = true;
    e.predicted_peak_bytes = static_cast<double>(peak_at(fit, 1, width));
    e.note = fmt::format("fits nothing: even one sequence of width {} predicts {} of {}, over {}",
                         width, format_bytes(e.predicted_peak_bytes), peak_name(fit.reserved),
                         budget_text(request, e.budget_bytes));
    return e;
  }
  e.batch = found;
  e.predicted_peak_bytes = static_cast<double>(peak_at(fit, found, width));
  e.capped = found == request.max_batch;
  notes.push_back(fmt::format("largest batch at width {}: {}, predicting {} of {} within {}", width,
                              found, format_bytes(e.predicted_peak_bytes), peak_name(fit.reserved),
                              budget_text(request, e.budget_bytes)));
  if (found + 1 <= kMaxMemoryFitBatch) {
    e.next_predicted_peak_bytes = static_cast<double>(peak_at(fit, found + 1, width));
    if (!e.capped) {
      notes.push_back(fmt::format("batch {} predicts {}", found + 1,
                                  format_bytes(*e.next_predicted_peak_bytes)));
    }
  }
  if (e.capped) {
    notes.push_back(fmt::format("capped at the largest batch searched ({}): the budget may allow "
                                "more",
                                found));
  }
  if (found > 1 && peak_at(fit, 1, width) > budget) {
    notes.push_back(fmt::format("yet one sequence does not fit: the fitted peak falls with the "
                                "batch at this width ({} per sequence)",
                                signed_bytes(marginal_sequence_bytes(fit, width))));
  }
  qualify(fit, e, notes);
  e.note = join(notes);
  return e;
}

MemoryEdgeCheck check_edge(const MemoryEdge& predicted, const MemoryFitPoint& edge,
                           const MemoryFitPoint& next, double budget_bytes) {
  if (predicted.fits_nothing) {
    fail_usage("the prediction fits nothing ({}): there is no edge to check", predicted.note);
  }
  if (predicted.axis != "width" && predicted.axis != "batch") {
    fail_usage("edge axis '{}' is neither width nor batch", predicted.axis);
  }
  if (!std::isfinite(budget_bytes) || budget_bytes <= 0) {
    fail_usage("budget {} bytes: must be a positive finite number", budget_bytes);
  }
  const auto& next_pred = predicted.next_predicted_peak_bytes;
  if (!std::isfinite(predicted.predicted_peak_bytes) || (next_pred && !std::isfinite(*next_pred))) {
    fail_usage("the edge's predicted peaks are not finite");
  }
  check_point(edge, "edge point", predicted.reserved);
  check_point(next, "next point", predicted.reserved);
  if (edge.batch != predicted.batch || edge.width != predicted.width) {
    fail_usage("the edge point is {}, not the predicted edge {}", shape(edge.batch, edge.width),
               shape(predicted.batch, predicted.width));
  }
  const int64_t next_batch = predicted.axis == "batch" ? predicted.batch + 1 : predicted.batch;
  const int64_t next_width =
      predicted.axis == "width" ? predicted.width + predicted.step : predicted.width;
  if (next.batch != next_batch || next.width != next_width) {
    fail_usage("the next point is {}, not one step past the edge along its {} ({})",
               shape(next.batch, next.width), predicted.axis, shape(next_batch, next_width));
  }
  MemoryEdgeCheck c;
  c.predicted = predicted;
  c.edge = edge;
  c.next = next;
  c.budget_bytes = budget_bytes;
  const bool reserved = predicted.reserved;
  const std::string edge_name = shape(edge.batch, edge.width);
  const std::string next_name = shape(next.batch, next.width);
  if (!edge.oom) {
    c.edge_error_bytes =
        static_cast<double>(fitted_peak(edge, reserved)) - predicted.predicted_peak_bytes;
  }
  if (!next.oom && predicted.next_predicted_peak_bytes) {
    c.next_error_bytes =
        static_cast<double>(fitted_peak(next, reserved)) - *predicted.next_predicted_peak_bytes;
  }
  auto measured = [&](const MemoryFitPoint& p, const std::optional<double>& err,
                      const std::optional<double>& pred) {
    std::string s = fmt::format("{} {}", peak_name(reserved),
                                format_bytes(static_cast<double>(fitted_peak(p, reserved))));
    if (err && pred) s += fmt::format(", {} against the predicted {}", signed_bytes(*err),
                                      format_bytes(*pred));
    return s;
  };
  std::vector<std::string> parts;
  const std::optional<double> edge_pred = predicted.predicted_peak_bytes;
  if (edge.oom) {
    c.verdict = "over";
    parts.push_back(fmt::format("over: the edge {} ran out of memory where {} was predicted "
                                "within the budget {}: the prediction overshot",
                                edge_name, format_bytes(predicted.predicted_peak_bytes),
                                format_bytes(budget_bytes)));
    if (!next.oom) {
      parts.push_back(fmt::format("yet {} one step past it ran ({}): the runs disagree, repeat "
                                  "them",
                                  next_name,
                                  measured(next, c.next_error_bytes,
                                           predicted.next_predicted_peak_bytes)));
    }
  } else if (next.oom) {
    c.verdict = "held";
    parts.push_back(fmt::format("held: the edge {} ran ({}) and {} one step past it ran out of "
                                "memory",
                                edge_name, measured(edge, c.edge_error_bytes, edge_pred),
                                next_name));
  } else {
    c.verdict = "conservative";
    parts.push_back(fmt::format("conservative: {} one step past the edge ran too ({}): the "
                                "prediction was short by at least one step",
                                next_name,
                                measured(next, c.next_error_bytes,
                                         predicted.next_predicted_peak_bytes)));
    parts.push_back(fmt::format("the edge {} ran ({})", edge_name,
                                measured(edge, c.edge_error_bytes, edge_pred)));
  }
  if (!edge.oom && static_cast<double>(fitted_peak(edge, reserved)) > budget_bytes) {
    parts.push_back(fmt::format("the edge's peak was {} over the budget {}: the reserve absorbed "
                                "it",
                                format_bytes(static_cast<double>(fitted_peak(edge, reserved)) -
                                             budget_bytes),
                                format_bytes(budget_bytes)));
  }
  c.message = join(parts);
  return c;
}

Json to_json(const MemoryFit& fit) {
  Json out;
  out["ok"] = fit.ok;
  out["why_not"] = fit.ok ? Json(nullptr) : Json(fit.why_not);
  out["peak"] = fit.reserved ? "reserved" : "allocated";
  out["model"] = "peak(b, w) = c0 + c1·(b·w) + c2·(b·w²)";
  out["points"] = fit.points;
  out["distinct_points"] = fit.distinct_points;
  out["excluded_oom"] = fit.excluded_oom;
  auto when_ok = [&](double v) { return fit.ok ? Json(v) : Json(nullptr); };
  out["c0_bytes"] = when_ok(fit.c0);
  out["c1_bytes_per_token"] = when_ok(fit.c1);
  out["c2_bytes_per_token_width"] = when_ok(fit.c2);
  out["dof"] = fit.ok ? Json(fit.dof) : Json(nullptr);
  out["exact"] = fit.ok ? Json(fit.exact) : Json(nullptr);
  out["max_abs_residual_bytes"] = when_ok(fit.max_abs_residual_bytes);
  out["rms_residual_bytes"] = when_ok(fit.rms_residual_bytes);
  out["residual_std_bytes"] = json_or_null(fit.residual_std_bytes);
  out["max_fitted_tokens"] = fit.max_fitted_tokens;
  out["max_fitted_token_width"] = fit.max_fitted_token_width;
  Json rows = Json::array();
  for (size_t i = 0; i < fit.fitted_points.size(); ++i) {
    Json row = evidence::to_json(fit.fitted_points[i]);
    row["index"] = fit.fitted_indices[i];
    if (fit.ok) {
      const double measured = static_cast<double>(fitted_peak(fit.fitted_points[i], fit.reserved));
      row["predicted_bytes"] = measured - fit.residuals_bytes[i];
      row["residual_bytes"] = fit.residuals_bytes[i];
    }
    rows.push_back(std::move(row));
  }
  out["fitted"] = std::move(rows);
  Json ooms = Json::array();
  for (const auto& p : fit.oom_points) ooms.push_back(evidence::to_json(p));
  out["oom_points"] = std::move(ooms);
  if (fit.ok) {
    // F is infinite when points generated from known coefficients leave no residual at all;
    // JSON has no infinity, so it is written null there, with p = 0 and the verdict saying so.
    const QuadraticTermTest& t = fit.c2_test;
    out["c2_test"] = Json{{"testable", t.testable},
                          {"why_not", t.testable ? Json(nullptr) : Json(t.why_not)},
                          {"dof", t.dof},
                          {"alpha", t.alpha},
                          {"c2_std_error", json_or_null(t.c2_std_error)},
                          {"f", t.f && std::isfinite(*t.f) ? Json(*t.f) : Json(nullptr)},
                          {"p_value", json_or_null(t.p_value)},
                          {"significant", t.testable ? Json(t.significant) : Json(nullptr)},
                          {"verdict", t.verdict}};
  } else {
    out["c2_test"] = nullptr;
  }
  return out;
}

Json to_json(const MemoryEdge& e) {
  return Json{{"axis", e.axis},
              {"batch", e.batch},
              {"width", e.width},
              {"step", e.step},
              {"peak", e.reserved ? "reserved" : "allocated"},
              {"predicted_peak_bytes", e.predicted_peak_bytes},
              {"next_predicted_peak_bytes", json_or_null(e.next_predicted_peak_bytes)},
              {"budget_bytes", e.budget_bytes},
              {"fits_nothing", e.fits_nothing},
              {"capped", e.capped},
              {"extrapolated", e.extrapolated},
              {"note", e.note}};
}

Json to_json(const MemoryEdgeCheck& c) {
  return Json{{"verdict", c.verdict},
              {"message", c.message},
              {"budget_bytes", c.budget_bytes},
              {"edge_error_bytes", json_or_null(c.edge_error_bytes)},
              {"next_error_bytes", json_or_null(c.next_error_bytes)},
              {"predicted", to_json(c.predicted)},
              {"edge", evidence::to_json(c.edge)},
              {"next", evidence::to_json(c.next)}};
}

namespace {

namespace jr = json_read;

bool peak_is_reserved(const Json& j, const std::string& where) {
  return jr::choice(j, "peak", where, {"allocated", "reserved"}) == 1;
}

}  // namespace

MemoryFit memory_fit_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  MemoryFit f;
  f.ok = jr::boolean(j, "ok", where);
  const std::optional<std::string> why = jr::nullable_string(j, "why_not", where);
  if (f.ok == why.has_value()) fail("{}: why_not must be null exactly when ok", where);
  if (why) f.why_not = *why;
  f.reserved = peak_is_reserved(j, where);
  f.points = jr::integer(j, "points", where, 0);
  f.distinct_points = jr::integer(j, "distinct_points", where, 0, f.points);
  f.excluded_oom = jr::integer(j, "excluded_oom", where, 0);
  f.max_fitted_tokens = jr::integer(j, "max_fitted_tokens", where, 0);
  f.max_fitted_token_width = jr::integer(j, "max_fitted_token_width", where, 0);
  auto when_ok = [&](const char* key) -> double {
    const std::optional<double> v = jr::nullable_number(j, key, where);
    if (v.has_value() != f.ok) fail("{}.{} must be a number exactly when ok", where, key);
    return v.value_or(0.0);
  };
  f.c0 = when_ok("c0_bytes");
  f.c1 = when_ok("c1_bytes_per_token");
  f.c2 = when_ok("c2_bytes_per_token_width");
  f.max_abs_residual_bytes = when_ok("max_abs_residual_bytes");
  f.rms_residual_bytes = when_ok("rms_residual_bytes");
  const std::optional<int64_t> dof = jr::nullable_integer(j, "dof", where, 0);
  const std::optional<bool> exact = jr::nullable_boolean(j, "exact", where);
  if (dof.has_value() != f.ok || exact.has_value() != f.ok)
    fail("{}: dof and exact must be set exactly when ok", where);
  f.dof = dof.value_or(0);
  f.exact = exact.value_or(false);
  f.residual_std_bytes = jr::nullable_number(j, "residual_std_bytes", where);
  if (f.residual_std_bytes && !(f.ok && f.dof > 0))
    fail("{}: residual_std_bytes is set only for a fit with residual degrees of freedom", where);
  const Json& rows = jr::array(j, "fitted", where);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string w = jr::at(where, "fitted", i);
    f.fitted_points.push_back(evidence::from_json<MemoryFitPoint>(rows[i], w));
    f.fitted_indices.push_back(jr::integer(rows[i], "index", w, 0));
    if (!f.ok) continue;
    const double residual = jr::number(rows[i], "residual_bytes", w);
    const double measured =
        static_cast<double>(fitted_peak(f.fitted_points.back(), f.reserved));
    if (jr::number(rows[i], "predicted_bytes", w) != measured - residual)
      fail("{}: predicted_bytes is not the measured peak less residual_bytes", w);
    f.residuals_bytes.push_back(residual);
  }
  if (f.ok && static_cast<int64_t>(f.fitted_points.size()) != f.points)
    fail("{}: {} fitted rows but points is {}", where, f.fitted_points.size(), f.points);
  const Json& ooms = jr::array(j, "oom_points", where);
  for (std::size_t i = 0; i < ooms.size(); ++i)
    f.oom_points.push_back(evidence::from_json<MemoryFitPoint>(ooms[i], jr::at(where, "oom_points", i)));
  const Json& test = jr::field(j, "c2_test", where);
  if (test.is_null() == f.ok) fail("{}: c2_test must be an object exactly when ok", where);
  if (f.ok) {
    const std::string w = where + ".c2_test";
    if (!test.is_object()) fail("{} must be an object", w);
    QuadraticTermTest& t = f.c2_test;
    t.testable = jr::boolean(test, "testable", w);
    const std::optional<std::string> tw = jr::nullable_string(test, "why_not", w);
    if (t.testable == tw.has_value()) fail("{}: why_not must be null exactly when testable", w);
    if (tw) t.why_not = *tw;
    t.dof = jr::integer(test, "dof", w);
    t.alpha = jr::number(test, "alpha", w);
    t.c2_std_error = jr::nullable_number(test, "c2_std_error", w);
    t.f = jr::nullable_number(test, "f", w);
    t.p_value = jr::nullable_number(test, "p_value", w);
    if (t.p_value && (*t.p_value < 0 || *t.p_value > 1)) fail("{}.p_value: not in [0, 1]", w);
    const std::optional<bool> significant = jr::nullable_boolean(test, "significant", w);
    if (significant.has_value() != t.testable)
      fail("{}: significant must be set exactly when testable", w);
    t.significant = significant.value_or(false);
    t.verdict = jr::string(test, "verdict", w);
  }
  return f;
}

MemoryEdge memory_edge_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  MemoryEdge e;
  e.axis = jr::choice(j, "axis", where, {"width", "batch"}) == 0 ? "width" : "batch";
  e.batch = jr::integer(j, "batch", where, 0, kMaxMemoryFitBatch);
  e.width = jr::integer(j, "width", where, 0, kMaxMemoryFitWidth);
  e.step = jr::integer(j, "step", where, 0);
  e.reserved = peak_is_reserved(j, where);
  e.predicted_peak_bytes = jr::number(j, "predicted_peak_bytes", where);
  e.next_predicted_peak_bytes = jr::nullable_number(j, "next_predicted_peak_bytes", where);
  e.budget_bytes = jr::number(j, "budget_bytes", where);
  e.fits_nothing = jr::boolean(j, "fits_nothing", where);
  e.capped = jr::boolean(j, "capped", where);
  e.extrapolated = jr::boolean(j, "extrapolated", where);
  e.note = jr::string(j, "note", where);
  return e;
}

MemoryEdgeCheck memory_edge_check_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  MemoryEdgeCheck c;
  c.verdict = jr::string(j, "verdict", where);
  c.message = jr::string(j, "message", where);
  c.budget_bytes = jr::number(j, "budget_bytes", where);
  c.edge_error_bytes = jr::nullable_number(j, "edge_error_bytes", where);
  c.next_error_bytes = jr::nullable_number(j, "next_error_bytes", where);
  c.predicted = memory_edge_from_json(jr::object(j, "predicted", where), where + ".predicted");
  c.edge = evidence::from_json<MemoryFitPoint>(jr::field(j, "edge", where), where + ".edge");
  c.next = evidence::from_json<MemoryFitPoint>(jr::field(j, "next", where), where + ".next");
  return c;
}

}  // namespace tprobe::core
