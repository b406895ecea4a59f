// Version-guarded access to libtorch APIs that exist only in newer releases.
#include "tprobe/model/kernels.hpp"

#include <torch/torch.h>
#include <torch/version.h>

#include "tprobe/config.hpp"

#define TPROBE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace tprobe::model {

std::string torch_version() { return TORCH_VERSION; }

bool has_sdpa() {
#if TPROBE_TORCH_AT_LEAST(2, 0)
  return true;
#else
  return false;
#endif
}

std::vector<core::SdpaBackend> sdpa_backends() {
  std::vector<core::SdpaBackend> out;
#if TPROBE_TORCH_AT_LEAST(2, 0)
  auto& ctx = at::globalContext();
  const bool cuda = TPROBE_HAS_TORCH_CUDA != 0;
  out.push_back({"flash", cuda, ctx.userEnabledFlashSDP(),
                 cuda ? "head_dim <= 256, no explicit mask" : "CUDA kernels not in this build"});
  out.push_back({"mem_efficient", cuda, ctx.userEnabledMemEfficientSDP(),
                 cuda ? "accepts explicit masks" : "CUDA kernels not in this build"});
#if TPROBE_TORCH_AT_LEAST(2, 3)
  out.push_back({"cudnn", cuda, ctx.userEnabledCuDNNSDP(),
                 cuda ? "" : "CUDA kernels not in this build"});
#endif
  out.push_back({"math", true, ctx.userEnabledMathSDP(), "reference composite, any shape"});
#else
  out.push_back({"math", false, false,
                 "libtorch " TORCH_VERSION " has no public scaled_dot_product_attention; tprobe "
                 "uses its eager attention"});
#endif
  return out;
}

}  // namespace tprobe::model
