// The report's section builder and build_report's use of the probe list it is given: the order,
// the generic section of a probe with no builder, fields named relative to results.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "tprobe/config.hpp"
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

}  // namespace
}  // namespace tprobe::core
