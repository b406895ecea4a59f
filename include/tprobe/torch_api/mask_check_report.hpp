// Views over the materialised mask check and the backend trials (no libtorch).
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/torch_api/mask_check_request.hpp"

namespace tprobe::torch_api {

core::Json to_json(const MaskCheckResult& result);
// results.materialised back, every field checked; throws tprobe::Error naming `where`
// ("m.json results materialised") and the field.
MaskCheckResult mask_check_result_from_json(const core::Json& j, const std::string& where);
core::Table mask_check_table(const MaskCheckResult& result);

core::Json backends_json(const MaskBackendsResult& result);         // results.backends[]
core::Json backends_status_json(const MaskBackendsResult& result);  // supported, reason, device
// The trials back from the results holding both (backends[] and backends_status), every field
// checked; throws tprobe::Error naming `where` ("m.json results") and the field.
MaskBackendsResult mask_backends_result_from_json(const core::Json& results,
                                                  const std::string& where);
std::vector<core::Table> mask_backends_tables(const MaskBackendsResult& result);

}  // namespace tprobe::torch_api
