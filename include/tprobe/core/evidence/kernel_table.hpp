// The kernel table as `kernels` and `profile` write it (results.kernel_table, docs/kernels.md
// "kernel_table"), each field declared once (core/evidence/fields.hpp): its rows, the kernel
// categories and a kernel's architecture. core/trace/stats's kernel_table builds it (its header
// says what each figure is), kernel_table_report writes, reads and shows it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/device_activity.hpp"
#include "tprobe/core/evidence/kernel_trace.hpp"

namespace tprobe::core {

enum class KernelCategory {
  kAttention,      // flash, fmha, cuDNN sdpa, efficient attention
  kDenseGemm,      // cutlass, cuBLAS (sm90_xmma, ampere_*gemm), nvjet, gemv
  kGroupedGemm,    // grouped problem shapes: MoE expert GEMMs
  kElementwise,    // vectorized/unrolled elementwise, foreach (optimizer), fill, index, ...
  kReduction,      // reduce, softmax, norms, cross-entropy / loss, sort/topk/scan
  kCopyCast,       // device-to-device copies and dtype casts done by kernels (copy_, cat, ...)
  kMemcpyMemset,   // memcpy / memset activities (not kernels)
  kCommunication,  // nccl
  kOther,          // nothing above matched: always listed, with its share
};
inline constexpr int kKernelCategoryCount = 9;
const char* to_string(KernelCategory category);  // "attention", "dense_gemm", ... (snake_case)
std::optional<KernelCategory> parse_kernel_category(const std::string& text);
const std::vector<KernelCategory>& all_kernel_categories();  // in enum order

// The SM generation a kernel was built for, read from its name where the name says
// (kernel_category.hpp's kernel_architecture()). 0 when the name is silent.
struct KernelArchitecture {
  int32_t sm = 0;
  std::string evidence;  // the part of the name that says so ("sm90", "ampere_", ...)
};

// Which records count. Steps are the KernelRecord::step values; -1 (outside any step) counts
// only when no step is selected and skip_first is 0.
struct KernelTableOptions {
  std::vector<int64_t> steps;  // only these steps (empty: all)
  int64_t skip_first = 0;      // drop the first K distinct steps present (warm-up)
  int32_t device = -1;         // only this device (-1: all)
};

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

// Version of the kernel_table object inside results (bumped on incompatible changes).
// 2: kernels[].lower_median_ns (1 wrote the same figure as median_ns; both are read).
inline constexpr int kKernelTableSchemaVersion = 2;

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
  int32_t schema_version = kKernelTableSchemaVersion;  // as read (written: the current one)
};

// Where a result holds a kernel table (kernels' and profile's results, profile's
// points[].kernel_trace): null where none was built. Views name the key through kKernelTableKey.
inline constexpr const char kKernelTableKey[] = "kernel_table";
struct KernelTableSlot {
  std::optional<KernelTable> kernel_table;
};

namespace evidence_detail {
Json category_json(KernelCategory c);
KernelCategory category_from(const Json& v, const std::string& w, const char* key);
std::string phase_name(const std::string& phase);  // "" as "unknown"
void read_selection(KernelTable& t, const Json& v, const std::string& w, const char* key);
Json selection_json(const KernelTable& t);
void read_table_version(KernelTable& t, const Json& v, const std::string& w, const char* key);
void read_other_devices(KernelTable& t, const Json& v, const std::string& w, const char* key);
Json other_devices_json(const KernelTable& t);
void read_kernels(KernelTable& t, const Json& v, const std::string& w, const char* key);
void read_phase_ns(KernelRow& k, const Json& v, const std::string& w, const char* key);
}  // namespace evidence_detail

// A struct's kernel category as its `category` field (the category's snake_case name).
template <typename S, KernelCategory S::*M>
constexpr auto category_field() {
  return evidence::custom<S>(
      "category", +[](const S& s) { return evidence_detail::category_json(s.*M); },
      +[](S& s, const Json& v, const std::string& w, const char* key) {
        s.*M = evidence_detail::category_from(v, w, key);
      },
      "string", "", "attention, dense_gemm, ...");
}

