// The fit-vs-parts share check against hand-made series whose coefficients are known, with the
// step's fitted curve computed independently (2×2 normal equations) in the test.
#include "tprobe/core/cost/step_shares.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

// Least squares of y = A·w + B·w² by the normal equations, independently of fit_model.
std::pair<double, double> fit_ab(const std::vector<double>& w, const std::vector<double>& y) {
  double s22 = 0, s23 = 0, s33 = 0, s2y = 0, s3y = 0;  // Σw², Σw³, Σw⁴, Σw·y, Σw²·y
  for (size_t i = 0; i < w.size(); ++i) {
    s22 += w[i] * w[i];
    s23 += w[i] * w[i] * w[i];
    s33 += w[i] * w[i] * w[i] * w[i];
    s2y += w[i] * y[i];
    s3y += w[i] * w[i] * y[i];
  }
  const double det = s22 * s33 - s23 * s23;
  return {(s2y * s33 - s23 * s3y) / det, (s22 * s3y - s23 * s2y) / det};
}

TEST(ShareCheck, TermsAddUpToTheDifferenceAndNameTheirParts) {
  ShareCheckInput in;
  in.widths = {2048, 4096, 8192, 16384};
  in.repeats = {1, 1, 1, 1};
  PartSeries q{"full/attention_core", true, {}};
  PartSeries l{"sliding/experts", false, {}};
  for (double w : in.widths) {
    q.seconds.push_back(2e-8 * w * w + 1e-5 * w);  // quadratic, with a linear term
    l.seconds.push_back(3e-4 * w + 1e-9 * w * w);  // "linear", with a little w² growth
  }
  for (size_t i = 0; i < in.widths.size(); ++i)
    in.step_s.push_back(q.seconds[i] + l.seconds[i] + 0.01);  // + a fixed 10 ms remainder
  in.parts = {q, l};
  ShareCheck c = check_quadratic_shares(in);
  ASSERT_TRUE(c.determined) << c.refusal;
  ASSERT_EQ(c.rows.size(), 4u);
  ASSERT_EQ(c.quadratic_parts, std::vector<std::string>{"full/attention_core"});
  const auto [a, b] = fit_ab(in.widths, in.step_s);
  for (size_t i = 0; i < 4; ++i) {
    const double w = in.widths[i], t = in.step_s[i];
    const double t_hat = a * w + b * w * w;
    const ShareCheckRow& r = c.rows[i];
    EXPECT_NEAR(r.fit_quadratic_share, b * w * w / t_hat, 1e-9);
    EXPECT_NEAR(r.parts_quadratic_share, q.seconds[i] / t, 1e-12);
    double sum = 0;
    for (const auto& term : r.terms) sum += term.share;
    EXPECT_NEAR(sum, r.difference, 1e-9);
    EXPECT_NEAR(r.difference, r.fit_quadratic_share - r.parts_quadratic_share, 1e-12);
    for (const auto& term : r.terms) {
      if (term.name == "quadratic growth of sliding/experts")
        EXPECT_NEAR(term.share, 1e-9 * w * w / t_hat, 1e-9);
      else if (term.name == "linear term and residual of full/attention_core")
        EXPECT_NEAR(term.share, -(q.seconds[i] / t - 2e-8 * w * w / t_hat), 1e-9);
      else
        EXPECT_NE(term.name.find("remainder"), std::string::npos) << term.name;
    }
  }
  Json j = to_json(c);
  EXPECT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["rows"][0]["terms"].size(), 3u);
}

TEST(ShareCheck, RefusesWhatItCannotCompare) {
  ShareCheckInput in;
  in.widths = {1024};
  in.repeats = {1};
  in.step_s = {1.0};
  in.parts = {{"full/attention_core", true, {0.5}}};
  ShareCheck c = check_quadratic_shares(in);
  EXPECT_FALSE(c.determined);
  EXPECT_NE(c.refusal.find("too few"), std::string::npos) << c.refusal;
  in.model = FitModel::kA;
  in.widths = {1024, 2048, 4096};
  in.repeats = {1, 1, 1};
  in.step_s = {1, 2, 4};
  in.parts = {{"full/attention_core", true, {0.5, 1, 2}}};
  EXPECT_NE(check_quadratic_shares(in).refusal.find("no quadratic term"), std::string::npos);
  in.model = FitModel::kAB;
  in.parts = {{"full/attention_core", true, {0.5}}};
  EXPECT_THROW(check_quadratic_shares(in), Error);
}

}  // namespace
}  // namespace tprobe::core
