// Views of a kernel table: evidence JSON (and its reader, for diffs) and the human tables.
#include "tprobe/core/trace/stats/kernel_table_report.hpp"
#include "tprobe/core/trace/stats/critical_path.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/evidence/kernel_trace.hpp"
#include "tprobe/core/report/svg_chart.hpp"
#include "tprobe/core/trace/stats/kernel_sequences.hpp"
#include "tprobe/core/trace/stats/trace_memory_report.hpp"
#include "tprobe/core/trace/stats/trace_series.hpp"
#include "tprobe/core/trace/stats/trace_stats_report.hpp"
#include "tprobe/core/trace/stats/user_ranges.hpp"
#include "trace/stats/detail/distinct_labels.hpp"

namespace tprobe::core {
namespace {

// Typed field access that names the document and the field on failure.
const Json& field(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object()) fail("{}: expected an object holding '{}'", where, key);
  auto it = j.find(key);
  if (it == j.end()) fail("{}: missing field '{}'", where, key);
  return *it;
}

int64_t int_field(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_number_integer())
    fail("{}: field '{}' must be an integer, got {}", where, key, v.dump());
  return v.get<int64_t>();
}

double num_field(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_number()) fail("{}: field '{}' must be a number, got {}", where, key, v.dump());
  return v.get<double>();
}

std::string str_field(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_string()) fail("{}: field '{}' must be a string, got {}", where, key, v.dump());
  return v.get<std::string>();
}

const Json& array_field(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  if (!v.is_array()) fail("{}: field '{}' must be an array", where, key);
  return v;
}

ActivityKind kind_from(const std::string& s, const std::string& where) {
  if (s == "kernel") return ActivityKind::kKernel;
  if (s == "memcpy") return ActivityKind::kMemcpy;
  if (s == "memset") return ActivityKind::kMemset;
  fail("{}: kind '{}' is not kernel, memcpy or memset", where, s);
}

std::string us(double ns) { return fmt::format("{:.1f} µs", ns * 1e-3); }

}  // namespace

