// The user's own ranges (record_function, "user_annotation" in the trace): device time per range,
// nested, each device row given to the innermost range holding its launch, the rows outside every
// range named as such. HolisticTraceAnalysis's get_gpu_user_annotation_breakdown sums the spans of
// Kineto's device-side annotations by name; this places rows, so the ranges add up to the table.
// docs/kernels.md, "User ranges", defines every figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"

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

Json to_json(const UserRanges& u);  // results.trace.user_ranges
// Read back (bounds-checked; `where` names the document in errors).
UserRanges user_ranges_from_json(const Json& j, const std::string& where);
// The table shows at most kMaxShownRanges paths: the ones with the most inclusive time, and every
// path holding one of them (so the tree stays whole), in depth-first order; a note counts the rest.
constexpr std::size_t kMaxShownRanges = 60;
std::vector<Table> user_range_tables(const UserRanges& u);

class SectionBuilder;
// The report's figure and table of results.<base> (a `kernels` evidence's "trace.user_ranges").
void user_range_figures(SectionBuilder& c, const std::string& base);

}  // namespace tprobe::core
