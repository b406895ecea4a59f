// Small string predicates shared by core's name-matching code (internal to tprobe_core).
#pragma once

#include <string>

namespace tprobe::core::detail {

inline bool starts_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

inline bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

}  // namespace tprobe::core::detail
