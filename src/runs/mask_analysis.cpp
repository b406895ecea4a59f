#include "tprobe/runs/mask_analysis.hpp"

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/mask/mask_report.hpp"
#include "tprobe/runs/mask_check_report.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {

using engine::Access;
using engine::MaskBackendsOptions;
using engine::MaskCheckOptions;

void validate(const MaskOptions& o) {
  const core::MaskRequest& r = o.request;
  if (!r.lengths.empty() && static_cast<int64_t>(r.lengths.size()) != r.batch) {
    fail_usage("--lengths has {} values for --batch {}: give one real length per row",
               r.lengths.size(), r.batch);
  }
  for (int64_t l : r.lengths) {
    if (l < 1 || l > r.width) fail_usage("--lengths value {} is outside 1..{} (--width)", l, r.width);
  }
  if (o.materialise) {
    // One bool mask [B or 1, 1, S, S] per layer type.
    const int64_t rows = r.lengths.empty() ? 1 : r.batch;
    const long double bytes = static_cast<long double>(rows) * r.width * r.width;
    if (bytes > static_cast<long double>(kMaxMaterialisedBytes)) {
      fail_usage("--materialise at --width {}{}: a [{}, 1, {}, {}] bool mask is {:.0f} bytes; at "
                 "most {} (16 GiB) per mask",
                 r.width, r.lengths.empty() ? "" : fmt::format(" --batch {}", r.batch), rows,
                 r.width, r.width, bytes, kMaxMaterialisedBytes);
    }
  }
}

MaskAnalysis analyze_mask(Access engine, const core::ModelConfig& config,
                          const MaskOptions& o) {
  validate(o);
  MaskAnalysis a;
  a.geometry = core::analyze_mask(config, o.request);
  a.diagnostics = a.geometry.diagnostics;
  a.outcome = a.geometry.outcome;

  if (o.materialise) {
    MaskCheckOptions m;
    m.width = o.request.width;
    m.lengths = a.geometry.shape.lengths;
    m.padded_input = !o.request.lengths.empty();
    m.device = o.device;
    for (const char* type : {"sliding_attention", "full_attention"}) {
      const bool sliding = std::string(type) == "sliding_attention";
      if (config.count_layers(sliding ? core::LayerType::kSliding : core::LayerType::kFull) == 0) {
        continue;
      }
      m.layers.push_back({type, sliding ? config.sliding_window : 0});
    }
    a.materialised = engine().run_mask_check(m);
    if (!a.materialised->ok) {
      a.outcome = core::Outcome::kNo;
      for (const auto& row : a.materialised->rows) {
        if (!row.check.ok()) {
          a.diagnostics.push_back({core::Severity::kError, "mask_materialised",
                                   fmt::format("{}: {}", row.type, row.check.detail)});
        }
      }
    }
  }

  if (o.backends) {
    MaskBackendsOptions b;
    b.width = o.request.width;
    b.batch = o.request.batch;
    b.padded_length = o.padded_length;
    b.dtype = o.dtype;
    b.warmup = o.warmup;
    b.repeats = o.repeats;
    for (const core::MaskBand& band : a.geometry.bands) {
      if (band.rules != o.request.rules) continue;
      const core::MaskLayer& l = a.geometry.layers[static_cast<size_t>(band.first_layer)];
      b.shapes.push_back({l.type, l.window, l.query_heads, l.kv_heads, l.head_dim});
    }
    a.backends = engine().run_mask_backends(b);
    if (!a.backends->supported) {
      a.diagnostics.push_back(
          {core::Severity::kWarning, "mask_backends_not_supported", a.backends->reason});
    }
  }
  return a;
}

core::Json to_json(const MaskAnalysis& a) {
  core::Json results = core::to_json(a.geometry);
  if (a.materialised) results["materialised"] = to_json(*a.materialised);
  results["backends"] = core::Json::array();
  if (a.backends) {
    results["backends"] = backends_json(*a.backends);
    results["backends_status"] = backends_status_json(*a.backends);
  }
  return results;
}

MaskAnalysis mask_analysis_from_json(const core::Json& results, const std::string& where) {
  MaskAnalysis a;
  a.geometry = core::mask_report_from_json(results, where);
  a.diagnostics = a.geometry.diagnostics;
  a.outcome = a.geometry.outcome;
  if (results.contains("materialised")) {
    const core::Json& m = core::json_read::object(results, "materialised", where);
    a.materialised = mask_check_result_from_json(m, where + " materialised");
  }
  if (results.contains("backends_status")) {
    a.backends = mask_backends_result_from_json(results, where);
  } else if (!core::json_read::array(results, "backends", where).empty()) {
    fail("{}: field 'backends' has rows but 'backends_status' is missing", where);
  }
  // The diagnostics and the outcome as analyze_mask adds them.
  if (a.materialised && !a.materialised->ok) {
    a.outcome = core::Outcome::kNo;
    for (const auto& row : a.materialised->rows) {
      if (!row.check.ok()) {
        a.diagnostics.push_back({core::Severity::kError, "mask_materialised",
                                 fmt::format("{}: {}", row.type, row.check.detail)});
      }
    }
  }
  if (a.backends && !a.backends->supported) {
    a.diagnostics.push_back(
        {core::Severity::kWarning, "mask_backends_not_supported", a.backends->reason});
  }
  return a;
}

std::vector<core::Table> mask_tables(const MaskAnalysis& a) {
  std::vector<core::Table> tables = core::mask_tables(a.geometry);
  if (a.materialised) tables.push_back(mask_check_table(*a.materialised));
  if (a.backends) {
    for (auto& t : mask_backends_tables(*a.backends)) tables.push_back(std::move(t));
  }
  return tables;
}

}  // namespace tprobe::runs
