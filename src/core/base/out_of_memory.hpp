// Internal: a reader's allocation sized by its input, with std::bad_alloc turned into the read
// error it is — "out of memory reading <what> (<N> bytes asked)", exit 1 like every other read
// error — instead of an exception that names nothing (or, past a second failure, terminate).
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <utility>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core::detail {

[[noreturn]] inline void fail_out_of_memory(const std::string& what, uint64_t bytes) {
  fail("out of memory reading {} ({} bytes asked)", what, bytes);
}

// `allocate()`'s result, or the error above when it throws std::bad_alloc; `bytes` is what it
// asks for. (The failed allocation is not held when the message is built.)
template <typename Allocate>
decltype(auto) allocating(const std::string& what, uint64_t bytes, Allocate&& allocate) {
  try {
    return std::forward<Allocate>(allocate)();
  } catch (const std::bad_alloc&) {
    fail_out_of_memory(what, bytes);
  }
}

}  // namespace tprobe::core::detail
