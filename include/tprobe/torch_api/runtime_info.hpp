// Fills the libtorch / CUDA part of the environment block.
#pragma once

#include "tprobe/core/base/environment.hpp"

namespace tprobe::model {

// Sets torch_version, torch_cuda_build, cuda_usable (with a reason when not), device facts,
// CUDA runtime/driver versions and the SDPA backend list. Never throws for a missing GPU.
void describe_torch(core::Environment& env);

}  // namespace tprobe::model