Json to_json(const KernelTable& t) {
  Json out;
  out["schema_version"] = kKernelTableSchemaVersion;
  out["selection"] = {{"steps_present", t.steps_present},
                      {"steps_selected", t.steps_selected},
                      {"skip_first", t.options.skip_first},
                      {"steps", t.options.steps},
                      {"device", t.options.device}};
  out["totals"] = evidence::to_json(t.totals);
  // A device's row: its totals, its index (other_devices: their count), its overlap figures.
  auto device_json = [](const DeviceRow& d, const char* key, int64_t value) {
    Json row = evidence::to_json(d.totals);
    row[key] = value;
    const Json overlap = evidence::to_json(static_cast<const OverlapFigures&>(d));  // named: items()
    for (const auto& [k, v] : overlap.items()) row[k] = v;
    return row;
  };
  Json devices = Json::array();
  for (const DeviceRow& d : t.devices) devices.push_back(device_json(d, "device", d.device));
  out["devices"] = devices;
  if (t.other_devices > 0)
    out["other_devices"] = device_json(t.other_device, "devices", t.other_devices);
  Json props = Json::array();
  for (const DeviceProperties& p : t.device_properties) {
    props.push_back({{"id", p.id},
                     {"name", p.name},
                     {"compute_major", p.compute_major},
                     {"compute_minor", p.compute_minor},
                     {"total_memory_bytes", p.total_memory_bytes},
                     {"multiprocessors", p.multiprocessors}});
  }
  out["device_properties"] = props;
  Json cats = Json::array();
  for (const CategoryRow& c : t.categories) {
    cats.push_back({{"category", to_string(c.category)},
                    {"kernels", c.kernels},
                    {"count", c.count},
                    {"total_ns", c.total_ns},
                    {"share_ratio", c.share_ratio}});
  }
  out["categories"] = cats;
  out["other_ns"] = t.other_ns;
  Json kernels = Json::array();
  for (const KernelRow& k : t.kernels) {
    Json phases = Json::object();
    for (const auto& [phase, ns] : k.phase_ns) phases[phase.empty() ? "unknown" : phase] = ns;
    kernels.push_back({{"name", k.name},
                       {"short_name", k.short_name},
                       {"family", k.family},
                       {"kind", to_string(k.kind)},
                       {"category", to_string(k.category)},
                       {"architecture_sm", k.architecture.sm},
                       {"architecture_evidence", k.architecture.evidence},
                       {"count", k.count},
                       {"total_ns", k.total_ns},
                       {"mean_ns", k.mean_ns},
                       {"lower_median_ns", k.lower_median_ns},
                       {"min_ns", k.min_ns},
                       {"max_ns", k.max_ns},
                       {"share_ratio", k.share_ratio},
                       {"phase_ns", phases}});
  }
  out["kernels"] = kernels;
  Json steps = Json::array();
  for (const StepRow& s : t.steps) {
    Json row = evidence::to_json(s.totals);
    row["step"] = s.step;
    steps.push_back(row);
  }
  out["steps"] = steps;
  Json phases = Json::array();
  for (const PhaseRow& p : t.phases) {
    phases.push_back({{"phase", p.phase.empty() ? "unknown" : p.phase},
                      {"count", p.count},
                      {"total_ns", p.total_ns},
                      {"share_ratio", p.share_ratio}});
  }
  out["phases"] = phases;
  const ArchitectureSummary& a = t.architecture;
  Json by = Json::array();
  for (const ArchitectureRow& r : a.by_target) {
    by.push_back({{"sm", r.sm},
                  {"kernels", r.kernels},
                  {"count", r.count},
                  {"total_ns", r.total_ns},
                  {"share_ratio", r.share_ratio}});
  }
  out["architecture"] = {{"device_sm", a.device_sm},
                         {"device_name", a.device_name},
                         {"older_kernels", a.older_kernels},
                         {"older_count", a.older_count},
                         {"older_ns", a.older_ns},
                         {"older_share_ratio", a.older_share_ratio},
                         {"by_target", by}};
  return out;
}

