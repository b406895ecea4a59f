// The entry point of libtprobe_torch.so: the table of torch-backed work the binary calls.
#include "tprobe/cupti/cupti_info.hpp"
#include "tprobe/model/mask_check.hpp"
#include "tprobe/model/profile.hpp"
#include "tprobe/model/runtime_info.hpp"
#include "tprobe/model/torch_api.hpp"

namespace {

void describe(tprobe::core::Environment& env) {
  tprobe::model::describe_torch(env);
  tprobe::cupti::describe_cupti(env);
}

const tprobe::model::TorchApi kApi = [] {
  tprobe::model::TorchApi api;
  api.version = tprobe::model::kTorchApiVersion;
  api.describe = &describe;
  api.run_parity = &tprobe::model::run_parity;
  api.run_mask_check = &tprobe::model::run_mask_check;
  api.run_mask_backends = &tprobe::model::run_mask_backends;
  api.run_profile = &tprobe::model::run_profile;
  return api;
}();

}  // namespace

extern "C" __attribute__((visibility("default"))) const tprobe::model::TorchApi* tprobe_torch_api() {
  return &kApi;
}
