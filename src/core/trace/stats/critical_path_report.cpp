// The critical path's evidence (results.trace.critical_path), its reader, its text tables and its
// report figures: what is written, read back and drawn of the CriticalPath that critical_path.cpp
// computes. docs/kernels.md, "Critical path", names every field.
#include <fmt/format.h>

#include <algorithm>

#include "base/math_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/report/svg_chart.hpp"
#include "tprobe/core/trace/stats/critical_path.hpp"

namespace tprobe::core {

namespace {

// "host (launch-bound)" etc.: the verdict a person reads.
std::string verdict(const PathShares& s) {
  const std::string b = s.bound();
  if (b == "host") return "launch-bound (host)";
  if (b == "device") return "device-bound";
  if (b == "delay") return "latency-bound (launch/queue)";
  return "-";
}

}  // namespace

Json to_json(const CriticalPath& p) { return evidence::to_json(p); }

std::vector<Table> critical_path_tables(const CriticalPath& p, int top) {
  std::vector<Table> out;
  if (!p.available) {
    Table t("Critical path");
    t.column("", Align::kLeft);
    t.note("not computed: " + p.why_not);
    out.push_back(t);
    return out;
  }
  const PathShares& s = p.total;
  const int64_t len = p.length_ns;
  Table t(fmt::format("Critical path: {} of the {} window, {}", format_ns(len),
                      format_ns(p.window_end_ns - p.window_start_ns), verdict(s)));
  t.column("on the path", Align::kLeft).column("time").column("share");
  auto row = [&](const std::string& what, int64_t ns) {
    t.row({what, format_ns(ns), format_percent(detail::ratio(ns, len))});
  };
  row("host", s.host_ns());
  row("  in recorded events (ops, ranges, runtime calls)", s.host_event_ns);
  row("    of which CUDA runtime / driver calls", s.runtime_ns);
  row("  untraced, or handing over between threads", s.host_untraced_ns);
  row("device", s.device_ns);
  row("  of which memcpy / memset", s.copy_ns);
  row("launch / queue delay", s.delay_ns());
  row("  launch delay (call start -> row start)", s.launch_delay_ns);
  row("  queue (previous row's end -> row start)", s.queue_ns);
  row("  cross-stream waits", s.wait_ns);
  row("  sync return (row end -> blocking call end)", s.sync_ns);
  t.separator();
  row("path length", len);
  if (p.outside_path_ns != 0) row("window not on the path", p.outside_path_ns);
  const PathEdges& e = p.edges;
  t.note(fmt::format(
      "walked back from the window's last node along each node's latest-finishing "
      "predecessor: {} nodes; steps: {} along a thread, {} joins, {} forks, {} launches, {} "
      "rows, {} stream order, {} stream waits, {} syncs",
      format_count(p.path_nodes), format_count(e.thread), format_count(e.join),
      format_count(e.fork), format_count(e.launch), format_count(e.row), format_count(e.stream),
      format_count(e.stream_wait), format_count(e.sync)));
  const PathGraph& g = p.graph;
  t.note(fmt::format(
      "graph: {} host events on {} thread(s), {} device rows on {} stream(s) ({} with a launch); "
      "{} cuda_sync event(s): {} sync edge(s) ({} inferred from a blocking call's name), {} "
      "stream wait(s), {} event quer(ies) (no wait), {} unresolved; {} predecessor(s) later than "
      "their node left out",
      format_count(g.host_events), g.threads, format_count(g.device_rows), g.streams,
      format_count(g.rows_with_launch), g.syncs, g.sync_edges, g.inferred_syncs, g.wait_edges,
      g.event_queries, g.unresolved_syncs, g.skewed_edges));
  out.push_back(t);

  Table r("Critical path by region: launch-bound or device-bound");
  r.column("region", Align::kLeft)
      .column("on path")
      .column("host")
      .column("device")
      .column("delay")
      .column("host %")
      .column("device %")
      .column("bound", Align::kLeft);
  auto region = [&](const std::string& name, const PathShares& x) {
    r.row({name, format_ns(x.total_ns()), format_ns(x.host_ns()), format_ns(x.device_ns), format_ns(x.delay_ns()),
           format_percent(detail::ratio(x.host_ns(), x.total_ns())),
           format_percent(detail::ratio(x.device_ns, x.total_ns())), verdict(x)});
  };
  for (const PathStep& st : p.steps) region(fmt::format("ProfilerStep#{}", st.step), st.shares);
  if (!p.steps.empty() && p.outside_steps.total_ns() > 0)
    region("outside the steps", p.outside_steps);
  if (!p.steps.empty()) r.separator();
  for (const PathPhase& ph : p.phases) {
    if (ph.shares.total_ns() > 0) region(ph.phase, ph.shares);
  }
  r.note(
      "a segment's phase is its event's: the host event holding it, or the row it leads to "
      "(launch, queue and wait segments) or runs (device)");
  out.push_back(r);

  auto limit = [&](std::size_t n) {
    return top > 0 ? std::min<std::size_t>(n, static_cast<std::size_t>(top)) : n;
  };
  if (!p.host_ops.empty()) {
    const std::size_t n = limit(p.host_ops.size());
    Table o(fmt::format("Host events on the critical path by self time there, top {} of {}", n,
                        p.host_ops.size()));
    o.column("event", Align::kLeft)
        .column("kind", Align::kLeft)
        .column("time")
        .column("share")
        .column("events");
    for (std::size_t i = 0; i < n; ++i) {
      const PathHostOp& x = p.host_ops[i];
      o.row({short_kernel_name(x.name, 70), x.kind, format_ns(x.ns), format_percent(detail::ratio(x.ns, len)),
             format_count(x.events)});
    }
    out.push_back(o);
  }
  if (!p.kernels.empty()) {
    const std::size_t n = limit(p.kernels.size());
    Table k(fmt::format("Kernels on the critical path by family, top {} of {}", n,
                        p.kernels.size()));
    k.column("family", Align::kLeft)
        .column("category", Align::kLeft)
        .column("time")
        .column("share")
        .column("rows");
    for (std::size_t i = 0; i < n; ++i) {
      const PathKernel& x = p.kernels[i];
      k.row({short_kernel_name(x.family, 70), to_string(x.category), format_ns(x.ns),
             format_percent(detail::ratio(x.ns, len)), format_count(x.rows)});
    }
    out.push_back(k);
  }
  return out;
}

CriticalPath critical_path_from_json(const Json& j, const std::string& where) {
  return evidence::from_json<CriticalPath>(j, where);
}

void critical_path_figures(SectionBuilder& c, const std::string& base) {
  const Json* j = c.find(base);
  if (j == nullptr) return;  // evidence written before the critical path was computed
  CriticalPath p;
  try {
    p = critical_path_from_json(*j, c.field_name(base));
  } catch (const Error&) {
    c.absent(base, "the critical path");
    return;
  }
  if (!p.available) {
    c.note("Critical path: not computed: " + p.why_not);
    return;
  }
  BarChart bars;
  bars.title = fmt::format("Critical path: {} of the {} window, {}", format_ns(p.length_ns),
                           format_ns(p.window_end_ns - p.window_start_ns), verdict(p.total));
  bars.value_label = "ms on the path";
  bars.series = {"host", "device", "launch / queue / wait / sync"};
  bars.stacked = true;
  auto bar = [&](const std::string& label, const PathShares& s) {
    bars.items.push_back({label,
                          {double(s.host_ns()) * 1e-6, double(s.device_ns) * 1e-6,
                           double(s.delay_ns()) * 1e-6},
                          false, verdict(s)});
  };
  bar("whole path", p.total);
  for (const PathStep& st : p.steps) bar(fmt::format("ProfilerStep#{}", st.step), st.shares);
  if (!p.steps.empty() && p.outside_steps.total_ns() > 0) bar("outside the steps", p.outside_steps);
  for (const PathPhase& ph : p.phases) {
    if (ph.shares.total_ns() > 0) bar(ph.phase, ph.shares);
  }
  c.figure("critical-path", bars.title, render_svg(bars),
           {base + ".host_ns", base + ".device_ns", base + ".delay_ns", base + ".by_step[]",
            base + ".by_phase[]"},
           "The chain of host and device work that sets the window's length, walked back from its "
           "last node along each node's latest-finishing predecessor; each region's time on it "
           "split into the host's own work, device rows, and the latency between them.");
  constexpr std::size_t kTop = 15;
  ReportTable ops;
  ops.id = "tab-kernels-critical-path-host";
  ops.title = fmt::format("Host events on the critical path, top {} of {}",
                          std::min(kTop, p.host_ops.size()), p.host_ops.size());
  ops.header = {"event", "kind", "time on the path", "share", "events"};
  for (std::size_t i = 0; i < p.host_ops.size() && i < kTop; ++i) {
    const PathHostOp& x = p.host_ops[i];
    ops.rows.push_back({short_kernel_name(x.name, 70), x.kind, format_ns(x.ns),
                        format_percent(detail::ratio(x.ns, p.length_ns)), format_count(x.events)});
  }
  ops.source = c.source();
  ops.fields = {c.field_name(base + ".host_ops[]")};
  if (!ops.rows.empty()) c.table(std::move(ops));
  ReportTable ks;
  ks.id = "tab-kernels-critical-path-kernels";
  ks.title = fmt::format("Kernels on the critical path by family, top {} of {}",
                         std::min(kTop, p.kernels.size()), p.kernels.size());
  ks.header = {"family", "category", "time on the path", "share", "rows"};
  for (std::size_t i = 0; i < p.kernels.size() && i < kTop; ++i) {
    const PathKernel& x = p.kernels[i];
    ks.rows.push_back({short_kernel_name(x.family, 70), to_string(x.category), format_ns(x.ns),
                       format_percent(detail::ratio(x.ns, p.length_ns)), format_count(x.rows)});
  }
  ks.source = c.source();
  ks.fields = {c.field_name(base + ".kernels[]")};
  if (!ks.rows.empty()) c.table(std::move(ks));
}

}  // namespace tprobe::core
