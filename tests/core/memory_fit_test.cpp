// Memory model: exact recovery, least squares against hand-worked and exact-rational references,
// the singular designs, the quadratic term's F-test, edges on hand-worked budgets, edge checks,
// broken inputs and the JSON views.
#include "tprobe/core/cost/memory_fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

__extension__ using Int128 = __int128;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

// The hand-worked surface: 50 GiB fixed, 128 KiB per token, 32 bytes per token per token of
// width. At batch 2, 50 GiB + 262144·w + 64·w² = 80 GiB solves to w² + 4096·w − 503316480 = 0,
// w = (−4096 + 45056) / 2 = 20480 exactly; at width 4096 a sequence costs 131072·4096 +
// 32·4096² = 1 GiB, so 80 GiB holds batch 30; at width 8192 it costs 1 + 2 = 3 GiB.
constexpr int64_t kC0 = 50 * kGiB;
constexpr int64_t kC1 = 131072;
constexpr int64_t kC2 = 32;

int64_t exact_peak(int64_t c0, int64_t c1, int64_t c2, int64_t b, int64_t w) {
  return c0 + c1 * b * w + c2 * b * w * w;
}

MemoryFitPoint ok_point(int64_t b, int64_t w, int64_t allocated, int64_t reserved = 0) {
  return MemoryFitPoint{b, w, allocated, reserved > 0 ? reserved : allocated + kGiB, false};
}

MemoryFitPoint oom_point(int64_t b, int64_t w) { return MemoryFitPoint{b, w, 0, 0, true}; }

std::vector<MemoryFitPoint> surface(const std::vector<std::pair<int64_t, int64_t>>& shapes,
                                 int64_t c0 = kC0, int64_t c1 = kC1, int64_t c2 = kC2) {
  std::vector<MemoryFitPoint> out;
  for (auto [b, w] : shapes) out.push_back(ok_point(b, w, exact_peak(c0, c1, c2, b, w)));
  return out;
}

// A fit with the coefficients exactly as given, measured up to (2, 16384).
MemoryFit hand_fit(double c0 = kC0, double c1 = kC1, double c2 = kC2) {
  MemoryFit f;
  f.ok = true;
  f.c0 = c0;
  f.c1 = c1;
  f.c2 = c2;
  f.max_fitted_tokens = 2 * 16384;
  f.max_fitted_token_width = 2 * int64_t{16384} * 16384;
  return f;
}

MemoryEdgeRequest budget(double gpu, double reserve, int64_t step = 256) {
  MemoryEdgeRequest r;
  r.gpu_memory_bytes = gpu;
  r.reserve_bytes = reserve;
  r.width_step = step;
  return r;
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

void expect_rel(double got, double want, double rel) {
  EXPECT_LE(std::fabs(got - want), rel * std::fabs(want)) << "got " << got << ", want " << want;
}

// --- fitting ---------------------------------------------------------------------------------

TEST(MemoryFit, RecoversExactCoefficientsToOnePartInABillion) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 2048}, {2, 2048}, {2, 8192}, {4, 4096}, {2, 16384}, {8, 1024}, {1, 32768}};
  // The hand-worked surface, and one shaped like the H200 measurements (c1 < 0): every peak an
  // exact integer, so the points carry no rounding.
  struct Case { int64_t c0, c1; double c2; };
  for (const Case& k : {Case{kC0, kC1, 32.0}, Case{66970000000, -60800, 31.5}}) {
    std::vector<MemoryFitPoint> pts;
    for (auto [b, w] : shapes) {
      const long double y = static_cast<long double>(k.c0) +
                            static_cast<long double>(k.c1) * b * w +
                            static_cast<long double>(k.c2) * b * w * w;
      ASSERT_EQ(y, std::floor(y));
      pts.push_back(ok_point(b, w, static_cast<int64_t>(y)));
    }
    MemoryFit f = fit_memory(pts, false);
    ASSERT_TRUE(f.ok) << f.why_not;
    expect_rel(f.c0, static_cast<double>(k.c0), 1e-9);
    expect_rel(f.c1, static_cast<double>(k.c1), 1e-9);
    expect_rel(f.c2, k.c2, 1e-9);
    EXPECT_EQ(f.points, 7);
    EXPECT_EQ(f.distinct_points, 7);
    EXPECT_EQ(f.dof, 4);
    EXPECT_FALSE(f.exact);
    ASSERT_EQ(f.residuals_bytes.size(), 7u);
    EXPECT_LT(f.max_abs_residual_bytes, 1e-3);
    EXPECT_LT(f.rms_residual_bytes, 1e-3);
    for (size_t i = 0; i < pts.size(); ++i) {
      EXPECT_NEAR(predict_peak(f, pts[i].batch, pts[i].width),
                  static_cast<double>(pts[i].peak_allocated_bytes), 1e-3);
    }
    // No residual at all: the b·w² term is certainly needed (F infinite, p = 0).
    EXPECT_TRUE(f.c2_test.testable);
    EXPECT_TRUE(f.c2_test.significant);
    EXPECT_EQ(*f.c2_test.p_value, 0.0);
  }
}

// Reserved is fitted from its own column: every reserved peak is allocated + 1 GiB here, so only
// c0 moves.
TEST(MemoryFit, FitsReservedFromItsOwnColumn) {
  auto pts = surface({{1, 2048}, {2, 8192}, {4, 4096}, {2, 16384}});
  MemoryFit a = fit_memory(pts, false);
  MemoryFit r = fit_memory(pts, true);
  ASSERT_TRUE(a.ok && r.ok);
  EXPECT_FALSE(a.reserved);
  EXPECT_TRUE(r.reserved);
  expect_rel(r.c0, static_cast<double>(kC0 + kGiB), 1e-9);
  expect_rel(r.c1, kC1, 1e-9);
  expect_rel(r.c2, kC2, 1e-9);
}

