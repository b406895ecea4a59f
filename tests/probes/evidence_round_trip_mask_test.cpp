// `tprobe mask`'s whole results read back by their own code (issue 34, item 2): the geometry from
// the real analysis, the materialised check and the backend trials filled by hand (they need
// libtorch), written by to_json, read by mask_analysis_from_json and written again give the same
// JSON; the diagnostics and the outcome come back; a damaged file is one tprobe::Error naming the
// field.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/error_of.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/mask/mask_geometry.hpp"
#include "tprobe/runs/mask_analysis.hpp"
#include "tprobe/runs/mask_check_report.hpp"

namespace tprobe::runs {
namespace {

using namespace engine;  // the engine's request and result types

using core::Json;
using testing_support::error_of;

MaskAnalysis read(const Json& j) { return mask_analysis_from_json(j, "t.json results"); }

core::MaskReport geometry() {
  core::MaskRequest q;
  q.width = 24;
  q.batch = 2;
  q.lengths = {24, 10};
  q.expect.window = 8;
  return core::analyze_mask(core::embedded_model("gemma4-tiny"), q);
}

// As run_mask_check reports it, one layer type's mask wrong when `bad`.
MaskCheckResult materialised(bool bad) {
  MaskCheckResult r;
  r.device = "cpu";
  r.torch_version = "1.13.1";
  r.wall_s = 0.25;
  for (const char* type : {"sliding_attention", "full_attention"}) {
    MaskCheckRow row;
    row.type = type;
    row.window = std::string(type) == "sliding_attention" ? 8 : 0;
    row.builder = "attention_bool_mask";
    row.check.shape = {2, 1, 24, 24};
    row.check.rows_checked = 48;
    row.check.max_allowed_per_row = row.window ? 8 : 24;
    row.check.saturates_at_row = row.window ? 7 : 23;
    row.check.fully_masked_rows = row.window ? 6 : 0;
    if (bad && row.window) {
      row.check.violating_rows = 3;
      row.check.first_bad_batch_row = 1;
      row.check.first_bad_row = 8;
      row.check.kinds = {"outside_window", "padded_key"};
      row.check.detail = "batch row 1 query row 8 allows keys [0, 8]";
      r.ok = false;
    }
    row.build_s = 0.125;
    row.check_s = 0.0625;
    r.rows.push_back(row);
  }
  return r;
}

MaskBackendsResult backends(bool supported) {
  MaskBackendsResult r;
  r.supported = supported;
  r.dtype = "bf16";
  if (!supported) {
    r.reason = "a CPU build: no CUDA SDPA backends";
    return r;
  }
  r.device = "NVIDIA H200";
  r.torch_version = "2.11.0";
  MaskBackendRow a;
  a.layer_type = core::LayerType::kSliding;
  a.query_heads = 4;
  a.kv_heads = 2;
  a.head_dim = 16;
  a.window = 8;
  a.kv = "gqa";
  a.mask_case = "none_is_causal";
  a.backend = "flash";
  a.outcome = "accepted";
  a.kernels = {"flash_fwd_kernel"};
  a.fwd_s = {1e-4, 1.5e-4, 1.25e-4};
  a.fwd_bwd_s = {3e-4, 3.5e-4, 3.25e-4};
  a.fwd_median_s = 1.25e-4;
  a.fwd_bwd_median_s = 3.25e-4;
  a.output_finite = true;
  MaskBackendRow b = a;
  b.mask_case = "explicit_causal_padded";
  b.backend = "flash_window";
  b.outcome = "not_applicable";
  b.message = "tprobe's flash-window path takes no mask tensor";
  b.kernels = {};
  b.kernels_note = "not run";
  b.fwd_s = {};
  b.fwd_bwd_s = {};
  b.fwd_median_s.reset();
  b.fwd_bwd_median_s.reset();
  b.output_finite.reset();
  MaskBackendRow c = a;
  c.layer_type = core::LayerType::kFull;
  c.kv = "repeated";
  c.mask_case = "explicit_band";
  c.backend = "efficient";
  c.outcome = "refused";
  c.warnings = {"Memory efficient kernel not used because:", "head_dim"};
  c.output_finite = false;
  r.rows = {a, b, c};
  return r;
}

MaskAnalysis analysis(bool with_materialised, bool bad, int with_backends) {
  MaskAnalysis a;
  a.geometry = geometry();
  if (with_materialised) a.materialised = materialised(bad);
  if (with_backends > 0) a.backends = backends(with_backends == 1);
  return a;
}

TEST(MaskAnalysisFromJson, RoundTripsEveryForm) {
  for (bool with_materialised : {false, true}) {
    for (bool bad : {false, true}) {
      for (int with_backends : {0, 1, 2}) {
        const MaskAnalysis a = analysis(with_materialised, bad, with_backends);
        const Json j = to_json(a);
        const std::string label =
            std::to_string(with_materialised) + std::to_string(bad) + std::to_string(with_backends);
        EXPECT_EQ(to_json(read(j)).dump(), j.dump()) << label;
        const MaskAnalysis back = read(j);
        EXPECT_EQ(back.materialised.has_value(), with_materialised) << label;
        EXPECT_EQ(back.backends.has_value(), with_backends > 0) << label;
        if (with_backends > 0) {
          ASSERT_TRUE(back.backends.has_value()) << label;
          ASSERT_EQ(back.backends->rows.size(), a.backends->rows.size()) << label;
          for (std::size_t i = 0; i < a.backends->rows.size(); ++i) {
            EXPECT_EQ(back.backends->rows[i].layer_type, a.backends->rows[i].layer_type) << label;
          }
          EXPECT_EQ(back.backends->reason, a.backends->reason) << label;
        }
      }
    }
  }
}

// The diagnostics and the outcome are analyze_mask's: the geometry's, a failed tensor check
// (an error, outcome no), backends not supported (a warning).
TEST(MaskAnalysisFromJson, DerivesDiagnosticsAndOutcome) {
  const MaskAnalysis ok = read(to_json(analysis(true, false, 1)));
  EXPECT_EQ(ok.outcome, core::Outcome::kOk);
  EXPECT_TRUE(ok.diagnostics.empty());
  const MaskAnalysis bad = read(to_json(analysis(true, true, 2)));
  EXPECT_EQ(bad.outcome, core::Outcome::kNo);
  ASSERT_EQ(bad.diagnostics.size(), 2u);
  EXPECT_EQ(bad.diagnostics[0].code, "mask_materialised");
  EXPECT_EQ(bad.diagnostics[0].severity, core::Severity::kError);
  EXPECT_EQ(bad.diagnostics[0].message,
            "sliding_attention: batch row 1 query row 8 allows keys [0, 8]");
  EXPECT_EQ(bad.diagnostics[1].code, "mask_backends_not_supported");
  EXPECT_EQ(bad.diagnostics[1].severity, core::Severity::kWarning);
  // A failed geometry assertion comes first, as in analyze_mask.
  MaskAnalysis failing = analysis(false, false, 0);
  core::MaskRequest q = failing.geometry.request;
  q.expect.window = 4;
  failing.geometry = core::analyze_mask(core::embedded_model("gemma4-tiny"), q);
  ASSERT_FALSE(failing.geometry.ok);
  const MaskAnalysis f = read(to_json(failing));
  EXPECT_EQ(f.outcome, core::Outcome::kNo);
  ASSERT_EQ(f.diagnostics.size(), 1u);
  EXPECT_EQ(f.diagnostics[0].code, "mask_window");
}

TEST(MaskAnalysisFromJson, BrokenResultsNameTheField) {
  const Json good = to_json(analysis(true, true, 1));
  EXPECT_ERROR_NAMES(read(Json::array()), "t.json results must be an object");
  Json j = good;
  j.erase("bands");
  EXPECT_ERROR_NAMES(read(j), "t.json results: missing field 'bands'");
  j = good;
  j["materialised"]["rows"][0].erase("detail");
  EXPECT_ERROR_NAMES(read(j), "t.json results materialised rows[0]: missing field 'detail'");
  j = good;
  j["materialised"]["rows"][0]["ok"] = true;
  EXPECT_ERROR_NAMES(read(j), "materialised rows[0]: field 'ok' is true but 'violating_rows' is 3");
  j = good;
  j["materialised"]["rows"][1]["shape"][2] = -24;
  EXPECT_ERROR_NAMES(read(j), "materialised rows[1] shape[2] must be an integer in 0..");
  j = good;
  j["materialised"] = "cpu";
  EXPECT_ERROR_NAMES(read(j), "t.json results: field 'materialised' must be an object");
  j = good;
  j["backends"][1]["kv"] = "shared";
  EXPECT_ERROR_NAMES(read(j), "t.json results backends[1]: field 'kv' must be one of repeated, "
                              "gqa");
  j = good;
  j["backends"][2]["layer_type"] = "full";  // the trace's word, not HF's
  EXPECT_ERROR_NAMES(read(j), "t.json results backends[2]: field 'layer_type' must be one of "
                              "sliding_attention, full_attention");
  j = good;
  j["backends"][0]["fwd_s"][1] = "fast";
  EXPECT_ERROR_NAMES(read(j), "backends[0] fwd_s[1] must be a finite number");
  j = good;
  j["backends"][2]["output_finite"] = "no";
  EXPECT_ERROR_NAMES(read(j), "backends[2]: field 'output_finite' must be true or false");
  j = good;
  j["backends_status"].erase("dtype");
  EXPECT_ERROR_NAMES(read(j), "t.json results backends_status: missing field 'dtype'");
  j = good;
  j.erase("backends_status");
  EXPECT_ERROR_NAMES(read(j), "field 'backends' has rows but 'backends_status' is missing");
  j = good;
  j.erase("backends");
  EXPECT_ERROR_NAMES(read(j), "t.json results: missing field 'backends'");
}

}  // namespace
}  // namespace tprobe::runs
