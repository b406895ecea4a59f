// The report's section builder and build_report's use of the probe list it is given: the order,
// the generic section of a probe with no builder, fields named relative to results.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "tprobe/config.hpp"
#include "tprobe/core/data/padding_report.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {
namespace {

EvidenceInput evidence(const std::string& probe, Json results) {
  EvidenceInput in;
  in.name = probe + ".json";
  in.path = "/x/" + in.name;
  in.doc = {{"schema", {{"name", "tprobe." + probe}, {"version", kEvidenceSchemaVersion}}},
            {"tool", {{"version", TPROBE_VERSION}}},
            {"status", {{"outcome", "ok"}}},
            {"environment", {{"device", {{"memory_bytes", 80}}}}},
            {"results", std::move(results)}};
  return in;
}

void draw_a(SectionBuilder& c) {
  c.fact("x", c.string_at("deep.x"), "deep.x");
  c.fact("two", "", {"deep.x", "y"});
  c.fact("memory",
         fmt::format("{}",
                     c.number_at(outside_results("environment.device.memory_bytes")).value_or(-1)),
         outside_results("environment.device.memory_bytes"));
  if (!c.array_at("rows")) c.absent("rows", "the rows figure");
  c.figure("f", "F", "<svg></svg>", {"deep.x", outside_results("environment.device")}, "");
}

void draw_b(SectionBuilder& c) { c.note("b drawn"); }

void draw_throws(SectionBuilder&) { throw std::runtime_error("unforeseen"); }

TEST(ReportSection, FieldsAreRelativeToResultsUnlessOutside) {
  const std::vector<ReportProbe> probes = {{"a", "Probe A", draw_a}};
  const Report r = build_report({evidence("a", {{"deep", {{"x", "seven"}}}})}, probes);
  ASSERT_EQ(r.sections.size(), 1u);
  const ReportSection& s = r.sections[0];
  EXPECT_EQ(s.title, "Probe A");
  ASSERT_EQ(s.facts.size(), 3u);
  EXPECT_EQ(s.facts[0].value, "seven");
  EXPECT_EQ(s.facts[0].field, "results.deep.x");
  EXPECT_EQ(s.facts[1].field, "results.deep.x, results.y");
  EXPECT_EQ(s.facts[2].value, "80");
  EXPECT_EQ(s.facts[2].field, "environment.device.memory_bytes");
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_EQ(s.notes[0],
            "results.rows absent or not of the documented type: the rows figure not drawn");
  ASSERT_EQ(s.figures.size(), 1u);
  EXPECT_EQ(s.figures[0].id, "fig-a-f");
  EXPECT_EQ(s.figures[0].source, "a.json");
  EXPECT_EQ(s.figures[0].fields,
            (std::vector<std::string>{"results.deep.x", "environment.device"}));
}

TEST(ReportSection, OrderIsTheListsAndUnknownProbesComeLast) {
  const std::vector<ReportProbe> probes = {{"b", "B", draw_b}, {"a", "A", draw_a}};
  const Report r = build_report({evidence("a", Json::object()), evidence("zz", Json::object()),
                                 evidence("b", Json::object())},
                                probes);
  ASSERT_EQ(r.sections.size(), 3u);
  EXPECT_EQ(r.sections[0].probe, "b");
  EXPECT_EQ(r.sections[1].probe, "a");
  EXPECT_EQ(r.sections[2].probe, "zz");
  EXPECT_EQ(r.sections[2].title, "tprobe zz");
  ASSERT_EQ(r.sections[2].notes.size(), 1u);
  EXPECT_EQ(r.sections[2].notes[0],
            "this tprobe draws no figures for probe 'zz'; its status is shown");
  // The same evidence with the order of the list reversed.
  const Report rev = build_report({evidence("a", Json::object()), evidence("b", Json::object())},
                                  {probes[1], probes[0]});
  EXPECT_EQ(rev.sections[0].probe, "a");
  EXPECT_EQ(rev.sections[1].probe, "b");
}

TEST(ReportSection, ABuilderThatThrowsLeavesANote) {
  const Report r = build_report({evidence("t", Json::object())}, {{"t", "T", draw_throws}});
  ASSERT_EQ(r.sections.size(), 1u);
  ASSERT_EQ(r.sections[0].notes.size(), 1u);
  EXPECT_NE(r.sections[0].notes[0].find("could not draw this section: unforeseen"),
            std::string::npos)
      << r.sections[0].notes[0];
}


// The padding figure draws a histogram of up to 64 bins as it is, one row per bin with the widths
// counted in the bin that holds them; a 65th bin merges consecutive bins (issue 46: the figure is
// bounded; tests/scale/report_scale_test.cpp times 10^6 bins).
std::vector<std::string> bar_labels(const std::string& svg) {
  std::vector<std::string> out;
  const std::string open = "class=\"bar-label\"";
  for (std::size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    const std::size_t start = svg.find('>', at) + 1;
    out.push_back(svg.substr(start, svg.find('<', start) - start));
  }
  return out;
}

Report padding_figure(int bins, const Json& widths) {
  Json hist = Json::array();
  for (int i = 0; i < bins; ++i) {
    hist.push_back({{"lo", 1 << i % 20}, {"hi", 2 << i % 20}, {"records", i + 1}});
  }
  return build_report({evidence("padding", {{"histogram", hist}, {"micro_batch_widths", widths}})},
                      {{"padding", "Padding", padding_report_section}});
}

TEST(ReportSection, PaddingHistogramUpTo64BinsIsDrawnBinByBin) {
  // Bins [1,2) [2,4) [4,8) [8,16) [16,32); widths 3 and 3 in [2,4), 31 in [16,32), 40 in none.
  const Report r = padding_figure(5, Json::array({3, 3, 31, 40}));
  ASSERT_EQ(r.sections[0].figures.size(), 1u);
  const ReportFigure& f = r.sections[0].figures[0];
  EXPECT_EQ(bar_labels(f.svg),
            (std::vector<std::string>{"1 – 1", "2 – 3", "4 – 7", "8 – 15", "16 – 31"}));
  EXPECT_NE(f.svg.find("2 – 3 (records by real length): 2<"), std::string::npos);
  EXPECT_NE(f.svg.find("2 – 3 (micro-batches by padded width): 2<"), std::string::npos);
  EXPECT_NE(f.svg.find("16 – 31 (micro-batches by padded width): 1<"), std::string::npos);
  EXPECT_NE(f.svg.find("4 – 7 (micro-batches by padded width): 0<"), std::string::npos);
  EXPECT_EQ(f.caption.find("The file has"), std::string::npos) << f.caption;
  EXPECT_EQ(bar_labels(padding_figure(64, Json::array()).sections[0].figures[0].svg).size(), 64u);
  // 65 bins: 33 rows of 2 consecutive bins (the last holds one), and the caption says so.
  const Report merged = padding_figure(65, Json::array({3}));
  const ReportFigure& m = merged.sections[0].figures[0];
  const std::vector<std::string> labels = bar_labels(m.svg);
  ASSERT_EQ(labels.size(), 33u);
  EXPECT_EQ(labels[0], "1 – 3");  // bins 0 and 1: [1, 4), records 1 + 2
  EXPECT_NE(m.svg.find("1 – 3 (records by real length): 3<"), std::string::npos);
  EXPECT_NE(m.svg.find("1 – 3 (micro-batches by padded width): 1<"), std::string::npos);
  EXPECT_NE(m.caption.find("The file has 65 bins; they are drawn as 33 bars of 2 consecutive"),
            std::string::npos)
      << m.caption;
}


// A generic table shows every scalar key as a column, up to 64, and says how many it left out.
TEST(ReportSection, GenericTableColumnsAreCappedAndNamed) {
  auto table_of = [](int keys) {
    Json rows = Json::array();
    for (int i = 0; i < keys; ++i) rows.push_back({{"k" + std::to_string(i), i}, {"name", "x"}});
    const Report r = build_report({evidence("t", {{"rows", rows}})},
                                  {{"t", "T", [](SectionBuilder& c) {
                                      c.table(c.generic_table("tab", "Rows", *c.array_at("rows"),
                                                              "rows"));
                                    }}});
    return r.sections[0].tables.at(0);
  };
  const ReportTable few = table_of(3);  // negative control: all columns, title unchanged
  EXPECT_EQ(few.header, (std::vector<std::string>{"k0", "name", "k1", "k2"}));
  EXPECT_EQ(few.title, "Rows");
  const ReportTable many = table_of(100);
  EXPECT_EQ(many.header.size(), 64u);
  EXPECT_EQ(many.header[1], "name");
  EXPECT_EQ(many.title, "Rows (first 60 of 100) (first 64 of 101 columns)");
}

}  // namespace
}  // namespace tprobe::core