// Noise orthogonal to the design is exactly the least-squares residual. At batch 2 and widths
// 2048·k (k = 1..4), x1 ∝ k and x2 ∝ k², and s·(−1, 3, −3, 1) (the third difference) is orthogonal
// to 1, k and k²; so the fit must return the generating coefficients and that residual.
// The F-test by hand: k² minus its projection on (1, k) is (1, −1, −1, 1) (k² ≈ 5k − 5), so
// |x2⊥| = 2·(2·2048²) and c2·|x2⊥| = 32·4·2048² = 512 MiB; with s = 16 MiB, rss = 20·s² on 1
// degree of freedom and F = c2²|x2⊥|² / (rss / 1) = (512/16)² / 20 = 51.2 = t², and a t with
// one degree of freedom is Cauchy: p = 1 − (2/π)·atan(√51.2) = 0.0884.
TEST(MemoryFit, NoisyPointsMatchAHandWorkedLeastSquaresSolution) {
  const int64_t s = 16 * kMiB;
  const int64_t noise[] = {-s, 3 * s, -3 * s, s};
  std::vector<MemoryFitPoint> pts;
  for (int k = 1; k <= 4; ++k) {
    const int64_t w = 2048 * k;
    pts.push_back(ok_point(2, w, exact_peak(kC0, kC1, kC2, 2, w) + noise[k - 1]));
  }
  MemoryFit f = fit_memory(pts, false);
  ASSERT_TRUE(f.ok) << f.why_not;
  expect_rel(f.c0, kC0, 1e-9);
  expect_rel(f.c1, kC1, 1e-9);
  expect_rel(f.c2, kC2, 1e-9);
  ASSERT_EQ(f.residuals_bytes.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(f.residuals_bytes[i], static_cast<double>(noise[i]), 1e-2);
  }
  EXPECT_NEAR(f.max_abs_residual_bytes, 3.0 * s, 1e-2);
  EXPECT_NEAR(f.rms_residual_bytes, s * std::sqrt(5.0), 1e-2);
  ASSERT_TRUE(f.residual_std_bytes);
  EXPECT_NEAR(*f.residual_std_bytes, s * std::sqrt(20.0), 1e-2);
  EXPECT_EQ(f.dof, 1);
  const QuadraticTermTest& t = f.c2_test;
  ASSERT_TRUE(t.testable);
  ASSERT_TRUE(t.f && t.p_value && t.c2_std_error);
  EXPECT_NEAR(*t.f, 51.2, 1e-9);
  const double pi = std::acos(-1.0);
  EXPECT_NEAR(*t.p_value, 1 - 2 / pi * std::atan(std::sqrt(51.2)), 1e-9);
  // se(c2) = s_resid / |x2⊥| = √20·s / (2·2·2048²).
  EXPECT_NEAR(*t.c2_std_error, std::sqrt(20.0) * s / (4.0 * 2048 * 2048), 1e-9);
  EXPECT_FALSE(t.significant);
  EXPECT_NE(t.verdict.find("not needed"), std::string::npos) << t.verdict;
  // At alpha = 0.1 the same points call it needed.
  MemoryFit loose = fit_memory(pts, false, 0.1);
  EXPECT_TRUE(loose.c2_test.significant);
  EXPECT_NE(loose.c2_test.verdict.find(": needed at alpha = 0.1"), std::string::npos)
      << loose.c2_test.verdict;
}

// Against an independent solve: the 3×3 normal equations by Cramer's rule in exact 128-bit
// integers, on widths in units of 256 (x1 = 256·x1', x2 = 65536·x2', so c1 = c1'/256 and
// c2 = c2'/65536), with noise that is not orthogonal to anything.
TEST(MemoryFit, MixedBatchesMatchAnExactRationalSolve) {
  struct P { int64_t b, wu; int64_t noise; };
  const std::vector<P> in = {{1, 8, 37 * kMiB},  {2, 8, -81 * kMiB}, {2, 32, 12 * kMiB},
                             {2, 64, 55 * kMiB}, {4, 16, -3 * kMiB}, {1, 48, -70 * kMiB},
                             {3, 40, 9 * kMiB}};
  std::vector<MemoryFitPoint> pts;
  Int128 s[3][3] = {};
  Int128 rhs[3] = {};
  for (const P& p : in) {
    const int64_t y = exact_peak(kC0, kC1, kC2, p.b, 256 * p.wu) + p.noise;
    pts.push_back(ok_point(p.b, 256 * p.wu, y));
    const Int128 x[3] = {1, p.b * p.wu, p.b * p.wu * p.wu};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) s[i][j] += x[i] * x[j];
      rhs[i] += x[i] * y;
    }
  }
  auto det3 = [](const Int128 m[3][3]) {
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
           m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  };
  const Int128 d = det3(s);
  ASSERT_NE(d, 0);
  long double ref[3];
  for (int j = 0; j < 3; ++j) {
    Int128 m[3][3];
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) m[r][c] = c == j ? rhs[r] : s[r][c];
    }
    ref[j] = static_cast<long double>(det3(m)) / static_cast<long double>(d);
  }
  MemoryFit f = fit_memory(pts, false);
  ASSERT_TRUE(f.ok) << f.why_not;
  expect_rel(f.c0, static_cast<double>(ref[0]), 1e-9);
  expect_rel(f.c1, static_cast<double>(ref[1] / 256), 1e-9);
  expect_rel(f.c2, static_cast<double>(ref[2] / 65536), 1e-9);
  // Least squares: the residuals are orthogonal to every column (to roundoff of the sums).
  long double dots[3] = {0, 0, 0}, scale[3] = {0, 0, 0};
  for (size_t i = 0; i < pts.size(); ++i) {
    const long double x[3] = {1, static_cast<long double>(in[i].b) * 256 * in[i].wu,
                              static_cast<long double>(in[i].b) * 65536 * in[i].wu * in[i].wu};
    for (int j = 0; j < 3; ++j) {
      dots[j] += x[j] * f.residuals_bytes[i];
      scale[j] += std::fabs(x[j]) * static_cast<long double>(pts[i].peak_allocated_bytes);
    }
  }
  for (int j = 0; j < 3; ++j) EXPECT_LT(std::fabs(dots[j]), 1e-12L * scale[j]) << j;
  EXPECT_EQ(f.fitted_indices, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
}