KernelTable kernel_table_from_json(const Json& j, const std::string& where) {
  KernelTable t;
  const int64_t version = int_field(j, "schema_version", where);
  if (version != kKernelTableSchemaVersion && version != 1) {
    fail("{}: kernel_table schema_version {} (this tprobe reads 1 to {})", where, version,
         kKernelTableSchemaVersion);
  }
  t.totals = evidence::from_json<BusyTotals>(field(j, "totals", where), where + " totals");
  auto device_from = [](const Json& d, const std::string& w, DeviceRow& row) {
    row.totals = evidence::from_json<BusyTotals>(d, w);
    static_cast<OverlapFigures&>(row) = evidence::from_json<OverlapFigures>(d, w);
  };
  for (const Json& d : array_field(j, "devices", where)) {
    const std::string w = where + " devices[]";
    DeviceRow row;
    row.device = static_cast<int32_t>(int_field(d, "device", w));
    device_from(d, w, row);
    t.devices.push_back(row);
  }
  if (j.contains("other_devices")) {
    const Json& d = j["other_devices"];
    const std::string w = where + " other_devices";
    t.other_device.device = -1;
    t.other_devices = int_field(d, "devices", w);
    if (t.other_devices < 1) fail("{}: field 'devices' must be at least 1", w);
    device_from(d, w, t.other_device);
  }
  for (const Json& p : array_field(j, "device_properties", where)) {
    const std::string w = where + " device_properties[]";
    DeviceProperties d;
    d.id = static_cast<int32_t>(int_field(p, "id", w));
    d.name = str_field(p, "name", w);
    d.compute_major = static_cast<int32_t>(int_field(p, "compute_major", w));
    d.compute_minor = static_cast<int32_t>(int_field(p, "compute_minor", w));
    d.total_memory_bytes = int_field(p, "total_memory_bytes", w);
    d.multiprocessors = static_cast<int32_t>(int_field(p, "multiprocessors", w));
    t.device_properties.push_back(d);
  }
  for (const Json& c : array_field(j, "categories", where)) {
    const std::string w = where + " categories[]";
    CategoryRow row;
    const std::string name = str_field(c, "category", w);
    auto cat = parse_kernel_category(name);
    if (!cat) fail("{}: unknown category '{}'", w, name);
    row.category = *cat;
    row.kernels = int_field(c, "kernels", w);
    row.count = int_field(c, "count", w);
    row.total_ns = int_field(c, "total_ns", w);
    row.share_ratio = num_field(c, "share_ratio", w);
    t.categories.push_back(row);
  }
  t.other_ns = int_field(j, "other_ns", where);
  std::size_t i = 0;
  for (const Json& k : array_field(j, "kernels", where)) {
    const std::string w = fmt::format("{} kernels[{}]", where, i++);
    KernelRow row;
    row.name = str_field(k, "name", w);
    row.short_name = str_field(k, "short_name", w);
    row.family = str_field(k, "family", w);
    row.kind = kind_from(str_field(k, "kind", w), w);
    const std::string cat = str_field(k, "category", w);
    auto c = parse_kernel_category(cat);
    if (!c) fail("{}: unknown category '{}'", w, cat);
    row.category = *c;
    row.architecture.sm = static_cast<int32_t>(int_field(k, "architecture_sm", w));
    row.architecture.evidence = str_field(k, "architecture_evidence", w);
    row.count = int_field(k, "count", w);
    row.total_ns = int_field(k, "total_ns", w);
    row.mean_ns = num_field(k, "mean_ns", w);
    row.lower_median_ns = int_field(k, version == 1 ? "median_ns" : "lower_median_ns", w);
    row.min_ns = int_field(k, "min_ns", w);
    row.max_ns = int_field(k, "max_ns", w);
    row.share_ratio = num_field(k, "share_ratio", w);
    if (row.count < 1 || row.total_ns < 0) fail("{}: count must be >= 1 and total_ns >= 0", w);
    const Json& ph = field(k, "phase_ns", w);
    if (!ph.is_object()) fail("{}: phase_ns must be an object", w);
    for (auto it = ph.begin(); it != ph.end(); ++it) {
      if (!it.value().is_number_integer()) fail("{}: phase_ns.{} must be an integer", w, it.key());
      row.phase_ns[it.key() == "unknown" ? "" : it.key()] = it.value().get<int64_t>();
    }
    t.kernels.push_back(std::move(row));
  }
  for (const Json& s : array_field(j, "steps", where)) {
    const std::string w = where + " steps[]";
    t.steps.push_back(StepRow{int_field(s, "step", w), evidence::from_json<BusyTotals>(s, w)});
  }
  for (const Json& p : array_field(j, "phases", where)) {
    const std::string w = where + " phases[]";
    PhaseRow row;
    row.phase = str_field(p, "phase", w);
    if (row.phase == "unknown") row.phase.clear();
    row.count = int_field(p, "count", w);
    row.total_ns = int_field(p, "total_ns", w);
    row.share_ratio = num_field(p, "share_ratio", w);
    t.phases.push_back(row);
  }
  const Json& a = field(j, "architecture", where);
  const std::string w = where + " architecture";
  t.architecture.device_sm = static_cast<int32_t>(int_field(a, "device_sm", w));
  t.architecture.device_name = str_field(a, "device_name", w);
  t.architecture.older_kernels = int_field(a, "older_kernels", w);
  t.architecture.older_count = int_field(a, "older_count", w);
  t.architecture.older_ns = int_field(a, "older_ns", w);
  t.architecture.older_share_ratio = num_field(a, "older_share_ratio", w);
  for (const Json& r : array_field(a, "by_target", w)) {
    ArchitectureRow row;
    row.sm = static_cast<int32_t>(int_field(r, "sm", w));
    row.kernels = int_field(r, "kernels", w);
    row.count = int_field(r, "count", w);
    row.total_ns = int_field(r, "total_ns", w);
    row.share_ratio = num_field(r, "share_ratio", w);
    t.architecture.by_target.push_back(row);
  }
  const Json& sel = field(j, "selection", where);
  // A named string, not `where + " selection"` in the range expression: g++ 13's
  // -Wdangling-reference cannot tell that array_field's result does not refer to that temporary.
  const std::string sel_where = where + " selection";
  for (const Json& s : array_field(sel, "steps_present", sel_where)) {
    if (!s.is_number_integer()) fail("{} selection: steps_present holds a non-integer", where);
    t.steps_present.push_back(s.get<int64_t>());
  }
  for (const Json& s : array_field(sel, "steps_selected", sel_where)) {
    if (!s.is_number_integer()) fail("{} selection: steps_selected holds a non-integer", where);
    t.steps_selected.push_back(s.get<int64_t>());
  }
  t.options.skip_first = int_field(sel, "skip_first", sel_where);
  t.options.device = static_cast<int32_t>(int_field(sel, "device", sel_where));
  // --step as given, so that the table read writes the selection it was read from.
  if (json_read::optional(sel, "steps"))
    t.options.steps = json_read::integers(sel, "steps", sel_where);
  return t;
}

