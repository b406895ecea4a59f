// The kernels command's evidence rows (kernel_trace.hpp): the custom fields' writers and readers.
#include "tprobe/core/evidence/kernel_trace.hpp"

#include <cmath>

namespace tprobe::core::evidence_detail {

Json seconds_json(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

int64_t ns_from_seconds(const Json& v, const std::string& where, const char* key) {
  if (!v.is_number()) fail("{}: field '{}' must be a number", where, key);
  const double s = v.get<double>();
  if (!std::isfinite(s) || s < 0 || s > 1e6)
    fail("{}: field '{}' = {} is not a time in 0..1e6 s", where, key, s);
  return std::llround(s * 1e9);
}

void read_layer_seconds(LayerRow& l, const Json& v, const std::string& w, const char* key) {
  const std::string at = w + "." + key;
  if (!v.is_object()) fail("{} must be an object", at);
  for (const auto& [phase, parts] : v.items()) {
    if (!parts.is_object()) fail("{}.{} must be an object", at, phase);
    auto& cells = l.kernel_ns[phase];
    for (const auto& [part, seconds] : parts.items())
      cells[part] = ns_from_seconds(seconds, at + "." + phase, part.c_str());
  }
}

}  // namespace tprobe::core::evidence_detail
