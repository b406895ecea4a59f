// The user's own ranges by device time (user_ranges.hpp; docs/kernels.md, "User ranges").
#include "tprobe/core/trace/stats/user_ranges.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <unordered_map>

#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/report/svg_chart.hpp"
#include "trace/stats/detail/user_ranges_internal.hpp"

namespace tprobe::core {
namespace detail {
namespace {

// Intervals of one thread (or one stream) nested by time: the innermost one holding a time, ends
// inclusive. Sorted by start, longest first among equal starts; a parent is the nearest earlier
// interval that still holds the child's end, so ends never decrease up a chain of parents. A query
// climbs that chain to the first interval ending at or after the time, by skew-binary jump
// pointers (each interval's `jump` an ancestor, O(log depth) steps a query): climbing parent by
// parent was O(depth) a query, quadratic on 10,000 nested ranges with rows launched after the
// inner ones closed (issue 46).
class Nest {
 public:
  void add(int64_t start, int64_t end, std::size_t item) {
    ivs_.push_back({start, end, item, -1, 0, -1});
  }
  void build() {
    std::stable_sort(ivs_.begin(), ivs_.end(), [](const Iv& a, const Iv& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<int32_t> stack;
    starts_.resize(ivs_.size());
    for (std::size_t i = 0; i < ivs_.size(); ++i) {
      while (!stack.empty() && ivs_[static_cast<std::size_t>(stack.back())].end < ivs_[i].end)
        stack.pop_back();
      Iv& v = ivs_[i];
      v.parent = stack.empty() ? -1 : stack.back();
      if (v.parent < 0) {
        v.depth = 0;
        v.jump = -1;
      } else {
        const Iv& p = ivs_[static_cast<std::size_t>(v.parent)];
        v.depth = p.depth + 1;
        const Iv* pj = p.jump >= 0 ? &ivs_[static_cast<std::size_t>(p.jump)] : nullptr;
        const Iv* pjj = pj && pj->jump >= 0 ? &ivs_[static_cast<std::size_t>(pj->jump)] : nullptr;
        v.jump = pj && pjj && p.depth - pj->depth == pj->depth - pjj->depth ? pj->jump : v.parent;
      }
      stack.push_back(static_cast<int32_t>(i));
      starts_[i] = v.start;
    }
  }
  // The caller's item of the innermost interval holding t; -1 when none does.
  int64_t innermost(int64_t t) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), t);
    int32_t i = static_cast<int32_t>(it - starts_.begin()) - 1;
    while (i >= 0 && ivs_[static_cast<std::size_t>(i)].end < t) {
      const Iv& v = ivs_[static_cast<std::size_t>(i)];
      i = v.jump >= 0 && ivs_[static_cast<std::size_t>(v.jump)].end < t ? v.jump : v.parent;
    }
    return i >= 0 ? static_cast<int64_t>(ivs_[static_cast<std::size_t>(i)].item) : -1;
  }
  // Items in the order build() sorted them, and each one's parent item (-1: none).
  std::size_t size() const { return ivs_.size(); }
  std::size_t item(std::size_t k) const { return ivs_[k].item; }
  int64_t parent_item(std::size_t k) const {
    const int32_t p = ivs_[k].parent;
    return p >= 0 ? static_cast<int64_t>(ivs_[static_cast<std::size_t>(p)].item) : -1;
  }

 private:
  struct Iv {
    int64_t start, end;
    std::size_t item;
    int32_t parent;
    int32_t depth = 0, jump = -1;
  };
  std::vector<Iv> ivs_;
  std::vector<int64_t> starts_;
};

bool is_step(const std::string& name) { return starts_with(name, "ProfilerStep#"); }

}  // namespace

// Size: the range tree built, walked and checked against Kineto's annotations in one scope.
UserRanges analyze_user_ranges(const UserRangesInput& in) {
  UserRanges out;
  const std::vector<UserRange>& all = *in.ranges;
  const std::vector<std::string>& names = *in.names;
  // The ranges (ProfilerStep#N left out: steps are the table's own selection), by thread.
  std::map<int64_t, Nest> threads;
  std::map<int64_t, int64_t> step_count, range_count;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const UserRange& u = all[i];
    if (u.end_ns < u.start_ns) continue;
    if (is_step(names[u.name_id])) {
      ++step_count[u.tid];
      continue;
    }
    threads[u.tid].add(u.start_ns, u.end_ns, i);
    ++range_count[u.tid];
    ++out.ranges;
  }
  for (const RangeRow& r : in.rows) {
    out.total_ns += r.end_ns - r.start_ns;
  }
  if (out.ranges == 0) {
    out.outside_rows = static_cast<int64_t>(in.rows.size());
    for (const RangeRow& r : in.rows) {
      (r.kind == ActivityKind::kKernel ? out.outside_kernel_ns : out.outside_memcpy_memset_ns) +=
          r.end_ns - r.start_ns;
    }
    return out;
  }
  out.available = true;
  // The training loop's thread: the one holding the most ProfilerStep#N ranges, else the most
  // user ranges (ties: the smaller id).
  const auto& pick = step_count.empty() ? range_count : step_count;
  int64_t best = -1;
  for (const auto& [tid, n] : pick) {
    if (n > best) {
      best = n;
      out.main_tid = tid;
    }
  }
  if (!threads.count(out.main_tid)) out.main_tid = -1;  // its steps hold no user range