// Size: the printed tables one after another, each a few lines of columns.
std::vector<Table> kernel_table_tables(const KernelTable& t, int top) {
  std::vector<Table> out;
  const BusyTotals& s = t.totals;
  Table totals("Device time (device rows only: kernel, memcpy, memset)");
  totals.column("measure", Align::kLeft)
      .column("time")
      .column("of span")
      .column("what it is", Align::kLeft);
  totals.row({"sum of kernel time", format_ns(s.sum_ns),
              format_percent(s.span_ns ? double(s.sum_ns) / s.span_ns : 0),
              fmt::format("{} rows, every stream added up", format_count(s.events))});
  totals.row({"union busy time", format_ns(s.union_busy_ns),
              format_percent(s.span_ns ? double(s.union_busy_ns) / s.span_ns : 0),
              "intervals merged across streams, per device"});
  totals.row({"wall span", format_ns(s.span_ns), "100.0 %", "first device row start .. last end"});
  totals.row({"idle", format_ns(s.idle_ns), format_percent(s.span_ns ? double(s.idle_ns) / s.span_ns : 0),
              "span − union busy"});
  totals.note(
      "left out: host rows (cpu_op, cuda_runtime, python_function, …), flows and "
      "gpu_user_annotation ranges: they are not device time");
  if (t.other_devices > 0) {
    totals.note(fmt::format(
        "evidence: kernel_table.devices keeps the {} devices with the most device time; {} more "
        "are folded into kernel_table.other_devices ({} rows, sum {})",
        KernelTable::kMaxDeviceRows, format_count(t.other_devices),
        format_count(t.other_device.totals.events), format_ns(t.other_device.totals.sum_ns)));
  }
  out.push_back(totals);

  Table cats("By category (share of the sum of kernel time)");
  cats.column("category", Align::kLeft)
      .column("kernels")
      .column("calls")
      .column("time")
      .column("share");
  std::string empty;
  for (const CategoryRow& c : t.categories) {
    if (c.count == 0) {
      empty += (empty.empty() ? "" : ", ") + std::string(to_string(c.category));
      continue;
    }
    cats.row({to_string(c.category), format_count(c.kernels), format_count(c.count), format_ns(c.total_ns),
              format_percent(c.share_ratio)});
  }
  if (!empty.empty()) cats.note("no rows, not listed: " + empty);
  out.push_back(cats);

  Table k(top > 0 && static_cast<int>(t.kernels.size()) > top
              ? fmt::format("Top {} of {} kernels by time (whole names in the evidence)", top,
                            t.kernels.size())
              : fmt::format("{} kernels by time", t.kernels.size()));
  k.column("kernel", Align::kLeft)
      .column("category", Align::kLeft)
      .column("arch")
      .column("calls")
      .column("total")
      .column("mean")
      .column("lower median")
      .column("share");
  const std::size_t shown =
      top > 0 ? std::min(t.kernels.size(), static_cast<std::size_t>(top)) : t.kernels.size();
  // Two kernels that shorten alike get their place in the evidence's kernels[] beside the name.
  std::vector<std::string> labels, whole;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < shown; ++i) {
    labels.push_back(t.kernels[i].short_name);
    whole.push_back(t.kernels[i].name);
    index.push_back(i);
  }
  detail::make_distinct(labels, whole, index, "kernels");
  for (std::size_t i = 0; i < shown; ++i) {
    const KernelRow& r = t.kernels[i];
    k.row({labels[i], to_string(r.category), r.architecture.sm ? sm_label(r.architecture.sm) : "",
           format_count(r.count), format_ns(r.total_ns), us(r.mean_ns), us(double(r.lower_median_ns)),
           format_percent(r.share_ratio)});
  }
  if (shown < t.kernels.size()) {
    int64_t rest_ns = 0, rest_count = 0;
    for (std::size_t i = shown; i < t.kernels.size(); ++i) {
      rest_ns += t.kernels[i].total_ns;
      rest_count += t.kernels[i].count;
    }
    k.note(fmt::format("left out: the other {} kernel name(s), {} calls, {} ({}): all in the "
                       "evidence",
                       t.kernels.size() - shown, format_count(rest_count), format_ns(rest_ns),
                       format_percent(s.sum_ns ? double(rest_ns) / double(s.sum_ns) : 0)));
  }
  const CategoryRow& other = t.categories[static_cast<int>(KernelCategory::kOther)];
  if (other.count > 0) {
    k.note(fmt::format("{} kernel name(s) matched no category rule: {} ({}) — listed as 'other'",
                       other.kernels, format_ns(other.total_ns), format_percent(other.share_ratio)));
  }
  out.push_back(k);

  if (t.steps.size() > 1 || (t.steps.size() == 1 && t.steps[0].step >= 0)) {
    Table st("Per profiler step");
    st.column("step")
        .column("rows")
        .column("sum")
        .column("union busy")
        .column("span")
        .column("idle");
    for (const StepRow& r : t.steps) {
      st.row({r.step >= 0 ? std::to_string(r.step) : "outside", format_count(r.totals.events),
              format_ns(r.totals.sum_ns), format_ns(r.totals.union_busy_ns), format_ns(r.totals.span_ns),
              format_ns(r.totals.idle_ns)});
    }
    std::string skipped;
    for (int64_t p : t.steps_present) {
      if (!std::binary_search(t.steps_selected.begin(), t.steps_selected.end(), p))
        skipped += (skipped.empty() ? "" : ", ") + (p >= 0 ? std::to_string(p) : "outside");
    }
    if (!skipped.empty()) st.note("left out by the selection: " + skipped);
    out.push_back(st);
  }
  if (!t.phases.empty() && !(t.phases.size() == 1 && t.phases[0].phase.empty())) {
    Table ph("By phase (from the launching host op / thread)");
    ph.column("phase", Align::kLeft).column("rows").column("time").column("share");
    for (const PhaseRow& p : t.phases) {
      ph.row({p.phase.empty() ? "unknown" : p.phase, format_count(p.count), format_ns(p.total_ns),
              format_percent(p.share_ratio)});
    }
    out.push_back(ph);
  }
  const ArchitectureSummary& a = t.architecture;
  Table ar(a.device_sm > 0 ? fmt::format("Architecture: kernels built for vs the device ({}, {})",
                                         a.device_name, sm_label(a.device_sm))
                           : "Architecture: kernels built for (device compute capability unknown)");
  ar.column("built for", Align::kLeft)
      .column("kernels")
      .column("calls")
      .column("time")
      .column("share");
  for (const ArchitectureRow& r : a.by_target) {
    std::string label = r.sm ? sm_label(r.sm) : "not in the name";
    if (a.device_sm > 0 && r.sm > 0 && r.sm < a.device_sm) label += "  OLDER than the device";
    ar.row({label, format_count(r.kernels), format_count(r.count), format_ns(r.total_ns),
            format_percent(r.share_ratio)});
  }
  if (a.device_sm > 0) {
    ar.note(a.older_kernels > 0
                ? fmt::format(
                      "{} kernel(s) built for an older generation than {}: {} ({} of device time)",
                      a.older_kernels, sm_label(a.device_sm), format_ns(a.older_ns),
                      format_percent(a.older_share_ratio))
                : fmt::format("no kernel name says it was built for a generation older than {}",
                              sm_label(a.device_sm)));
  }
  int64_t copy_count = 0, copy_ns = 0;
  for (const KernelRow& r : t.kernels) {
    if (r.kind == ActivityKind::kKernel) continue;
    copy_count += r.count;
    copy_ns += r.total_ns;
  }
  if (copy_count > 0) {
    const double kernel_share = s.sum_ns ? double(s.sum_ns - copy_ns) / double(s.sum_ns) : 0;
    ar.note(fmt::format("left out: memcpy/memset rows ({} calls, {}, {}) are not kernels; the "
                        "shares above add up to {}",
                        format_count(copy_count), format_ns(copy_ns),
                        format_percent(s.sum_ns ? double(copy_ns) / double(s.sum_ns) : 0),
                        format_percent(kernel_share)));
  }
  out.push_back(ar);
  return out;
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

