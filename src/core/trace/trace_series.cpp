// Queue length and copy bandwidth over time (trace_series.hpp; docs/kernels.md, "Time series").
#include "tprobe/core/trace/trace_series.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/report/svg_chart.hpp"
#include "trace/trace_stats_internal.hpp"

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

}  // namespace

TraceSeries compute_trace_series(const std::vector<StatRow>& rows,
                                 const std::vector<StatLaunch>& launches,
                                 const std::vector<std::string>& names) {
  TraceSeries out;
  auto queued = [&](const StatRow& r) {
    return r.launch >= 0 ? std::min(launches[static_cast<std::size_t>(r.launch)].ts_ns, r.start_ns)
                         : r.start_ns;
  };
  std::map<int32_t, Grid> grids;
  for (const StatRow& r : rows) {
    auto [it, fresh] = grids.try_emplace(r.device);
    Grid& g = it->second;
    const int64_t q = queued(r);
    if (fresh) {
      g.start = q;
      g.end = r.end_ns;
    }
    g.start = std::min(g.start, q);
    g.end = std::max(g.end, r.end_ns);
  }
  for (auto& [device, g] : grids) {
    const int64_t span = g.end - g.start;
    g.width = std::max<int64_t>(1, (span + TraceSeries::kMaxBuckets - 1) / TraceSeries::kMaxBuckets);
    g.buckets = std::max<int64_t>(1, (span + g.width - 1) / g.width);
  }
  // Queue length: +1 at a row's queueing, -1 at its end, ends first at one instant (as the
  // queue-length statistics have it).
  struct Change {
    int64_t t;
    int delta;
  };
  std::map<std::pair<int32_t, int64_t>, std::vector<Change>> changes;
  std::map<std::pair<int32_t, uint32_t>, CopySeries> copies;
  for (const StatRow& r : rows) {
    const Grid& g = grids.at(r.device);
    if (r.launch >= 0) {
      auto& v = changes[{r.device, r.stream}];
      v.push_back({queued(r), +1});
      v.push_back({r.end_ns, -1});
    }
    if (r.kind == ActivityKind::kKernel || r.bytes < 0) continue;
    CopySeries& c = copies[{r.device, r.name_id}];
    if (c.bytes.empty()) {
      c.name = names[r.name_id];
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
  for (auto& [device, g] : grids) {
    DeviceSeries ds;
    ds.device = device;
    ds.start_ns = g.start;
    ds.end_ns = g.end;
    ds.bucket_ns = g.width;
    ds.buckets = g.buckets;
    const auto n = static_cast<std::size_t>(g.buckets);
    for (auto& [key, v] : changes) {
      if (key.first != device) continue;
      std::sort(v.begin(), v.end(), [](const Change& a, const Change& b) {
        return a.t != b.t ? a.t < b.t : a.delta < b.delta;
      });
      QueueSeries q;
      q.stream = key.second;
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
      ds.queues.push_back(std::move(q));
    }
    for (auto& [key, c] : copies) {
      if (key.first != device) continue;
      c.bytes_per_s.resize(n);
      for (std::size_t k = 0; k < n; ++k) {
        const int64_t w = g.hi(static_cast<int64_t>(k)) - g.lo(static_cast<int64_t>(k));
        c.bytes_per_s[k] = w > 0 ? c.bytes[k] * 1e9 / double(w) : 0.0;
      }
      ds.copies.push_back(std::move(c));
    }
    std::sort(ds.copies.begin(), ds.copies.end(),
              [](const CopySeries& a, const CopySeries& b) { return a.name < b.name; });
    out.devices.push_back(std::move(ds));
  }
  return out;
}

}  // namespace detail

Json to_json(const TraceSeries& s) {
  Json devices = Json::array();
  for (const DeviceSeries& d : s.devices) {
    Json queues = Json::array();
    for (const QueueSeries& q : d.queues) {
      queues.push_back(
          {{"stream", q.stream}, {"max_length", q.max_length}, {"mean_length", q.mean_length}});
    }
    Json copies = Json::array();
    for (const CopySeries& c : d.copies) {
      copies.push_back({{"name", c.name},
                        {"rows", c.rows},
                        {"bytes", c.bytes},
                        {"bytes_per_s", c.bytes_per_s}});
    }
    devices.push_back({{"device", d.device},
                       {"start_ns", d.start_ns},
                       {"end_ns", d.end_ns},
                       {"bucket_ns", d.bucket_ns},
                       {"buckets", d.buckets},
                       {"queue_length", queues},
                       {"copy_bandwidth", copies}});
  }
  return {{"max_buckets", TraceSeries::kMaxBuckets}, {"devices", devices}};
}

TraceSeries trace_series_from_json(const Json& j, const std::string& where) {
  namespace jr = json_read;
  TraceSeries s;
  if (jr::integer(j, "max_buckets", where) != TraceSeries::kMaxBuckets)
    fail("{}: field 'max_buckets' is not {}", where, TraceSeries::kMaxBuckets);
  const Json& devices = jr::array(j, "devices", where);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string w = jr::at(where, "devices", i);
    const Json& dj = devices[i];
    DeviceSeries d;
    d.device = static_cast<int32_t>(jr::integer(dj, "device", w, 0, INT32_MAX));
    d.start_ns = jr::integer(dj, "start_ns", w);
    d.end_ns = jr::integer(dj, "end_ns", w, d.start_ns);
    d.bucket_ns = jr::integer(dj, "bucket_ns", w, 1);
    d.buckets = jr::integer(dj, "buckets", w, 1, TraceSeries::kMaxBuckets);
    const auto n = static_cast<std::size_t>(d.buckets);
    const Json& queues = jr::array(dj, "queue_length", w);
    for (std::size_t k = 0; k < queues.size(); ++k) {
      const std::string wq = jr::at(w, "queue_length", k);
      QueueSeries q;
      q.stream = jr::integer(queues[k], "stream", wq);
      q.max_length = jr::integers(queues[k], "max_length", wq, 0);
      q.mean_length = jr::numbers(queues[k], "mean_length", wq);
      if (q.max_length.size() != n || q.mean_length.size() != n)
        fail("{}: {} buckets expected in max_length and mean_length", wq, n);
      d.queues.push_back(std::move(q));
    }
    const Json& copies = jr::array(dj, "copy_bandwidth", w);
    for (std::size_t k = 0; k < copies.size(); ++k) {
      const std::string wc = jr::at(w, "copy_bandwidth", k);
      CopySeries c;
      c.name = jr::string(copies[k], "name", wc);
      c.rows = jr::integer(copies[k], "rows", wc, 0);
      c.bytes = jr::numbers(copies[k], "bytes", wc);
      c.bytes_per_s = jr::numbers(copies[k], "bytes_per_s", wc);
      if (c.bytes.size() != n || c.bytes_per_s.size() != n)
        fail("{}: {} buckets expected in bytes and bytes_per_s", wc, n);
      d.copies.push_back(std::move(c));
    }
    s.devices.push_back(std::move(d));
  }
  return s;
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
    for (const QueueSeries& qs : d.queues) {
      ChartSeries line{fmt::format("stream {}", qs.stream), ChartSeries::Kind::kLine, x, {}, {}, {},
                       false, color++};
      for (int64_t v : qs.max_length) line.y.push_back(double(v));
      q.series.push_back(std::move(line));
    }
    if (!q.series.empty()) {
      c.figure(fmt::format("queue-length-{}", d.device), q.title, render_svg(q),
               {at + ".queue_length[].max_length", at + ".bucket_ns"},
               fmt::format("Each {} bucket's largest queue: rows launched (from their launch "
                           "call) and not finished, per stream. A queue near 0 while the device "
                           "idles means the host did not launch ahead: launch-bound.",
                           format_seconds(double(d.bucket_ns) * 1e-9)));
    }
    XYChart bw;
    bw.title = fmt::format("Copy bandwidth over time, device {}", d.device);
    bw.x_label = "ms since the device's first queued row";
    bw.y_label = "GB/s (bytes moved in the bucket / its time)";
    bw.width = 720;
    color = 0;
    for (const CopySeries& cs : d.copies) {
      ChartSeries line{cs.name, ChartSeries::Kind::kLine, x, {}, {}, {}, false, color++};
      for (double v : cs.bytes_per_s) line.y.push_back(v * 1e-9);
      bw.series.push_back(std::move(line));
    }
    if (!bw.series.empty()) {
      c.figure(fmt::format("copy-bandwidth-{}", d.device), bw.title, render_svg(bw),
               {at + ".copy_bandwidth[].bytes_per_s", at + ".bucket_ns"},
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
    for (const QueueSeries& q : d.queues) {
      const auto top = std::max_element(q.max_length.begin(), q.max_length.end());
      double mean = 0;
      for (double m : q.mean_length) mean += m;
      t.row({std::to_string(d.device), fmt::format("queue length, stream {}", q.stream),
             std::to_string(*top), at(static_cast<std::size_t>(top - q.max_length.begin())),
             fmt::format("{:.2f}", q.mean_length.empty() ? 0.0 : mean / double(q.mean_length.size()))});
    }
    for (const CopySeries& c : d.copies) {
      const auto top = std::max_element(c.bytes_per_s.begin(), c.bytes_per_s.end());
      double bytes = 0;
      for (double b : c.bytes) bytes += b;
      const double window = double(d.end_ns - d.start_ns);
      t.row({std::to_string(d.device), c.name, format_bytes(*top) + "/s",
             at(static_cast<std::size_t>(top - c.bytes_per_s.begin())),
             window > 0 ? format_bytes(bytes / window * 1e9) + "/s" : ""});
    }
    t.note(fmt::format("device {}: {} bucket(s) of {} from the first queued row to the last end; "
                       "queue: the bucket's largest length and its time-weighted mean; bandwidth: "
                       "bytes moved in the bucket (each copy's bytes spread evenly over its time) "
                       "over the bucket's time",
                       d.device, d.buckets, format_seconds(double(d.bucket_ns) * 1e-9)));
  }
  out.push_back(t);
  return out;
}

}  // namespace tprobe::core
