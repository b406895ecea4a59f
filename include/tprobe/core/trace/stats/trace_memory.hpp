// A trace's memory, from the `[memory]` instant events torch.profiler writes with
// `profile_memory=True` (one per allocation or free: Addr, Bytes — negative for a free —, Total
// Allocated and Total Reserved after it, Device Type and Id): per device the timeline of allocated
// and reserved bytes, the peak, and the bytes alive at the peak by phase × part × layer, each
// allocation placed by the rule that places a kernel's launch (trace_parts.hpp). An allocation
// the rule cannot place stays untagged, counted by reason, never guessed. docs/kernels.md,
// "Memory", defines every figure.
#pragma once

#include "tprobe/core/evidence/trace_memory.hpp"

