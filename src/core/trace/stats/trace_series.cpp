// Queue length and copy bandwidth over time (trace_series.hpp; docs/kernels.md, "Time series").
#include "tprobe/core/trace/stats/trace_series.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/report/svg_chart.hpp"
#include "trace/stats/detail/trace_stats_internal.hpp"

namespace tprobe::core {
namespace detail {
namespace {

// The bucket grid of one device: bucket b covers [start + b·width, min(end, start + (b+1)·width)).
struct Grid {
  int64_t start = 0, end = 0, width = 1, buckets = 1;
  int64_t lo(int64_t b) const { return start + b * width; }
  int64_t hi(int64_t b) const { return std::min(end, start + (b + 1) * width); }
  int64_t index(int64_t t) const {
    return std::clamp<int64_t>((t - start) / width, 0, buckets - 1);
  }
};

struct Change {
  int64_t t;
  int delta;
};

// A queue series from its +1/-1 changes (any number of streams' changes together: their summed
// queue length).
QueueSeries queue_series(std::vector<Change>& v, const Grid& g) {
  std::sort(v.begin(), v.end(), [](const Change& a, const Change& b) {
    return a.t != b.t ? a.t < b.t : a.delta < b.delta;
  });
  const auto n = static_cast<std::size_t>(g.buckets);
  QueueSeries q;
  q.max_length.assign(n, 0);
  std::vector<int64_t> integral(n, 0);
  int64_t length = 0;
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    length += v[i].delta;
    const int64_t s = v[i].t, e = v[i + 1].t;
    if (e <= s || length <= 0) continue;
    for (int64_t b = g.index(s); b < g.buckets && g.lo(b) < e; ++b) {
      const int64_t overlap = std::min(e, g.hi(b)) - std::max(s, g.lo(b));
      if (overlap <= 0) continue;
      const auto k = static_cast<std::size_t>(b);
      q.max_length[k] = std::max(q.max_length[k], length);
      integral[k] += length * overlap;
    }
  }
  q.mean_length.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    const int64_t w = g.hi(static_cast<int64_t>(k)) - g.lo(static_cast<int64_t>(k));
    q.mean_length[k] = w > 0 ? double(integral[k]) / double(w) : 0.0;
  }
  return q;
}

void finish_copy(CopySeries& c, const Grid& g) {
  const auto n = static_cast<std::size_t>(g.buckets);
  c.bytes_per_s.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    const int64_t w = g.hi(static_cast<int64_t>(k)) - g.lo(static_cast<int64_t>(k));
    c.bytes_per_s[k] = w > 0 ? c.bytes[k] * 1e9 / double(w) : 0.0;
  }
}

// The `cap` keys with the largest value (ties: the smaller key), as a set.
template <typename K, typename V>
std::set<K> top_keys(const std::map<K, V>& by, int64_t cap) {
  std::vector<std::pair<K, V>> v(by.begin(), by.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::set<K> out;
  for (std::size_t i = 0; i < v.size() && static_cast<int64_t>(i) < cap; ++i) out.insert(v[i].first);
  return out;
}

}  // namespace

