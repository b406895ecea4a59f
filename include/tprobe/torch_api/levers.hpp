// `tprobe levers`' measurement: the baseline and each lever alone, then the best combination, each
// one `run_profile` sweep of the same points through the module's function table (so every row is
// measured the way `profile` measures: warm-up, repeats, CUDA events, the allocator's peaks).
// Torch-free; the comparison and the views are core's (core/cost/levers.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tprobe/core/cost/levers.hpp"
#include "tprobe/torch_api/profile.hpp"
#include "tprobe/torch_api/profile_analysis.hpp"

namespace tprobe::model {

struct LeversRequest {
  // The points, repeats, model, LoRA targets and dtype every row shares; its knobs are replaced by
  // each configuration's. trace is off for every row (no CUPTI step: the rows stay comparable).
  ProfileRequest shared;
  core::StepKnobs baseline;  // moe "auto": resolved by the engine (grouped_mm or loop)
  std::string baseline_name;
  std::vector<std::string> only;  // lever names to measure (empty: all)
  std::function<void(const core::LeverRow&)> on_row;  // as each row is measured
};

// Every configuration's failure is a row (refused: the engine's reason, e.g. a path the device or
// libtorch lacks; oom; error); an interrupt stops between configurations. Throws only for what
// makes the baseline impossible to build (its error, as run_profile throws it).
core::LeversReport run_levers(const LeversRequest& request);

// The profile request of one configuration: `shared` with `knobs` applied (attention path, norm,
// LoRA dtype, MoE dispatch, checkpointing, CE, the points' batch).
ProfileRequest lever_request(const ProfileRequest& shared, const core::StepKnobs& knobs,
                             bool padded_only);

// `tprobe levers`' options: the shapes and the measurement (profile's options; its knobs are the
// baseline's and each lever's, never the user's) and which levers to measure.
struct LeversOptions {
  ProfileOptions step;              // widths empty: 2048,16384 on cuda, 32,64 on cpu
  std::vector<std::string> levers;  // lever names (empty: all)
};

// The whole probe: the request (profile's validation and size limits), the baseline and every
// lever, the best combination; a diagnostic per lever that failed or was refused.
core::LeversReport analyse_levers(const LeversOptions& options,
                                  const std::function<bool()>& should_stop,
                                  const std::function<void(const core::LeverRow&)>& on_row);

}  // namespace tprobe::model