// The three H200 points (26B MoE LoRA step, batch 2): a parabola through three widths is
// determined, exactly, with nothing left to test c2 against.
TEST(MemoryFit, H200ThreePointsAreExactAndUntestable) {
  auto gib = [](double g) { return static_cast<int64_t>(std::llround(g * kGiB)); };
  std::vector<MemoryFitPoint> pts = {ok_point(2, 2048, gib(62.4)), ok_point(2, 8192, gib(65.4)),
                                  ok_point(2, 16384, gib(76.3))};
  MemoryFit f = fit_memory(pts, false);
  ASSERT_TRUE(f.ok) << f.why_not;
  EXPECT_EQ(f.dof, 0);
  EXPECT_TRUE(f.exact);
  EXPECT_FALSE(f.residual_std_bytes);
  EXPECT_LT(f.max_abs_residual_bytes, 1e-3);
  for (const auto& p : pts) {
    EXPECT_NEAR(predict_peak(f, 2, p.width), static_cast<double>(p.peak_allocated_bytes), 1e-3);
  }
  // By hand: differences of 3.0 GiB over Δ(b·w) = 12288, Δ(b·w²) = 125829120 and of 10.9 GiB
  // over 16384, 402653184 give c2 = 31.5429 and c1 = −60855 bytes per token (c0 = 62.386 GiB):
  // the surface dips at short widths, so one more short sequence "saves" memory.
  EXPECT_NEAR(f.c2, 31.5429, 1e-4);
  EXPECT_NEAR(f.c1, -60854.86, 0.01);
  EXPECT_NEAR(f.c0 / kGiB, 62.38571, 1e-5);
  EXPECT_LT(marginal_sequence_bytes(f, 512), 0);
  EXPECT_GT(marginal_sequence_bytes(f, 8192), 0);
  const QuadraticTermTest& t = f.c2_test;
  EXPECT_FALSE(t.testable);
  EXPECT_FALSE(t.significant);
  EXPECT_FALSE(t.f);
  EXPECT_FALSE(t.p_value);
  EXPECT_NE(t.why_not.find("0 residual degrees of freedom"), std::string::npos) << t.why_not;
  EXPECT_NE(t.verdict.find("untestable"), std::string::npos) << t.verdict;
  EXPECT_TRUE(one_line(t.verdict));
  // 80 GiB at batch 2: c0 + 2·c1·w + 2·c2·w² = 80 GiB at w = 18306.3, so 18176 on the 256 grid,
  // past the widest measurement, and the note says so.
  MemoryEdge e = largest_width(f, 2, budget(80.0 * kGiB, 0));
  ASSERT_FALSE(e.fits_nothing);
  EXPECT_EQ(e.width, 18176);
  EXPECT_TRUE(e.extrapolated);
  EXPECT_NE(e.note.find("extrapolated"), std::string::npos) << e.note;
}

TEST(MemoryFit, WithoutAQuadraticTermTheTestSaysNotNeeded) {
  // c2 = 0 plus the orthogonal noise of the hand-worked case: c0 + c1·x1 leaves the same
  // residual, so c2 explains nothing: F = 0, p = 1.
  const int64_t s = 16 * kMiB;
  const int64_t noise[] = {-s, 3 * s, -3 * s, s};
  std::vector<MemoryFitPoint> pts;
  for (int k = 1; k <= 4; ++k) {
    pts.push_back(ok_point(2, 2048 * k, exact_peak(kC0, kC1, 0, 2, 2048 * k) + noise[k - 1]));
  }
  MemoryFit f = fit_memory(pts, false);
  ASSERT_TRUE(f.ok);
  EXPECT_NEAR(f.c2, 0, 1e-9);
  ASSERT_TRUE(f.c2_test.testable);
  EXPECT_NEAR(*f.c2_test.f, 0, 1e-9);
  EXPECT_NEAR(*f.c2_test.p_value, 1, 1e-6);
  EXPECT_FALSE(f.c2_test.significant);
}

TEST(MemoryFit, ANegativeQuadraticTermIsCalledOut) {
  std::vector<MemoryFitPoint> pts = surface(
      {{1, 2048}, {2, 2048}, {2, 8192}, {4, 4096}, {2, 16384}}, 60 * kGiB, 400000, -2);
  pts[0].peak_allocated_bytes += 1000;  // a residual, so F is finite
  MemoryFit f = fit_memory(pts, false);
  ASSERT_TRUE(f.ok);
  EXPECT_LT(f.c2, 0);
  EXPECT_TRUE(f.c2_test.significant);
  EXPECT_NE(f.c2_test.verdict.find("negative"), std::string::npos) << f.c2_test.verdict;
}

