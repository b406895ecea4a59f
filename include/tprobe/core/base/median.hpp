// The one median of a sample of doubles (step times, repeats, per-width samples): every probe that
// quotes a median computes it here. (kernel_table's per-kernel figure is the lower median of
// integer durations, named lower_median_ns for that reason.)
#pragma once

#include <algorithm>
#include <vector>

namespace tprobe::core {

// The middle value; for an even count the mean of the two middle ones; 0 for an empty sample.
inline double median(std::vector<double> samples) {
  const std::size_t n = samples.size();
  if (n == 0) return 0.0;
  std::sort(samples.begin(), samples.end());
  return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

}  // namespace tprobe::core
