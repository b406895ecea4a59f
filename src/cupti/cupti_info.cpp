// CUPTI version and availability; compiled to a stub when the build has no CUPTI.
#include "tprobe/cupti/cupti_info.hpp"

#include "tprobe/config.hpp"

#if TPROBE_HAS_CUPTI
#include <cupti.h>
#endif

namespace tprobe::cupti {

void describe_cupti(core::Environment& env) {
#if TPROBE_HAS_CUPTI
  env.cupti_built = true;
  uint32_t version = 0;
  CUptiResult rc = cuptiGetVersion(&version);
  if (rc == CUPTI_SUCCESS) {
    env.cupti_version = std::to_string(version);
  } else {
    const char* text = nullptr;
    cuptiGetResultString(rc, &text);
    env.cupti_version = "unknown";
    env.cupti_unavailable_reason = std::string("cuptiGetVersion failed: ") + (text ? text : "?");
    return;
  }
  if (!env.cuda_usable) {
    env.cupti_usable = false;
    env.cupti_unavailable_reason = "no usable CUDA device (" + env.cuda_unusable_reason + ")";
    return;
  }
  env.cupti_usable = true;
#else
  env.cupti_built = false;
  env.cupti_usable = false;
  env.cupti_unavailable_reason = "tprobe was built without CUPTI (no CUDA toolkit at configure time)";
#endif
}

}  // namespace tprobe::cupti
