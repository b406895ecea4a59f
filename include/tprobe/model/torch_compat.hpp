// The one place that knows which libtorch version is linked: every API that differs between
// libtorch 1.13 (Debian, CPU) and 2.x (the GPU host) is reached through this header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/environment.hpp"
#include "tprobe/core/step/attention_path.hpp"
#include "tprobe/core/step/step_config.hpp"

namespace tprobe::model {

// c10's memory reporting (the hook torch.profiler's profile_memory uses): while one of these
// lives, every allocation and free of a reporting allocator — CUDA's caching allocator, and the
// CPU allocator — made on the constructing thread, or on a thread that inherits its thread-local
// state (the autograd engine's backward threads), calls `sink`. The totals are the allocator's own
// after the event, -1 where it reports none (the CPU). It occupies the profiler-state slot of
// the thread: not beside torch's own profiler.
class AllocatorEvents {
 public:
  using Sink = void (*)(void* user, const void* ptr, int64_t bytes, int64_t total_allocated,
                        int64_t total_reserved, bool cuda);
  AllocatorEvents(Sink sink, void* user);
  ~AllocatorEvents();
  AllocatorEvents(const AllocatorEvents&) = delete;
  AllocatorEvents& operator=(const AllocatorEvents&) = delete;

 private:
  struct Impl;
  Impl* impl_;
};
int64_t cuda_reserved_bytes();  // reserved now (0 on CPU-only builds)
// Caps what the caching allocator may reserve on device 0 at `bytes` (its memory fraction of the
// device's total); 0 lifts the cap. Past it an allocation is an out-of-memory error, as on a
// card of that size. Nothing on CPU-only builds.
void cuda_set_memory_cap(int64_t bytes);

// libtorch version string, e.g. "1.13.1" or "2.11.0".
std::string torch_version();

// True when the linked libtorch has the public scaled_dot_product_attention (>= 2.0).
bool has_sdpa();
// True when its SDPA takes enable_gqa (>= 2.5).
bool has_sdpa_enable_gqa();
// True when it is a CUDA build with the variable-length flash kernel's window arguments (>= 2.5).
bool has_flash_varlen();

// The SDPA backends the linked libtorch was built with and whether each is globally enabled.
std::vector<core::SdpaBackend> sdpa_backends();

// What this engine is (the linked libtorch's version, whether it is a CUDA build) for a step on
// `device` in `dtype`: what every knob value's requirement (core/step/knobs.hpp) is held against —
// the one check of what can run; the registry, not this file, says what each value needs.
core::EngineFacts engine_facts(const std::string& device, const std::string& dtype);

// CUDA device 0 helpers for timing and memory (no-ops / 0 on CPU-only builds).
void cuda_synchronize();
void cuda_reset_peak_memory();
int64_t cuda_peak_allocated_bytes();  // caching allocator's peak of allocated bytes
int64_t cuda_peak_reserved_bytes();
int64_t cuda_allocated_bytes();  // allocated now
int64_t cuda_total_memory_bytes();  // device 0's total memory (0 on CPU-only builds)
// Returns cached blocks to the driver (after an OOM, so the next point starts clean).
void cuda_empty_cache();

}  // namespace tprobe::model