  // Each range's path: (parent path, name) interned, parents first.
  struct Path {
    int64_t parent = -1;
    uint32_t name_id = 0;
    int32_t depth = 0;
    int64_t first_start = 0;
    UserRangeRow row;
  };
  std::vector<Path> paths;
  std::map<std::pair<int64_t, uint32_t>, int64_t> path_ids;
  std::unordered_map<std::size_t, int64_t> path_of;  // range index -> path id
  for (auto& [tid, nest] : threads) {
    nest.build();
    for (std::size_t k = 0; k < nest.size(); ++k) {
      const std::size_t i = nest.item(k);
      const int64_t parent_range = nest.parent_item(k);
      const int64_t parent_path = parent_range >= 0 ? path_of.at(static_cast<std::size_t>(parent_range)) : -1;
      const auto key = std::make_pair(parent_path, all[i].name_id);
      auto it = path_ids.find(key);
      if (it == path_ids.end()) {
        Path p;
        p.parent = parent_path;
        p.name_id = all[i].name_id;
        p.depth = parent_path >= 0 ? paths[static_cast<std::size_t>(parent_path)].depth + 1 : 0;
        p.first_start = all[i].start_ns;
        it = path_ids.emplace(key, static_cast<int64_t>(paths.size())).first;
        paths.push_back(std::move(p));
      }
      Path& p = paths[static_cast<std::size_t>(it->second)];
      p.first_start = std::min(p.first_start, all[i].start_ns);
      ++p.row.instances;
      p.row.host_ns += all[i].end_ns - all[i].start_ns;
      path_of[i] = it->second;
    }
  }
  // Kineto's device annotations per (device, stream), for the cross-check.
  std::map<std::pair<int32_t, int64_t>, Nest> device_nests;
  if (in.devices) {
    for (std::size_t i = 0; i < in.devices->size(); ++i) {
      const DeviceRange& d = (*in.devices)[i];
      if (d.external_id != 0) device_nests[{d.device, d.stream}].add(d.start_ns, d.end_ns, i);
    }
    for (auto& [key, nest] : device_nests) nest.build();
  }
  const Nest* main = out.main_tid >= 0 ? &threads.at(out.main_tid) : nullptr;
  for (const RangeRow& r : in.rows) {
    const int64_t d = r.end_ns - r.start_ns;
    int64_t range = -1;
    bool borrowed = false;
    if (r.launched) {
      auto t = threads.find(r.tid);
      if (t != threads.end()) range = t->second.innermost(r.launch_ns);
      if (range < 0 && main != nullptr && r.tid != out.main_tid) {
        range = main->innermost(r.launch_ns);
        borrowed = range >= 0;
      }
    }
    if (range < 0) {
      ++out.outside_rows;
      (r.kind == ActivityKind::kKernel ? out.outside_kernel_ns : out.outside_memcpy_memset_ns) += d;
      continue;
    }
    UserRangeRow& row = paths[static_cast<std::size_t>(path_of.at(static_cast<std::size_t>(range)))].row;
    ++row.rows;
    row.borrowed_rows += borrowed;
    if (r.kind == ActivityKind::kKernel) {
      ++row.kernels;
      row.kernel_ns += d;
    } else {
      row.memcpy_memset_ns += d;
    }
    if (borrowed) continue;
    auto dn = device_nests.find({r.device, r.stream});
    if (dn == device_nests.end()) continue;
    const int64_t held = dn->second.innermost(r.start_ns);
    if (held < 0) continue;
    ++out.kineto_checked;
    out.kineto_same +=
        (*in.devices)[static_cast<std::size_t>(held)].external_id == all[static_cast<std::size_t>(range)].external_id;
  }
  // Depth-first, siblings by their first instance; inclusive time bottom-up.
  std::vector<std::vector<int64_t>> children(paths.size());
  std::vector<int64_t> roots;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    (paths[i].parent >= 0 ? children[static_cast<std::size_t>(paths[i].parent)] : roots)
        .push_back(static_cast<int64_t>(i));
  }
  auto by_first = [&](int64_t a, int64_t b) {
    const Path &x = paths[static_cast<std::size_t>(a)], &y = paths[static_cast<std::size_t>(b)];
    return x.first_start != y.first_start ? x.first_start < y.first_start : a < b;
  };
  std::sort(roots.begin(), roots.end(), by_first);
  for (auto& c : children) std::sort(c.begin(), c.end(), by_first);
  for (std::size_t i = paths.size(); i-- > 0;) {
    // paths were interned parents first, so children have larger ids: bottom-up by id
    Path& p = paths[i];
    p.row.inclusive_ns += p.row.kernel_ns + p.row.memcpy_memset_ns;
    if (p.parent >= 0) paths[static_cast<std::size_t>(p.parent)].row.inclusive_ns += p.row.inclusive_ns;
  }
  // Depth-first: each path's row after its parent's, the parent given by its row index.
  std::vector<int64_t> row_of(paths.size(), -1);
  std::vector<int64_t> stack(roots.rbegin(), roots.rend());
  out.rows.reserve(paths.size());
  while (!stack.empty()) {
    const int64_t id = stack.back();
    stack.pop_back();
    Path& p = paths[static_cast<std::size_t>(id)];
    UserRangeRow row = p.row;
    row.name = names[p.name_id];
    row.depth = p.depth;
    row.parent = p.parent >= 0 ? row_of[static_cast<std::size_t>(p.parent)] : -1;
    row.share_ratio =
        out.total_ns > 0 ? double(row.kernel_ns + row.memcpy_memset_ns) / double(out.total_ns) : 0.0;
    row_of[static_cast<std::size_t>(id)] = static_cast<int64_t>(out.rows.size());
    out.rows.push_back(std::move(row));
    const auto& c = children[static_cast<std::size_t>(id)];
    for (auto it = c.rbegin(); it != c.rend(); ++it) stack.push_back(*it);
  }
  return out;
}

}  // namespace detail

