// Fills the CUPTI part of the environment block.
#pragma once

#include "tprobe/core/base/environment.hpp"

namespace tprobe::cupti {

// Sets cupti_built, cupti_version and cupti_usable (with a reason). Call after the CUDA fields
// are set: CUPTI is only usable where a CUDA device is. Never throws.
void describe_cupti(core::Environment& env);

}  // namespace tprobe::cupti
