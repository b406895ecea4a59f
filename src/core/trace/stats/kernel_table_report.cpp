// Views of a kernel table: evidence JSON (and its reader, for diffs) and the human tables.
#include "tprobe/core/trace/stats/kernel_table_report.hpp"
#include "tprobe/core/trace/stats/critical_path.hpp"

#include <fmt/format.h>

#include <algorithm>
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

std::string us(double ns) { return fmt::format("{:.1f} µs", ns * 1e-3); }

}  // namespace

Json to_json(const KernelTable& t) { return evidence::to_json(t); }

KernelTable kernel_table_from_json(const Json& j, const std::string& where) {
  return evidence::from_json<KernelTable>(j, where);
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
  const Json* kt = find_path(c.results(), kKernelTableKey);
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
