// Internal: 64-bit arithmetic on user-given sizes that refuses to wrap, and the largest sizes
// tprobe accepts (beyond them a number is a typo or an attack, not a training setup).
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core::detail {

inline constexpr int64_t kMaxBatch = int64_t{1} << 20;     // sequences per micro-batch
inline constexpr int64_t kMaxWidth = int64_t{2147483647};  // tokens per sequence
inline constexpr int64_t kMaxLoraRank = int64_t{1} << 20;  // far past any adapter

// a * b and a + b for int64_t or uint64_t; a usage error naming `what` when the result does not
// fit (the inputs came from options or user files).
// The second operand takes the first's type (a literal 16 next to a uint64_t is fine).
template <typename T>
struct same_as_first {
  using type = T;
};

template <typename T>
T mul_or_refuse(T a, typename same_as_first<T>::type b, std::string_view what) {
  T r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    fail_usage("{}: {} x {} does not fit in 64 bits; the sizes are not realistic", what, a, b);
  }
  return r;
}

template <typename T>
T add_or_refuse(T a, typename same_as_first<T>::type b, std::string_view what) {
  T r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    fail_usage("{}: {} + {} does not fit in 64 bits; the sizes are not realistic", what, a, b);
  }
  return r;
}

// `value` in 1..max, else a usage error "<option> <value>: ...".
inline void require_count(std::string_view option, int64_t value, int64_t max) {
  if (value < 1) fail_usage("{} {}: must be a positive integer", option, value);
  if (value > max) fail_usage("{} {}: above the largest accepted value {}", option, value, max);
}

}  // namespace tprobe::core::detail