// --- refusals ------------------------------------------------------------------------------

TEST(MemoryFit, RefusesTwoPoints) {
  MemoryFit f = fit_memory(surface({{2, 2048}, {2, 8192}}), false);
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.points, 2);
  EXPECT_NE(f.why_not.find("at least 3 distinct"), std::string::npos) << f.why_not;
  EXPECT_TRUE(one_line(f.why_not));
  EXPECT_THROW(predict_peak(f, 2, 2048), Error);
  EXPECT_FALSE(fit_memory({}, false).ok);
}

TEST(MemoryFit, RepeatsOfOnePointDoNotCountAsDistinct) {
  MemoryFit f = fit_memory(surface({{2, 2048}, {2, 2048}, {2, 8192}}), false);
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.points, 3);
  EXPECT_EQ(f.distinct_points, 2);
  // A repeat is fine alongside three distinct points: it is one more degree of freedom.
  MemoryFit g = fit_memory(surface({{2, 2048}, {2, 2048}, {2, 8192}, {2, 16384}}), false);
  ASSERT_TRUE(g.ok) << g.why_not;
  EXPECT_EQ(g.dof, 1);
}

// At one width b·w² = w·(b·w): the points lie on a line through the origin however many
// batches there are; four of them are still singular.
TEST(MemoryFit, RefusesOneWidthHoweverManyBatches) {
  MemoryFit f = fit_memory(surface({{1, 8192}, {2, 8192}, {4, 8192}, {8, 8192}}), false);
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.distinct_points, 4);
  EXPECT_NE(f.why_not.find("every fitted point is at width 8192"), std::string::npos) << f.why_not;
  EXPECT_NE(f.why_not.find("singular"), std::string::npos);
  EXPECT_TRUE(one_line(f.why_not));
}

TEST(MemoryFit, RefusesOneTokenCount) {
  MemoryFit f = fit_memory(surface({{1, 8192}, {2, 4096}, {4, 2048}}), false);
  EXPECT_FALSE(f.ok);
  EXPECT_NE(f.why_not.find("b·w = 8192 tokens"), std::string::npos) << f.why_not;
}

// (10, 1024), (6, 2048), (5, 3072): x1 = 10240, 12288, 15360 and x2 = 10485760, 25165824,
// 47185920, all on x2 = 7168·x1 − 62914560. Three widths, three batches, and still singular.
TEST(MemoryFit, RefusesPointsOnAnyOneLine) {
  MemoryFit f = fit_memory(surface({{10, 1024}, {6, 2048}, {5, 3072}}), false);
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.distinct_points, 3);
  EXPECT_NE(f.why_not.find("lie on one line"), std::string::npos) << f.why_not;
  // A fourth point off the line determines the fit.
  MemoryFit g = fit_memory(surface({{10, 1024}, {6, 2048}, {5, 3072}, {2, 2048}}), false);
  ASSERT_TRUE(g.ok) << g.why_not;
  expect_rel(g.c2, kC2, 1e-9);
}

// Batch 1 at widths 4194300..4194302: not exactly collinear (a parabola), but 1 − r² = 4.7e-15.
// At 65536..65538 it is 1.9e-11: accepted.
TEST(MemoryFit, RefusesANumericallySingularDesign) {
  MemoryFit f = fit_memory(surface({{1, 4194300}, {1, 4194301}, {1, 4194302}}), false);
  EXPECT_FALSE(f.ok);
  EXPECT_NE(f.why_not.find("numerically"), std::string::npos) << f.why_not;
  MemoryFit g = fit_memory(surface({{1, 65536}, {1, 65537}, {1, 65538}}), false);
  EXPECT_TRUE(g.ok) << g.why_not;
}

TEST(MemoryFit, OomPointsAreExcludedFromTheFitButKept) {
  auto pts = surface({{1, 2048}, {2, 8192}, {4, 4096}, {2, 16384}});
  std::vector<MemoryFitPoint> with = pts;
  with.insert(with.begin() + 1, oom_point(2, 32768));
  MemoryFitPoint partial = oom_point(8, 16384);  // what the allocator had reached when it failed
  partial.peak_allocated_bytes = 79 * kGiB;
  with.push_back(partial);
  MemoryFit a = fit_memory(pts, false);
  MemoryFit b = fit_memory(with, false);
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(b.points, 4);
  EXPECT_EQ(b.excluded_oom, 2);
  EXPECT_EQ(b.c0, a.c0);
  EXPECT_EQ(b.c1, a.c1);
  EXPECT_EQ(b.c2, a.c2);
  EXPECT_EQ(b.fitted_indices, (std::vector<int64_t>{0, 2, 3, 4}));
  ASSERT_EQ(b.oom_points.size(), 2u);
  EXPECT_EQ(b.oom_points[0].width, 32768);
  EXPECT_EQ(b.oom_points[1].batch, 8);
  // Two OOM points and two fitted: refused, and the message counts both.
  MemoryFit c = fit_memory({pts[0], pts[1], oom_point(2, 4096), oom_point(2, 2048)}, false);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.why_not.find("2 OOM excluded"), std::string::npos) << c.why_not;
  // Kept for the checks: an OOM measured inside a predicted edge is named in its note.
  std::vector<MemoryFitPoint> inside = pts;
  inside.push_back(oom_point(2, 20480));
  MemoryFit d = fit_memory(inside, false);
  MemoryEdge e = largest_width(d, 2, budget(80.0 * kGiB + kMiB, 0));
  EXPECT_EQ(e.width, 20480);
  EXPECT_NE(e.note.find("OOM at 2x20480"), std::string::npos) << e.note;
}

