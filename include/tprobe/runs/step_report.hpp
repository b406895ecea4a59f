// Views of a StepReport (no libtorch): the JSON both the profile evidence and step_bench write,
// the per-point line and the timing table.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/engine/step_spec.hpp"

namespace tprobe::runs {

// Summary of one series of samples (seconds).
struct SampleStats {
  double median = 0, min = 0, max = 0;
  double spread_ratio = 0;  // (max - min) / median
};
SampleStats sample_stats(const std::vector<double>& samples);  // all 0 for an empty series

// One point as scaling-fit reads it (batch, width, outcome, samples_s) plus everything else.
core::Json point_to_json(const engine::PointResult& point);
// Its reader: every field point_to_json writes, so point_to_json(point_from_json(point_to_json(p)))
// is point_to_json(p) (`extra` and `raw_memory` are not written, so not read). The derived fields
// (padded, the token counts, the stats, the overhead ratios) are checked against what the read
// fields make of them, the time stats only for being there exactly when their samples are. A
// loss that was not finite was written as null and reads back as NaN. Throws tprobe::Error
// naming `where` and the field.
engine::PointResult point_from_json(const core::Json& j, const std::string& where);
// The measured points of profile's (or step_bench's) `results`: its `points` (unpadded, in sweep
// order) then its `padded_points`, each point as point_from_json reads it; the fields profile
// adds beside them (costs, kernel_trace) are not read here. A point filed under the wrong one of
// the two arrays is an error.
std::vector<engine::PointResult> profile_points_from_json(const core::Json& results,
                                                  const std::string& where);
// The whole StepReport of those results: its own fields (model, source, config_digest, device,
// dtype, clock, init_s, the parameter counts, the weights' bytes, interrupted and where) and the
// points as profile_points_from_json reads them; `config` (the built model's facts, which the
// evidence names by config_digest) and `extra` are not written, so not read. to_json of it is
// to_json(report) for a report whose points are in sweep order, unpadded first.
engine::StepReport step_report_from_json(const core::Json& results, const std::string& where);
// {model, source, ..., points: [unpadded points], padded_points: [points with padding]}:
// scaling-fit fits `points` (one curve over widths) and never sees a padded point.
core::Json to_json(const engine::StepReport& report);
// "2x8192 ok: step 1.234 s (min 1.230, spread 0.4 %), fwd ..., peak 12.3 GiB"
std::string point_line(const engine::PointResult& point);
core::Table timing_table(const engine::StepReport& report);
// The sweep's and the points' scalar fields, one row each, straight from their field tables
// (core/evidence/profile_point.hpp): a field added to a table is a row here with no other edit.
std::vector<core::Table> field_tables(const engine::StepReport& report);
// Where each point's peak goes (the memory step's items) and the widest point's alive bytes by
// part × phase; none when no point recorded its memory.
std::vector<core::Table> memory_tables(const engine::StepReport& report);

}  // namespace tprobe::runs
