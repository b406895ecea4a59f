// Small string helpers shared by core's readers and name matching (internal to tprobe_core).
#pragma once

#include <string>
#include <string_view>

namespace tprobe::core::detail {

inline bool starts_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

inline bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// s without leading and trailing spaces, tabs, carriage returns and other ASCII white space.
inline std::string_view trim(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace tprobe::core::detail
