// Two time series of a trace, as pictures for the report: the queue length per stream (rows
// launched and not finished) and the copy bandwidth per memcpy/memset kind, each over at most
// 400 equal time buckets per device. HolisticTraceAnalysis's get_queue_length_time_series and
// get_memory_bw_time_series, downsampled so every bucket keeps its extreme (the queue's maximum)
// and its exact total (time-weighted queue, bytes). docs/kernels.md, "Time series", defines them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/evidence/trace_series.hpp"
#include "tprobe/core/base/table.hpp"

namespace tprobe::core {

// QueueSeries, CopySeries, DeviceSeries and TraceSeries, their fields:
// core/evidence/trace_series.hpp.

Json to_json(const TraceSeries& s);  // results.trace.time_series
TraceSeries trace_series_from_json(const Json& j, const std::string& where);
// The peak of each series (queue length per stream, bandwidth per copy kind) and when.
std::vector<Table> trace_series_tables(const TraceSeries& s);

class SectionBuilder;
// The report's two pictures per device of results.<base> ("trace.time_series").
void trace_series_figures(SectionBuilder& c, const std::string& base);

}  // namespace tprobe::core
