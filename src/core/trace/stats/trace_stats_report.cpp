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

}  // namespace

Json to_json(const TraceStats& st) { return evidence::to_json(st); }

std::vector<StreamRow> streams_from_json(const Json& streams, const std::string& where) {
  return evidence::detail::decode<std::vector<StreamRow>>(streams, where);
}

TraceStats trace_stats_from_json(const Json& j, const std::string& where) {
  return evidence::from_json<TraceStats>(j, where);
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
