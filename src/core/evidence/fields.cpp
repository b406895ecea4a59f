#include "tprobe/core/evidence/fields.hpp"

#include <fmt/format.h>

namespace tprobe::core::evidence {

std::string field_rows(const std::vector<FieldDoc>& docs) {
  std::string out;
  for (const FieldDoc& d : docs) {
    out += fmt::format("| `{}` | {} | {} | {} |\n", d.path, d.type, d.unit.empty() ? "–" : d.unit,
                       d.doc);
  }
  return out;
}

}  // namespace tprobe::core::evidence
