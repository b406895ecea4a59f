// One traced step written as a Chrome / Kineto JSON trace (`profile --trace-out`): the device rows
// as recorded with tprobe's attribution in their args, the host launch calls where the source
// timed them with their ac2g flows, slices of phase, layer and part per stream, and the memory
// step's allocated / reserved counters. Perfetto, chrome://tracing, TensorBoard and HTA read this
// format; `tprobe kernels` reads it back with the same table and parts (docs/profile.md, "The step
// in a trace viewer").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/trace/record/kernel_record.hpp"
#include "tprobe/core/trace/attribute/step_memory.hpp"

namespace tprobe::core {

// The process ids of the tracks beside the devices' (pid = device index, tid = stream, as Kineto
// writes them): the host's launch calls (tid = OS thread), the attribution slices (one pid per
// device: tid = stream * 4 + level, level 1 phase, 2 layer, 3 part) and the memory step.
constexpr int64_t kTraceHostPid = 1000000;
constexpr int64_t kTraceAttributionPid = 1000100;  // + device
constexpr int64_t kTraceMemoryPid = 1000200;

struct ChromeTraceInput {
  // The traced step's rows as attributed (phase, part, layer, layer kind; launch call times where
  // recorded). Not owned.
  const std::vector<KernelRecord>* records = nullptr;
  std::vector<DeviceProperties> devices;
  // The memory step's timeline (a separate, untraced run of the same step; its clock starts at
  // its own window): null when there is none, and memory_note says why.
  const std::vector<MemorySample>* memory = nullptr;
  std::string memory_note;
  Json metadata = Json::object();  // written as the top-level "tprobe" object
};

struct ChromeTrace {
  std::string bytes;  // the file's bytes: JSON text, or its gzip stream
  int64_t events = 0;          // traceEvents entries
  int64_t device_rows = 0;     // kernels, memcpys and memsets
  int64_t host_launches = 0;   // cuda_runtime rows (each with an ac2g flow to its row)
  int64_t attribution_slices = 0;
  int64_t memory_samples = 0;  // counter events (allocated and reserved each count)
};

// The trace's JSON text; gzip-compressed (one gzip member) when `gzip`. Kernel names are written
// as JSON strings (quotes, backslashes and control characters escaped; invalid UTF-8 replaced by
// U+FFFD). Times are microseconds with three decimals, so nanoseconds come back exactly.
ChromeTrace chrome_trace(const ChromeTraceInput& input, bool gzip);

// Whether a trace path asks for gzip: it ends in ".gz".
bool wants_gzip(std::string_view path);

// `text` as one gzip member (what gzip(1) writes); throws tprobe::Error when zlib fails.
std::string gzip_compress(std::string_view text);

}  // namespace tprobe::core