// --- edges ---------------------------------------------------------------------------------

TEST(MemoryEdge, LargestWidthOnHandWorkedNumbers) {
  MemoryFit f = hand_fit();
  // 82 GiB with 2 GiB reserved: a budget of exactly 80 GiB, met exactly at 2 x 20480.
  MemoryEdge e = largest_width(f, 2, budget(82.0 * kGiB, 2.0 * kGiB));
  EXPECT_EQ(e.axis, "width");
  EXPECT_EQ(e.batch, 2);
  EXPECT_EQ(e.width, 20480);
  EXPECT_EQ(e.step, 256);
  EXPECT_EQ(e.budget_bytes, 80.0 * kGiB);
  EXPECT_EQ(e.predicted_peak_bytes, 80.0 * kGiB);
  ASSERT_TRUE(e.next_predicted_peak_bytes);
  EXPECT_EQ(*e.next_predicted_peak_bytes,
            static_cast<double>(exact_peak(kC0, kC1, kC2, 2, 20736)));  // 80.69 GiB
  EXPECT_FALSE(e.fits_nothing);
  EXPECT_FALSE(e.capped);
  EXPECT_TRUE(e.extrapolated);  // measured up to 16384
  EXPECT_TRUE(one_line(e.note));
  EXPECT_NE(e.note.find("20480"), std::string::npos) << e.note;
  // One byte less and the edge drops a step.
  EXPECT_EQ(largest_width(f, 2, budget(82.0 * kGiB - 1, 2.0 * kGiB)).width, 20224);
  // The step is the grid: 20480 = 20·1024; on a grid of 3000 the edge is 18000 (21000 is over).
  EXPECT_EQ(largest_width(f, 2, budget(80.0 * kGiB, 0, 1024)).width, 20480);
  EXPECT_EQ(largest_width(f, 2, budget(80.0 * kGiB, 0, 3000)).width, 18000);
  // Batch 1: 50 GiB + 131072·w + 32·w² ≤ 80 GiB → w² + 4096·w − 30·2^25 ≤ 0 → w ≤ 29745.6;
  // a grid of 1 token, scanned up from one token.
  EXPECT_EQ(largest_width(f, 1, budget(80.0 * kGiB, 0, 1)).width, 29745);
  // The fitted surface (not the hand-made one) agrees away from the exact tie.
  MemoryFit g = fit_memory(surface({{1, 2048}, {2, 8192}, {4, 4096}, {2, 16384}}), false);
  EXPECT_EQ(largest_width(g, 2, budget(80.0 * kGiB + kMiB, 0)).width, 20480);
}

TEST(MemoryEdge, LargestWidthCappedAndFitsNothing) {
  MemoryFit f = hand_fit();
  MemoryEdgeRequest r = budget(80.0 * kGiB, 0);
  r.max_width = 8192;
  MemoryEdge capped = largest_width(f, 2, r);
  EXPECT_EQ(capped.width, 8192);
  EXPECT_TRUE(capped.capped);
  EXPECT_FALSE(capped.extrapolated);
  EXPECT_NE(capped.note.find("capped"), std::string::npos) << capped.note;
  r.max_width = 8000;  // the grid's last multiple of 256 below it
  EXPECT_EQ(largest_width(f, 2, r).width, 7936);
  // 40 GiB is below the 50 GiB fixed part: nothing fits.
  MemoryEdge none = largest_width(f, 2, budget(40.0 * kGiB, 0));
  EXPECT_TRUE(none.fits_nothing);
  EXPECT_EQ(none.width, 0);
  EXPECT_EQ(none.predicted_peak_bytes, static_cast<double>(exact_peak(kC0, kC1, kC2, 2, 256)));
  EXPECT_NE(none.note.find("fits nothing"), std::string::npos) << none.note;
  EXPECT_TRUE(one_line(none.note));
}

// The reserved fit of an H100 sweep (26B-A4B, batch 2, 2,048-8,192, AdamW): c2 < 0, so the
// surface peaks and falls below any budget far past the measured range. The edge is the first
// crossing from below (a search from the top found 2^20 "fitting").
TEST(MemoryEdge, ANegativeQuadraticTermGivesTheFirstCrossingNotTheFarSide) {
  const long double c0 = 68631396352.0L, c1 = 1625292.8L, c2 = -128.0L;
  MemoryFit f = hand_fit(static_cast<double>(c0), static_cast<double>(c1), static_cast<double>(c2));
  const long double cap = 72.0L * 1024 * 1024 * 1024;
  // c0 + 2·c1·w + 2·c2·w² = cap: the smaller root of 2·c2·w² + 2·c1·w + (c0 - cap) = 0.
  const long double a = 2 * c2, b = 2 * c1, c = c0 - cap;
  const long double root = (-b + std::sqrt(b * b - 4 * a * c)) / (2 * a);
  ASSERT_GT(root, 1024.0L);
  const int64_t expected = static_cast<int64_t>(root / 1024) * 1024;  // 3,072
  MemoryEdge e = largest_width(f, 2, budget(72.0 * kGiB, 0, 1024));
  EXPECT_EQ(e.width, expected);
  EXPECT_FALSE(e.capped);
  // Batch: each sequence adds c1·w + c2·w² (positive at 8,192), so one sequence more per step.
  const long double per_sequence = c1 * 8192 + c2 * 8192.0L * 8192;
  ASSERT_GT(per_sequence, 0.0L);
  EXPECT_EQ(largest_batch(f, 8192, budget(72.0 * kGiB, 0)).batch,
            static_cast<int64_t>((cap - c0) / per_sequence));
}

