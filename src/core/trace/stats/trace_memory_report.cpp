// Views of a trace's memory: evidence JSON, tables, the report's figures (trace_memory_report.hpp).
#include "tprobe/core/trace/stats/trace_memory_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/math_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/svg_chart.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"

namespace tprobe::core {
namespace {

std::string bytes(int64_t b) { return format_bytes(double(b)); }

// "+48.3 ms": time since the device's first event.
std::string since(int64_t ts, int64_t first) {
  return "+" + format_seconds(double(ts - first) * 1e-9);
}

std::string step_text(int64_t step) { return step >= 0 ? std::to_string(step) : "outside"; }

const std::vector<std::string>& phase_columns() {
  static const std::vector<std::string> k = {"forward",  "loss",      "recompute",
                                             "backward", "optimizer", "untagged"};
  return k;
}

Table alive_table(const MemoryDevice& d, const std::string& why, const std::string& prefix) {
  Table t(fmt::format("{}bytes alive at the {} peak ({} at {}, step {}), by phase and part",
                      prefix, d.label, bytes(d.peak.allocated_bytes),
                      since(d.peak.ts_ns, d.first.ts_ns), step_text(d.peak_step)));
  t.column("layers", Align::kLeft).column("part", Align::kLeft);
  for (const std::string& ph : phase_columns()) t.column(ph);
  t.column("all phases").column("of peak");
  std::vector<std::pair<std::string, std::string>> keys;  // (layer kind, part), rows' order
  for (const MemoryPartRow& r : d.by_phase_part) {
    if (r.phase == "untagged") continue;
    std::pair<std::string, std::string> k{r.layer_kind, r.part};
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::stable_sort(keys.begin(), keys.end(), [&](const auto& a, const auto& b) {
    return std::make_pair(layer_kind_rank(a.first), part_rank(a.second)) <
           std::make_pair(layer_kind_rank(b.first), part_rank(b.second));
  });
  const int64_t peak = d.peak.allocated_bytes;
  auto share = [&](int64_t b) { return peak > 0 ? format_percent(detail::ratio(b, peak)) : "-"; };
  auto cell_row = [&](const std::string& kind, const std::string& part) {
    std::vector<std::string> row = {kind, part};
    int64_t all = 0;
    for (const std::string& ph : phase_columns()) {
      int64_t b = 0;
      for (const MemoryPartRow& r : d.by_phase_part) {
        if (r.phase == ph && r.layer_kind == kind && r.part == part) b += r.bytes;
      }
      all += b;
      row.push_back(b > 0 ? bytes(b) : "");
    }
    row.push_back(bytes(all));
    row.push_back(share(all));
    return row;
  };
  for (const auto& [kind, part] : keys) t.row(cell_row(kind, part));
  if (d.untagged_bytes > 0) t.row(cell_row("-", "untagged"));
  t.separator();
  std::vector<std::string> alive = {"all", "allocated in the trace"};
  for (const std::string& ph : phase_columns()) {
    int64_t b = 0;
    for (const MemoryPartRow& r : d.by_phase_part) {
      if (r.phase == ph) b += r.bytes;
    }
    alive.push_back(b > 0 ? bytes(b) : "");
  }
  alive.push_back(bytes(d.alive_at_peak_bytes));
  alive.push_back(share(d.alive_at_peak_bytes));
  t.row(std::move(alive));
  std::vector<std::string> resident = {"", "resident before the trace"};
  resident.resize(2 + phase_columns().size());
  resident.push_back(bytes(d.resident_at_peak_bytes));
  resident.push_back(share(d.resident_at_peak_bytes));
  t.row(std::move(resident));
  if (d.unexplained_at_peak_bytes != 0) {
    std::vector<std::string> row = {"", "not explained by the events"};
    row.resize(2 + phase_columns().size());
    row.push_back((d.unexplained_at_peak_bytes < 0 ? "-" : "") +
                  bytes(std::llabs(d.unexplained_at_peak_bytes)));
    row.push_back("");
    t.row(std::move(row));
  }
  std::vector<std::string> total = {"peak", "Total Allocated"};
  total.resize(2 + phase_columns().size());
  total.push_back(bytes(peak));
  total.push_back(peak > 0 ? "100.0 %" : "-");
  t.row(std::move(total));
  t.note(fmt::format(
      "{} allocation(s) made up to the peak and not freed by it hold {}; each is placed where it "
      "was allocated (its thread's enclosing ops, modules and backward flows: the rule that "
      "places a kernel's launch, docs/kernels.md \"Parts\"), never guessed",
      format_count(d.alive_at_peak_allocations), bytes(d.alive_at_peak_bytes)));
  if (!d.attributed && d.alive_at_peak_allocations > 0)
    t.note("not placed by part, every alive byte untagged: " + why);
  if (d.untagged_bytes > 0) {
    t.note(fmt::format(
        "untagged {} ({} of the trace's alive bytes, {} allocation(s)): no module events {}, "
        "outside every module and op {}, backward op without a flow {}, in modules that name "
        "no part {}",
        bytes(d.untagged_bytes), format_percent(detail::ratio(d.untagged_bytes, d.alive_at_peak_bytes)),
        format_count(d.untagged_allocations), bytes(d.untagged_no_module_events_bytes),
        bytes(d.untagged_no_module_bytes), bytes(d.untagged_unlinked_bytes),
        bytes(d.untagged_no_part_bytes)));
  }
  t.note(fmt::format(
      "resident before the trace: {} allocated before its first event (its Total Allocated "
      "minus its Bytes), less {} of it freed by the peak",
      bytes(d.resident_before_trace_bytes), bytes(d.pre_trace_freed_before_peak_bytes)));
  return t;
}

}  // namespace

Json to_json(const TraceMemory& m) { return evidence::to_json(m); }

// The devices' cross-field figures (share_ratio, tagged_bytes, timeline.events, the hint's text)
// are checked by writing what was read again.
TraceMemory trace_memory_from_json(const Json& j, const std::string& where) {
  TraceMemory m = evidence::from_json<TraceMemory>(j, where);
  for (MemoryDevice& d : m.devices) set_alive_shares(d);
  json_read::check_rewritten(j, to_json(m), where);
  return m;
}

std::vector<Table> trace_memory_tables(const TraceMemory& m, const std::string& prefix) {
  std::vector<Table> out;
  if (m.devices.empty()) {
    Table t(prefix + "Memory");
    t.column(m.skipped_events > 0
                 ? fmt::format("none of the trace's {} [memory] event(s) could be read ({})",
                               m.skipped_events, m.first_skipped)
                 : trace_memory_hint(!m.attribution_off),
             Align::kLeft);
    out.push_back(t);
    return out;
  }
  Table t(prefix + "Memory: torch.profiler's [memory] events over the whole trace, per device");
  t.column("device", Align::kLeft)
      .column("events")
      .column("allocated: first")
      .column("peak")
      .column("last")
      .column("reserved: first")
      .column("peak")
      .column("last")
      .column("peak at")
      .column("step");
  for (const MemoryDevice& d : m.devices) {
    t.row({d.label, format_count(d.events), bytes(d.first.allocated_bytes),
           bytes(d.peak.allocated_bytes), bytes(d.last.allocated_bytes),
           bytes(d.first.reserved_bytes), bytes(d.peak_reserved.reserved_bytes),
           bytes(d.last.reserved_bytes), since(d.peak.ts_ns, d.first.ts_ns),
           step_text(d.peak_step)});
  }
  t.note("allocated and reserved: the event's Total Allocated and Total Reserved; peak: the first "
         "event with the largest Total Allocated, at its time since the device's first event");
  for (const MemoryDevice& d : m.devices) {
    std::string n = fmt::format(
        "{}: {} allocations ({}), {} frees ({}); {} free(s) of memory allocated before the trace "
        "({}); resident before the trace {}",
        d.label, format_count(d.allocations), bytes(d.allocated_bytes_total),
        format_count(d.frees), bytes(d.freed_bytes_total), format_count(d.unmatched_frees),
        bytes(d.unmatched_free_bytes), bytes(d.resident_before_trace_bytes));
    if (d.total_mismatches > 0)
      n += fmt::format("; {} event(s) whose Total Allocated is not the previous one's plus their "
                       "Bytes",
                       format_count(d.total_mismatches));
    if (d.duplicate_allocations > 0)
      n += fmt::format("; {} address(es) allocated again before being freed",
                       format_count(d.duplicate_allocations));
    if (d.size_mismatched_frees > 0)
      n += fmt::format("; {} free(s) of another size than their allocation",
                       format_count(d.size_mismatched_frees));
    t.note(n);
  }
  if (m.skipped_events > 0) {
    t.note(fmt::format("{} [memory] event(s) left out; first: {}", format_count(m.skipped_events),
                       m.first_skipped));
  }
  if (!m.not_attributed_why.empty())
    t.note("the bytes alive at the peak are not placed by part: " + m.not_attributed_why);
  out.push_back(t);
  for (const MemoryDevice& d : m.devices) {
    out.push_back(alive_table(d, m.not_attributed_why, prefix));
    if (!d.by_layer.empty()) {
      Table l(fmt::format("{}bytes alive at the {} peak per decoder layer (parts summed)", prefix,
                          d.label));
      l.column("layer").column("kind", Align::kLeft);
      const std::vector<std::string> phases = {"forward", "recompute", "backward"};
      for (const std::string& ph : phases) l.column(ph);
      l.column("all phases");
      for (const MemoryLayerRow& r : d.by_layer) {
        std::vector<std::string> row = {std::to_string(r.layer), r.layer_kind};
        for (const std::string& ph : phases) {
          auto it = r.bytes_by_phase.find(ph);
          row.push_back(it != r.bytes_by_phase.end() && it->second > 0 ? bytes(it->second) : "");
        }
        row.push_back(bytes(r.bytes));
        l.row(std::move(row));
      }
      out.push_back(l);
    }
    if (!d.outside_model.empty()) {
      Table o(fmt::format(
          "{}bytes alive at the {} peak allocated outside the model's modules, by op (part other, "
          "layers -, above)",
          prefix, d.label));
      o.column("op", Align::kLeft).column("phase", Align::kLeft).column("allocations").column("bytes");
      for (const MemoryOutsideRow& r : d.outside_model) {
        o.row({r.op.substr(0, 80), r.phase, format_count(r.allocations), bytes(r.bytes)});
      }
      out.push_back(o);
    }
  }
  return out;
}

// ---- the report's figures ----

void trace_memory_figures(SectionBuilder& c, const std::string& base) {
  const Json* mem = c.find(base);
  if (mem == nullptr || !mem->is_object()) return;  // evidence written before memory was read
  if (const Json* a = find_path(*mem, "available"); a && a->is_boolean() && !a->get<bool>()) {
    c.note("memory: " + (c.string_at(base + ".hint").empty() ? trace_memory_hint()
                                                            : c.string_at(base + ".hint")));
    return;
  }
  const Json* devices = c.array_at(base + ".devices");
  if (devices == nullptr) {
    c.absent(base + ".devices", "the memory timeline");
    return;
  }
  for (std::size_t k = 0; k < devices->size(); ++k) {
    const Json& d = (*devices)[k];
    const std::string at = fmt::format("{}.devices[{}]", base, k);
    const std::string label = string_at(d, "device");
    const Json* ts = array_at(d, "timeline.ts_ns");
    const Json* alloc = array_at(d, "timeline.allocated_bytes");
    const Json* reserved = array_at(d, "timeline.reserved_bytes");
    const auto peak = number_at(d, "peak.allocated_bytes");
    const auto peak_ts = number_at(d, "peak.ts_ns");
    if (!ts || !alloc || !reserved || ts->empty() || ts->size() != alloc->size() ||
        ts->size() != reserved->size() || !peak || !peak_ts) {
      c.absent(at + ".timeline", "the memory timeline of " + label);
      continue;
    }
    double top = *peak;
    for (const Json& v : *reserved) {
      if (v.is_number()) top = std::max(top, v.get<double>());
    }
    const bool gib = top >= 4.0 * (1 << 30);
    const double unit = gib ? double(1 << 30) : double(1 << 20);
    const char* unit_name = gib ? "GiB" : "MiB";
    const double t0 = (*ts)[0].is_number() ? (*ts)[0].get<double>() : 0;
    XYChart chart;
    chart.title = "Memory timeline, " + label;
    chart.x_label = "ms since the device's first [memory] event";
    chart.y_label = std::string(unit_name) + " (Total Allocated, Total Reserved)";
    ChartSeries a{"allocated (Total Allocated)", ChartSeries::Kind::kLine, {}, {}, {}, {}, false, 0};
    ChartSeries r{"reserved (Total Reserved)", ChartSeries::Kind::kLine, {}, {}, {}, {}, true, 1};
    for (std::size_t i = 0; i < ts->size(); ++i) {
      if (!(*ts)[i].is_number() || !(*alloc)[i].is_number() || !(*reserved)[i].is_number())
        continue;
      const double x = ((*ts)[i].get<double>() - t0) * 1e-6;
      a.x.push_back(x);
      a.y.push_back((*alloc)[i].get<double>() / unit);
      r.x.push_back(x);
      r.y.push_back((*reserved)[i].get<double>() / unit);
    }
    chart.series = {a, r};
    chart.width = 720;
    const auto step = number_at(d, "peak.step");
    chart.markers.push_back(
        {true, (*peak_ts - t0) * 1e-6,
         fmt::format("peak {}{}", format_bytes(*peak),
                     step && *step >= 0 ? fmt::format(" (step {})", static_cast<int64_t>(*step))
                                        : "")});
    const std::string id_label = [&] {
      std::string s;
      for (char ch : label) {
        if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) s += ch;
      }
      return s.empty() ? std::to_string(k) : s;
    }();
    const auto events = number_at(d, "timeline.events");
    c.figure("memory-timeline-" + id_label, chart.title, render_svg(chart),
             {at + ".timeline.ts_ns", at + ".timeline.allocated_bytes",
              at + ".timeline.reserved_bytes", at + ".peak"},
             fmt::format("torch.profiler's [memory] events (profile_memory=True): {} of {} "
                         "events drawn, each time bucket's largest Total Allocated with the "
                         "exact peak; the dashed line is what the caching allocator reserved.",
                         ts->size(), events ? format_count(static_cast<int64_t>(*events)) : "?"));
    c.fact(label + ": peak allocated",
           fmt::format("{} at {}", format_bytes(*peak),
                       fmt::format("+{}", format_seconds((*peak_ts - t0) * 1e-9))),
           {at + ".peak.allocated_bytes", at + ".peak.ts_ns"});
    if (auto res = number_at(d, "alive_at_peak.resident_bytes"))
      c.fact(label + ": resident before the trace, at the peak", format_bytes(*res),
             at + ".alive_at_peak.resident_bytes");
    const auto untagged = number_at(d, "alive_at_peak.untagged_share_ratio");
    if (untagged) {
      c.fact(label + ": alive bytes at the peak not placed by part", format_percent(*untagged),
             at + ".alive_at_peak.untagged_share_ratio", *untagged > 0.02);
    }
    // Bytes alive at the peak by phase and part, with what was resident before the trace.
    if (const Json* rows = array_at(d, "alive_at_peak.by_phase_part")) {
      BarChart bars;
      bars.title = "Bytes alive at the " + label + " peak, by phase and part";
      bars.value_label = std::string(unit_name) + ", field bytes";
      std::vector<std::pair<double, BarItem>> items;
      std::vector<MemoryPartRow> parts;
      try {
        parts = evidence::from_json<std::vector<MemoryPartRow>>(*rows, at + ".alive_at_peak.by_phase_part");
      } catch (const Error& e) {
        c.note(std::string("memory: ") + e.what());
      }
      for (const MemoryPartRow& row : parts) {
        const double b = double(row.bytes);
        const std::string& kind = row.layer_kind;
        const std::string name =
            row.phase + " · " + (kind.empty() || kind == "-" ? "" : kind + " ") + row.part;
        items.push_back({b, {name, {b / unit}, row.phase == "untagged",
                             *peak > 0 ? format_percent(b / *peak) : ""}});
      }
      std::stable_sort(items.begin(), items.end(),
                       [](const auto& x, const auto& y) { return x.first > y.first; });
      if (auto res = number_at(d, "alive_at_peak.resident_bytes"); res && *res > 0) {
        items.push_back({*res, {"resident before the trace", {*res / unit}, false,
                                *peak > 0 ? format_percent(*res / *peak) : ""}});
      }
      for (auto& [v, item] : items) {
        if (item.highlight) bars.highlight_label = "untagged: where it was allocated is not known";
        bars.items.push_back(std::move(item));
      }
      if (!bars.items.empty()) {
        c.figure("memory-at-peak-" + id_label, bars.title, render_svg(bars),
                 {at + ".alive_at_peak.by_phase_part[].bytes",
                  at + ".alive_at_peak.resident_bytes"},
                 "Each allocation made up to the peak and not freed by it, placed where it was "
                 "allocated (the rule that places a kernel's launch); shares are of the peak.");
      }
    }
  }
}

}  // namespace tprobe::core
