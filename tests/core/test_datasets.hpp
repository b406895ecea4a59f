// Seeded random length datasets for the padding and bucket invariant tests.
#pragma once

#include <cstdint>
#include <string>

#include "tprobe/core/io/lengths.hpp"
#include "tprobe/core/base/rng.hpp"

namespace tprobe::testing_support {

// n records with lengths uniform in [1, max_len] and sources uniform over `sources` names.
inline core::LengthDataset random_dataset(uint64_t seed, std::size_t n, uint32_t sources,
                                          int64_t max_len) {
  core::Rng rng(seed);
  core::LengthDataset ds;
  ds.name = "random";
  for (uint32_t s = 0; s < sources; ++s) ds.source_names.push_back("s" + std::to_string(s));
  for (std::size_t i = 0; i < n; ++i) {
    ds.lengths.push_back(1 + static_cast<int64_t>(rng.uniform(static_cast<uint64_t>(max_len))));
    ds.source.push_back(static_cast<uint32_t>(rng.uniform(sources)));
  }
  return ds;
}

}  // namespace tprobe::testing_support