TEST(MemoryEdge, LargestBatchOnHandWorkedNumbers) {
  MemoryFit f = hand_fit();
  // 1 GiB per sequence at width 4096 on 50 GiB: 30 sequences in 80 GiB, exactly.
  MemoryEdge e = largest_batch(f, 4096, budget(80.0 * kGiB, 0));
  EXPECT_EQ(e.axis, "batch");
  EXPECT_EQ(e.batch, 30);
  EXPECT_EQ(e.width, 4096);
  EXPECT_EQ(e.step, 1);
  EXPECT_EQ(e.predicted_peak_bytes, 80.0 * kGiB);
  EXPECT_EQ(*e.next_predicted_peak_bytes, 81.0 * kGiB);
  EXPECT_TRUE(e.extrapolated);  // 30·4096 tokens, measured up to 32768
  EXPECT_EQ(largest_batch(f, 4096, budget(80.0 * kGiB - 1, 0)).batch, 29);
  // 3 GiB per sequence at 8192: 10 in 80 GiB.
  EXPECT_EQ(largest_batch(f, 8192, budget(80.0 * kGiB, 0)).batch, 10);
  MemoryEdgeRequest r = budget(80.0 * kGiB, 0);
  r.max_batch = 16;
  MemoryEdge capped = largest_batch(f, 1024, r);
  EXPECT_EQ(capped.batch, 16);
  EXPECT_TRUE(capped.capped);
  MemoryEdge none = largest_batch(f, 4096, budget(50.5 * kGiB, 0));  // one sequence is 51 GiB
  EXPECT_TRUE(none.fits_nothing);
  EXPECT_EQ(none.batch, 0);
  EXPECT_EQ(none.predicted_peak_bytes, 51.0 * kGiB);
}

TEST(MemoryEdge, MarginalSequenceBytes) {
  MemoryFit f = hand_fit();
  EXPECT_EQ(marginal_sequence_bytes(f, 4096), 1.0 * kGiB);
  EXPECT_EQ(marginal_sequence_bytes(f, 8192), 3.0 * kGiB);
  for (int64_t w : {256, 2048, 16384, 131072}) {
    EXPECT_EQ(marginal_sequence_bytes(f, w), predict_peak(f, 3, w) - predict_peak(f, 2, w)) << w;
  }
}

TEST(MemoryEdge, LargestShapesDoNotOverflow) {
  MemoryFit f = hand_fit();
  // b·w² = 2^16·2^44 = 2^60: exact in long double, and in the double result to its precision.
  const long double want = static_cast<long double>(kC0) + 131072.0L * 65536 * 4194304 +
                           32.0L * 65536 * 4194304.0L * 4194304;
  EXPECT_EQ(predict_peak(f, kMaxMemoryFitBatch, kMaxMemoryFitWidth), static_cast<double>(want));
  MemoryEdgeRequest r = budget(1e30, 0, 1);
  r.max_width = kMaxMemoryFitWidth;
  MemoryEdge e = largest_width(f, kMaxMemoryFitBatch, r);
  EXPECT_EQ(e.width, kMaxMemoryFitWidth);
  EXPECT_TRUE(e.capped);
  EXPECT_FALSE(e.next_predicted_peak_bytes);  // one step past the largest width accepted
}

// --- edge checks ---------------------------------------------------------------------------

MemoryEdge hand_edge(bool reserved = false) {
  MemoryFit f = hand_fit();
  f.reserved = reserved;
  return largest_width(f, 2, budget(82.0 * kGiB, 2.0 * kGiB));  // 2 x 20480 at 80 GiB
}

TEST(MemoryEdgeCheck, HeldWhenTheEdgeFitsAndTheNextStepDoesNot) {
  MemoryEdge e = hand_edge();
  MemoryEdgeCheck c = check_edge(e, ok_point(2, 20480, 79 * kGiB + kGiB / 2), oom_point(2, 20736),
                                 80.0 * kGiB);
  EXPECT_EQ(c.verdict, "held");
  ASSERT_TRUE(c.edge_error_bytes);
  EXPECT_EQ(*c.edge_error_bytes, -0.5 * kGiB);
  EXPECT_FALSE(c.next_error_bytes);
  EXPECT_TRUE(one_line(c.message));
  EXPECT_NE(c.message.find("-512.00 MiB"), std::string::npos) << c.message;
  // Over the budget but it ran: the reserve absorbed it, and the message says so.
  MemoryEdgeCheck over_budget =
      check_edge(e, ok_point(2, 20480, 81 * kGiB), oom_point(2, 20736), 80.0 * kGiB);
  EXPECT_EQ(over_budget.verdict, "held");
  EXPECT_EQ(*over_budget.edge_error_bytes, 1.0 * kGiB);
  EXPECT_NE(over_budget.message.find("reserve absorbed"), std::string::npos) << over_budget.message;
}

TEST(MemoryEdgeCheck, ConservativeWhenTheNextStepFitsToo) {
  MemoryEdge e = hand_edge();
  MemoryEdgeCheck c = check_edge(e, ok_point(2, 20480, 78 * kGiB), ok_point(2, 20736, 79 * kGiB),
                                 80.0 * kGiB);
  EXPECT_EQ(c.verdict, "conservative");
  EXPECT_EQ(*c.edge_error_bytes, -2.0 * kGiB);
  ASSERT_TRUE(c.next_error_bytes);
  EXPECT_EQ(*c.next_error_bytes,
            static_cast<double>(79 * kGiB - exact_peak(kC0, kC1, kC2, 2, 20736)));
  EXPECT_NE(c.message.find("short by at least one step"), std::string::npos) << c.message;
}

