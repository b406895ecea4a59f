// A seeded random generator that gives the same numbers on every platform and standard library.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tprobe::core {

// SplitMix64 step (Steele, Lea, Flood 2014): used to expand one seed into xoshiro's state.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman, Vigna). std::mt19937 would be portable too, but the std distributions
// on top of it are not (libstdc++ and libc++ draw differently), so bounded draws and shuffles are
// done here with integer arithmetic only: an emitted order is reproducible from its seed anywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& word : s_) word = splitmix64(sm);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, bound), bound > 0, without modulo bias: rejects r < 2^64 mod bound. That
  // threshold is below bound, so it only needs computing (a second division) when r < bound.
  uint64_t uniform(uint64_t bound) {
    for (;;) {
      const uint64_t r = next();
      if (r >= bound || r >= (0 - bound) % bound) return r % bound;
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Fisher-Yates over [first, last), drawing with `rng` from the back.
template <typename It>
void shuffle(It first, It last, Rng& rng) {
  auto n = static_cast<uint64_t>(last - first);
  for (uint64_t i = n; i > 1; --i) {
    uint64_t j = rng.uniform(i);
    std::swap(first[static_cast<std::ptrdiff_t>(i - 1)], first[static_cast<std::ptrdiff_t>(j)]);
  }
}

}  // namespace tprobe::core
