// Small arithmetic helpers shared by core's analyses and views (internal to tprobe_core).
#pragma once

namespace tprobe::core::detail {

// part / whole, or 0 when whole is not positive (an empty dataset, no micro-batches).
inline double ratio(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

}  // namespace tprobe::core::detail
