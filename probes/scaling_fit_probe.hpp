// What `scaling-fit --profile` takes of profile evidence, outside the probe's own file so the
// probes' tests and the fuzz entries can call it.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/io/fit_points.hpp"

namespace tprobe::probes {

// profile evidence's unpadded points (results.points[]), read whole by profile's reader
// (engine's profile_points_from_json): one FitPoint per timed repeat of each "ok" point, in
// file order; `skipped` (may be null) receives one line per point that was not ok ("p.json
// results.points[3] (batch 2, width 32768): oom: CUDA out of memory"). Padded points are not
// fitted. Throws tprobe::Error naming the file and field.
std::vector<core::FitPoint> read_profile_points_evidence(const std::string& path,
                                                         std::vector<std::string>* skipped);

}  // namespace tprobe::probes
