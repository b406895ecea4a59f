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

void put_shares(Json& j, const PathShares& s) {
  const int64_t total = s.total_ns();
  j["host_ns"] = s.host_ns();
  j["host_event_ns"] = s.host_event_ns;
  j["runtime_ns"] = s.runtime_ns;
  j["host_untraced_ns"] = s.host_untraced_ns;
  j["device_ns"] = s.device_ns;
  j["copy_ns"] = s.copy_ns;
  j["delay_ns"] = s.delay_ns();
  j["launch_delay_ns"] = s.launch_delay_ns;
  j["queue_ns"] = s.queue_ns;
  j["wait_ns"] = s.wait_ns;
  j["sync_ns"] = s.sync_ns;
  j["host_ratio"] = detail::ratio(s.host_ns(), total);
  j["device_ratio"] = detail::ratio(s.device_ns, total);
  j["delay_ratio"] = detail::ratio(s.delay_ns(), total);
  j["bound"] = s.bound();
}

// "host (launch-bound)" etc.: the verdict a person reads.
std::string verdict(const PathShares& s) {
  const std::string b = s.bound();
  if (b == "host") return "launch-bound (host)";
  if (b == "device") return "device-bound";
  if (b == "delay") return "latency-bound (launch/queue)";
  return "-";
}

}  // namespace

Json to_json(const CriticalPath& p) {
  const PathGraph& g = p.graph;
  Json graph = {{"host_events", g.host_events},
                {"threads", g.threads},
                {"device_rows", g.device_rows},
                {"streams", g.streams},
                {"rows_with_launch", g.rows_with_launch},
                {"syncs", g.syncs},
                {"stream_syncs", g.stream_syncs},
                {"context_syncs", g.context_syncs},
                {"event_syncs", g.event_syncs},
                {"stream_wait_events", g.stream_wait_events},
                {"other_syncs", g.other_syncs},
                {"event_queries", g.event_queries},
                {"sync_edges", g.sync_edges},
                {"wait_edges", g.wait_edges},
                {"inferred_syncs", g.inferred_syncs},
                {"record_by_thread", g.record_by_thread},
                {"unresolved_syncs", g.unresolved_syncs},
                {"skewed_edges", g.skewed_edges}};
  Json out = {{"available", p.available},
              {"why_not", p.available ? Json(nullptr) : Json(p.why_not)},
              {"window_start_ns", p.window_start_ns},
              {"window_end_ns", p.window_end_ns},
              {"window_ns", p.window_end_ns - p.window_start_ns}};
  if (!p.available) {
    out["graph"] = graph;
    return out;
  }
  out["first_node_ns"] = p.first_node_ns;
  out["last_node_ns"] = p.last_node_ns;
  out["length_ns"] = p.length_ns;
  out["outside_path_ns"] = p.outside_path_ns;
  out["path_nodes"] = p.path_nodes;
  put_shares(out, p.total);
  const PathEdges& e = p.edges;
  out["edges_on_path"] = {{"thread", e.thread}, {"join", e.join},     {"fork", e.fork},
                          {"row", e.row},       {"launch", e.launch}, {"stream", e.stream},
                          {"stream_wait", e.stream_wait}, {"sync", e.sync}};
  Json steps = Json::array();
  for (const PathStep& s : p.steps) {
    Json j = {{"step", s.step},
              {"start_ns", s.start_ns},
              {"end_ns", s.end_ns},
              {"duration_ns", s.end_ns - s.start_ns}};
    put_shares(j, s.shares);
    steps.push_back(j);
  }
  out["by_step"] = steps;
  Json outside = Json::object();
  put_shares(outside, p.outside_steps);
  out["outside_steps"] = outside;
  Json phases = Json::array();
  for (const PathPhase& ph : p.phases) {
    Json j = {{"phase", ph.phase}};
    put_shares(j, ph.shares);
    phases.push_back(j);
  }
  out["by_phase"] = phases;
  Json ops = Json::array();
  for (const PathHostOp& o : p.host_ops) {
    ops.push_back({{"name", o.name},
                   {"kind", o.kind},
                   {"ns", o.ns},
                   {"events", o.events},
                   {"share_ratio", detail::ratio(o.ns, p.length_ns)}});
  }
  out["host_ops"] = ops;
  Json kernels = Json::array();
  for (const PathKernel& k : p.kernels) {
    kernels.push_back({{"family", k.family},
                       {"category", to_string(k.category)},
                       {"ns", k.ns},
                       {"rows", k.rows},
                       {"share_ratio", detail::ratio(k.ns, p.length_ns)}});
  }
  out["kernels"] = kernels;
  out["graph"] = graph;
  return out;
}

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

