// The trace reader's hand-over to the user-range breakdown (internal to tprobe_core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/trace/record/kernel_record.hpp"
#include "tprobe/core/trace/stats/user_ranges.hpp"
#include "trace/record/detail/trace_events_internal.hpp"

namespace tprobe::core::detail {

// A selected device row and its launch (launched false: none in the trace).
struct RangeRow {
  int64_t start_ns = 0, end_ns = 0;
  int32_t device = 0;
  int64_t stream = 0;
  bool launched = false;
  int64_t tid = 0, launch_ns = 0;
  ActivityKind kind = ActivityKind::kKernel;
};

struct UserRangesInput {
  const std::vector<UserRange>* ranges = nullptr;     // every user_annotation, ProfilerStep too
  const std::vector<DeviceRange>* devices = nullptr;  // every gpu_user_annotation
  const std::vector<std::string>* names = nullptr;    // the host names UserRange::name_id index
  std::vector<RangeRow> rows;                         // the selection
};

UserRanges analyze_user_ranges(const UserRangesInput& in);

}  // namespace tprobe::core::detail
