// The device facts a kernel table's evidence names, below the records that carry them: the kind of
// a device activity and what the source knows about a device (core/trace/record's KernelRecord and
// the kernel table, core/evidence/kernel_table.hpp, both use them).
#pragma once

#include <cstdint>
#include <string>

namespace tprobe::core {

enum class ActivityKind { kKernel, kMemcpy, kMemset };
const char* to_string(ActivityKind kind);  // "kernel", "memcpy", "memset"

// What the source knows about a device (Kineto's `deviceProperties`, or the CUDA runtime for
// the CUPTI source). compute_major 0 = unknown.
struct DeviceProperties {
  int32_t id = 0;
  std::string name;
  int32_t compute_major = 0;
  int32_t compute_minor = 0;
  int64_t total_memory_bytes = 0;
  int32_t multiprocessors = 0;
  // 90 for compute capability 9.0, 0 if unknown: the same scale as kernel_architecture().
  int32_t sm() const { return compute_major * 10 + compute_minor; }
};

}  // namespace tprobe::core