// Kernel table (kernels probe, or profile's embedded table): categories and top kernels by time,
// architecture mismatches highlighted, sum vs union vs wall.
void kernel_table_figures(SectionBuilder& c, const Json& kt, const std::string& base) {
  for (const char* cat_key : {"categories", "by_category"}) {
    const Json* cats = array_at(kt, cat_key);
    if (!cats) continue;
    BarChart chart;
    chart.title = "Kernel time by category";
    std::string tkey, lkey;
    for (const auto& row : *cats) {
      auto t = row_seconds(row, &tkey);
      std::string label = row_label(row, &lkey);
      if (!t) continue;
      auto share = number_at(row, "share_ratio");
      chart.items.push_back({label, {*t}, false, share ? format_percent(*share) : ""});
    }
    chart.value_label = "device time (s), field " + tkey;
    c.figure("categories", chart.title, render_svg(chart),
             {base + cat_key + "[]." + lkey, base + cat_key + "[]." + tkey},
             "Device kernel rows only (ATen op rows would double-count).");
    break;
  }
  const auto device_sm = number_at(kt, "architecture.device_sm");
  if (auto older = number_at(kt, "architecture.older_share_ratio"); older && device_sm) {
    c.fact("kernels built for an older architecture than sm" + axis_number(*device_sm),
           format_percent(*older) + " of kernel time", base + "architecture.older_share_ratio",
           *older > 0);
  }
  for (const char* k_key : {"top_kernels", "kernels"}) {
    const Json* ks = array_at(kt, k_key);
    if (!ks) continue;
    BarChart chart;
    chart.title = "Top kernels";
    chart.highlight_label = "built for an older architecture than the device";
    std::string tkey, lkey;
    std::vector<std::pair<double, BarItem>> items;
    for (const auto& row : *ks) {
      auto t = row_seconds(row, &tkey);
      std::string label = row_label(row, &lkey);
      if (!t) continue;
      bool mismatch = false;
      for (const char* mk : {"arch_mismatch", "architecture_mismatch", "mismatch", "older_arch"}) {
        const Json* m = find_path(row, mk);
        if (m && m->is_boolean() && m->get<bool>()) mismatch = true;
      }
      // The kernels probe's table: architecture_sm from the name against architecture.device_sm.
      auto sm = number_at(row, "architecture_sm");
      if (sm && *sm > 0 && device_sm && *device_sm > 0 && *sm < *device_sm) mismatch = true;
      std::string note = string_at(row, "category");
      std::string arch = string_at(row, "kernel_arch").empty() ? string_at(row, "arch")
                                                               : string_at(row, "kernel_arch");
      if (arch.empty() && sm && *sm > 0) arch = fmt::format("sm{}", static_cast<int>(*sm));
      if (!arch.empty()) note += (note.empty() ? "" : ", ") + arch;
      items.push_back({*t, {label, {*t}, mismatch, note}});
    }
    std::stable_sort(items.begin(), items.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (std::size_t i = 0; i < items.size() && i < 15; ++i) chart.items.push_back(items[i].second);
    chart.value_label = "device time (s), field " + tkey;

    c.figure("top-kernels", chart.title, render_svg(chart),
             {base + k_key + "[]." + lkey, base + k_key + "[]." + tkey},
             "The 15 largest kernels; a red outline marks a kernel whose architecture "
             "is older than the card's.");
    break;
  }
  // Sum vs union vs wall.
  BarChart sums;
  sums.title = "Kernel time: sum vs union vs wall";
  sums.value_label = "seconds";
  std::vector<FieldPath> fields;
  for (const auto& [label, keys] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"sum of kernel times",
            {"totals.sum_ns", "sum_s", "kernel_sum_s", "totals.sum_s", "sum_ns"}},
           {"union (busy time)",
            {"totals.union_busy_ns", "union_s", "kernel_union_s", "totals.union_s", "union_ns",
             "totals.union_ns"}},
           {"wall span",
            {"totals.span_ns", "wall_s", "wall_time_s", "totals.wall_s", "wall_ns",
             "totals.wall_ns"}}}) {
    for (const auto& k : keys) {
      if (auto v = number_at(kt, k)) {
        const double s = detail::ends_with(k, "_ns") ? *v * 1e-9 : *v;
        sums.items.push_back({label, {s}, false, format_seconds(s)});
        fields.push_back(base + k);
        break;
      }
    }
  }
  if (sums.items.size() >= 2) {
    c.figure("sum-union-wall", sums.title, render_svg(sums), fields,
             "A sum above the union means kernels overlapped (streams); a union well "
             "below the wall means the device sat idle.");
  }
  if (const Json* phases = array_at(kt, "phases")) {
    BarChart chart;
    chart.title = "Kernel time by phase";
    std::string tkey, lkey;
    for (const auto& row : *phases) {
      auto t = row_seconds(row, &tkey);
      if (t) chart.items.push_back({row_label(row, &lkey), {*t}, false, format_seconds(*t)});
    }
    chart.value_label = "device time (s), field " + tkey;
    if (!chart.items.empty()) {
      c.figure("kernel-phases", chart.title, render_svg(chart),
               {base + "phases[]." + lkey, base + "phases[]." + tkey}, "");
    }
  }
  if (c.section().figures.empty()) {
    c.note("no kernel categories or kernels found under " +
           c.field_name(base) +
           " (looked for categories[], by_category[], top_kernels[], kernels[])");
  }
}

void kernels_report_section(SectionBuilder& c) {
  const Json* kt = find_path(c.results(), "kernel_table");
  if (kt && kt->is_object()) {
    kernel_table_figures(c, *kt, "kernel_table.");
  } else {
    kernel_table_figures(c, c.results(), "");
  }
  trace_memory_figures(c, "memory");
  trace_stream_figures(c, "trace.streams");
  user_range_figures(c, "trace.user_ranges");
  kernel_sequence_figures(c, "trace.kernel_sequences");
  trace_series_figures(c, "trace.time_series");
  critical_path_figures(c, "trace.critical_path");
}
}  // namespace tprobe::core
