// Views over a parity result (no libtorch): the evidence results and the stdout table.
#pragma once

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/model/parity.hpp"

namespace tprobe::model {

core::Json to_json(const ParityResult& result, const ParityOptions& options);
core::Table parity_table(const ParityResult& result, const ParityOptions& options);

}  // namespace tprobe::model
