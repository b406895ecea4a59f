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

#include "tprobe/core/evidence/kernel_trace.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"
#include "tprobe/core/trace/record/kernel_record.hpp"

namespace tprobe::core {

// Sorts [start, end) intervals and merges the overlapping and touching ones, in place.
void merge_intervals(std::vector<std::pair<int64_t, int64_t>>& intervals);

// Which records count. Steps are the KernelRecord::step values; -1 (outside any step) counts
// only when no step is selected and skip_first is 0.
struct KernelTableOptions {
  std::vector<int64_t> steps;  // only these steps (empty: all)
  int64_t skip_first = 0;      // drop the first K distinct steps present (warm-up)
  int32_t device = -1;         // only this device (-1: all)
};

// The steps a selection keeps, given the distinct steps present (sorted ascending, -1 first if
// present). Throws tprobe::UsageError when --step names a step the records do not hold.
std::vector<int64_t> select_steps(const std::vector<int64_t>& present,
                                  const KernelTableOptions& options);

// BusyTotals (sum, union and span of a set of intervals on one device): core/evidence/kernel_trace.hpp.

struct KernelRow {
  std::string name;  // demangled, whole
  std::string short_name;
  std::string family;
  ActivityKind kind = ActivityKind::kKernel;
  KernelCategory category = KernelCategory::kOther;
  KernelArchitecture architecture;
  int64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns = 0;
  // The lower median of the durations: the middle one, the lower of the two middle ones for an
  // even count (a duration that occurred, in integer ns; not the mean of the two).
  int64_t lower_median_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double share_ratio = 0;                   // of the selection's sum of device time
  std::map<std::string, int64_t> phase_ns;  // "forward", "backward", ... ("" = unknown)
};

struct CategoryRow {
  KernelCategory category = KernelCategory::kOther;
  int64_t kernels = 0;  // distinct names
  int64_t count = 0;
  int64_t total_ns = 0;
  double share_ratio = 0;
};

struct DeviceRow : OverlapFigures {
  int32_t device = 0;
  BusyTotals totals;
};

struct StepRow {
  int64_t step = -1;
  BusyTotals totals;  // all selected devices' records in this step (span: first start..last end)
};

struct PhaseRow {
  std::string phase;  // "" = the source could not tell
  int64_t count = 0;
  int64_t total_ns = 0;
  double share_ratio = 0;
};

// Kernels built for an older SM generation than the device they ran on.
struct ArchitectureRow {
  int32_t sm = 0;  // from the name; 0 = the name does not say
  int64_t kernels = 0;
  int64_t count = 0;
  int64_t total_ns = 0;
  double share_ratio = 0;
};
struct ArchitectureSummary {
  int32_t device_sm = 0;  // from DeviceProperties of the selected device(s); 0 = unknown
  std::string device_name;
  std::vector<ArchitectureRow> by_target;  // ascending sm
  int64_t older_kernels = 0;               // distinct names built for sm < device_sm
  int64_t older_count = 0;
  int64_t older_ns = 0;
  double older_share_ratio = 0;
};

struct KernelTable {
  KernelTableOptions options;
  std::vector<int64_t> steps_present;   // before selection
  std::vector<int64_t> steps_selected;  // after
  // As the trace statistics' rows (TraceStats::kMaxDeviceRows): a trace with thousands of
  // devices keeps its evidence smaller than itself.
  static constexpr int64_t kMaxDeviceRows = 16;
  BusyTotals totals;  // all selected records; union_busy_ns is summed over devices
  // The kMaxDeviceRows devices with the most device time (totals.sum_ns; ties: the smaller
  // index), ascending device; the rest summed in other_device (its device -1; start_ns and
  // end_ns their earliest and latest, span_ns the sum of theirs), counted in other_devices.
  std::vector<DeviceRow> devices;
  int64_t other_devices = 0;
  DeviceRow other_device;
  std::vector<KernelRow> kernels;       // by total_ns descending, then name
  std::vector<CategoryRow> categories;  // every category, enum order (zero rows included)
  std::vector<StepRow> steps;           // ascending step
  std::vector<PhaseRow> phases;         // by total_ns descending
  ArchitectureSummary architecture;
  std::vector<DeviceProperties> device_properties;
  int64_t other_ns = 0;  // == the kOther category's total (listed so new families show)
};

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
