// Views of the launch-bound statistics: evidence JSON and tables.
#include "tprobe/core/trace/stats/trace_stats_report.hpp"

#include <fmt/format.h>

#include "base/math_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/report/svg_chart.hpp"
#include "trace/stats/detail/distinct_labels.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"

namespace tprobe::core {
namespace {

std::string us(double ns) { return fmt::format("{:.1f} µs", ns * 1e-3); }

Json distribution_json(const Distribution& d) {
  return Json{{"count", d.count},   {"sum_ns", d.sum_ns}, {"mean_ns", d.mean_ns},
              {"min_ns", d.min_ns}, {"p50_ns", d.p50_ns}, {"p90_ns", d.p90_ns},
              {"p99_ns", d.p99_ns}, {"max_ns", d.max_ns}};
}

Json other_json(const TraceStats& st) {
  Json out = Json::object();
  if (const OtherStreams& o = st.other_streams; o.streams > 0) {
    out["other_streams"] = {{"streams", o.streams},     {"rows", o.rows},
                            {"kernels", o.kernels},     {"memcpys", o.memcpys},
                            {"memsets", o.memsets},     {"kernel_ns", o.kernel_ns},
                            {"memcpy_ns", o.memcpy_ns}, {"memset_ns", o.memset_ns},
                            {"sum_ns", o.sum_ns},       {"busy_ns", o.busy_ns}};
  }
  if (const OtherIdle& o = st.other_idle; o.devices > 0) {
    out["other_idle_split"] = {{"devices", o.devices},
                               {"idle_ns", o.idle_ns},
                               {"gaps", o.gaps},
                               {"host_wait_ns", o.host_wait_ns},
                               {"kernel_wait_ns", o.kernel_wait_ns},
                               {"unlaunched_ns", o.unlaunched_ns},
                               {"host_wait_gaps", o.host_wait_gaps}};
  }
  if (const OtherQueues& o = st.other_queues; o.queues > 0) {
    out["other_queue_length"] = {{"queues", o.queues},
                                 {"rows", o.rows},
                                 {"unlaunched_rows", o.unlaunched_rows},
                                 {"max_length", o.max_length}};
  }
  return out;
}

// The other_* objects, each present only when something was folded.
void other_from_json(const Json& j, const std::string& where, TraceStats& st) {
  namespace jr = json_read;
  if (j.contains("other_streams")) {
    const std::string w = where + ".other_streams";
    const Json& x = jr::object(j, "other_streams", where);
    OtherStreams& o = st.other_streams;
    o.streams = jr::integer(x, "streams", w, 1);
    o.rows = jr::integer(x, "rows", w, 0);
    o.kernels = jr::integer(x, "kernels", w, 0, o.rows);
    o.memcpys = jr::integer(x, "memcpys", w, 0, o.rows);
    o.memsets = jr::integer(x, "memsets", w, 0, o.rows);
    o.kernel_ns = jr::integer(x, "kernel_ns", w, 0);
    o.memcpy_ns = jr::integer(x, "memcpy_ns", w, 0);
    o.memset_ns = jr::integer(x, "memset_ns", w, 0);
    o.sum_ns = jr::integer(x, "sum_ns", w, 0);
    o.busy_ns = jr::integer(x, "busy_ns", w, 0);
  }
  if (j.contains("other_idle_split")) {
    const std::string w = where + ".other_idle_split";
    const Json& x = jr::object(j, "other_idle_split", where);
    OtherIdle& o = st.other_idle;
    o.devices = jr::integer(x, "devices", w, 1);
    o.idle_ns = jr::integer(x, "idle_ns", w, 0);
    o.gaps = jr::integer(x, "gaps", w, 0);
    o.host_wait_ns = jr::integer(x, "host_wait_ns", w, 0, o.idle_ns);
    o.kernel_wait_ns = jr::integer(x, "kernel_wait_ns", w, 0, o.idle_ns);
    o.unlaunched_ns = jr::integer(x, "unlaunched_ns", w, 0, o.idle_ns);
    o.host_wait_gaps = jr::integer(x, "host_wait_gaps", w, 0, o.gaps);
    if (o.host_wait_ns + o.kernel_wait_ns + o.unlaunched_ns != o.idle_ns)
      fail("{}: host_wait_ns + kernel_wait_ns + unlaunched_ns is not idle_ns", w);
  }
  if (j.contains("other_queue_length")) {
    const std::string w = where + ".other_queue_length";
    const Json& x = jr::object(j, "other_queue_length", where);
    OtherQueues& o = st.other_queues;
    o.queues = jr::integer(x, "queues", w, 1);
    o.rows = jr::integer(x, "rows", w, 0);
    o.unlaunched_rows = jr::integer(x, "unlaunched_rows", w, 0);
    o.max_length = jr::integer(x, "max_length", w, 0, o.rows);
  }
}

}  // namespace

Json to_json(const TraceStats& st) {
  Json streams = Json::array();
  for (const StreamRow& s : st.streams) {
    streams.push_back({{"device", s.device},
                       {"stream", s.stream},
                       {"rows", s.rows},
                       {"kernels", s.kernels},
                       {"memcpys", s.memcpys},
                       {"memsets", s.memsets},
                       {"kernel_ns", s.kernel_ns},
                       {"memcpy_ns", s.memcpy_ns},
                       {"memset_ns", s.memset_ns},
                       {"sum_ns", s.sum_ns},
                       {"busy_ns", s.busy_ns},
                       {"concurrent_ns", s.concurrent_ns},
                       {"first_start_ns", s.first_start_ns},
                       {"last_end_ns", s.last_end_ns},
                       {"sum_share_ratio", s.sum_share_ratio},
                       {"busy_span_ratio", s.busy_span_ratio}});
  }
  Json idle = Json::array();
  for (const IdleSplit& s : st.idle) {
    idle.push_back({{"device", s.device},
                    {"idle_ns", s.idle_ns},
                    {"gaps", s.gaps},
                    {"host_wait_ns", s.host_wait_ns},
                    {"kernel_wait_ns", s.kernel_wait_ns},
                    {"unlaunched_ns", s.unlaunched_ns},
                    {"host_wait_gaps", s.host_wait_gaps},
                    {"host_wait_ratio", detail::ratio(s.host_wait_ns, s.idle_ns)},
                    {"kernel_wait_ratio", detail::ratio(s.kernel_wait_ns, s.idle_ns)}});
  }
  const LaunchStats& l = st.launch;
  Json per = Json::array();
  for (const LaunchKernelRow& k : l.per_kernel) {
    per.push_back({{"name", k.name},
                   {"launches", k.launches},
                   {"launch_ns", k.launch_ns},
                   {"delay_ns", k.delay_ns},
                   {"shorter_than_launch", k.shorter_than_launch},
                   {"device_ns", k.device_ns}});
  }
  Json queues = Json::array();
  for (const QueueRow& q : st.queues) {
    queues.push_back({{"device", q.device},
                      {"stream", q.stream},
                      {"rows", q.rows},
                      {"unlaunched_rows", q.unlaunched_rows},
                      {"window_start_ns", q.window_start_ns},
                      {"window_end_ns", q.window_end_ns},
                      {"max_length", q.max_length},
                      {"mean_length", q.mean_length},
                      {"time_at_length_ns", q.time_at_length_ns}});
  }
  Json copies = Json::array();
  for (const CopyRow& c : st.copies) {
    copies.push_back({{"name", c.name},
                      {"kind", to_string(c.kind)},
                      {"count", c.count},
                      {"rows_with_bytes", c.rows_with_bytes},
                      {"bytes", c.bytes},
                      {"total_ns", c.total_ns},
                      {"bytes_per_s", c.bytes_per_s}});
  }
  const HostOpCensus& h = st.host_ops;
  Json ops = Json::array();
  for (const HostOpRow& o : h.by_name) {
    ops.push_back({{"name", o.name},
                   {"calls", o.calls},
                   {"top_level_calls", o.top_level_calls},
                   {"device_rows", o.device_rows},
                   {"device_ns", o.device_ns}});
  }
  Json out{
      {"streams", streams},
      {"idle_split", idle},
      {"launches",
       {{"kernels", l.kernels},
        {"with_launch", l.with_launch},
        {"launch_duration_unknown", l.launch_duration_unknown},
        {"launch_call", distribution_json(l.launch_call)},
        {"launch_delay", distribution_json(l.launch_delay)},
        {"negative_delay", l.negative_delay},
        {"shorter_than_launch", l.shorter_than_launch},
        {"shorter_than_launch_ns", l.shorter_than_launch_ns},
        {"per_kernel", per}}},
      {"queue_length", queues},
      {"copies", copies},
      {"host_ops",
       {{"ops", h.ops},
        {"top_level_ops", h.top_level_ops},
        {"rows_in_op", h.rows_in_op},
        {"rows_outside_op", h.rows_outside_op},
        {"by_name", ops}}}};
  out.update(other_json(st));
  return out;
}

std::vector<StreamRow> streams_from_json(const Json& streams, const std::string& where) {
  namespace jr = json_read;
  if (!streams.is_array()) fail("{} must be an array", where);
  std::vector<StreamRow> out;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    const Json& j = streams[i];
    const std::string w = fmt::format("{}[{}]", where, i);
    StreamRow s;
    s.device = static_cast<int32_t>(jr::integer(j, "device", w, 0, INT32_MAX));
    s.stream = jr::integer(j, "stream", w);
    s.rows = jr::integer(j, "rows", w, 0);
    s.kernels = jr::integer(j, "kernels", w, 0);
    s.memcpys = jr::integer(j, "memcpys", w, 0);
    s.memsets = jr::integer(j, "memsets", w, 0);
    s.kernel_ns = jr::integer(j, "kernel_ns", w, 0);
    s.memcpy_ns = jr::integer(j, "memcpy_ns", w, 0);
    s.memset_ns = jr::integer(j, "memset_ns", w, 0);
    s.sum_ns = jr::integer(j, "sum_ns", w, 0);
    s.busy_ns = jr::integer(j, "busy_ns", w, 0);
    s.concurrent_ns = jr::integer(j, "concurrent_ns", w, 0, s.busy_ns);
    s.first_start_ns = jr::integer(j, "first_start_ns", w);
    s.last_end_ns = jr::integer(j, "last_end_ns", w);
    s.sum_share_ratio = jr::number(j, "sum_share_ratio", w);
    s.busy_span_ratio = jr::number(j, "busy_span_ratio", w);
    out.push_back(s);
  }
  return out;
}

