// The critical path of a traced step: the chain of host and device work, linked by what the
// trace records of their dependencies (CPU op nesting and order, launch -> kernel, stream order,
// CUDA synchronisation), that sets the step's length. docs/kernels.md, "Critical path", defines
// the graph and every figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/evidence/critical_path.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"

namespace tprobe::core {

class SectionBuilder;

// PathShares, PathStep, PathPhase, PathHostOp, PathKernel, PathEdges, PathGraph and CriticalPath,
// their fields: core/evidence/critical_path.hpp.

// results.trace.critical_path, and its reader (one tprobe::Error line naming `where` and the
// field when the object is damaged; the sums written beside their parts are checked).
Json to_json(const CriticalPath& p);
CriticalPath critical_path_from_json(const Json& j, const std::string& where);
// Its tables for the text output (empty when not available: the why is one line instead).
// `top` rows at most in the host-op and kernel tables (<= 0: all).
std::vector<Table> critical_path_tables(const CriticalPath& p, int top = 25);
// The report's figure (host / device / delay on the path, whole, per step and per phase) and
// its host-event and kernel tables, from the evidence under `base`.
void critical_path_figures(SectionBuilder& c, const std::string& base);

}  // namespace tprobe::core
