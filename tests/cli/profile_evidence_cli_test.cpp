// `profile`'s evidence read back by its own code (issue 34, item 2): a real CPU sweep (gemma4-tiny,
// three widths and a padded point, a replayed raw trace for the kernel traces and the phase × part
// rows, a given peak for the MFUs, a memory budget) is written by the binary, read by
// runs::profile_analysis_from_json and written again by runs::to_json, which must give the
// results the binary wrote; and damaged results are one tprobe::Error naming the field.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"
#include "support/error_of.hpp"
#include "tprobe/runs/profile_analysis.hpp"

namespace tprobe::testing {
namespace {

using core::Json;

// One sweep for every test of this file: the binary runs once.
const Json& results() {
  static const Json out = [] {
    const std::string dir = make_temp_dir();
    const std::string path = dir + "/profile.json";
    RunResult r = run_tprobe(
        {"profile", "--device", "cpu", "--model", "gemma4-tiny", "--dtype", "fp32", "--rank", "4",
         "--alpha", "8", "--widths", "16,24,32", "--pad-fraction", "0.5", "--ce-chunk", "16",
         "--repeats", "2", "--replay-trace",
         std::string(TPROBE_FIXTURES_DIR) + "/raw_trace_small.json", "--peak-tflops", "1",
         "--gpu-memory", "80", "--reserve", "2", "--json", path});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return Json::parse(read_text(path))["results"];
  }();
  return out;
}

TEST(ProfileEvidence, ResultsReadBackWhole) {
  const Json& res = results();
  // The sweep holds every kind of field the reader reads: else this test proves less than it says.
  ASSERT_EQ(res["points"].size(), 3u);
  ASSERT_EQ(res["padded_points"].size(), 1u);
  ASSERT_TRUE(res["points"][0]["kernel_trace"].is_object());
  ASSERT_FALSE(res["points"][0]["kernel_trace"]["by_phase_part"].empty());
  ASSERT_FALSE(res["points"][0]["kernel_trace"]["by_layer"].empty());
  ASSERT_TRUE(res["points"][0]["performed_mfu_ratio"].is_number());
  ASSERT_TRUE(res["scaling_fit"].is_object());
  ASSERT_TRUE(res["kernel_table"].is_object());
  ASSERT_TRUE(res["memory_fit"].is_object());
  const runs::ProfileAnalysis a = runs::profile_analysis_from_json(res, "p.json results");
  EXPECT_EQ(runs::to_json(a), res);
  // The struct, not only the JSON.
  ASSERT_EQ(a.report.steps.points.size(), 4u);
  EXPECT_TRUE(a.report.steps.points[3].point.padded());
  ASSERT_EQ(a.report.traces.size(), 4u);
  EXPECT_EQ(a.report.traces[0].records,
            res["points"][0]["kernel_trace"]["records"].get<int64_t>());
  ASSERT_TRUE(a.report.table_point.has_value());
  EXPECT_EQ(a.report.steps.points[*a.report.table_point].point.width, 32);
  EXPECT_EQ(a.report.peak_tflops, 1.0);
  EXPECT_EQ(a.request.spec.lora_rank, 4);
  EXPECT_EQ(a.request.spec.device, "cpu");
  EXPECT_TRUE(a.memory_fit.requested);
  EXPECT_FALSE(a.memory_fit.fit.ok);  // no caching allocator on the CPU: nothing to fit
}

TEST(ProfileEvidence, DamagedResultsNameTheField) {
  auto read = [](const std::function<void(Json&)>& edit) {
    Json j = results();
    edit(j);
    return runs::profile_analysis_from_json(j, "p.json results");
  };
  EXPECT_ERROR_NAMES(read([](Json& j) { j["points"][1].erase("performed_flops"); }),
                     "p.json results points[1]");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["peak"]["tflops"] = -1; }), "peak.tflops");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["flops_attention_path"] = "warp"; }),
                     "flops_attention_path");
  // Fields written twice: the provenance's word for a knob against its config.
  EXPECT_ERROR_NAMES(read([](Json& j) { j["provenance"]["ce_mode"] = "naive-ish"; }),
                     "provenance.ce_mode");
  // A trace's share against its kernel times.
  EXPECT_ERROR_NAMES(read([](Json& j) {
                       j["points"][0]["kernel_trace"]["by_phase_part"][0]["kernel_share_ratio"] =
                           0.123456;
                     }),
                     "kernel_trace.by_phase_part.0.kernel_share_ratio");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["points"][0]["kernel_trace"]["records"] = -3; }),
                     "kernel_trace");
  // The phase × part cells, read typed (core/evidence's PartCells): null, absent or mistyped.
  EXPECT_ERROR_NAMES(
      read([](Json& j) { j["points"][0]["kernel_trace"]["by_phase_part"] = nullptr; }),
      "kernel_trace.by_phase_part");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["points"][0]["kernel_trace"].erase("by_layer"); }),
                     "by_layer");
  EXPECT_ERROR_NAMES(
      read([](Json& j) { j["points"][0]["kernel_trace"]["by_layer"][0]["layer_kind"] = 3; }),
      "kernel_trace.by_layer[0]");
  EXPECT_ERROR_NAMES(read([](Json& j) {
                       j["points"][0]["kernel_trace"]["by_phase_part"][0]["kernels"] = "many";
                     }),
                     "kernel_trace.by_phase_part[0]");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["kernel_table_point"]["width"] = 999; }),
                     "kernel_table_point");
  // The embedded kernel table is the table point's own.
  EXPECT_ERROR_NAMES(read([](Json& j) { j["kernel_table"] = nullptr; }),
                     "p.json results.kernel_table");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["scaling_fit_note"] = ""; }), "scaling_fit_note");
  EXPECT_ERROR_NAMES(
      read([](Json& j) { j["memory_fit"]["budgets"] = Json::array({Json::object()}); }),
      "memory_fit budgets[0]");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["memory_fit"]["model"] = "peak = c0"; }),
                     "memory_fit.model");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["interrupted_at"] = "layer 3"; }), "interrupted_at");
  EXPECT_ERROR_NAMES(read([](Json& j) { j["provenance"]["lora"]["rank"] = "four"; }),
                     "provenance.lora");
}

}  // namespace
}  // namespace tprobe::testing
