// Names of the attention paths and MoE dispatches (torch-free: the probes parse them).
#include "tprobe/core/base/error.hpp"
#include "tprobe/model/torch_compat.hpp"

namespace tprobe::model {

const char* to_string(AttnImpl impl) {
  switch (impl) {
    case AttnImpl::kEager:
      return "eager";
    case AttnImpl::kSdpa:
      return "sdpa";
    case AttnImpl::kFlashWindow:
      return "flash-window";
  }
  return "?";
}

AttnImpl parse_attn(const std::string& name) {
  if (name == "eager") return AttnImpl::kEager;
  if (name == "sdpa") return AttnImpl::kSdpa;
  if (name == "flash-window") return AttnImpl::kFlashWindow;
  fail_usage("--attn '{}': expected eager, sdpa or flash-window", name);
}

const char* to_string(MoeDispatch dispatch) {
  return dispatch == MoeDispatch::kGroupedMm ? "grouped_mm" : "loop";
}

MoeDispatch parse_moe(const std::string& name) {
  if (name == "loop") return MoeDispatch::kLoop;
  if (name == "grouped_mm") return MoeDispatch::kGroupedMm;
  fail_usage("--moe '{}': expected loop or grouped_mm", name);
}

}  // namespace tprobe::model