TraceSeries compute_trace_series(const std::vector<StatRow>& rows,
                                 const std::vector<StatLaunch>& launches,
                                 const std::vector<std::string>& names) {
  TraceSeries out;
  auto queued = [&](const StatRow& r) {
    return r.launch >= 0 ? std::min(launches[static_cast<std::size_t>(r.launch)].ts_ns, r.start_ns)
                         : r.start_ns;
  };
  // Pass 1: each device's grid and time, each stream's and copy kind's weight.
  struct Device {
    Grid g;
    int64_t ns = 0;
    std::map<int64_t, int64_t> stream_ns;   // streams with launched rows: their rows' time
    std::map<std::string, double> copy_bytes;  // copy kinds with bytes: their bytes
    std::set<int64_t> kept_streams;
    std::set<std::string> kept_copies;
    std::map<int64_t, std::vector<Change>> changes;  // kept streams
    std::vector<Change> other_changes;
    std::map<std::string, CopySeries> copies;  // kept kinds
    CopySeries other_copy;
  };
  std::map<int32_t, Device> devices;
  for (const StatRow& r : rows) {
    auto [it, fresh] = devices.try_emplace(r.device);
    Device& d = it->second;
    const int64_t q = queued(r);
    if (fresh) {
      d.g.start = q;
      d.g.end = r.end_ns;
    }
    d.g.start = std::min(d.g.start, q);
    d.g.end = std::max(d.g.end, r.end_ns);
    d.ns += r.end_ns - r.start_ns;
    if (r.launch >= 0) d.stream_ns[r.stream] += r.end_ns - r.start_ns;
    if (r.kind != ActivityKind::kKernel && r.bytes >= 0) d.copy_bytes[names[r.name_id]] += double(r.bytes);
  }
  std::map<int32_t, int64_t> device_ns;
  for (const auto& [device, d] : devices) device_ns[device] = d.ns;
  const std::set<int32_t> kept = top_keys(device_ns, TraceSeries::kMaxDevices);
  for (auto it = devices.begin(); it != devices.end();) {
    if (kept.count(it->first)) {
      ++it;
      continue;
    }
    ++out.other_devices;
    out.other_devices_ns += it->second.ns;
    it = devices.erase(it);
  }
  for (auto& [device, d] : devices) {
    Grid& g = d.g;
    const int64_t span = g.end - g.start;
    g.width = std::max<int64_t>(1, (span + TraceSeries::kMaxBuckets - 1) / TraceSeries::kMaxBuckets);
    g.buckets = std::max<int64_t>(1, (span + g.width - 1) / g.width);
    d.kept_streams = top_keys(d.stream_ns, TraceSeries::kMaxStreams);
    d.kept_copies = top_keys(d.copy_bytes, TraceSeries::kMaxCopies);
  }
  // Pass 2: queue length: +1 at a row's queueing, -1 at its end, ends first at one instant (as
  // the queue-length statistics have it); bytes spread over each copy's time.
  for (const StatRow& r : rows) {
    auto it = devices.find(r.device);
    if (it == devices.end()) continue;
    Device& dev = it->second;
    const Grid& g = dev.g;
    if (r.launch >= 0) {
      auto& v = dev.kept_streams.count(r.stream) ? dev.changes[r.stream] : dev.other_changes;
      v.push_back({queued(r), +1});
      v.push_back({r.end_ns, -1});
    }
    if (r.kind == ActivityKind::kKernel || r.bytes < 0) continue;
    const std::string& name = names[r.name_id];
    CopySeries& c = dev.kept_copies.count(name) ? dev.copies[name] : dev.other_copy;
    if (c.bytes.empty()) {
      c.name = dev.kept_copies.count(name) ? name : "other";
      c.bytes.assign(static_cast<std::size_t>(g.buckets), 0.0);
    }
    ++c.rows;
    const int64_t d = r.end_ns - r.start_ns;
    if (d <= 0) {
      c.bytes[static_cast<std::size_t>(g.index(r.start_ns))] += double(r.bytes);
      continue;
    }
    for (int64_t b = g.index(r.start_ns); b < g.buckets && g.lo(b) < r.end_ns; ++b) {
      const int64_t overlap = std::min(r.end_ns, g.hi(b)) - std::max(r.start_ns, g.lo(b));
      if (overlap > 0) {
        c.bytes[static_cast<std::size_t>(b)] += double(r.bytes) * double(overlap) / double(d);
      }
    }
  }
  for (auto& [device, dev] : devices) {
    const Grid& g = dev.g;
    DeviceSeries ds;
    ds.device = device;
    ds.start_ns = g.start;
    ds.end_ns = g.end;
    ds.bucket_ns = g.width;
    ds.buckets = g.buckets;
    ds.device_ns = dev.ns;
    for (auto& [stream, v] : dev.changes) {
      QueueSeries q = queue_series(v, g);
      q.stream = stream;
      q.device_ns = dev.stream_ns.at(stream);
      ds.queues.push_back(std::move(q));
    }
    ds.other_streams = static_cast<int64_t>(dev.stream_ns.size() - dev.kept_streams.size());
    if (ds.other_streams > 0) {
      ds.other_queue = queue_series(dev.other_changes, g);
      ds.other_queue.stream = -1;
      for (const auto& [stream, ns] : dev.stream_ns)
        if (!dev.kept_streams.count(stream)) ds.other_queue.device_ns += ns;
    }
    for (auto& [name, c] : dev.copies) {  // by name
      finish_copy(c, g);
      ds.copies.push_back(std::move(c));
    }
    ds.other_copies = static_cast<int64_t>(dev.copy_bytes.size() - dev.kept_copies.size());
    if (ds.other_copies > 0) {
      finish_copy(dev.other_copy, g);
      ds.other_copy = std::move(dev.other_copy);
    }
    out.devices.push_back(std::move(ds));
  }
  return out;
}

}  // namespace detail