namespace {

// The rows a table or figure shows (user_ranges.hpp, kMaxShownRanges): the `cap` paths with the
// most inclusive time (ties: the earlier row) and every path holding one, in row order. Linear
// but for the sort: each ancestor is marked once.
std::vector<std::size_t> shown_rows(const UserRanges& u, std::size_t cap) {
  const std::size_t n = u.rows.size();
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  if (n <= cap) return order;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return u.rows[a].inclusive_ns > u.rows[b].inclusive_ns;
  });
  std::vector<bool> shown(n, false);
  std::size_t count = 0;
  for (std::size_t k = 0; k < n && count < cap; ++k) {
    for (int64_t i = static_cast<int64_t>(order[k]); i >= 0 && !shown[static_cast<std::size_t>(i)];
         i = u.rows[static_cast<std::size_t>(i)].parent) {
      shown[static_cast<std::size_t>(i)] = true;
      ++count;
    }
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < n; ++i)
    if (shown[i]) out.push_back(i);
  return out;
}

// A row's name indented by its depth, the indent capped (a 10,000-deep chain would print 20,000
// spaces per row): past depth 8, "[depth N] " says how deep.
std::string indented(const UserRangeRow& r) {
  constexpr int32_t kMaxIndent = 8;
  std::string out(static_cast<std::size_t>(2 * std::min(r.depth, kMaxIndent)), ' ');
  if (r.depth > kMaxIndent) out += fmt::format("[depth {}] ", r.depth);
  return out + r.name;
}
}  // namespace

Json to_json(const UserRanges& u) { return evidence::to_json(u); }

UserRanges user_ranges_from_json(const Json& j, const std::string& where) {
  return evidence::from_json<UserRanges>(j, where);
}

