// The user ranges' evidence (user_ranges.hpp): the tree's rules.
#include "tprobe/core/evidence/user_ranges.hpp"

namespace tprobe::core {

void evidence_check(const UserRanges& u, const std::string& where) {
  for (std::size_t i = 0; i < u.rows.size(); ++i) {
    const UserRangeRow& r = u.rows[i];
    const std::string w = where + ".rows[" + std::to_string(i) + "]";
    if (r.parent >= static_cast<int64_t>(i))
      fail("{}: field 'parent' is {}, not an earlier row", w, r.parent);
    const int32_t want = r.parent < 0 ? 0 : u.rows[static_cast<std::size_t>(r.parent)].depth + 1;
    if (r.depth != want)
      fail("{}: field 'depth' is {}, but its parent row makes it {}", w, r.depth, want);
  }
  if (u.kineto_same > u.kineto_checked)
    fail("{}: kineto_same ({}) is above kineto_checked ({})", where, u.kineto_same,
         u.kineto_checked);
}

}  // namespace tprobe::core
