// Byte units shared by the analyses and views: the evidence stores bytes, a view divides by these.
#pragma once

namespace tprobe::core {

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace tprobe::core
