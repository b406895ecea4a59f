// Views over the materialised mask check and the backend trials (no libtorch).
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/engine/mask_check_request.hpp"

namespace tprobe::runs {

core::Json to_json(const engine::MaskCheckResult& result);
// results.materialised back, every field checked; throws tprobe::Error naming `where`
// ("m.json results materialised") and the field.
engine::MaskCheckResult mask_check_result_from_json(const core::Json& j,
                                                       const std::string& where);
core::Table mask_check_table(const engine::MaskCheckResult& result);

core::Json backends_json(const engine::MaskBackendsResult& result);         // results.backends[]
// supported, reason, device
core::Json backends_status_json(const engine::MaskBackendsResult& result);
// The trials back from the results holding both (backends[] and backends_status), every field
// checked; throws tprobe::Error naming `where` ("m.json results") and the field.
engine::MaskBackendsResult mask_backends_result_from_json(const core::Json& results,
                                                  const std::string& where);
std::vector<core::Table> mask_backends_tables(const engine::MaskBackendsResult& result);

}  // namespace tprobe::runs
