// The trace reader's hand-over to the repeated kernel sequences (internal to tprobe_core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/trace/record/kernel_record.hpp"
#include "tprobe/core/trace/stats/kernel_sequences.hpp"

namespace tprobe::core::detail {

// A selected device row, its launch thread and its launch call's duration.
struct SequenceRow {
  int64_t start_ns = 0, end_ns = 0;
  int32_t device = 0;
  int64_t stream = 0;
  uint32_t name_id = 0;
  bool launched = false;
  int64_t tid = 0;
  int64_t launch_dur_ns = -1;  // -1: no usable duration
  ActivityKind kind = ActivityKind::kKernel;
};

KernelSequences find_kernel_sequences(const std::vector<SequenceRow>& rows,
                                      const std::vector<std::string>& names);

}  // namespace tprobe::core::detail
