// The trace reader's hand-over to the launch-bound statistics (internal to tprobe_core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/trace/stats/trace_series.hpp"
#include "tprobe/core/trace/stats/trace_stats.hpp"
#include "trace/attribute/detail/trace_parts_internal.hpp"

namespace tprobe::core::detail {

struct StatLaunch {
  int64_t ts_ns = 0;
  int64_t dur_ns = -1;  // -1: the event has no usable duration
  int64_t tid = 0;
};

// A selected device row.
struct StatRow {
  int64_t start_ns = 0, end_ns = 0;
  int64_t stream = 0;
  int64_t bytes = -1;  // -1: no "bytes" in its args
  int64_t launch = -1;  // index into the launches, -1 without one
  uint32_t name_id = 0;
  int32_t device = 0;
  ActivityKind kind = ActivityKind::kKernel;
};

// A cpu_op event: the parse's own record (the part attribution's PartsOp), read in place.
using StatOp = PartsOp;

// The two time series over the same rows (trace_series.hpp).
TraceSeries compute_trace_series(const std::vector<StatRow>& rows,
                                 const std::vector<StatLaunch>& launches,
                                 const std::vector<std::string>& names);

// `op_selected`: per op, 1 when it lies in the selected steps; empty: every op is.
TraceStats compute_trace_stats(const std::vector<StatRow>& rows,
                               const std::vector<StatLaunch>& launches,
                               const std::vector<StatOp>& ops,
                               const std::vector<uint8_t>& op_selected,
                               const std::vector<std::string>& row_names,
                               const std::vector<std::string>& op_names);

}  // namespace tprobe::core::detail
