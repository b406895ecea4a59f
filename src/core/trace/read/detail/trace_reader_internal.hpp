// Internal entry points of the trace reader, for tests (internal to tprobe_core).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "tprobe/core/trace/read/trace_reader.hpp"

namespace tprobe::core::detail {

// read_trace_buffer with the tokenizer's chunk set to `chunk` bytes, so that tests can split
// every token across chunk boundaries and check that the result does not change.
TraceResult read_trace_buffer_in_chunks(std::string_view bytes, const std::string& label,
                                        std::size_t chunk, const KernelTableOptions& options = {});

}  // namespace tprobe::core::detail
