# Optional libtorch C++ APIs whose headers move between releases, detected by compiling a small
# probe against the found libtorch instead of guessing from its version. Result: a compile
# definition on tprobe_model only (see src/model/CMakeLists.txt).
#   TPROBE_HAS_KINETO_EVENTS  the Kineto profiler's C++ API (device kernel names for
#                             `tprobe mask --backends`); a CUDA libtorch only.
include(CheckCXXSourceCompiles)

set(TPROBE_HAS_KINETO_EVENTS 0)
if(TPROBE_HAS_TORCH_CUDA)
  set(CMAKE_REQUIRED_INCLUDES ${TORCH_INCLUDE_DIRS})
  # The project's CMAKE_CXX_STANDARD applies to try_compile (policy CMP0067).
  set(CMAKE_REQUIRED_FLAGS "${TORCH_CXX_FLAGS}")
  # Compile only: linking the whole of libtorch into a try_compile is slow and not the question.
  set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
  check_cxx_source_compiles([=[
#include <set>
#include <string>
#include <torch/csrc/autograd/profiler_kineto.h>
int probe() {
  namespace prof = torch::profiler::impl;
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  const std::set<prof::ActivityType> activities{prof::ActivityType::CUDA};
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  auto result = torch::autograd::profiler::disableProfiler();
  int n = 0;
  for (const auto& e : result->events()) {
    const std::string name = e.name();
    if (e.deviceType() == c10::DeviceType::CUDA && !name.empty()) ++n;
  }
  return n;
}
]=] TPROBE_KINETO_EVENTS_COMPILES)
  unset(CMAKE_TRY_COMPILE_TARGET_TYPE)
  unset(CMAKE_REQUIRED_INCLUDES)
  unset(CMAKE_REQUIRED_FLAGS)
  if(TPROBE_KINETO_EVENTS_COMPILES)
    set(TPROBE_HAS_KINETO_EVENTS 1)
  endif()
endif()
message(STATUS "tprobe: Kineto kernel names for mask --backends: ${TPROBE_HAS_KINETO_EVENTS}")
