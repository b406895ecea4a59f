// The process's CPU time, for the scale tests' growth checks (CPU, not wall: the 2-core machine
// runs other tests beside them).
#pragma once

#include <time.h>

namespace tprobe::scale {

inline double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace tprobe::scale
