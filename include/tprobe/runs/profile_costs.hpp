// What a profile sweep's measurements give without the engine, worked out after `run_profile`
// returns (torch-free): the point whose kernel table is the evidence's, the FLOPs and MFUs of
// every point, the scaling fit over the unpadded points and its quadratic-share check against the
// traced parts. `profile` and `levers` both call it on what the engine returned.
#pragma once

#include "tprobe/engine/profile_request.hpp"

namespace tprobe::runs {

// Fills report.table_point, .costs (one per steps.points entry), .flops_path, .fit or .fit_note,
// .sliding_dense and .share_check or .share_check_note. Needs what the engine resolved
// (report.config.attn) and measured (steps, traces, peak_tflops); a report without a resolved
// attention path (a fake engine's) gets no costs and a fit note saying why. A --table-width
// whose step failed or was not traced chooses no table point.
void derive_profile_costs(engine::ProfileReport& report,
                          const engine::ProfileRequest& request);

}  // namespace tprobe::runs
