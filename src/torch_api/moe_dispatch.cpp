// Names of the MoE dispatches (torch-free: the probes parse them; the attention paths are named
// in core/gemma4/attention_path).
#include "tprobe/core/base/error.hpp"
#include "tprobe/torch_api/moe_dispatch.hpp"

namespace tprobe::model {

const char* to_string(MoeDispatch dispatch) {
  return dispatch == MoeDispatch::kGroupedMm ? "grouped_mm" : "loop";
}

MoeDispatch parse_moe(const std::string& name) {
  if (name == "loop") return MoeDispatch::kLoop;
  if (name == "grouped_mm") return MoeDispatch::kGroupedMm;
  fail_usage("MoE dispatch '{}': expected loop or grouped_mm", name);
}

}  // namespace tprobe::model
