// The user's own ranges (record_function, "user_annotation" in the trace): device time per range,
// nested, each device row given to the innermost range holding its launch, the rows outside every
// range named as such. HolisticTraceAnalysis's get_gpu_user_annotation_breakdown sums the spans of
// Kineto's device-side annotations by name; this places rows, so the ranges add up to the table.
// docs/kernels.md, "User ranges", defines every figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/evidence/user_ranges.hpp"
#include "tprobe/core/base/table.hpp"

namespace tprobe::core {

// UserRangeRow and UserRanges, their fields: core/evidence/user_ranges.hpp.

Json to_json(const UserRanges& u);  // results.trace.user_ranges
// Read back (bounds-checked; `where` names the document in errors).
UserRanges user_ranges_from_json(const Json& j, const std::string& where);
// The table shows at most kMaxShownRanges paths: the ones with the most inclusive time, and every
// path holding one of them (so the tree stays whole), in depth-first order; a note counts the rest.
constexpr std::size_t kMaxShownRanges = 60;
std::vector<Table> user_range_tables(const UserRanges& u);

class SectionBuilder;
// The report's figure and table of results.<base> (a `kernels` evidence's "trace.user_ranges").
void user_range_figures(SectionBuilder& c, const std::string& base);

}  // namespace tprobe::core
