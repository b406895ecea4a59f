// Where a training step's memory goes: the allocator's events of one recorded step, each carrying
// the same launch context the kernel attribution uses (the engine scope or the autograd node on
// the allocating thread), replayed into the step's peak, the bytes alive at the peak by phase ×
// part × layer, the items an operator budgets with, and a timeline (docs/profile.md, "Memory").
//
// Replay in short: the allocated bytes start at what was allocated when the window opened (the
// resident set: weights, adapters, inputs, workspace) and move by every event's signed size, so
// they follow the allocator's own total exactly; the peak is the first event where they are
// largest. An allocation is alive at the peak when it was made at or before the peak event and
// not freed by then. Its phase, part and layer come from its context like a kernel's: an engine
// scope directly, a backward node through the forward op that made it; an allocation with neither
// is untagged — counted, never given to a part.
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/evidence/step_memory.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"

namespace tprobe::core {

// One event of the allocator (c10's memory reporting: every allocation and free of a block).
struct MemoryEvent {
  int64_t t_ns = 0;     // host steady clock, from the window's start
  uint64_t ptr = 0;     // the block's address
  int64_t bytes = 0;    // > 0 allocated, < 0 freed (the block's size, the allocator's rounding)
  int64_t total_allocated = -1;  // the allocator's own total after the event; -1 where unknown
  int64_t total_reserved = -1;
  LaunchContext context;  // the allocating thread's innermost entry; tag 0 and !node: none
};

// What the engine knows beside the events: MemoryFacts (core/evidence/step_memory.hpp).

// What one memory window recorded, before attribution (schema tprobe.raw_memory, version 1):
// replayable without a GPU.
struct RawMemory {
  std::string device;           // "cuda:0" or "cpu"
  bool totals_known = false;    // the events carry the allocator's totals (CUDA's caching allocator)
  int64_t start_allocated = 0;  // allocated when the window opened
  int64_t start_reserved = 0;
  std::vector<MemoryEvent> events;
  std::vector<StepTag> tags;
  std::vector<ForwardLink> forward_ops;
  int64_t dropped_events = 0;  // events past the recorder's cap (then the replay is refused)
  MemoryFacts facts;
};
Json to_json(const RawMemory& raw);
// Bounds-checked; throws tprobe::Error naming `where` and the field.
RawMemory parse_raw_memory(std::string_view text, const std::string& where);
RawMemory read_raw_memory(const std::string& path);

// Throws tprobe::Error when the events cannot be replayed (dropped events, a block allocated
// twice without a free).
StepMemory analyze_step_memory(const RawMemory& raw, size_t max_samples = 400);
// AdamW's two fp32 moments per trainable parameter (the playbook's count).
int64_t adamw_state_bytes(int64_t parameters);

}  // namespace tprobe::core