Json to_json(const TraceSeries& s) { return evidence::to_json(s); }

TraceSeries trace_series_from_json(const Json& j, const std::string& where) {
  return evidence::from_json<TraceSeries>(j, where);
}

void trace_series_figures(SectionBuilder& c, const std::string& base) {
  const Json* j = c.find(base);
  if (j == nullptr) return;  // evidence written before the series were kept
  TraceSeries s;
  try {
    s = trace_series_from_json(*j, c.field_name(base));
  } catch (const Error&) {
    c.absent(base, "the queue-length and copy-bandwidth time series");
    return;
  }
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const DeviceSeries& d = s.devices[i];
    const std::string at = fmt::format("{}.devices[{}]", base, i);
    std::vector<double> x;
    for (int64_t b = 0; b < d.buckets; ++b) x.push_back(double(b * d.bucket_ns) * 1e-6);
    XYChart q;
    q.title = fmt::format("Queue length over time, device {}", d.device);
    q.x_label = "ms since the device's first queued row";
    q.y_label = "rows launched, not finished (bucket max)";
    q.width = 720;
    int color = 0;
    auto queue_line = [&](const QueueSeries& qs, std::string label) {
      ChartSeries line{std::move(label), ChartSeries::Kind::kLine, x, {}, {}, {}, false, color++};
      for (int64_t v : qs.max_length) line.y.push_back(double(v));
      q.series.push_back(std::move(line));
    };
    for (const QueueSeries& qs : d.queues) queue_line(qs, fmt::format("stream {}", qs.stream));
    if (d.other_streams > 0)
      queue_line(d.other_queue, fmt::format("{} other streams (summed)", d.other_streams));
    if (!q.series.empty()) {
      c.figure(fmt::format("queue-length-{}", d.device), q.title, render_svg(q),
               {at + ".queue_length[].max_length", at + ".bucket_ns",
                at + ".queue_length_other_streams"},
               fmt::format("Each {} bucket's largest queue: rows launched (from their launch "
                           "call) and not finished, per stream. A queue near 0 while the device "
                           "idles means the host did not launch ahead: launch-bound.{}",
                           format_seconds(double(d.bucket_ns) * 1e-9),
                           d.other_streams > 0
                               ? fmt::format(" The {} streams with the most device time drawn "
                                             "alone, the other {} as one summed line.",
                                             d.queues.size(), d.other_streams)
                               : std::string()));
    }
    XYChart bw;
    bw.title = fmt::format("Copy bandwidth over time, device {}", d.device);
    bw.x_label = "ms since the device's first queued row";
    bw.y_label = "GB/s (bytes moved in the bucket / its time)";
    bw.width = 720;
    color = 0;
    auto copy_line = [&](const CopySeries& cs, std::string label) {
      ChartSeries line{std::move(label), ChartSeries::Kind::kLine, x, {}, {}, {}, false, color++};
      for (double v : cs.bytes_per_s) line.y.push_back(v * 1e-9);
      bw.series.push_back(std::move(line));
    };
    for (const CopySeries& cs : d.copies) copy_line(cs, cs.name);
    if (d.other_copies > 0)
      copy_line(d.other_copy, fmt::format("{} other copy kinds (summed)", d.other_copies));
    if (!bw.series.empty()) {
      c.figure(fmt::format("copy-bandwidth-{}", d.device), bw.title, render_svg(bw),
               {at + ".copy_bandwidth[].bytes_per_s", at + ".bucket_ns",
                at + ".copy_bandwidth_other_kinds"},
               "Bytes of each memcpy/memset kind moved per bucket (each copy's bytes spread "
               "evenly over its duration), over the bucket's time.");
    }
  }
}

