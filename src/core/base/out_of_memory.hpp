// Internal: a reader's allocation sized by its input, with std::bad_alloc turned into the read
// error it is — "out of memory reading <what> (<N> bytes asked)", exit 1 like every other read
// error — instead of an exception that names nothing (or, past a second failure, terminate).
//
// Fault injection for the tests: TPROBE_FAULT_ALLOC_LIMIT=<bytes> in the environment makes every
// allocation made through allocating() that asks for more than that fail as if the allocator had
// refused it. (A real refusal cannot be provoked under AddressSanitizer: its operator new reports
// and aborts instead of throwing, and its shadow memory does not start under a small RLIMIT_AS.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core::detail {

[[noreturn]] inline void fail_out_of_memory(const std::string& what, uint64_t bytes) {
  fail("out of memory reading {} ({} bytes asked)", what, bytes);
}

// TPROBE_FAULT_ALLOC_LIMIT as a byte count, read once; UINT64_MAX when unset or not a number.
inline uint64_t injected_allocation_limit() {
  static const uint64_t limit = [] {
    const char* v = std::getenv("TPROBE_FAULT_ALLOC_LIMIT");
    if (v == nullptr || *v < '0' || *v > '9') return UINT64_MAX;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    return *end == '\0' ? static_cast<uint64_t>(n) : UINT64_MAX;
  }();
  return limit;
}

// `allocate()`'s result, or the error above when it throws std::bad_alloc; `bytes` is what it
// asks for. (The failed allocation is not held when the message is built.)
template <typename Allocate>
decltype(auto) allocating(const std::string& what, uint64_t bytes, Allocate&& allocate) {
  try {
    if (bytes > injected_allocation_limit()) throw std::bad_alloc();
    return std::forward<Allocate>(allocate)();
  } catch (const std::bad_alloc&) {
    fail_out_of_memory(what, bytes);
  }
}

// Makes room for one more element in `v` (a std::vector or std::string that grows with the
// input), doubling its capacity through allocating(), so that a growth that fails names the bytes
// it asked for. Call it before each push_back of a container whose size the input decides.
template <typename Vector>
void room_for_one(Vector& v, const std::string& what) {
  if (v.size() < v.capacity()) return;
  const std::size_t n = std::max<std::size_t>(16, 2 * v.capacity());
  const uint64_t bytes = static_cast<uint64_t>(n) * sizeof(typename Vector::value_type);
  allocating(what, bytes, [&] { v.reserve(n); });
}

// Appends `n` bytes to `text`, which a whole-file read grows with its input: capacity doubles
// through allocating() (a growth that fails names its bytes), so append() never reallocates.
inline void append_growing(std::string& text, const char* data, std::size_t n,
                           const std::string& what) {
  if (text.size() + n > text.capacity()) {
    const std::size_t want = std::max(text.size() + n, 2 * text.capacity());
    allocating(what, want, [&] { text.reserve(want); });
  }
  text.append(data, n);
}

// Runs a whole streaming read, whose smaller allocations (names, map nodes, one record's
// fields) are not each sized through allocating(): one of them failing is still this reader's
// error, naming the file and how far it had read, never an exception that names nothing.
template <typename Read, typename BytesRead>
decltype(auto) reading(const std::string& what, BytesRead&& bytes_read, Read&& read) {
  try {
    return std::forward<Read>(read)();
  } catch (const std::bad_alloc&) {
    fail("out of memory reading {} (a small allocation failed after {} bytes of it)", what,
         bytes_read());
  }
}

}  // namespace tprobe::core::detail
