// The device-only kernel table: per-name statistics, three totals, categories, architecture,
// steps and phases, from core::KernelRecord alone.
#include "tprobe/core/trace/stats/kernel_table.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "base/math_util.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

void merge_intervals(std::vector<std::pair<int64_t, int64_t>>& v) {
  std::sort(v.begin(), v.end());
  std::size_t out = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (out > 0 && v[i].first <= v[out - 1].second) {
      v[out - 1].second = std::max(v[out - 1].second, v[i].second);
    } else {
      v[out++] = v[i];
    }
  }
  v.resize(out);
}

namespace {

using Intervals = std::vector<std::pair<int64_t, int64_t>>;

// Sorts and merges in place; returns the merged list's total length.
int64_t merge(Intervals& v) {
  merge_intervals(v);
  int64_t busy = 0;
  for (const auto& iv : v) busy += iv.second - iv.first;
  return busy;
}

}  // namespace

std::vector<int64_t> select_steps(const std::vector<int64_t>& present,
                                  const KernelTableOptions& options) {
  std::vector<int64_t> real;
  for (int64_t s : present) {
    if (s >= 0) real.push_back(s);
  }
  std::sort(real.begin(), real.end());
  if (options.steps.empty() && options.skip_first <= 0) return present;
  if (real.empty()) {
    fail_usage(
        "step selection: the records hold no profiler steps (no ProfilerStep#N ranges in "
        "the trace); select no steps");
  }
  std::vector<int64_t> kept = real;
  if (options.skip_first > 0) {
    if (options.skip_first >= static_cast<int64_t>(real.size())) {
      fail_usage("skipping the first {} step(s) leaves none: the records hold {} step(s) ({})",
                 options.skip_first, real.size(), fmt::join(real, ", "));
    }
    kept.erase(kept.begin(), kept.begin() + options.skip_first);
  }
  if (!options.steps.empty()) {
    std::vector<int64_t> chosen;
    for (int64_t s : options.steps) {
      if (!std::binary_search(real.begin(), real.end(), s)) {
        fail_usage("step {}: no such profiler step; the records hold {}", s,
                   fmt::join(real, ", "));
      }
      if (std::binary_search(kept.begin(), kept.end(), s)) chosen.push_back(s);
    }
    std::sort(chosen.begin(), chosen.end());
    chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
    if (chosen.empty()) {
      fail_usage("step {} is among the first {} step(s), which are skipped",
                 fmt::join(options.steps, ","), options.skip_first);
    }
    kept = chosen;
  }
  return kept;
}

BusyTotals busy_totals(std::vector<std::pair<int64_t, int64_t>>& intervals) {
  BusyTotals t;
  t.events = static_cast<int64_t>(intervals.size());
  if (intervals.empty()) return t;
  t.start_ns = intervals.front().first;
  t.end_ns = intervals.front().second;
  for (const auto& iv : intervals) {
    t.sum_ns += iv.second - iv.first;
    t.start_ns = std::min(t.start_ns, iv.first);
    t.end_ns = std::max(t.end_ns, iv.second);
  }
  t.union_busy_ns = merge(intervals);
  t.span_ns = t.end_ns - t.start_ns;
  t.idle_ns = t.span_ns - t.union_busy_ns;
  return t;
}

int64_t overlap_ns(std::vector<std::pair<int64_t, int64_t>> a,
                   std::vector<std::pair<int64_t, int64_t>> b) {
  merge(a);
  merge(b);
  int64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first);
    const int64_t hi = std::min(a[i].second, b[j].second);
    if (hi > lo) total += hi - lo;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

KernelTableBuilder::KernelTableBuilder(std::vector<DeviceProperties> devices,
                                       KernelTableOptions options,
                                       std::vector<int64_t> steps_present,
                                       std::vector<int64_t> steps_selected)
    : device_properties_(std::move(devices)),
      options_(std::move(options)),
      steps_present_(std::move(steps_present)),
      steps_selected_(std::move(steps_selected)) {
  std::sort(steps_selected_.begin(), steps_selected_.end());
}

