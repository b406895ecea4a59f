// The step's request and result types' own members (torch_api/step_spec.hpp): what a point is and
// the outcome's spelling, which the engine and the views both use.
#include "tprobe/torch_api/step_spec.hpp"

namespace tprobe::torch_api {

bool StepPoint::padded() const {
  for (int64_t l : lengths) {
    if (l < width) return true;
  }
  return false;
}

int64_t StepPoint::real_tokens() const {
  if (lengths.empty()) return batch * width;
  int64_t n = 0;
  for (int64_t l : lengths) n += l;
  return n;
}

const char* to_string(PointOutcome outcome) {
  switch (outcome) {
    case PointOutcome::kOk:
      return "ok";
    case PointOutcome::kOom:
      return "oom";
    case PointOutcome::kError:
      return "error";
  }
  return "?";
}

}  // namespace tprobe::torch_api
