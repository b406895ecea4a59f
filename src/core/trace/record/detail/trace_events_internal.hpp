// Host and device events the trace reader keeps for the analyses beside the kernel table — the
// user's own ranges, the CUDA synchronisation events and the runtime calls by name — and the
// selection they are read over (internal to tprobe_core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tprobe::core::detail {

// A CUDA runtime or driver call ("cuda_runtime", "cuda_driver"): cudaLaunchKernel,
// cudaMemcpyAsync, cudaStreamSynchronize, cudaEventRecord, ...
struct RuntimeCall {
  int64_t correlation = 0;
  int64_t ts_ns = 0;
  int64_t dur_ns = -1;  // -1: no usable duration
  int64_t tid = 0;
  uint32_t name_id = 0;  // into the host names (the cpu_ops' table)
};

// A host user annotation ("user_annotation": a record_function range, ProfilerStep#N and the
// optimizer's Optimizer.step#... included).
struct UserRange {
  int64_t tid = 0;
  int64_t start_ns = 0, end_ns = 0;
  int64_t external_id = 0;  // 0: none
  uint32_t name_id = 0;     // into the host names
};

// A device-side annotation ("gpu_user_annotation"): Kineto's span of the device rows it gave to
// the host annotation with the same External id, on one stream.
struct DeviceRange {
  int32_t device = 0;
  int64_t stream = 0;
  int64_t start_ns = 0, end_ns = 0;
  int64_t external_id = 0;
};

// A CUDA synchronisation event ("cuda_sync", torch.profiler's
// _ExperimentalConfig(enable_cuda_sync_events=True)).
enum class SyncKind : uint8_t { kContext, kStream, kEvent, kStreamWaitEvent, kOther };
struct SyncEvent {
  int64_t ts_ns = 0, end_ns = 0;
  int32_t device = 0;
  int64_t stream = -1;                   // args.stream: the stream synchronised or waiting
  int64_t correlation = 0;               // the runtime call's
  int64_t wait_record_correlation = -1;  // the cudaEventRecord waited on, -1 unknown
  int64_t wait_stream = -1;              // the stream that event was recorded on, -1 unknown
  int64_t event_id = -1;                 // the CUDA event, -1 unknown
  SyncKind kind = SyncKind::kOther;
};

SyncKind sync_kind_of(const std::string& name);
const char* to_string(SyncKind k);

}  // namespace tprobe::core::detail