void KernelTableBuilder::add(const KernelRecord& r) {
  if (options_.device >= 0 && r.device != options_.device) return;
  if (!std::binary_search(steps_selected_.begin(), steps_selected_.end(), r.step)) return;
  if (r.end_ns < r.start_ns) return;  // a negative duration is trace health, not time
  auto it = index_.find(r.name);
  std::size_t id;
  if (it == index_.end()) {
    id = names_.size();
    index_.emplace(r.name, id);
    NameStats fresh{r.name, r.kind, {}, {}};
    fresh.communication_kernel =
        categorize(ActivityKind::kKernel, r.name) == KernelCategory::kCommunication;
    names_.push_back(std::move(fresh));
  } else {
    id = it->second;
  }
  NameStats& n = names_[id];
  const int64_t d = r.duration_ns();
  n.durations.push_back(d);
  n.phase_ns[r.phase] += d;
  phase_count_[r.phase] += 1;
  intervals_.push_back(Interval{r.start_ns, r.end_ns, r.device, static_cast<int32_t>(r.step)});
  is_comm_.push_back(r.kind == ActivityKind::kKernel && n.communication_kernel);
  ++added_;
}

// Size: the table's sections (per device, per name, the architecture) over one set of rows.
KernelTable KernelTableBuilder::finish() {
  if (names_.empty()) {
    std::string what = options_.device >= 0 ? fmt::format(" on device {}", options_.device) : "";
    fail(
        "no device activity (kernel, memcpy or memset rows){} in the selected steps ({}): "
        "nothing to tabulate: was the trace recorded with ProfilerActivity.CUDA?",
        what,
        steps_selected_.empty() ? std::string("none")
                                : fmt::format("{}", fmt::join(steps_selected_, ", ")));
  }
  KernelTable t;
  t.options = options_;
  t.steps_present = steps_present_;
  t.steps_selected = steps_selected_;
  t.device_properties = device_properties_;

  // Per-device totals and compute/communication overlap.
  std::map<int32_t, Intervals> by_device, comm_by_device, compute_by_device;
  std::map<int32_t, int64_t> comm_ns;
  std::map<int64_t, Intervals> by_step;
  for (std::size_t i = 0; i < intervals_.size(); ++i) {
    const Interval& iv = intervals_[i];
    by_device[iv.device].emplace_back(iv.start_ns, iv.end_ns);
    by_step[iv.step].emplace_back(iv.start_ns, iv.end_ns);
    if (is_comm_[i]) {
      comm_by_device[iv.device].emplace_back(iv.start_ns, iv.end_ns);
      comm_ns[iv.device] += iv.end_ns - iv.start_ns;
    } else {
      compute_by_device[iv.device].emplace_back(iv.start_ns, iv.end_ns);
    }
  }
  bool first = true;
  for (auto& [device, ivs] : by_device) {
    DeviceRow row;
    row.device = device;
    row.totals = busy_totals(ivs);
    row.communication_ns = comm_ns[device];
    Intervals comp = compute_by_device[device], comm = comm_by_device[device];
    row.overlap_ns = overlap_ns(comp, comm);
    row.compute_union_ns = merge(comp);
    row.communication_union_ns = merge(comm);
    t.totals.events += row.totals.events;
    t.totals.sum_ns += row.totals.sum_ns;
    t.totals.union_busy_ns += row.totals.union_busy_ns;
    t.totals.idle_ns += row.totals.idle_ns;
    t.totals.start_ns =
        first ? row.totals.start_ns : std::min(t.totals.start_ns, row.totals.start_ns);
    t.totals.end_ns = first ? row.totals.end_ns : std::max(t.totals.end_ns, row.totals.end_ns);
    first = false;
    t.devices.push_back(row);
  }
  t.totals.span_ns = t.totals.end_ns - t.totals.start_ns;
  if (static_cast<int64_t>(t.devices.size()) > KernelTable::kMaxDeviceRows) {
    std::vector<std::pair<int64_t, int32_t>> ranked;  // (-device time, device)
    for (const DeviceRow& d : t.devices) ranked.push_back({-d.totals.sum_ns, d.device});
    std::sort(ranked.begin(), ranked.end());
    std::set<int32_t> kept;
    for (int64_t i = 0; i < KernelTable::kMaxDeviceRows; ++i) kept.insert(ranked[i].second);
    std::vector<DeviceRow> rows;
    DeviceRow& o = t.other_device;
    o.device = -1;
    for (const DeviceRow& d : t.devices) {
      if (kept.count(d.device)) {
        rows.push_back(d);
        continue;
      }
      BusyTotals& ot = o.totals;
      const bool first_folded = t.other_devices == 0;
      ot.start_ns = first_folded ? d.totals.start_ns : std::min(ot.start_ns, d.totals.start_ns);
      ot.end_ns = first_folded ? d.totals.end_ns : std::max(ot.end_ns, d.totals.end_ns);
      ++t.other_devices;
      ot.events += d.totals.events;
      ot.sum_ns += d.totals.sum_ns;
      ot.union_busy_ns += d.totals.union_busy_ns;
      ot.span_ns += d.totals.span_ns;
      ot.idle_ns += d.totals.idle_ns;
      o.communication_ns += d.communication_ns;
      o.compute_union_ns += d.compute_union_ns;
      o.communication_union_ns += d.communication_union_ns;
      o.overlap_ns += d.overlap_ns;
    }
    t.devices = std::move(rows);
  }
  for (auto& [step, ivs] : by_step) t.steps.push_back(StepRow{step, busy_totals(ivs)});

  // Per-name rows.
  std::map<std::string, PhaseRow> phases;
  std::vector<int64_t> category_ns(kKernelCategoryCount, 0),
      category_count(kKernelCategoryCount, 0), category_kernels(kKernelCategoryCount, 0);
  for (NameStats& n : names_) {
    KernelRow row;
    row.name = n.name;
    row.short_name = short_kernel_name(n.name);
    row.family = kernel_family(n.name);
    row.kind = n.kind;
    row.category = categorize(n.kind, n.name);
    if (n.kind == ActivityKind::kKernel) row.architecture = kernel_architecture(n.name);
    std::sort(n.durations.begin(), n.durations.end());
    row.count = static_cast<int64_t>(n.durations.size());
    for (int64_t d : n.durations) row.total_ns += d;
    row.mean_ns = double(row.total_ns) / double(row.count);
    row.lower_median_ns = n.durations[(n.durations.size() - 1) / 2];
    row.min_ns = n.durations.front();
    row.max_ns = n.durations.back();
    row.share_ratio = detail::ratio(row.total_ns, t.totals.sum_ns);
    row.phase_ns = n.phase_ns;
    for (const auto& [phase, ns] : n.phase_ns) {
      PhaseRow& p = phases[phase];
      p.phase = phase;
      p.total_ns += ns;
    }
    const int c = static_cast<int>(row.category);
    category_ns[c] += row.total_ns;
    category_count[c] += row.count;
    category_kernels[c] += 1;
    t.kernels.push_back(std::move(row));
    n.durations.clear();
    n.durations.shrink_to_fit();
  }
  std::sort(t.kernels.begin(), t.kernels.end(), [](const KernelRow& a, const KernelRow& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  for (KernelCategory c : all_kernel_categories()) {
    const int i = static_cast<int>(c);
    t.categories.push_back(CategoryRow{c, category_kernels[i], category_count[i], category_ns[i],
                                       detail::ratio(category_ns[i], t.totals.sum_ns)});
  }
  t.other_ns = category_ns[static_cast<int>(KernelCategory::kOther)];
  for (auto& [phase, p] : phases) {
    p.count = phase_count_[phase];
    p.share_ratio = detail::ratio(p.total_ns, t.totals.sum_ns);
    t.phases.push_back(p);
  }
  std::sort(t.phases.begin(), t.phases.end(), [](const PhaseRow& a, const PhaseRow& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.phase < b.phase;
  });

  // Architecture: the device the records ran on (the selected one, else the lowest id present
  // that has properties).
  ArchitectureSummary& a = t.architecture;
  for (const DeviceRow& d : t.devices) {
    for (const DeviceProperties& p : device_properties_) {
      if (p.id == d.device && p.sm() > 0 && a.device_sm == 0) {
        a.device_sm = p.sm();
        a.device_name = p.name;
      }
    }
  }
  std::map<int32_t, ArchitectureRow> by_sm;
  for (const KernelRow& row : t.kernels) {
    if (row.kind != ActivityKind::kKernel) continue;
    ArchitectureRow& r = by_sm[row.architecture.sm];
    r.sm = row.architecture.sm;
    r.kernels += 1;
    r.count += row.count;
    r.total_ns += row.total_ns;
    if (a.device_sm > 0 && row.architecture.sm > 0 && row.architecture.sm < a.device_sm) {
      a.older_kernels += 1;
      a.older_count += row.count;
      a.older_ns += row.total_ns;
    }
  }
  for (auto& [sm, r] : by_sm) {
    r.share_ratio = detail::ratio(r.total_ns, t.totals.sum_ns);
    a.by_target.push_back(r);
  }
  a.older_share_ratio = detail::ratio(a.older_ns, t.totals.sum_ns);
  return t;
}

KernelTable build_kernel_table(const std::vector<KernelRecord>& records,
                               const std::vector<DeviceProperties>& devices,
                               const KernelTableOptions& options) {
  std::set<int64_t> present;
  for (const KernelRecord& r : records) present.insert(r.step);
  std::vector<int64_t> steps(present.begin(), present.end());
  KernelTableBuilder b(devices, options, steps, select_steps(steps, options));
  for (const KernelRecord& r : records) b.add(r);
  return b.finish();
}

}  // namespace tprobe::core
