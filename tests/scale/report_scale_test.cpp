// The report's padding figure on a huge hand-made histogram (issue 46: ~0.7 ms per bin, a
// 10^6-bin file took over 60 s, every width compared with every bin). The guard, as in
// parse_scale_test.cpp, is CPU-time growth (4x the bins and widths must cost about 4x, not 16x),
// with ctest's TIMEOUT as the backstop; and the drawn figure stays bounded in size. Also the
// generic table's columns over rows that each bring a new key (quadratic before).
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cpu_time.hpp"
#include "tprobe/config.hpp"
#include "tprobe/core/data/padding_report.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {
namespace {

// n one-token bins [i + 1, i + 2) and n micro-batch widths, one in each bin.
EvidenceInput padding_evidence(int n) {
  Json hist = Json::array();
  Json widths = Json::array();
  for (int i = 0; i < n; ++i) {
    hist.push_back({{"lo", i + 1}, {"hi", i + 2}, {"records", 1}});
    widths.push_back(n - i);  // reversed: the sort is exercised
  }
  EvidenceInput in;
  in.name = "padding.json";
  in.path = "/x/padding.json";
  in.doc = {{"schema", {{"name", "tprobe.padding"}, {"version", kEvidenceSchemaVersion}}},
            {"tool", {{"version", TPROBE_VERSION}}},
            {"status", {{"outcome", "ok"}}},
            {"results",
             {{"waste_ratio", 0.5},
              {"batch", 1},
              {"histogram", std::move(hist)},
              {"micro_batch_widths", std::move(widths)}}}};
  return in;
}

using scale::cpu_seconds;

const std::vector<ReportProbe>& probes() {
  static const std::vector<ReportProbe> list = {{"padding", "Padding", padding_report_section}};
  return list;
}

// CPU time of building the report's section for `in` (once: building the 10^6-bin document
// costs several times more under the sanitizers, and process CPU time does not stretch when the
// machine is busy).
double report_cpu_seconds(const EvidenceInput& in, Report* out) {
  const double t0 = cpu_seconds();
  Report r = build_report({in}, probes());
  const double t1 = cpu_seconds();
  if (out) *out = std::move(r);
  return t1 - t0;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The sum of the bar values whose titles follow `series` ("1,234" with thousands separators).
int64_t bar_sum(const std::string& svg, const std::string& series) {
  int64_t sum = 0;
  for (std::size_t at = svg.find(series); at != std::string::npos; at = svg.find(series, at + 1)) {
    int64_t v = 0;
    for (std::size_t i = at + series.size(); i < svg.size() && svg[i] != '<'; ++i) {
      if (svg[i] >= '0' && svg[i] <= '9') v = v * 10 + (svg[i] - '0');
    }
    sum += v;
  }
  return sum;
}

TEST(ReportScale, PaddingHistogramCpuTimeGrowsLinearly) {
  constexpr int kBig = 1000000;
  Report big_report;
  const double small = report_cpu_seconds(padding_evidence(kBig / 4), nullptr);
  const double big = report_cpu_seconds(padding_evidence(kBig), &big_report);
  // Linear: about 4 (a little more for the sort); quadratic: about 16.
  EXPECT_LT(big, 10 * std::max(small, 1e-3)) << "small " << small << " s, big " << big << " s";
  ASSERT_EQ(big_report.sections.size(), 1u);
  ASSERT_EQ(big_report.sections[0].figures.size(), 1u);
  const ReportFigure& fig = big_report.sections[0].figures[0];
  // At most 64 drawn rows (two bars each: records, micro-batches), and every bin and width is in
  // one of them: the bars' values (their titles, "…: 15,625") sum to the file's.
  const std::size_t rows = count_of(fig.svg, "class=\"bar-label\"");
  EXPECT_LE(rows, 64u);
  EXPECT_GE(rows, 32u);
  EXPECT_LT(fig.svg.size(), 100000u);
  EXPECT_NE(fig.caption.find("The file has 1,000,000 bins"), std::string::npos) << fig.caption;
  EXPECT_EQ(bar_sum(fig.svg, "(records by real length): "), kBig);
  EXPECT_EQ(bar_sum(fig.svg, "(micro-batches by padded width): "), kBig);
}


// A generic table over rows that each bring a new key (the padding section's per-source
// truncation table, hand-made): the columns were found by a linear search of those seen, n^2 / 2
// string compares.
double table_cpu_seconds(int n) {
  Json rows = Json::array();
  for (int i = 0; i < n; ++i) rows.push_back({{"key_" + std::to_string(i), i}});
  EvidenceInput in = padding_evidence(1);
  in.doc["results"]["truncation"] = {{"per_source", std::move(rows)}};
  Report r;
  const double t = report_cpu_seconds(in, &r);
  EXPECT_EQ(r.sections.at(0).tables.at(0).header.size(), 64u);
  return t;
}

TEST(ReportScale, GenericTableCpuTimeGrowsLinearlyWithDistinctKeys) {
  const double small = table_cpu_seconds(50000);
  const double big = table_cpu_seconds(200000);
  EXPECT_LT(big, 10 * std::max(small, 1e-3)) << "small " << small << " s, big " << big << " s";
}

}  // namespace
}  // namespace tprobe::core
