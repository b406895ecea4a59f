// Row labels for printed tables that never print two different things the same way (internal).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tprobe::core::detail {

// labels[i] is whole[i] shortened for a table; where two different whole names shorten to one
// label, each of them gets " [<array>[index[i]]]" (its place in the evidence array that holds the
// whole name), so a reader can tell the rows apart and find each one.
inline void make_distinct(std::vector<std::string>& labels, const std::vector<std::string>& whole,
                          const std::vector<std::size_t>& index, const std::string& array) {
  std::map<std::string, std::set<std::string>> seen;
  for (std::size_t i = 0; i < labels.size(); ++i) seen[labels[i]].insert(whole[i]);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (seen[labels[i]].size() > 1) {
      labels[i] += " [" + array + "[" + std::to_string(index[i]) + "]]";
    }
  }
}

}  // namespace tprobe::core::detail
