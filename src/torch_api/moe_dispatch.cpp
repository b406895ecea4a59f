// Names of the MoE dispatches (torch-free: the probes parse them; the attention paths are named
// in core/gemma4/attention_path).
#include "tprobe/core/base/error.hpp"
#include "tprobe/torch_api/moe_dispatch.hpp"

namespace tprobe::model {

const char* to_string(MoeDispatch dispatch) {
  switch (dispatch) {
    case MoeDispatch::kGroupedMm: return "grouped_mm";
    case MoeDispatch::kHfGroupedMm: return "hf_grouped_mm";
    case MoeDispatch::kLoop: break;
  }
  return "loop";
}

bool needs_grouped_mm(MoeDispatch dispatch) { return dispatch != MoeDispatch::kLoop; }

const std::vector<std::string>& moe_names() {
  static const std::vector<std::string> names = {"hf_grouped_mm", "grouped_mm", "loop"};
  return names;
}

std::string moe_help() {
  return "Experts: hf_grouped_mm (transformers 5.17's grouped_mm experts, op for op), grouped_mm "
         "(tprobe's permutation: one gather, a sum over k) — both CUDA, libtorch >= 2.8 — or loop "
         "(a GEMM per expert, any device)";
}

MoeDispatch parse_moe(const std::string& name) {
  if (name == "loop") return MoeDispatch::kLoop;
  if (name == "grouped_mm") return MoeDispatch::kGroupedMm;
  if (name == "hf_grouped_mm") return MoeDispatch::kHfGroupedMm;
  fail_usage("MoE dispatch '{}': expected hf_grouped_mm, grouped_mm or loop", name);
}

}  // namespace tprobe::model
