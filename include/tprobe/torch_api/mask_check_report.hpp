// Views over the materialised mask check and the backend trials (no libtorch).
#pragma once

#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/torch_api/mask_check.hpp"

namespace tprobe::model {

core::Json to_json(const MaskCheckResult& result);
core::Table mask_check_table(const MaskCheckResult& result);

core::Json backends_json(const MaskBackendsResult& result);         // results.backends[]
core::Json backends_status_json(const MaskBackendsResult& result);  // supported, reason, device
std::vector<core::Table> mask_backends_tables(const MaskBackendsResult& result);

}  // namespace tprobe::model
