// Least-squares fit of step time against per-sequence width: t(w) = C + A·w + B·w² (docs/scaling-fit.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/io/fit_points.hpp"

namespace tprobe::core {

// The nested family of models; A is always present (a step does at least linear work).
enum class FitModel { kA, kAB, kAC, kABC };

const char* to_string(FitModel model);  // "A", "AB", "AC", "ABC"
// "A", "AB", "AC", "ABC" (case-insensitive); nullopt otherwise ("auto" is the caller's business).
std::optional<FitModel> parse_fit_model(std::string_view text);
int parameter_count(FitModel model);
bool has_quadratic(FitModel model);
bool has_constant(FitModel model);

struct Coefficient {
  double value = 0;
  std::optional<double> std_error;  // absent without residual degrees of freedom
};

struct PointFit {
  double width = 0;
  double seconds = 0;
  double predicted_s = 0;
  double residual_s = 0;      // seconds - predicted_s
  double residual_ratio = 0;  // residual_s / seconds
  double constant_s = 0;
  double linear_s = 0;
  double quadratic_s = 0;
  double quadratic_share = 0;  // quadratic_s / predicted_s
  std::optional<double> loo_predicted_s;  // prediction of a fit without this point
  std::optional<double> loo_error_s;      // seconds - loo_predicted_s
};

// Terms of the fitted curve at one width.
struct WidthTerms {
  double width = 0;
  double constant_s = 0;
  double linear_s = 0;
  double quadratic_s = 0;
  double predicted_s = 0;
  double quadratic_share = 0;
};

struct ModelFit {
  FitModel model = FitModel::kAB;
  bool determined = false;  // false: fewer distinct widths than parameters; nothing else is set
  std::string refusal;      // why, when !determined
  int points = 0;
  int distinct_widths = 0;
  int parameters = 0;
  int dof = 0;             // points - parameters
  bool exact = false;      // dof == 0: the curve passes through every point, no error bars
  Coefficient a;           // s per token
  Coefficient b;           // s per token², 0 when not fitted
  Coefficient c;           // s, 0 when not fitted
  double rss = 0;          // residual sum of squares, s²
  std::optional<double> residual_std_s;  // sqrt(rss / dof)
  std::vector<PointFit> per_point;
  std::optional<double> loo_rms_s;       // root mean square leave-one-out error
  std::optional<double> loo_max_abs_s;
  std::optional<double> crossover_width;  // A/B: where the quadratic term overtakes the linear

  WidthTerms at(double width) const;
};

// Fits `model` by Householder QR on scaled columns (double precision). Never throws for a
// shape problem: an underdetermined fit comes back with determined = false and a refusal.
ModelFit fit_model(const std::vector<FitPoint>& points, FitModel model);

// One nested-model F-test: does the larger model explain significantly more than the smaller?
struct FTest {
  FitModel reduced = FitModel::kA;
  FitModel full = FitModel::kAB;
  std::string term;  // the coefficient the full model adds: "B" or "C"
  double f = 0;
  int df_num = 0;
  int df_den = 0;
  double p_value = 1;
  bool significant = false;
};

FTest f_test(const ModelFit& reduced, const ModelFit& full, double alpha);

// The auto fit form (`--form auto`): backward elimination from ABC by F-tests at level alpha (docs/scaling-fit.md
// says why F and not AIC). Needs ABC to leave a residual degree of freedom over distinct widths.
struct ModelSelection {
  bool possible = false;
  std::string refusal;      // why not, when !possible
  FitModel chosen = FitModel::kAB;
  std::vector<FTest> tests;  // in the order they were made
  std::string reason;        // one sentence
};

ModelSelection select_model(const std::vector<FitPoint>& points, double alpha = 0.05);

// Whether a fixed per-step term is supported by the data: from the ABC fit and its F-test against AB.
// The outcome is one that repeats on a second run of the same sweep, or says it would not. C's
// two-sided interval at level 1 - alpha/5 (99 % at alpha = 0.05) is set against what would
// matter, 5 % of the quickest measured step (material_s):
//   "needed"       the interval lies above it (a fixed per-step cost is real and material);
//   "not needed"   the interval lies within ± it (not launch-bound);
//   "negative"     the interval lies below 0 (curvature the AB form lacks, not a cost);
//   "undetermined" the interval reaches across the line, or one residual degree of freedom
//                  (4 widths: F(1, 1) is so wide that two runs of one call on the H200 gave
//                  p = 0.10 and p = 0.007);
//   "untestable"   fewer than 4 distinct widths.
// `needed` is outcome == "needed"; f and p_value are the F-test of ABC against AB, for reference.
struct FixedTermVerdict {
  bool testable = false;
  std::string outcome = "untestable";
  std::optional<double> c_low_s, c_high_s;  // C ± t_{1 - alpha/10, d}·SE
  std::optional<double> material_s;         // 5 % of the quickest measured step
  std::optional<double> c_s;
  std::optional<double> c_std_error_s;
  std::optional<double> f;
  std::optional<double> p_value;
  bool needed = false;
  std::string verdict;  // "C = 1.2 ms ± 3.4 ms: not needed (F = 0.13, p = 0.73)"
};

FixedTermVerdict fixed_term_verdict(const std::vector<FitPoint>& points, double alpha = 0.05);

// Upper tail of the F distribution, P(F(d1, d2) > f).
double f_distribution_sf(double f, double d1, double d2);
// Regularized incomplete beta function I_x(a, b).
double regularized_incomplete_beta(double a, double b, double x);

// The medians of the seconds of the points that share a width (one point per distinct width,
// ascending); origins are joined.
std::vector<FitPoint> median_per_width(const std::vector<FitPoint>& points);

struct WeightedShare {
  int64_t micro_batches = 0;
  double predicted_total_s = 0;   // Σ t(w) over the micro-batches
  double quadratic_total_s = 0;   // Σ B·w²
  double quadratic_share = 0;     // quadratic_total_s / predicted_total_s: share of the epoch's time
  double mean_width = 0;
};

WeightedShare weighted_quadratic_share(const ModelFit& fit, const WidthDistribution& widths);

// A fit is at one batch. With `batch` set, points of another batch are dropped (one line each
// in `dropped`) and points without a batch are taken to be at it. Without it, the points must
// agree (or say nothing). Throws tprobe::Error when they disagree. Returns the batch (0: unknown).
// `batch_option` is how the caller lets a user choose the batch (a probe passes its flag).
int64_t select_batch(std::vector<FitPoint>& points, std::optional<int64_t> batch,
                     std::vector<std::string>* dropped,
                     const std::string& batch_option = "the batch to fit");

}  // namespace tprobe::core
