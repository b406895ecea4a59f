// How the MoE experts' GEMMs are dispatched: a per-expert GEMM loop (any libtorch), or one grouped
// GEMM call per projection where the linked libtorch has at::_grouped_mm (CUDA, >= 2.8; the engine
// says whether through model::has_grouped_mm()). Torch-free: the probes parse the name.
#pragma once

#include <string>

namespace tprobe::model {

enum class MoeDispatch { kLoop, kGroupedMm };
const char* to_string(MoeDispatch dispatch);
MoeDispatch parse_moe(const std::string& name);  // "loop" / "grouped_mm"

}  // namespace tprobe::model
