// The torch-backed work, reached without linking libtorch: the `tprobe` binary loads the module
// libtprobe_torch.so (tprobe_model + tprobe_cupti) on first use, so the probes that need no model
// (padding, bucket, scaling-fit, kernels, ...) never pay libtorch's start-up (docs/ARCHITECTURE.md).
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/environment.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/engine/mask_check_request.hpp"
#include "tprobe/engine/parity_request.hpp"
#include "tprobe/engine/profile_request.hpp"

namespace tprobe::engine {

// Bumped whenever a member is added, removed or changes signature: the loader refuses a module
// built from another version of this header.
inline constexpr int kEngineVersion = 13;  // 2: mask; 3: parity backward; 4: profile;
                                          // 5: StepSpec.should_stop/on_start;
                                          // 6: StepSpec.fused_rms_norm;
                                          // 7: ProfileRequest.moe_default;
                                          // 8: share_interrupt_flag;
                                          // 9: StepReport.interrupted_at;
                                          // 10: share_temporaries, PointResult plan
                                          // 11: StepSpec.config (core::StepConfig)
                                          // 12: device_memory, ExtraPoints.steps,
                                          //     PointResult.wall_s
                                          // 13: MaskBackendShape/Row's layer type an enum

// Plain function pointers over torch-free structs. To add torch-backed work: declare its options
// and result in a torch-free header here, its entry point in model/engine.hpp, implement it in
// tprobe_model, add a member here and one line in src/model/torch_module.cpp, and bump
// kEngineVersion.
struct Engine {
  int version = 0;
  // The libtorch, CUDA device, SDPA backend and CUPTI fields of the environment block.
  void (*describe)(core::Environment& env) = nullptr;
  ParityResult (*run_parity)(const ParityOptions& options) = nullptr;
  // `tprobe mask --materialise` and `--backends` (mask_check_request.hpp).
  MaskCheckResult (*run_mask_check)(const MaskCheckOptions& options) = nullptr;
  MaskBackendsResult (*run_mask_backends)(const MaskBackendsOptions& options) = nullptr;
  ProfileReport (*run_profile)(const ProfileRequest& request,
                               const std::function<void(const PointResult&)>& on_point) = nullptr;
  // The module's copy of tprobe_core reads the binary's interrupt flag from here on
  // (core/base/interrupt.hpp): its steps and readers then stop on the binary's signal.
  void (*share_interrupt_flag)(volatile int* flag) = nullptr;
  // Its temporary files go into the binary's table, which a second signal unlinks.
  void (*share_temporaries)(core::RegisterTemporaryFn add, core::UnregisterTemporaryFn remove) =
      nullptr;
  DeviceMemory (*device_memory)() = nullptr;
};

// Loads the module on first call (thread-safe) and returns its table. Looks at
// $TPROBE_TORCH_MODULE alone when it is set; otherwise at libtprobe_torch.so beside the running
// executable, then the build tree's copy. Throws tprobe::Error saying where it looked and what dlopen answered.
const Engine& load();

// How an analysis reaches the engine, handed to it by its caller: the probes pass
// `&engine::load` (the module above), a test its own table. A function rather than the table, so
// that an analysis that ends up not needing the engine (`mask` without --materialise or
// --backends) never loads libtorch.
using Access = const Engine& (*)();

// Where the module was loaded from ("" before the first successful load()).
std::string torch_module_path();
// Where load() looks for it, in order (the output guard protects each: docs/evidence.md).
std::vector<std::string> torch_module_candidates();

}  // namespace tprobe::engine
