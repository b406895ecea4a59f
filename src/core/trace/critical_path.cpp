// The critical path of a traced step (critical_path.hpp; docs/kernels.md, "Critical path").
#include "tprobe/core/trace/critical_path.hpp"

#include "trace/critical_path_internal.hpp"

namespace tprobe::core {
namespace detail {

CriticalPath analyze_critical_path(const CriticalPathInput& in) {
  CriticalPath p;
  (void)in;
  p.why_not = "not computed";
  return p;
}

}  // namespace detail

Json to_json(const CriticalPath& p) {
  return {{"available", p.available}, {"why_not", p.available ? Json(nullptr) : Json(p.why_not)}};
}

std::vector<Table> critical_path_tables(const CriticalPath& p) {
  (void)p;
  return {};
}

}  // namespace tprobe::core