namespace {

Distribution distribution_from_json(const Json& j, const std::string& where) {
  namespace jr = json_read;
  if (!j.is_object()) fail("{} must be an object", where);
  Distribution d;
  d.count = jr::integer(j, "count", where, 0);
  d.sum_ns = jr::integer(j, "sum_ns", where);
  d.mean_ns = jr::number(j, "mean_ns", where);
  d.min_ns = jr::integer(j, "min_ns", where);
  d.p50_ns = jr::integer(j, "p50_ns", where, d.min_ns);
  d.p90_ns = jr::integer(j, "p90_ns", where, d.p50_ns);
  d.p99_ns = jr::integer(j, "p99_ns", where, d.p90_ns);
  d.max_ns = jr::integer(j, "max_ns", where, d.p99_ns);
  return d;
}

}  // namespace

TraceStats trace_stats_from_json(const Json& j, const std::string& where) {
  namespace jr = json_read;
  if (!j.is_object()) fail("{} must be an object", where);
  TraceStats st;
  st.streams = streams_from_json(jr::field(j, "streams", where), where + ".streams");
  const Json& idle = jr::array(j, "idle_split", where);
  for (std::size_t i = 0; i < idle.size(); ++i) {
    const std::string w = jr::at(where, "idle_split", i);
    const Json& x = idle[i];
    IdleSplit s;
    s.device = static_cast<int32_t>(jr::integer(x, "device", w, 0, INT32_MAX));
    s.idle_ns = jr::integer(x, "idle_ns", w, 0);
    s.gaps = jr::integer(x, "gaps", w, 0);
    s.host_wait_ns = jr::integer(x, "host_wait_ns", w, 0, s.idle_ns);
    s.kernel_wait_ns = jr::integer(x, "kernel_wait_ns", w, 0, s.idle_ns);
    s.unlaunched_ns = jr::integer(x, "unlaunched_ns", w, 0, s.idle_ns);
    s.host_wait_gaps = jr::integer(x, "host_wait_gaps", w, 0, s.gaps);
    if (s.host_wait_ns + s.kernel_wait_ns + s.unlaunched_ns != s.idle_ns)
      fail("{}: host_wait_ns + kernel_wait_ns + unlaunched_ns is not idle_ns", w);
    if (jr::number(x, "host_wait_ratio", w) != detail::ratio(s.host_wait_ns, s.idle_ns) ||
        jr::number(x, "kernel_wait_ratio", w) != detail::ratio(s.kernel_wait_ns, s.idle_ns))
      fail("{}: a wait ratio is not its time over idle_ns", w);
    st.idle.push_back(s);
  }
  const std::string lw = where + ".launches";
  const Json& launches = jr::object(j, "launches", where);
  LaunchStats& l = st.launch;
  l.kernels = jr::integer(launches, "kernels", lw, 0);
  l.with_launch = jr::integer(launches, "with_launch", lw, 0, l.kernels);
  l.launch_duration_unknown =
      jr::integer(launches, "launch_duration_unknown", lw, 0, l.with_launch);
  l.launch_call =
      distribution_from_json(jr::object(launches, "launch_call", lw), lw + ".launch_call");
  l.launch_delay =
      distribution_from_json(jr::object(launches, "launch_delay", lw), lw + ".launch_delay");
  l.negative_delay = jr::integer(launches, "negative_delay", lw, 0, l.with_launch);
  l.shorter_than_launch = jr::integer(launches, "shorter_than_launch", lw, 0, l.with_launch);
  l.shorter_than_launch_ns = jr::integer(launches, "shorter_than_launch_ns", lw, 0);
  const Json& per = jr::array(launches, "per_kernel", lw);
  for (std::size_t i = 0; i < per.size(); ++i) {
    const std::string w = jr::at(lw, "per_kernel", i);
    LaunchKernelRow k;
    k.name = jr::string(per[i], "name", w);
    k.launches = jr::integer(per[i], "launches", w, 0);
    k.launch_ns = jr::integer(per[i], "launch_ns", w, 0);
    k.delay_ns = jr::integer(per[i], "delay_ns", w);
    k.shorter_than_launch = jr::integer(per[i], "shorter_than_launch", w, 0, k.launches);
    k.device_ns = jr::integer(per[i], "device_ns", w, 0);
    l.per_kernel.push_back(std::move(k));
  }
  const Json& queues = jr::array(j, "queue_length", where);
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const std::string w = jr::at(where, "queue_length", i);
    const Json& x = queues[i];
    QueueRow q;
    q.device = static_cast<int32_t>(jr::integer(x, "device", w, 0, INT32_MAX));
    q.stream = jr::integer(x, "stream", w);
    q.rows = jr::integer(x, "rows", w, 0);
    q.unlaunched_rows = jr::integer(x, "unlaunched_rows", w, 0);
    q.window_start_ns = jr::integer(x, "window_start_ns", w);
    q.window_end_ns = jr::integer(x, "window_end_ns", w, q.window_start_ns);
    q.max_length = jr::integer(x, "max_length", w, 0, q.rows);
    q.mean_length = jr::number(x, "mean_length", w);
    q.time_at_length_ns = jr::integers(x, "time_at_length_ns", w, 0);
    int64_t total = 0;
    for (int64_t t : q.time_at_length_ns) {
      if (__builtin_add_overflow(total, t, &total)) fail("{}.time_at_length_ns: too large", w);
    }
    if (!q.time_at_length_ns.empty() && total != q.window_end_ns - q.window_start_ns)
      fail("{}.time_at_length_ns: does not sum to the window", w);
    st.queues.push_back(std::move(q));
  }
  const Json& copies = jr::array(j, "copies", where);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const std::string w = jr::at(where, "copies", i);
    const Json& x = copies[i];
    CopyRow c;
    c.name = jr::string(x, "name", w);
    c.kind = jr::enum_value(x, "kind", w, {ActivityKind::kMemcpy, ActivityKind::kMemset});
    c.count = jr::integer(x, "count", w, 0);
    c.rows_with_bytes = jr::integer(x, "rows_with_bytes", w, 0, c.count);
    c.bytes = jr::integer(x, "bytes", w, 0);
    c.total_ns = jr::integer(x, "total_ns", w, 0);
    c.bytes_per_s = jr::number(x, "bytes_per_s", w);
    st.copies.push_back(std::move(c));
  }
  const std::string hw = where + ".host_ops";
  const Json& host = jr::object(j, "host_ops", where);
  HostOpCensus& h = st.host_ops;
  h.ops = jr::integer(host, "ops", hw, 0);
  h.top_level_ops = jr::integer(host, "top_level_ops", hw, 0, h.ops);
  h.rows_in_op = jr::integer(host, "rows_in_op", hw, 0);
  h.rows_outside_op = jr::integer(host, "rows_outside_op", hw, 0);
  const Json& ops = jr::array(host, "by_name", hw);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string w = jr::at(hw, "by_name", i);
    HostOpRow o;
    o.name = jr::string(ops[i], "name", w);
    o.calls = jr::integer(ops[i], "calls", w, 0);
    o.top_level_calls = jr::integer(ops[i], "top_level_calls", w, 0, o.calls);
    o.device_rows = jr::integer(ops[i], "device_rows", w, 0);
    o.device_ns = jr::integer(ops[i], "device_ns", w, 0);
    h.by_name.push_back(std::move(o));
  }
  other_from_json(j, where, st);
  return st;
}

