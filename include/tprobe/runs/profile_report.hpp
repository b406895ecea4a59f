// Views of a profile run (no libtorch): its evidence JSON, its tables and the report's section
// for profile evidence. The run's types are the engine's (torch_api/profile_request.hpp).
#pragma once

#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/torch_api/profile_request.hpp"

namespace tprobe::runs {

core::Json to_json(const torch_api::ProfileReport& report,
                   const torch_api::ProfileRequest& request);
std::vector<core::Table> profile_tables(const torch_api::ProfileReport& report);

// Time and memory per width, the phase × part attribution of the traced step, and the kernel
// table the profile embeds (core/report/section.hpp).
void profile_report_section(core::SectionBuilder& c);

}  // namespace tprobe::runs
