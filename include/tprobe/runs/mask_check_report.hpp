// Views over the materialised mask check and the backend trials (no libtorch).
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/torch_api/mask_check_request.hpp"

namespace tprobe::runs {

core::Json to_json(const torch_api::MaskCheckResult& result);
// results.materialised back, every field checked; throws tprobe::Error naming `where`
// ("m.json results materialised") and the field.
torch_api::MaskCheckResult mask_check_result_from_json(const core::Json& j,
                                                       const std::string& where);
core::Table mask_check_table(const torch_api::MaskCheckResult& result);

core::Json backends_json(const torch_api::MaskBackendsResult& result);         // results.backends[]
// supported, reason, device
core::Json backends_status_json(const torch_api::MaskBackendsResult& result);
// The trials back from the results holding both (backends[] and backends_status), every field
// checked; throws tprobe::Error naming `where` ("m.json results") and the field.
torch_api::MaskBackendsResult mask_backends_result_from_json(const core::Json& results,
                                                  const std::string& where);
std::vector<core::Table> mask_backends_tables(const torch_api::MaskBackendsResult& result);

}  // namespace tprobe::runs
