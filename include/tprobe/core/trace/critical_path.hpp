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

namespace tprobe::core {

struct CriticalPath {
  bool available = false;  // false: nothing to build a path from (why_not says what)
  std::string why_not;
};

// results.trace.critical_path
Json to_json(const CriticalPath& p);
// Its tables for the text output (empty when not available: the why is one line instead).
std::vector<Table> critical_path_tables(const CriticalPath& p);

}  // namespace tprobe::core