namespace {

namespace jr = json_read;

PathShares shares_from_json(const Json& j, const std::string& w) {
  PathShares s;
  s.host_event_ns = jr::integer(j, "host_event_ns", w, 0);
  s.runtime_ns = jr::integer(j, "runtime_ns", w, 0, s.host_event_ns);
  s.host_untraced_ns = jr::integer(j, "host_untraced_ns", w, 0);
  s.device_ns = jr::integer(j, "device_ns", w, 0);
  s.copy_ns = jr::integer(j, "copy_ns", w, 0, s.device_ns);
  s.launch_delay_ns = jr::integer(j, "launch_delay_ns", w, 0);
  s.queue_ns = jr::integer(j, "queue_ns", w, 0);
  s.wait_ns = jr::integer(j, "wait_ns", w, 0);
  s.sync_ns = jr::integer(j, "sync_ns", w, 0);
  // The sums are written beside their parts: a file whose sums disagree was edited.
  if (jr::integer(j, "host_ns", w) != s.host_ns() || jr::integer(j, "delay_ns", w) != s.delay_ns())
    fail("{}: host_ns / delay_ns are not the sums of their parts", w);
  return s;
}

}  // namespace

CriticalPath critical_path_from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  CriticalPath p;
  p.available = jr::boolean(j, "available", where);
  p.window_start_ns = jr::integer(j, "window_start_ns", where);
  p.window_end_ns = jr::integer(j, "window_end_ns", where, p.window_start_ns);
  const Json& g = jr::object(j, "graph", where);
  const std::string gw = where + ".graph";
  PathGraph& G = p.graph;
  for (auto [key, field] : std::initializer_list<std::pair<const char*, int64_t*>>{
           {"host_events", &G.host_events},
           {"threads", &G.threads},
           {"device_rows", &G.device_rows},
           {"streams", &G.streams},
           {"rows_with_launch", &G.rows_with_launch},
           {"syncs", &G.syncs},
           {"stream_syncs", &G.stream_syncs},
           {"context_syncs", &G.context_syncs},
           {"event_syncs", &G.event_syncs},
           {"stream_wait_events", &G.stream_wait_events},
           {"other_syncs", &G.other_syncs},
           {"event_queries", &G.event_queries},
           {"sync_edges", &G.sync_edges},
           {"wait_edges", &G.wait_edges},
           {"inferred_syncs", &G.inferred_syncs},
           {"record_by_thread", &G.record_by_thread},
           {"unresolved_syncs", &G.unresolved_syncs},
           {"skewed_edges", &G.skewed_edges}}) {
    *field = jr::integer(g, key, gw, 0);
  }
  if (!p.available) {
    p.why_not = jr::string(j, "why_not", where);
    return p;
  }
  p.first_node_ns = jr::integer(j, "first_node_ns", where);
  p.last_node_ns = jr::integer(j, "last_node_ns", where, p.first_node_ns);
  p.length_ns = jr::integer(j, "length_ns", where, 0);
  p.outside_path_ns = jr::integer(j, "outside_path_ns", where);
  p.path_nodes = jr::integer(j, "path_nodes", where, 0);
  p.total = shares_from_json(j, where);
  if (p.total.total_ns() != p.length_ns)
    fail("{}: length_ns is not the sum of host, device and delay", where);
  const Json& e = jr::object(j, "edges_on_path", where);
  const std::string ew = where + ".edges_on_path";
  PathEdges& E = p.edges;
  for (auto [key, field] :
       std::initializer_list<std::pair<const char*, int64_t*>>{{"thread", &E.thread},
                                                               {"join", &E.join},
                                                               {"fork", &E.fork},
                                                               {"row", &E.row},
                                                               {"launch", &E.launch},
                                                               {"stream", &E.stream},
                                                               {"stream_wait", &E.stream_wait},
                                                               {"sync", &E.sync}}) {
    *field = jr::integer(e, key, ew, 0);
  }
  const Json& steps = jr::array(j, "by_step", where);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string w = jr::at(where, "by_step", i);
    PathStep s;
    s.step = jr::integer(steps[i], "step", w);
    s.start_ns = jr::integer(steps[i], "start_ns", w);
    s.end_ns = jr::integer(steps[i], "end_ns", w, s.start_ns);
    s.shares = shares_from_json(steps[i], w);
    p.steps.push_back(s);
  }
  p.outside_steps =
      shares_from_json(jr::object(j, "outside_steps", where), where + ".outside_steps");
  const Json& phases = jr::array(j, "by_phase", where);
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const std::string w = jr::at(where, "by_phase", i);
    p.phases.push_back({jr::string(phases[i], "phase", w), shares_from_json(phases[i], w)});
  }
  const Json& ops = jr::array(j, "host_ops", where);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string w = jr::at(where, "host_ops", i);
    p.host_ops.push_back({jr::string(ops[i], "name", w), jr::string(ops[i], "kind", w),
                          jr::integer(ops[i], "ns", w, 0), jr::integer(ops[i], "events", w, 0)});
  }
  const Json& kernels = jr::array(j, "kernels", where);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const std::string w = jr::at(where, "kernels", i);
    PathKernel k;
    k.family = jr::string(kernels[i], "family", w);
    const std::string category = jr::string(kernels[i], "category", w);
    const auto c = parse_kernel_category(category);
    if (!c) fail("{}: unknown kernel category \"{}\"", w, category);
    k.category = *c;
    k.ns = jr::integer(kernels[i], "ns", w, 0);
    k.rows = jr::integer(kernels[i], "rows", w, 0);
    p.kernels.push_back(k);
  }
  return p;
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