void trace_stream_figures(SectionBuilder& c, const std::string& base) {
  const Json* j = c.find(base);
  if (j == nullptr) return;  // evidence written before per-stream time was kept
  std::vector<StreamRow> streams;
  try {
    streams = streams_from_json(*j, c.field_name(base));
  } catch (const Error&) {
    c.absent(base, "the device time per stream");
    return;
  }
  if (streams.empty()) return;
  std::string folded;
  const std::string parent = base.substr(0, base.rfind('.'));
  if (const Json* o = c.find(parent + ".other_streams"); o != nullptr && o->is_object() &&
                                                        o->contains("streams")) {
    folded = fmt::format(" {} more streams with less device time are folded (not drawn).",
                         o->at("streams").dump());
  }
  BarChart bars;
  bars.title = "Device time per stream";
  bars.value_label = "ms";
  bars.series = {"kernels", "memcpy", "memset"};
  bars.stacked = true;
  ReportTable t;
  t.id = "tab-kernels-streams";
  t.title = "Device time per stream";
  t.header = {"device", "stream", "rows", "sum", "of the device's sum", "busy", "of the span",
              "with another stream"};
  for (const StreamRow& s : streams) {
    bars.items.push_back({fmt::format("device {} stream {}", s.device, s.stream),
                          {double(s.kernel_ns) * 1e-6, double(s.memcpy_ns) * 1e-6,
                           double(s.memset_ns) * 1e-6},
                          false, format_percent(s.sum_share_ratio)});
    t.rows.push_back({std::to_string(s.device), std::to_string(s.stream), format_count(s.rows),
                      format_ns(s.sum_ns), format_percent(s.sum_share_ratio), format_ns(s.busy_ns),
                      format_percent(s.busy_span_ratio), format_ns(s.concurrent_ns)});
  }
  c.figure("streams", bars.title, render_svg(bars),
           {base + "[].kernel_ns", base + "[].memcpy_ns", base + "[].memset_ns",
            base + "[].sum_share_ratio"},
           "Each stream's rows by kind, summed; the share is of its device's sum over all "
           "streams." + folded);
  t.source = c.source();
  t.fields = {c.field_name(base + "[]")};
  c.table(std::move(t));
}