constexpr auto evidence_fields(const DeviceProperties*) {
  using evidence::field;
  using P = DeviceProperties;
  return std::make_tuple(
      field("id", &P::id, "", "the device's index").at_least(0),
      field("name", &P::name, "", "its name"),
      field("compute_major", &P::compute_major, "", "0: unknown").at_least(0).at_most(99),
      field("compute_minor", &P::compute_minor, "", "compute capability's minor")
          .at_least(0)
          .at_most(99),
      field("total_memory_bytes", &P::total_memory_bytes, "B", "its memory").at_least(0),
      field("multiprocessors", &P::multiprocessors, "", "its SMs").at_least(0));
}
constexpr auto evidence_fields(const DeviceRow*) {
  using evidence::field;
  using evidence::flat;
  return std::tuple_cat(
      std::make_tuple(flat(&DeviceRow::totals),
                      field("device", &DeviceRow::device, "", "the device's index")),
      evidence_fields(static_cast<const OverlapFigures*>(nullptr)));
}
constexpr auto evidence_fields(const StepRow*) {
  using evidence::field;
  using evidence::flat;
  return std::make_tuple(flat(&StepRow::totals),
                         field("step", &StepRow::step, "", "-1: outside every step"));
}
inline auto evidence_fields(const CategoryRow*) {
  using evidence::field;
  using C = CategoryRow;
  return std::make_tuple(
      category_field<C, &C::category>(),
      field("kernels", &C::kernels, "", "distinct names").at_least(0),
      field("count", &C::count, "", "device rows").at_least(0),
      field("total_ns", &C::total_ns, "ns", "their time").at_least(0),
      field("share_ratio", &C::share_ratio, "", "of totals.sum_ns"));
}
constexpr auto evidence_fields(const KernelArchitecture*) {
  using evidence::field;
  using A = KernelArchitecture;
  return std::make_tuple(field("architecture_sm", &A::sm, "", "0: the name does not say"),
                         field("architecture_evidence", &A::evidence, "", "what says so"));
}
inline auto evidence_fields(const KernelRow*) {
  using evidence::custom;
  using evidence::field;
  using evidence::flat;
  using K = KernelRow;
  return std::make_tuple(
      field("name", &K::name, "", "whole, demangled"),
      field("short_name", &K::short_name, "", "for tables"),
      field("family", &K::family, "", "without template arguments"),
      custom<K>("kind", +[](const K& k) { return Json(to_string(k.kind)); },
                +[](K& k, const Json& v, const std::string& w, const char* key) {
                  for (ActivityKind a : {ActivityKind::kKernel, ActivityKind::kMemcpy,
                                         ActivityKind::kMemset})
                    if (v == to_string(a)) return void(k.kind = a);
                  fail("{}: field '{}' is {}, not kernel, memcpy or memset", w, key, v.dump());
                },
                "string", "", "kernel, memcpy or memset"),
      category_field<K, &K::category>(),
      flat(&K::architecture),
      field("count", &K::count, "", "device rows").at_least(1),
      field("total_ns", &K::total_ns, "ns", "their time").at_least(0),
      field("mean_ns", &K::mean_ns, "ns", "their mean"),
      field("lower_median_ns", &K::lower_median_ns, "ns", "the middle duration (the lower one)"),
      field("min_ns", &K::min_ns, "ns", "the shortest"),
      field("max_ns", &K::max_ns, "ns", "the longest"),
      field("share_ratio", &K::share_ratio, "", "of totals.sum_ns"),
      custom<K>("phase_ns", +[](const K& k) {
                  Json out = Json::object();
                  for (const auto& [p, ns] : k.phase_ns) out[evidence_detail::phase_name(p)] = ns;
                  return out;
                },
                evidence_detail::read_phase_ns, "object", "ns", "time by phase (unknown: none)"));
}
inline auto evidence_fields(const PhaseRow*) {
  using evidence::custom;
  using evidence::field;
  using P = PhaseRow;
  return std::make_tuple(
      custom<P>("phase", +[](const P& p) { return Json(evidence_detail::phase_name(p.phase)); },
                +[](P& p, const Json& v, const std::string& w, const char* k) {
                  p.phase = evidence::detail::decode<std::string>(v, w + ": field '" + k + "'");
                  if (p.phase == "unknown") p.phase.clear();
                },
                "string", "", "the phase (unknown: the source could not tell)"),
      field("count", &P::count, "", "device rows"),
      field("total_ns", &P::total_ns, "ns", "their time"),
      field("share_ratio", &P::share_ratio, "", "of totals.sum_ns"));
}
constexpr auto evidence_fields(const ArchitectureRow*) {
  using evidence::field;
  using R = ArchitectureRow;
  return std::make_tuple(field("sm", &R::sm, "", "built for; 0: the name does not say"),
                         field("kernels", &R::kernels, "", "distinct names"),
                         field("count", &R::count, "", "device rows"),
                         field("total_ns", &R::total_ns, "ns", "their time"),
                         field("share_ratio", &R::share_ratio, "", "of totals.sum_ns"));
}
constexpr auto evidence_fields(const ArchitectureSummary*) {
  using evidence::field;
  using A = ArchitectureSummary;
  return std::make_tuple(
      field("device_sm", &A::device_sm, "", "the selected device's; 0: unknown"),
      field("device_name", &A::device_name, "", "its name"),
      field("older_kernels", &A::older_kernels, "", "distinct names built for an older sm"),
      field("older_count", &A::older_count, "", "their rows"),
      field("older_ns", &A::older_ns, "ns", "their time"),
      field("older_share_ratio", &A::older_share_ratio, "", "of totals.sum_ns"),
      field("by_target", &A::by_target, "", "by the sm built for, ascending"));
}
inline auto evidence_fields(const KernelTable*) {
  using evidence::custom;
  using evidence::field;
  using T = KernelTable;
  namespace d = evidence_detail;
  return std::make_tuple(
      custom<T>("schema_version", +[](const T&) { return Json(kKernelTableSchemaVersion); },
                d::read_table_version, "integer", "", "2 (1 is read too)"),
      custom<T>("selection", d::selection_json, d::read_selection, "object", "",
                "steps_present[], steps_selected[], skip_first, steps[], device"),
      field("totals", &T::totals, "", "all selected rows"),
      field("devices", &T::devices, "", "per device (the 16 with the most time)"),
      custom<T>("other_devices", d::other_devices_json, d::read_other_devices, "object", "",
                "the devices past the 16, summed, with their count as devices; absent if none")
          .omitted_if_null(),
      field("device_properties", &T::device_properties, "", "what the source knows"),
      field("categories", &T::categories, "", "every category, zero rows included"),
      field("other_ns", &T::other_ns, "ns", "the other category's time"),
      custom<T>("kernels", +[](const T& t) { return evidence::detail::encode(t.kernels); },
                d::read_kernels, "[object]", "", "by total_ns descending: kernels[] below"),
      field("steps", &T::steps, "", "per step"),
      field("phases", &T::phases, "", "per phase, by total_ns descending"),
      field("architecture", &T::architecture, "", "kernels built for an older sm"));
}
inline auto evidence_fields(const KernelTableSlot*) {
  return std::make_tuple(evidence::field(kKernelTableKey, &KernelTableSlot::kernel_table, "",
                                         "the kernel table; null where none was built"));
}

}  // namespace tprobe::core