std::vector<Table> trace_series_tables(const TraceSeries& s) {
  std::vector<Table> out;
  if (s.devices.empty()) return out;
  Table t("Time series (results.trace.time_series; pictures in the report): each series' peak");
  t.column("device").column("series", Align::kLeft).column("peak").column("at").column("mean");
  for (const DeviceSeries& d : s.devices) {
    auto at = [&](std::size_t k) {
      return fmt::format("+{}", format_seconds(double(static_cast<int64_t>(k) * d.bucket_ns) * 1e-9));
    };
    auto queue_row = [&](const QueueSeries& q, std::string label) {
      const auto top = std::max_element(q.max_length.begin(), q.max_length.end());
      double mean = 0;
      for (double m : q.mean_length) mean += m;
      t.row({std::to_string(d.device), std::move(label), std::to_string(*top),
             at(static_cast<std::size_t>(top - q.max_length.begin())),
             fmt::format("{:.2f}", q.mean_length.empty() ? 0.0 : mean / double(q.mean_length.size()))});
    };
    for (const QueueSeries& q : d.queues) queue_row(q, fmt::format("queue length, stream {}", q.stream));
    if (d.other_streams > 0) {
      queue_row(d.other_queue,
                fmt::format("queue length, {} other streams (summed)", d.other_streams));
    }
    auto copy_row = [&](const CopySeries& c, std::string label) {
      const auto top = std::max_element(c.bytes_per_s.begin(), c.bytes_per_s.end());
      double bytes = 0;
      for (double b : c.bytes) bytes += b;
      const double window = double(d.end_ns - d.start_ns);
      t.row({std::to_string(d.device), std::move(label), format_bytes(*top) + "/s",
             at(static_cast<std::size_t>(top - c.bytes_per_s.begin())),
             window > 0 ? format_bytes(bytes / window * 1e9) + "/s" : ""});
    };
    for (const CopySeries& c : d.copies) copy_row(c, c.name);
    if (d.other_copies > 0)
      copy_row(d.other_copy, fmt::format("{} other copy kinds (summed)", d.other_copies));
    if (d.other_streams > 0 || d.other_copies > 0) {
      t.note(fmt::format("device {}: the {} streams with the most device time and the {} copy "
                         "kinds with the most bytes have a series each; the other {} stream(s) "
                         "({}) and {} copy kind(s) are summed into one series each",
                         d.device, TraceSeries::kMaxStreams, TraceSeries::kMaxCopies,
                         d.other_streams, format_seconds(double(d.other_queue.device_ns) * 1e-9),
                         d.other_copies));
    }
    t.note(fmt::format("device {}: {} bucket(s) of {} from the first queued row to the last end; "
                       "queue: the bucket's largest length and its time-weighted mean; bandwidth: "
                       "bytes moved in the bucket (each copy's bytes spread evenly over its time) "
                       "over the bucket's time",
                       d.device, d.buckets, format_seconds(double(d.bucket_ns) * 1e-9)));
  }
  if (s.other_devices > 0) {
    t.note(fmt::format("series for the {} devices with the most device time only; {} other "
                       "device(s), {} of device time, have none (results.trace.time_series."
                       "other_devices)",
                       TraceSeries::kMaxDevices, s.other_devices,
                       format_seconds(double(s.other_devices_ns) * 1e-9)));
  }
  out.push_back(t);
  return out;
}

}  // namespace tprobe::core