TEST(MemoryEdgeCheck, OverWhenTheEdgeRunsOutOfMemory) {
  MemoryEdge e = hand_edge();
  MemoryEdgeCheck c = check_edge(e, oom_point(2, 20480), oom_point(2, 20736), 80.0 * kGiB);
  EXPECT_EQ(c.verdict, "over");
  EXPECT_FALSE(c.edge_error_bytes);
  EXPECT_FALSE(c.next_error_bytes);
  EXPECT_NE(c.message.find("overshot"), std::string::npos) << c.message;
  // The edge ran out but the next step ran: still over, and the runs are said to disagree.
  MemoryEdgeCheck odd =
      check_edge(e, oom_point(2, 20480), ok_point(2, 20736, 79 * kGiB), 80.0 * kGiB);
  EXPECT_EQ(odd.verdict, "over");
  EXPECT_TRUE(odd.next_error_bytes);
  EXPECT_NE(odd.message.find("disagree"), std::string::npos) << odd.message;
}

TEST(MemoryEdgeCheck, ComparesThePeakTheFitPredictsAlongItsAxis) {
  // A reserved fit is checked against the reserved peaks.
  MemoryEdge e = hand_edge(true);
  MemoryEdgeCheck c = check_edge(e, MemoryFitPoint{2, 20480, 70 * kGiB, 79 * kGiB, false},
                                 oom_point(2, 20736), 80.0 * kGiB);
  EXPECT_EQ(*c.edge_error_bytes, -1.0 * kGiB);
  // Along the batch: the next step is one more sequence.
  MemoryEdge b = largest_batch(hand_fit(), 4096, budget(80.0 * kGiB, 0));
  MemoryEdgeCheck cb =
      check_edge(b, ok_point(30, 4096, 80 * kGiB), oom_point(31, 4096), 80.0 * kGiB);
  EXPECT_EQ(cb.verdict, "held");
  EXPECT_EQ(*cb.edge_error_bytes, 0.0);
  EXPECT_THROW(check_edge(b, ok_point(30, 4096, 80 * kGiB), oom_point(30, 4352), 80.0 * kGiB),
               UsageError);
}

TEST(MemoryEdgeCheck, RefusesPointsThatAreNotTheEdgeAndTheStepPastIt) {
  MemoryEdge e = hand_edge();
  const double b = 80.0 * kGiB;
  EXPECT_THROW(check_edge(e, ok_point(2, 20224, 79 * kGiB), oom_point(2, 20480), b), UsageError);
  EXPECT_THROW(check_edge(e, ok_point(2, 20480, 79 * kGiB), oom_point(2, 20992), b), UsageError);
  EXPECT_THROW(check_edge(e, ok_point(2, 20480, 79 * kGiB), oom_point(3, 20480), b), UsageError);
  EXPECT_THROW(check_edge(e, ok_point(2, 20480, 0), oom_point(2, 20736), b), UsageError);
  EXPECT_THROW(check_edge(e, ok_point(2, 20480, 79 * kGiB), oom_point(2, 20736), NAN), UsageError);
  EXPECT_THROW(check_edge(e, ok_point(2, 20480, 79 * kGiB), oom_point(2, 20736), -1), UsageError);
  MemoryEdge none = largest_width(hand_fit(), 2, budget(40.0 * kGiB, 0));
  EXPECT_THROW(check_edge(none, ok_point(2, 256, 79 * kGiB), oom_point(2, 512), b), UsageError);
}

// --- broken inputs -------------------------------------------------------------------------

