// `tprobe mask`'s analysis as one call: the band geometry and its assertions (core/mask), then
// on request the engine's masks materialised and verified and the SDPA backend trials (the torch
// module, loaded only then), with the diagnostics and the outcome of all three. docs/mask.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/mask/mask_geometry.hpp"
#include "tprobe/engine/mask_check_request.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {

struct MaskOptions {
  core::MaskRequest request;    // width, batch, lengths, rules, expectations
  bool materialise = false;     // build the engine's bool masks and verify them
  std::string device = "cpu";   // of the materialised check: cpu | cuda
  bool backends = false;        // SDPA backends pinned alone per layer shape and mask case
  std::string dtype = "bf16";   // of the backend trials: bf16 | fp16
  int64_t warmup = 1;
  int64_t repeats = 5;
  int64_t padded_length = 0;    // 0: width / 2
};

// A materialised mask above this many bytes is refused before anything is allocated.
constexpr int64_t kMaxMaterialisedBytes = int64_t{1} << 34;

// Throws UsageError for lengths that are not one per row within 1..width, and for a
// materialised mask above kMaxMaterialisedBytes.
void validate(const MaskOptions& options);

struct MaskAnalysis {
  core::MaskReport geometry;
  std::optional<engine::MaskCheckResult> materialised;  // with options.materialise
  std::optional<engine::MaskBackendsResult> backends;   // with options.backends
  std::vector<core::Diagnostic> diagnostics;    // failed assertions, failed tensors, no backends
  core::Outcome outcome = core::Outcome::kOk;   // kNo: an assertion or a tensor check failed
};

// validate(), then the geometry, then the torch module's checks that were asked for.
MaskAnalysis analyze_mask(engine::Access engine, const core::ModelConfig& config,
                          const MaskOptions& options);

// The evidence results: the geometry's, plus "materialised", "backends" (always, [] when not
// run) and "backends_status".
core::Json to_json(const MaskAnalysis& analysis);
// The analysis back from the probe's results: the geometry (core::mask_report_from_json), the
// materialised check when written, the backend trials when backends_status is written (backends[]
// must then be empty without it); diagnostics and outcome derived as analyze_mask derives them.
// Throws tprobe::Error naming `where` ("m.json results") and the field.
MaskAnalysis mask_analysis_from_json(const core::Json& results, const std::string& where);
// The geometry's tables, then the materialised check's, then the backends'.
std::vector<core::Table> mask_tables(const MaskAnalysis& analysis);

}  // namespace tprobe::runs
