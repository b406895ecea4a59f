// The device-only kernel table: per-kernel and per-category time, the three totals (sum of
// kernel time, union busy time, wall span), architecture flags, per-step and per-phase splits.
// Built from core::KernelRecord only, so the torch.profiler trace reader (`tprobe kernels`) and
// the CUPTI source (`tprobe profile`) share it. docs/kernels.md documents every field.
//
// Use, from any source of records:
//   core::KernelTableOptions options;            // all steps, all devices
//   core::KernelTable t = core::build_kernel_table(records, devices, options);
//   Json table = core::to_json(t);  // kernel_table_report.hpp
// or, to keep memory bounded when records arrive one by one (the trace reader does this):
//   core::KernelTableBuilder b(devices);  b.add(record) ...;  KernelTable t = b.finish();
// An empty selection is not a table: finish()/build_kernel_table() throw tprobe::Error (exit 1)
// naming what was selected.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tprobe/core/evidence/kernel_table.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"
#include "tprobe/core/trace/record/kernel_record.hpp"

namespace tprobe::core {

// Sorts [start, end) intervals and merges the overlapping and touching ones, in place.
void merge_intervals(std::vector<std::pair<int64_t, int64_t>>& intervals);

// The steps a selection keeps, given the distinct steps present (sorted ascending, -1 first if
// present). Throws tprobe::UsageError when --step names a step the records do not hold.
std::vector<int64_t> select_steps(const std::vector<int64_t>& present,
                                  const KernelTableOptions& options);

// KernelTable and its rows, KernelTableOptions: core/evidence/kernel_table.hpp.

// Accumulates records one at a time: per distinct name it keeps the stats and durations, per
// record one interval (start, end, device, step, flags: 24 bytes), so memory is bounded by the
// records kept rather than by their names. Records outside the selection are ignored at add();
// a builder therefore needs the selected steps up front (select_steps()).
class KernelTableBuilder {
 public:
  KernelTableBuilder(std::vector<DeviceProperties> devices, KernelTableOptions options,
                     std::vector<int64_t> steps_present, std::vector<int64_t> steps_selected);
  void add(const KernelRecord& record);
  int64_t added() const { return added_; }
  // Throws tprobe::Error when nothing was added ("no device activity in the selection ...").
  KernelTable finish();

 private:
  struct NameStats {
    std::string name;
    ActivityKind kind;
    std::vector<int64_t> durations;
    std::map<std::string, int64_t> phase_ns;
    bool communication_kernel = false;  // categorize(kKernel, name): once per name, not per row
  };
  struct Interval {
    int64_t start_ns;
    int64_t end_ns;
    int32_t device;
    int32_t step;
  };
  struct CommInterval {
    int64_t start_ns;
    int64_t end_ns;
  };
  std::vector<DeviceProperties> device_properties_;
  KernelTableOptions options_;
  std::vector<int64_t> steps_present_;
  std::vector<int64_t> steps_selected_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<NameStats> names_;
  std::vector<Interval> intervals_;
  std::vector<uint8_t> is_comm_;  // parallel to intervals_
  std::map<std::string, int64_t> phase_count_;
  int64_t added_ = 0;
};

// The whole computation over a vector (the CUPTI source, tests). Steps present are read from
// the records.
KernelTable build_kernel_table(const std::vector<KernelRecord>& records,
                               const std::vector<DeviceProperties>& devices,
                               const KernelTableOptions& options = {});

// Intervals -> totals. Exposed for tests and the per-rank view. `intervals` is sorted in place.
BusyTotals busy_totals(std::vector<std::pair<int64_t, int64_t>>& intervals);
// Length of the intersection of two interval sets (each merged inside).
int64_t overlap_ns(std::vector<std::pair<int64_t, int64_t>> a,
                   std::vector<std::pair<int64_t, int64_t>> b);

}  // namespace tprobe::core
