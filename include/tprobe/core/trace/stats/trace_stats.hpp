// The launch-bound questions a torch.profiler trace answers, beside its kernel table: the device's
// idle time split into host wait and kernel wait, kernel-launch statistics, queue length per
// stream, memcpy/memset bandwidth per copy kind, and the host-op census (dispatches per cpu_op
// name, device rows per top-level op). HolisticTraceAnalysis's features, computed exactly in
// integer nanoseconds over the same selection as the table. docs/kernels.md defines every figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/evidence/trace_stats.hpp"
#include "tprobe/core/trace/record/kernel_record.hpp"

namespace tprobe::core {

// The statistics' structs and their fields: core/evidence/trace_stats.hpp.

// Sorts `values` in place.
Distribution distribution_of(std::vector<int64_t>& values);

}  // namespace tprobe::core