// Size: the printed tables one after another, each a few lines of columns.
std::vector<Table> trace_stats_tables(const TraceStats& st, int top) {
  std::vector<Table> out;
  auto limit = [&](std::size_t n) {
    return top > 0 ? std::min<std::size_t>(n, static_cast<std::size_t>(top)) : n;
  };

  Table per_stream("Device time per stream");
  per_stream.column("device")
      .column("stream")
      .column("rows")
      .column("kernels")
      .column("kernel time")
      .column("memcpy")
      .column("memset")
      .column("sum")
      .column("of device")
      .column("busy")
      .column("of span")
      .column("with another stream");
  for (const StreamRow& s : st.streams) {
    per_stream.row({std::to_string(s.device), std::to_string(s.stream), format_count(s.rows),
                    format_count(s.kernels), format_ns(s.kernel_ns), format_ns(s.memcpy_ns), format_ns(s.memset_ns),
                    format_ns(s.sum_ns), format_percent(s.sum_share_ratio), format_ns(s.busy_ns),
                    format_percent(s.busy_span_ratio), format_ns(s.concurrent_ns)});
  }
  per_stream.note(
      "sum: the stream's rows' durations; busy: their union; of span: busy over the device's "
      "first start .. last end; with another stream: the part of busy time another stream of the "
      "device was busy too (overlap between streams)");
  if (const OtherStreams& o = st.other_streams; o.streams > 0) {
    per_stream.note(fmt::format(
        "{} more streams folded (the {} with the most device time are shown): {} rows, sum {}, "
        "busy {}",
        format_count(o.streams), TraceStats::kMaxStreamRows, format_count(o.rows), format_ns(o.sum_ns),
        format_ns(o.busy_ns)));
  }
  out.push_back(per_stream);

  Table idle("Idle time split: host wait vs kernel wait (per device)");
  idle.column("device")
      .column("idle")
      .column("gaps")
      .column("host wait")
      .column("of idle")
      .column("kernel wait")
      .column("of idle")
      .column("no launch");
  int64_t host = 0, kernel = 0;
  for (const IdleSplit& s : st.idle) {
    idle.row({std::to_string(s.device), format_ns(s.idle_ns), format_count(s.gaps), format_ns(s.host_wait_ns),
              format_percent(detail::ratio(s.host_wait_ns, s.idle_ns)), format_ns(s.kernel_wait_ns),
              format_percent(detail::ratio(s.kernel_wait_ns, s.idle_ns)), format_ns(s.unlaunched_ns)});
    host += s.host_wait_ns;
    kernel += s.kernel_wait_ns;
  }
  idle.note(
      "host wait: the part of each gap before the next row's launch call began (the host had not "
      "asked yet); kernel wait: the rest (asked for, device still idle); no launch: gaps before a "
      "row with no launch in the trace");
  if (host + kernel > 0) {
    idle.note(host > kernel ? "host wait dominates: the device waited for launches (launch-bound)"
                            : "kernel wait dominates: the work was launched ahead of the device");
  }
  if (const OtherIdle& o = st.other_idle; o.devices > 0) {
    idle.note(fmt::format(
        "{} more devices folded (the {} with the most device time are shown): idle {}, host wait "
        "{}, kernel wait {}, no launch {}",
        format_count(o.devices), TraceStats::kMaxDeviceRows, format_ns(o.idle_ns), format_ns(o.host_wait_ns),
        format_ns(o.kernel_wait_ns), format_ns(o.unlaunched_ns)));
  }
  out.push_back(idle);

  const LaunchStats& l = st.launch;
  Table launch("Kernel launches (kernel rows only: memcpy/memset calls are left out)");
  launch.column("per kernel", Align::kLeft)
      .column("count")
      .column("sum")
      .column("mean")
      .column("min")
      .column("p50")
      .column("p90")
      .column("p99")
      .column("max");
  auto dist_row = [&](const char* what, const Distribution& d) {
    launch.row({what, format_count(d.count), format_ns(d.sum_ns), us(d.mean_ns), us(double(d.min_ns)),
                us(double(d.p50_ns)), us(double(d.p90_ns)), us(double(d.p99_ns)),
                us(double(d.max_ns))});
  };
  dist_row("CPU launch call", l.launch_call);
  dist_row("launch delay (start − call start)", l.launch_delay);
  launch.note(fmt::format(
      "{} of {} kernel rows have a launch in the trace ({} left out); {} kernel(s) ran shorter "
      "than their launch call ({} of device time); {} launch(es) without a usable duration; {} "
      "kernel(s) start before their call (clock skew)",
      format_count(l.with_launch), format_count(l.kernels), format_count(l.kernels - l.with_launch),
      format_count(l.shorter_than_launch), format_ns(l.shorter_than_launch_ns),
      format_count(l.launch_duration_unknown), format_count(l.negative_delay)));
  out.push_back(launch);

  if (!l.per_kernel.empty()) {
    const std::size_t n = limit(l.per_kernel.size());
    Table per(fmt::format("Launch cost by kernel, top {} of {} by CPU launch time", n,
                          l.per_kernel.size()));
    per.column("kernel", Align::kLeft)
        .column("launches")
        .column("launch time")
        .column("mean call")
        .column("mean delay")
        .column("shorter than call")
        .column("device time");
    std::vector<std::string> labels, whole;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < n; ++i) {
      labels.push_back(short_kernel_name(l.per_kernel[i].name, 60));
      whole.push_back(l.per_kernel[i].name);
      index.push_back(i);
    }
    detail::make_distinct(labels, whole, index, "launches.per_kernel");
    int64_t rest = 0;
    for (std::size_t i = n; i < l.per_kernel.size(); ++i) rest += l.per_kernel[i].launch_ns;
    for (std::size_t i = 0; i < n; ++i) {
      const LaunchKernelRow& k = l.per_kernel[i];
      per.row({labels[i], format_count(k.launches), format_ns(k.launch_ns),
               us(double(k.launch_ns) / double(k.launches)),
               us(double(k.delay_ns) / double(k.launches)), format_count(k.shorter_than_launch),
               format_ns(k.device_ns)});
    }
    if (n < l.per_kernel.size()) {
      per.note(fmt::format("{} more kernel(s), {} of launch time, in the evidence",
                           l.per_kernel.size() - n, format_ns(rest)));
    }
    out.push_back(per);
  }

  Table q("Queue length per stream (rows launched, not finished)");
  q.column("device").column("stream").column("rows").column("max").column("mean").column(
      "≥1 queued");
  int64_t unlaunched = 0;
  for (const QueueRow& r : st.queues) {
    const int64_t window = r.window_end_ns - r.window_start_ns;
    const int64_t idle_time = r.time_at_length_ns.empty() ? 0 : r.time_at_length_ns[0];
    q.row({std::to_string(r.device), std::to_string(r.stream), format_count(r.rows),
           std::to_string(r.max_length), fmt::format("{:.2f}", r.mean_length),
           format_percent(detail::ratio(window - idle_time, window))});
    unlaunched += r.unlaunched_rows;
  }
  unlaunched += st.other_queues.unlaunched_rows;
  q.note(fmt::format(
      "a row is queued from its launch call's start to its end; {} row(s) without a launch are "
      "left out; the time spent at each length is in the evidence",
      format_count(unlaunched)));
  if (const OtherQueues& o = st.other_queues; o.queues > 0) {
    q.note(fmt::format("{} more streams folded (those of the streams shown above): {} rows, max {}",
                       format_count(o.queues), format_count(o.rows), o.max_length));
  }
  out.push_back(q);

  if (!st.copies.empty()) {
    Table c("Memcpy / memset bandwidth per kind");
    c.column("kind", Align::kLeft).column("rows").column("bytes").column("time").column("GB/s");
    int64_t without = 0;
    for (const CopyRow& r : st.copies) {
      c.row({r.name, format_count(r.count), format_bytes(double(r.bytes)), format_ns(r.total_ns),
             r.total_ns > 0 ? fmt::format("{:.1f}", r.bytes_per_s * 1e-9) : ""});
      without += r.count - r.rows_with_bytes;
    }
    c.note(fmt::format("bytes / time over the rows that carry args.bytes; {} row(s) without it are "
                       "left out of bytes and time",
                       format_count(without)));
    out.push_back(c);
  }

  const HostOpCensus& h = st.host_ops;
  if (!h.by_name.empty()) {
    const std::size_t n = limit(h.by_name.size());
    Table o(fmt::format("Host ops (cpu_op): dispatches and device rows, top {} of {} names", n,
                        h.by_name.size()));
    o.column("op", Align::kLeft)
        .column("calls")
        .column("top-level")
        .column("device rows")
        .column("device time");
    std::vector<std::string> labels, whole;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < n; ++i) {
      labels.push_back(short_kernel_name(h.by_name[i].name, 70));
      whole.push_back(h.by_name[i].name);
      index.push_back(i);
    }
    detail::make_distinct(labels, whole, index, "host_ops.by_name");
    for (std::size_t i = 0; i < n; ++i) {
      const HostOpRow& r = h.by_name[i];
      o.row({labels[i], format_count(r.calls), format_count(r.top_level_calls),
             format_count(r.device_rows), format_ns(r.device_ns)});
    }
    o.note(fmt::format(
        "{} cpu_op events, {} top-level; device rows count toward the top-level op holding their "
        "launch; {} device row(s) were launched outside any cpu_op{}",
        format_count(h.ops), format_count(h.top_level_ops), format_count(h.rows_outside_op),
        n < h.by_name.size() ? fmt::format("; {} more op name(s) in the evidence",
                                           h.by_name.size() - n)
                             : ""));
    out.push_back(o);
  }
  return out;
}

}  // namespace tprobe::core
