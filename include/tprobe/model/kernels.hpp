// The one place that knows which libtorch version is linked: every API that differs between
// libtorch 1.13 (Debian, CPU) and 2.x (the GPU host) is reached through this header.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/environment.hpp"

namespace tprobe::model {

// libtorch version string, e.g. "1.13.1" or "2.11.0".
std::string torch_version();

// True when the linked libtorch has the public scaled_dot_product_attention (>= 2.0).
bool has_sdpa();

// The SDPA backends the linked libtorch was built with and whether each is globally enabled.
std::vector<core::SdpaBackend> sdpa_backends();

}  // namespace tprobe::model
