// How the MoE experts are computed: tprobe's permutation (one gather of each token's k copies into
// expert order, a sum over k in the routing weights' dtype) with a per-expert GEMM loop (any
// libtorch) or one grouped GEMM per projection; or transformers 5.17's grouped_mm_experts_forward
// op for op (two advanced-index gathers, histc offsets, index_add_ back in the model dtype). The
// grouped GEMMs need at::_grouped_mm (CUDA, libtorch >= 2.8; model::has_grouped_mm()).
// Torch-free: the probes parse the name.
#pragma once

#include <string>
#include <vector>

namespace tprobe::model {

enum class MoeDispatch { kLoop, kGroupedMm, kHfGroupedMm };
// Whether the dispatch calls at::_grouped_mm (CUDA, libtorch >= 2.8).
bool needs_grouped_mm(MoeDispatch dispatch);
const char* to_string(MoeDispatch dispatch);
MoeDispatch parse_moe(const std::string& name);  // "loop" / "grouped_mm" / "hf_grouped_mm"
// The names, in the order --help lists them.
const std::vector<std::string>& moe_names();
// --moe's help text, one for every probe that takes it.
std::string moe_help();

}  // namespace tprobe::model
