// A trace's facts (trace_facts.hpp): the rules between their fields.
#include "tprobe/core/evidence/trace_facts.hpp"

namespace tprobe::core {

void evidence_check(const TraceStepRange& r, const std::string& where) {
  if (r.end_ns < r.start_ns)
    fail("{}: end_ns ({}) is before start_ns ({})", where, r.end_ns, r.start_ns);
}

void evidence_check(const TraceFacts& f, const std::string& where) {
  for (const auto& [cat, count] : f.categories)
    if (count > f.events)
      fail("{}.categories: '{}' counts {} events, more than the trace's {}", where, cat, count,
           f.events);
}

}  // namespace tprobe::core
