// Views of the launch-bound statistics: their evidence JSON (results.trace.idle_split, .launches,
// .queue_length, .copies, .host_ops; docs/kernels.md) and their human tables.
#pragma once

#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/trace/stats/trace_stats.hpp"

namespace tprobe::core {

// An object with the keys above and `streams`, to be merged into results.trace.
Json to_json(const TraceStats& stats);
// results.trace.streams read back (bounds-checked; `where` names the document in errors).
std::vector<StreamRow> streams_from_json(const Json& streams, const std::string& where);
// The whole of to_json(stats) read back: every field, counts not negative nor above what holds
// them, an idle split's parts summing to its idle time and its ratios their times over it, a
// queue's time at each length summing to its window. Throws tprobe::Error naming `where`.
TraceStats trace_stats_from_json(const Json& j, const std::string& where);

// Idle split, launch statistics, launch cost by kernel, queue length, copy bandwidth, host ops.
// `top` rows at most in the per-kernel and per-op tables (<= 0: all).
std::vector<Table> trace_stats_tables(const TraceStats& stats, int top = 25);

class SectionBuilder;
// The report's picture and table of results.<base> ("trace.streams"): device time per stream.
void trace_stream_figures(SectionBuilder& c, const std::string& base);

}  // namespace tprobe::core
