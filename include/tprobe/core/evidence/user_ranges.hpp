// The user's own ranges as the kernels command's evidence holds them (results.trace.user_ranges,
// docs/kernels.md "User ranges"), each field declared once (core/evidence/fields.hpp), with the
// tree's rules (a parent is an earlier row, one level up) as evidence_check; core/trace/stats's
// user_ranges fills and shows them.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"

namespace tprobe::core {

// One range path (the names from the outermost range in: "train_step > forward"), stored as a
// tree: its parent row and its own name, never the whole path (10,000 nested ranges would write
// 10,000 paths of up to 10,000 names each, issue 46).
struct UserRangeRow {
  int64_t parent = -1;    // the row of the path holding it (an earlier row); -1: outermost
  std::string name;       // its own (innermost) name
  int32_t depth = 0;      // 0: outermost; the parent's depth + 1
  int64_t instances = 0;  // host ranges with this path (over the whole trace)
  int64_t host_ns = 0;    // their summed host duration
  int64_t rows = 0;       // selected device rows whose innermost range it is
  int64_t kernels = 0;
  int64_t kernel_ns = 0;            // of those rows: kernels
  int64_t memcpy_memset_ns = 0;     // and memcpy/memset rows
  int64_t borrowed_rows = 0;        // of rows: launched on another thread (below)
  int64_t inclusive_ns = 0;  // kernel_ns + memcpy_memset_ns of it and every range inside it
  double share_ratio = 0;    // (kernel_ns + memcpy_memset_ns) / the table's sum
};

struct UserRanges {
  bool available = false;  // the trace holds user ranges (ProfilerStep#N left out)
  int64_t ranges = 0;      // host user ranges, ProfilerStep#N left out
  int64_t main_tid = -1;   // the thread rows of other threads borrow ranges from (-1: none)
  std::vector<UserRangeRow> rows;  // depth-first: a range, then the ranges inside it
  int64_t outside_rows = 0;        // rows no range holds (no launch, or none at its launch)
  int64_t outside_kernel_ns = 0, outside_memcpy_memset_ns = 0;
  int64_t total_ns = 0;  // every selected row: the table's sum
  // Kineto's own assignment (gpu_user_annotation spans, by External id) against the rule, over
  // the rows placed on their own launch thread that a device annotation holds.
  int64_t kineto_checked = 0, kineto_same = 0;
};

// A row's parent is an earlier row and its depth the parent's + 1; kineto_same not above
// kineto_checked.
void evidence_check(const UserRanges& u, const std::string& where);

constexpr auto evidence_fields(const UserRangeRow*) {
  using evidence::field;
  using R = UserRangeRow;
  return std::make_tuple(
      field("parent", &R::parent, "", "the row holding it (an earlier one); -1: outermost")
          .at_least(-1),
      field("name", &R::name, "", "its own (innermost) name"),
      field("depth", &R::depth, "", "0: outermost; the parent's + 1").at_least(0),
      field("instances", &R::instances, "", "host ranges with this path").at_least(0),
      field("host_ns", &R::host_ns, "ns", "their host duration").at_least(0),
      field("rows", &R::rows, "", "device rows whose innermost range it is").at_least(0),
      field("kernels", &R::kernels, "", "of them kernels").at_least(0),
      field("kernel_ns", &R::kernel_ns, "ns", "the kernels' time").at_least(0),
      field("memcpy_memset_ns", &R::memcpy_memset_ns, "ns", "the copies' time").at_least(0),
      field("borrowed_rows", &R::borrowed_rows, "", "launched on another thread").at_least(0),
      field("inclusive_ns", &R::inclusive_ns, "ns", "with every range inside it").at_least(0),
      field("share_ratio", &R::share_ratio, "", "its own time over the table's sum"));
}
inline auto evidence_fields(const UserRanges*) {
  using evidence::derived;
  using evidence::field;
  using evidence::group;
  using U = UserRanges;
  return std::make_tuple(
      field("available", &U::available, "", "the trace holds user ranges"),
      field("ranges", &U::ranges, "", "host user ranges, ProfilerStep#N left out").at_least(0),
      field("main_tid", &U::main_tid, "", "the thread others borrow ranges from; -1: none"),
      field("rows", &U::rows, "", "depth-first: a range, then the ranges inside it"),
      group<U>("outside", "the rows no range holds",
               field("rows", &U::outside_rows, "", "no launch, or none at it").at_least(0),
               field("kernel_ns", &U::outside_kernel_ns, "ns", "their kernels' time").at_least(0),
               field("memcpy_memset_ns", &U::outside_memcpy_memset_ns, "ns", "their copies'")
                   .at_least(0),
               derived<U>("share_ratio",
                          +[](const U& u) { return Json(evidence::ratio(
                            u.outside_kernel_ns + u.outside_memcpy_memset_ns, u.total_ns)); },
                          "number", "", "over total_ns")),
      field("total_ns", &U::total_ns, "ns", "every selected row: the table's sum").at_least(0),
      field("kineto_checked", &U::kineto_checked, "", "rows Kineto's own annotation holds")
          .at_least(0),
      field("kineto_same", &U::kineto_same, "", "of them placed alike").at_least(0));
}

}  // namespace tprobe::core