void expect_usage_one_line(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no UsageError for " << needle;
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(one_line(m)) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

TEST(MemoryFit, RefusesBrokenPoints) {
  auto good = surface({{1, 2048}, {2, 8192}, {4, 4096}});
  auto with = [&](MemoryFitPoint p) {
    auto v = good;
    v.push_back(p);
    return [v] { fit_memory(v, false); };
  };
  expect_usage_one_line(with(ok_point(0, 2048, kGiB)), "memory point 4: batch 0");
  expect_usage_one_line(with(ok_point(-3, 2048, kGiB)), "batch -3");
  expect_usage_one_line(with(ok_point(2, 0, kGiB)), "width 0");
  expect_usage_one_line(with(ok_point(kMaxMemoryFitBatch + 1, 8, kGiB)), "outside 1..65536");
  expect_usage_one_line(with(ok_point(1, kMaxMemoryFitWidth + 1, kGiB)), "outside 1..4194304");
  expect_usage_one_line(with(MemoryFitPoint{2, 2048, 0, kGiB, false}), "a measured peak is positive");
  expect_usage_one_line(with(MemoryFitPoint{2, 2048, -1, 0, true}), "negative peak");
  expect_usage_one_line(with(MemoryFitPoint{2, 2048, 2 * kGiB, kGiB, false}), "below peak allocated");
  // An unknown reserved peak is fine when allocated is fitted, and the other way round it is not.
  EXPECT_TRUE(fit_memory({MemoryFitPoint{1, 2048, kGiB, 0, false},
                          MemoryFitPoint{2, 8192, 2 * kGiB, 0, false},
                          MemoryFitPoint{4, 4096, 3 * kGiB, 0, false}},
                         false)
                  .ok);
  expect_usage_one_line([] { fit_memory({MemoryFitPoint{1, 2048, kGiB, 0, false}}, true); },
                        "peak reserved is 0 bytes");
  expect_usage_one_line([&] { fit_memory(good, false, NAN); }, "alpha");
  expect_usage_one_line([&] { fit_memory(good, false, 0.9); }, "alpha");
}

TEST(MemoryEdge, RefusesBrokenRequestsAndFits) {
  MemoryFit f = hand_fit();
  auto width_with = [&](MemoryEdgeRequest r) { return [f, r] { largest_width(f, 2, r); }; };
  const double inf = std::numeric_limits<double>::infinity();
  expect_usage_one_line(width_with(budget(NAN, 0)), "GPU memory");
  expect_usage_one_line(width_with(budget(inf, 0)), "GPU memory");
  expect_usage_one_line(width_with(budget(0, 0)), "GPU memory");
  expect_usage_one_line(width_with(budget(80.0 * kGiB, NAN)), "reserve");
  expect_usage_one_line(width_with(budget(80.0 * kGiB, -1)), "reserve");
  expect_usage_one_line(width_with(budget(80.0 * kGiB, 80.0 * kGiB)), "no budget is left");
  expect_usage_one_line(width_with(budget(80.0 * kGiB, 0, 0)), "width step 0");
  MemoryEdgeRequest r = budget(80.0 * kGiB, 0);
  r.max_width = 128;
  expect_usage_one_line(width_with(r), "width step 256");
  r = budget(80.0 * kGiB, 0);
  r.max_width = kMaxMemoryFitWidth + 1;
  expect_usage_one_line(width_with(r), "largest width");
  r = budget(80.0 * kGiB, 0);
  r.max_batch = 0;
  expect_usage_one_line([&] { largest_batch(f, 4096, r); }, "largest batch 0");
  expect_usage_one_line([&] { largest_width(f, 0, budget(80.0 * kGiB, 0)); }, "batch 0");
  expect_usage_one_line([&] { largest_batch(f, -5, budget(80.0 * kGiB, 0)); }, "width -5");
  expect_usage_one_line([&] { predict_peak(f, 2, kMaxMemoryFitWidth + 1); }, "width");
  expect_usage_one_line([&] { marginal_sequence_bytes(f, 0); }, "width 0");
  // A refused or corrupted fit is not a usage error: nothing to predict from.
  MemoryFit refused = fit_memory(surface({{2, 2048}, {2, 8192}}), false);
  try {
    largest_width(refused, 2, budget(80.0 * kGiB, 0));
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kError);
    EXPECT_NE(std::string(e.what()).find("no memory fit"), std::string::npos) << e.what();
  }
  MemoryFit nan_fit = hand_fit(kC0, NAN, kC2);
  EXPECT_THROW(predict_peak(nan_fit, 2, 2048), Error);
  EXPECT_THROW(marginal_sequence_bytes(hand_fit(kC0, kC1, inf), 2048), Error);
}

// --- views ---------------------------------------------------------------------------------

TEST(MemoryFit, JsonViews) {
  std::vector<MemoryFitPoint> pts = surface({{1, 2048}, {2, 8192}, {4, 4096}, {2, 16384}});
  pts.push_back(oom_point(2, 32768));
  MemoryFit f = fit_memory(pts, false);
  Json j = to_json(f);
  EXPECT_EQ(j["ok"], true);
  EXPECT_TRUE(j["why_not"].is_null());
  EXPECT_EQ(j["peak"], "allocated");
  EXPECT_EQ(j["points"], 4);
  EXPECT_EQ(j["excluded_oom"], 1);
  EXPECT_NEAR(j["c2_bytes_per_token_width"].get<double>(), 32.0, 1e-6);
  ASSERT_EQ(j["fitted"].size(), 4u);
  EXPECT_EQ(j["fitted"][3]["index"], 3);
  EXPECT_NEAR(j["fitted"][3]["predicted_bytes"].get<double>(),
              static_cast<double>(exact_peak(kC0, kC1, kC2, 2, 16384)), 1e-3);
  EXPECT_EQ(j["oom_points"][0]["width"], 32768);
  EXPECT_EQ(j["c2_test"]["testable"], true);
  EXPECT_TRUE(j["c2_test"]["f"].is_null());  // infinite: no residual at all
  EXPECT_EQ(j["c2_test"]["p_value"], 0.0);
  EXPECT_NO_THROW((void)j.dump());

  Json refused = to_json(fit_memory(surface({{2, 2048}, {2, 8192}}), true));
  EXPECT_EQ(refused["ok"], false);
  EXPECT_EQ(refused["peak"], "reserved");
  EXPECT_TRUE(refused["c0_bytes"].is_null());
  EXPECT_TRUE(refused["c2_test"].is_null());
  EXPECT_TRUE(refused["why_not"].is_string());

  MemoryEdge e = hand_edge();
  Json je = to_json(e);
  EXPECT_EQ(je["axis"], "width");
  EXPECT_EQ(je["width"], 20480);
  EXPECT_EQ(je["budget_bytes"], 80.0 * kGiB);
  EXPECT_EQ(je["fits_nothing"], false);
  EXPECT_EQ(je["note"], e.note);

  MemoryEdgeCheck c =
      check_edge(e, ok_point(2, 20480, 79 * kGiB), oom_point(2, 20736), 80.0 * kGiB);
  Json jc = to_json(c);
  EXPECT_EQ(jc["verdict"], "held");
  EXPECT_EQ(jc["edge_error_bytes"], -1.0 * kGiB);
  EXPECT_TRUE(jc["next_error_bytes"].is_null());
  EXPECT_EQ(jc["edge"]["width"], 20480);
  EXPECT_EQ(jc["next"]["oom"], true);
  EXPECT_EQ(jc["predicted"]["width"], 20480);
}

}  // namespace
}  // namespace tprobe::core
