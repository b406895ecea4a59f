// `kernels`' trace side read back by its own code (issue 34, item 2): for every trace fixture, a
// report made by the real analysis — single, per-rank folder and A/B diff — written by to_json,
// read by kernels_report_from_json and written again gives the same JSON, the trace summary, its
// attribution and its memory included; each piece's reader does the same alone; and damaged
// pieces are one tprobe::Error naming the field.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "support/error_of.hpp"
#include "tprobe/core/trace/compare/kernels.hpp"
#include "tprobe/core/trace/stats/trace_memory_report.hpp"
#include "tprobe/core/trace/stats/trace_stats_report.hpp"

namespace tprobe::core {
namespace {

const std::string kTraces = std::string(TPROBE_FIXTURES_DIR) + "/traces";

KernelsReport kernels_of(std::vector<std::string> inputs) {
  KernelsRequest q;
  q.inputs = std::move(inputs);
  return analyze_kernels(q);
}

const std::vector<std::string>& fixtures() {
  static const std::vector<std::string> names = {"hf-sdpa-2x256.json.gz",
                                                 "hf-sdpa-memory-2x256.json.gz",
                                                 "hf-sdpa-memory-nonreentrant-2x256.json.gz",
                                                 "hf-sdpa-ranges-nonreentrant-2x256.json.gz",
                                                 "hf-sdpa-stack-2x256.json.gz",
                                                 "hf-sdpa-stack-nonreentrant-2x256.json.gz",
                                                 "parts-small.json",
                                                 "synthetic-1mb.json.gz"};
  return names;
}

// The negative control of the row caps (issue 46): an ordinary trace folds nothing.
TEST(TraceFromJson, AnOrdinaryTraceKeepsEveryStreamAndDeviceRow) {
  const KernelsReport r = kernels_of({kTraces + "/hf-sdpa-2x256.json.gz"});
  ASSERT_TRUE(r.sources[0].has_trace);
  const Json j = to_json(r);
  const Json& t = j["trace"];
  EXPECT_FALSE(t["streams"].empty());
  EXPECT_FALSE(t.contains("other_streams"));
  EXPECT_FALSE(t.contains("other_queue_length"));
  EXPECT_FALSE(t.contains("other_idle_split"));
  EXPECT_FALSE(j["kernel_table"].contains("other_devices"));
  EXPECT_FALSE(j["kernel_table"]["devices"].empty());
  const std::string dump = j.dump();
  EXPECT_EQ(dump.find("\"other_streams\""), std::string::npos);
}

TEST(TraceFromJson, EverySingleTraceRoundTripsWhole) {
  bool saw_memory = false, saw_parts = false;
  for (const std::string& name : fixtures()) {
    const KernelsReport r = kernels_of({kTraces + "/" + name});
    ASSERT_TRUE(r.sources[0].has_trace) << name;
    saw_memory = saw_memory || !r.sources[0].trace.memory.devices.empty();
    saw_parts = saw_parts || r.sources[0].trace.parts.module_events;
    const Json j = to_json(r);
    const KernelsReport back = kernels_report_from_json(j, "k.json results");
    EXPECT_EQ(to_json(back), j) << name;
    ASSERT_TRUE(back.sources[0].has_trace) << name;
    const TraceSummary& a = r.sources[0].trace;
    const TraceSummary& b = back.sources[0].trace;
    EXPECT_EQ(b.events, a.events) << name;
    EXPECT_EQ(b.double_count.host_attributed_ns, a.double_count.host_attributed_ns) << name;
    EXPECT_EQ(b.stats.launch.launch_call.p90_ns, a.stats.launch.launch_call.p90_ns) << name;
    EXPECT_EQ(b.parts.breakdown.kernel_ns, a.parts.breakdown.kernel_ns) << name;
    EXPECT_EQ(b.parts.counts.linked, a.parts.counts.linked) << name;
    EXPECT_EQ(b.memory.devices.size(), a.memory.devices.size()) << name;
    // Each piece alone.
    EXPECT_EQ(to_json(trace_stats_from_json(to_json(a.stats), "s")), to_json(a.stats)) << name;
    EXPECT_EQ(to_json(trace_parts_from_json(to_json(a.parts), "p")), to_json(a.parts)) << name;
    EXPECT_EQ(to_json(trace_memory_from_json(to_json(a.memory), "m")), to_json(a.memory)) << name;
    EXPECT_EQ(to_json(step_breakdown_from_json(to_json(a.parts.breakdown), "b")),
              to_json(a.parts.breakdown))
        << name;
  }
  // Else the loop above proves less than its name says.
  EXPECT_TRUE(saw_memory);
  EXPECT_TRUE(saw_parts);
}

TEST(TraceFromJson, RanksAndDiffsRoundTripWhole) {
  const KernelsReport ranks = kernels_of({kTraces + "/ranks"});
  ASSERT_EQ(ranks.mode, KernelsReport::Mode::kRanks);
  EXPECT_EQ(to_json(kernels_report_from_json(to_json(ranks), "r")), to_json(ranks));
  const KernelsReport diff = kernels_of(
      {kTraces + "/hf-sdpa-stack-2x256.json.gz", kTraces + "/hf-sdpa-memory-2x256.json.gz"});
  ASSERT_EQ(diff.mode, KernelsReport::Mode::kDiff);
  const KernelsReport back = kernels_report_from_json(to_json(diff), "d");
  EXPECT_EQ(to_json(back), to_json(diff));
  EXPECT_TRUE(back.sources[1].has_trace);
}

TEST(TraceFromJson, DamagedPiecesNameTheField) {
  const KernelsReport r = kernels_of({kTraces + "/hf-sdpa-memory-2x256.json.gz"});
  const Json good = to_json(r);
  ASSERT_FALSE(good["memory"]["devices"].empty());
  auto read = [&](const std::function<void(Json&)>& edit) {
    Json j = good;
    edit(j);
    return kernels_report_from_json(j, "k.json results");
  };
  EXPECT_ERROR_NAMES(read([](Json& j) { j["trace"]["events"] = -1; }), "k.json results.trace");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["trace"]["health"].erase("zero_duration"); }),
                     "zero_duration");
  EXPECT_ERROR_NAMES(
      read([](Json& j) { j["trace"]["key_averages_trap"]["double_count_ratio"] = 7.5; }),
      "key_averages_trap: field 'double_count_ratio'");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["trace"]["profiler_steps"][0]["duration_ns"] = 1; }),
                     "profiler_steps[0]: field 'duration_ns'");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["trace"]["idle_split"][0]["host_wait_ns"] = -4; }),
                     "idle_split[0]");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["trace"]["copies"] = Json::array({{{"kind", "x"}}}); }),
                     "copies[0]");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["attribution"]["linked_rows"] = "many"; }),
                     "attribution");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["by_phase_part"][0]["kernel_share_ratio"] = 0.99; }),
                     "by_phase_part");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["parts"]["hint"] = "look elsewhere"; }), "parts.hint");
  EXPECT_ERROR_NAMES(
      read([](Json& j) { j["memory"]["devices"][0]["timeline"]["ts_ns"].erase(0); }),
      "timeline");
  EXPECT_ERROR_NAMES(read([](Json& j) {
                       j["memory"]["devices"][0]["alive_at_peak"]["untagged_share_ratio"] = 2;
                     }),
                     "alive_at_peak.untagged_share_ratio");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["memory"]["devices"][0]["frees"] = -2; }),
                     "k.json results.memory devices[0]");
  // Issue 46's shapes: the user-range tree and the capped time series.
  EXPECT_ERROR_NAMES(read([](Json& j) { j["trace"]["time_series"]["max_streams"] = 3; }),
                     "max_streams");
  EXPECT_ERROR_NAMES(
      read([](Json& j) { j["trace"]["time_series"]["other_devices"]["devices"] = -1; }),
      "other_devices");
  EXPECT_ERROR_NAMES(
      read([](Json& j) {
        j["trace"]["time_series"]["devices"][0]["queue_length_other_streams"] = {{"streams", 2}};
      }),
      "queue_length_other_streams");
}

// The ranges fixture's user ranges are a tree in its evidence: parents read back, a parent that
// is not an earlier row refused naming the row.
TEST(TraceFromJson, UserRangeTreeReadsBackAndABadParentIsNamed) {
  const KernelsReport r = kernels_of({kTraces + "/hf-sdpa-ranges-nonreentrant-2x256.json.gz"});
  const Json good = to_json(r);
  const Json& rows = good["trace"]["user_ranges"]["rows"];
  ASSERT_GT(rows.size(), 2u);
  EXPECT_EQ(rows[0]["parent"], -1);
  EXPECT_EQ(rows[1]["parent"], 0);
  EXPECT_EQ(to_json(kernels_report_from_json(good, "k.json results")), good);
  Json bad = good;
  bad["trace"]["user_ranges"]["rows"][1]["parent"] = 1;  // itself
  EXPECT_ERROR_NAMES(kernels_report_from_json(bad, "k.json results"),
                     "user_ranges.rows[1]: field 'parent'");
}

}  // namespace
}  // namespace tprobe::core
