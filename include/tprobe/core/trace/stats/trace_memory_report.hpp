// Views of a trace's memory (trace_memory.hpp): its evidence JSON (results.memory,
// docs/kernels.md "Evidence"), its human tables, and its figures in the report's kernels section.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/trace/stats/trace_memory.hpp"

namespace tprobe::core {

// results.memory.
Json to_json(const TraceMemory& memory);
// Its reader: every field to_json writes, bounds-checked; the derived ones (availability, the
// hint, shares, tagged bytes, the timeline's point count) checked by writing them again, so that
// to_json(trace_memory_from_json(to_json(m))) is to_json(m). The attribution's being off is read
// from the hint, the one place it shows. Throws tprobe::Error naming `where` and the field.
TraceMemory trace_memory_from_json(const Json& j, const std::string& where);

// Per device: first/peak/last allocated and reserved with the peak's time and step; the bytes
// alive at each device's peak by phase × part, per decoder layer, and by op outside the model's
// modules. Without [memory] events: one line saying how to record them. `title_prefix` heads
// every title ("rank 1: ").
std::vector<Table> trace_memory_tables(const TraceMemory& memory,
                                       const std::string& title_prefix = {});

// The report's memory figures from the evidence's results.<base> (base "memory"): per device the
// timeline of allocated and reserved bytes with the peak marked, and the bytes alive at the peak
// by phase and part; facts for the peak, what was resident before the trace and what is untagged.
void trace_memory_figures(SectionBuilder& c, const std::string& base = "memory");

}  // namespace tprobe::core
