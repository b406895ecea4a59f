// The report's section for profile evidence (its views over a ProfileReport: profile_request.hpp).
#pragma once

#include "tprobe/core/report/section.hpp"

namespace tprobe::torch_api {

// Time and memory per width, the phase × part attribution of the traced step, and the kernel
// table the profile embeds (core/report/section.hpp).
void profile_report_section(core::SectionBuilder& c);

}  // namespace tprobe::torch_api