void user_range_figures(SectionBuilder& c, const std::string& base) {
  const Json* j = c.find(base);
  if (j == nullptr) return;  // evidence written before user ranges were read
  UserRanges u;
  try {
    u = user_ranges_from_json(*j, c.field_name(base));
  } catch (const Error&) {
    c.absent(base, "the user-range breakdown");
    return;
  }
  if (!u.available) {
    c.note("user ranges: the trace holds no record_function range besides ProfilerStep#N");
    return;
  }
  BarChart bars;
  bars.title = "Device time by the user's own ranges";
  bars.value_label = "ms";
  bars.series = {"rows in the range itself", "with the ranges inside it"};
  const std::vector<std::size_t> shown = shown_rows(u, kMaxShownRanges);
  for (std::size_t i : shown) {
    const UserRangeRow& r = u.rows[i];
    bars.items.push_back({indented(r),
                          {double(r.kernel_ns + r.memcpy_memset_ns) * 1e-6,
                           double(r.inclusive_ns) * 1e-6},
                          false, format_percent(r.share_ratio)});
  }
  const int64_t outside = u.outside_kernel_ns + u.outside_memcpy_memset_ns;
  if (outside > 0) bars.highlight_label = "rows outside every user range";
  bars.items.push_back({"(outside every user range)", {double(outside) * 1e-6, double(outside) * 1e-6},
                        outside > 0,
                        u.total_ns > 0 ? format_percent(double(outside) / double(u.total_ns)) : ""});
  c.figure("user-ranges", bars.title, render_svg(bars),
           {base + ".rows[].kernel_ns", base + ".rows[].memcpy_memset_ns",
            base + ".rows[].inclusive_ns", base + ".outside"},
           "Each device row in the innermost record_function range holding its launch (rows "
           "launched by autograd's thread in the training loop's range at that time); shares are "
           "of the trace's device time." +
               (shown.size() < u.rows.size()
                    ? fmt::format(" {} of the {} range paths drawn: the {} with the most time "
                                  "inside them and the ranges holding those.",
                                  shown.size(), u.rows.size(), kMaxShownRanges)
                    : std::string()));
  if (u.kineto_checked > 0) {
    c.fact("user ranges: Kineto's device annotations agree",
           fmt::format("{} of {} rows", format_count(u.kineto_same), format_count(u.kineto_checked)),
           {base + ".kineto_same", base + ".kineto_checked"}, u.kineto_same != u.kineto_checked);
  }
}

std::vector<Table> user_range_tables(const UserRanges& u) {
  std::vector<Table> out;
  if (!u.available) return out;
  Table t("Device time by the user's own ranges (record_function; rows in their innermost range)");
  t.column("range", Align::kLeft)
      .column("instances")
      .column("host time")
      .column("rows")
      .column("device time")
      .column("of total")
      .column("with inner ranges")
      .column("borrowed rows");
  const std::vector<std::size_t> shown = shown_rows(u, kMaxShownRanges);
  for (std::size_t i : shown) {
    const UserRangeRow& r = u.rows[i];
    t.row({indented(r),
           format_count(r.instances), format_ns(r.host_ns), format_count(r.rows),
           format_ns(r.kernel_ns + r.memcpy_memset_ns), format_percent(r.share_ratio),
           format_ns(r.inclusive_ns), r.borrowed_rows ? format_count(r.borrowed_rows) : ""});
  }
  const int64_t outside = u.outside_kernel_ns + u.outside_memcpy_memset_ns;
  t.row({"(outside every user range)", "", "", format_count(u.outside_rows), format_ns(outside),
         format_percent(u.total_ns > 0 ? double(outside) / double(u.total_ns) : 0.0), "", ""});
  t.note(fmt::format(
      "{} range(s) (ProfilerStep#N left out); a row belongs to the innermost range on its launch "
      "thread holding the launch; a thread with no range there (autograd's) borrows the innermost "
      "range of the training loop's thread{} at that time; the rows add up to the table's {}",
      format_count(u.ranges), u.main_tid >= 0 ? fmt::format(" (tid {})", u.main_tid) : "",
      format_ns(u.total_ns)));
  if (shown.size() < u.rows.size()) {
    t.note(fmt::format("{} of the {} range paths shown: the {} with the most device time inside "
                       "them and the ranges holding those; every path is in "
                       "results.trace.user_ranges.rows (a tree: each row's parent and name)",
                       format_count(static_cast<int64_t>(shown.size())),
                       format_count(static_cast<int64_t>(u.rows.size())), kMaxShownRanges));
  }
  if (u.kineto_checked > 0) {
    t.note(fmt::format(
        "Kineto's own device-side annotations agree on {} of the {} rows placed on their own "
        "thread that one holds",
        format_count(u.kineto_same), format_count(u.kineto_checked)));
  }
  out.push_back(t);
  return out;
}

}  // namespace tprobe::core
