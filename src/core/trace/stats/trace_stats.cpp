// The launch-bound statistics of a trace: idle split, launch statistics, queue length, copy
// bandwidth, host-op census (definitions in trace_stats.hpp and docs/kernels.md).
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "trace/stats/detail/trace_stats_internal.hpp"

namespace tprobe::core {

Distribution distribution_of(std::vector<int64_t>& v) {
  Distribution d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  d.count = static_cast<int64_t>(n);
  for (int64_t x : v) d.sum_ns += x;
  auto rank = [&](std::size_t p) { return v[(p * n + 99) / 100 - 1]; };  // ceil(p n / 100)
  d.min_ns = v.front();
  d.p50_ns = rank(50);
  d.p90_ns = rank(90);
  d.p99_ns = rank(99);
  d.max_ns = v.back();
  d.mean_ns = double(d.sum_ns) / double(n);
  return d;
}

namespace detail {
namespace {

void idle_split(const std::vector<StatRow>& rows, const std::vector<StatLaunch>& launches,
                TraceStats& out) {
  // Per device by start; among rows starting together, those with a launch first, earliest
  // launch first: the row that ends a gap is the one the host asked for first.
  std::vector<std::size_t> order(rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto launch_ts = [&](const StatRow& r) {
    return r.launch >= 0 ? launches[static_cast<std::size_t>(r.launch)].ts_ns : INT64_MAX;
  };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const StatRow &x = rows[a], &y = rows[b];
    if (x.device != y.device) return x.device < y.device;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if ((x.launch >= 0) != (y.launch >= 0)) return x.launch >= 0;
    return launch_ts(x) < launch_ts(y);
  });
  IdleSplit* cur = nullptr;
  int64_t busy_end = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const StatRow& r = rows[order[k]];
    if (cur == nullptr || cur->device != r.device) {
      out.idle.push_back(IdleSplit{});
      cur = &out.idle.back();
      cur->device = r.device;
      busy_end = r.end_ns;
      continue;
    }
    if (r.start_ns > busy_end) {
      const int64_t gap = r.start_ns - busy_end;
      cur->idle_ns += gap;
      ++cur->gaps;
      if (r.launch < 0) {
        cur->unlaunched_ns += gap;
      } else {
        const int64_t before = std::clamp(launch_ts(r) - busy_end, int64_t{0}, gap);
        cur->host_wait_ns += before;
        cur->kernel_wait_ns += gap - before;
        if (before > 0) ++cur->host_wait_gaps;
      }
    }
    busy_end = std::max(busy_end, r.end_ns);
  }
}

void streams(const std::vector<StatRow>& rows, TraceStats& out) {
  std::map<std::pair<int32_t, int64_t>, StreamRow> by;
  struct Edge {
    int64_t t;
    int delta;
    int64_t stream;
  };
  std::map<int32_t, std::vector<Edge>> edges;  // per device
  for (const StatRow& r : rows) {
    StreamRow& s = by[{r.device, r.stream}];
    const int64_t d = r.end_ns - r.start_ns;
    if (s.rows == 0) {
      s.device = r.device;
      s.stream = r.stream;
      s.first_start_ns = r.start_ns;
      s.last_end_ns = r.end_ns;
    }
    ++s.rows;
    s.first_start_ns = std::min(s.first_start_ns, r.start_ns);
    s.last_end_ns = std::max(s.last_end_ns, r.end_ns);
    switch (r.kind) {
      case ActivityKind::kKernel:
        ++s.kernels;
        s.kernel_ns += d;
        break;
      case ActivityKind::kMemcpy:
        ++s.memcpys;
        s.memcpy_ns += d;
        break;
      case ActivityKind::kMemset:
        ++s.memsets;
        s.memset_ns += d;
        break;
    }
    s.sum_ns += d;
    auto& e = edges[r.device];
    e.push_back({r.start_ns, +1, r.stream});
    e.push_back({r.end_ns, -1, r.stream});
  }
  // One sweep per device: each stream's busy time (open rows > 0) and the part of it with another
  // stream busy too. Ends before starts at one instant, as everywhere.
  for (auto& [device, e] : edges) {
    std::sort(e.begin(), e.end(), [](const Edge& a, const Edge& b) {
      return a.t != b.t ? a.t < b.t : a.delta < b.delta;
    });
    // stream -> rows open; a stream leaves when none is open, so each step walks the busy
    // streams only (not every stream seen: quadratic on a trace of thousands of streams).
    std::map<int64_t, int64_t> open;
    int64_t busy_streams = 0;
    int64_t device_sum = 0, span_start = e.front().t, span_end = e.back().t;
    for (std::size_t i = 0; i < e.size(); ++i) {
      auto it = open.try_emplace(e[i].stream, 0).first;
      int64_t& n = it->second;
      const bool was = n > 0;
      n += e[i].delta;
      busy_streams += (n > 0) - was;
      if (n == 0) open.erase(it);
      if (i + 1 == e.size() || e[i + 1].t == e[i].t) continue;
      const int64_t dt = e[i + 1].t - e[i].t;
      for (const auto& [stream, k] : open) {
        if (k <= 0) continue;
        StreamRow& s = by[{device, stream}];
        s.busy_ns += dt;
        if (busy_streams > 1) s.concurrent_ns += dt;
      }
    }
    // This device's streams only (not every stream of every device: quadratic on thousands).
    const auto first = by.lower_bound({device, std::numeric_limits<int64_t>::min()});
    const auto last = by.upper_bound({device, std::numeric_limits<int64_t>::max()});
    for (auto it = first; it != last; ++it) device_sum += it->second.sum_ns;
    for (auto it = first; it != last; ++it) {
      StreamRow& s = it->second;
      s.sum_share_ratio = device_sum > 0 ? double(s.sum_ns) / double(device_sum) : 0.0;
      const int64_t span = span_end - span_start;
      s.busy_span_ratio = span > 0 ? double(s.busy_ns) / double(span) : 0.0;
    }
  }
  for (auto& [key, s] : by) out.streams.push_back(s);
}

void launch_stats(const std::vector<StatRow>& rows, const std::vector<StatLaunch>& launches,
                  const std::vector<std::string>& names, TraceStats& out) {
  LaunchStats& s = out.launch;
  std::vector<int64_t> calls, delays;
  std::unordered_map<uint32_t, LaunchKernelRow> per;
  for (const StatRow& r : rows) {
    if (r.kind != ActivityKind::kKernel) continue;
    ++s.kernels;
    if (r.launch < 0) continue;
    ++s.with_launch;
    const StatLaunch& l = launches[static_cast<std::size_t>(r.launch)];
    LaunchKernelRow& k = per[r.name_id];
    ++k.launches;
    const int64_t dur = r.end_ns - r.start_ns;
    k.device_ns += dur;
    const int64_t delay = r.start_ns - l.ts_ns;
    delays.push_back(delay);
    k.delay_ns += delay;
    if (delay < 0) ++s.negative_delay;
    if (l.dur_ns < 0) {
      ++s.launch_duration_unknown;
      continue;
    }
    calls.push_back(l.dur_ns);
    k.launch_ns += l.dur_ns;
    if (dur < l.dur_ns) {
      ++s.shorter_than_launch;
      s.shorter_than_launch_ns += dur;
      ++k.shorter_than_launch;
    }
  }
  s.launch_call = distribution_of(calls);
  s.launch_delay = distribution_of(delays);
  for (auto& [id, row] : per) {
    row.name = names[id];
    s.per_kernel.push_back(std::move(row));
  }
  std::sort(s.per_kernel.begin(), s.per_kernel.end(),
            [](const LaunchKernelRow& a, const LaunchKernelRow& b) {
              return a.launch_ns != b.launch_ns ? a.launch_ns > b.launch_ns : a.name < b.name;
            });
}

void queue_lengths(const std::vector<StatRow>& rows, const std::vector<StatLaunch>& launches,
                   TraceStats& out) {
  struct Change {
    int64_t t;
    int delta;
  };
  std::map<std::pair<int32_t, int64_t>, std::vector<Change>> by_stream;
  std::map<std::pair<int32_t, int64_t>, int64_t> unlaunched;
  for (const StatRow& r : rows) {
    const auto key = std::make_pair(r.device, r.stream);
    if (r.launch < 0) {
      ++unlaunched[key];
      by_stream[key];
      continue;
    }
    const int64_t queued = std::min(launches[static_cast<std::size_t>(r.launch)].ts_ns, r.start_ns);
    auto& v = by_stream[key];
    v.push_back({queued, +1});
    v.push_back({r.end_ns, -1});
  }
  for (auto& [key, v] : by_stream) {
    QueueRow q;
    q.device = key.first;
    q.stream = key.second;
    q.unlaunched_rows = unlaunched.count(key) ? unlaunched[key] : 0;
    q.rows = static_cast<int64_t>(v.size() / 2);
    if (!v.empty()) {
      // Ends before starts at one instant: a row ending at t and one queued at t never count as
      // outstanding together; lengths are only taken over positive stretches of time.
      std::sort(v.begin(), v.end(), [](const Change& a, const Change& b) {
        return a.t != b.t ? a.t < b.t : a.delta < b.delta;
      });
      q.window_start_ns = v.front().t;
      q.window_end_ns = v.back().t;
      int64_t length = 0;
      long double weighted = 0;
      for (std::size_t i = 0; i < v.size(); ++i) {
        length += v[i].delta;
        if (i + 1 < v.size() && v[i + 1].t > v[i].t && length >= 0) {
          const int64_t dt = v[i + 1].t - v[i].t;
          const auto n = static_cast<std::size_t>(length);
          if (q.time_at_length_ns.size() <= n) q.time_at_length_ns.resize(n + 1, 0);
          q.time_at_length_ns[n] += dt;
          q.max_length = std::max(q.max_length, length);
          weighted += static_cast<long double>(length) * static_cast<long double>(dt);
        }
      }
      const int64_t window = q.window_end_ns - q.window_start_ns;
      q.mean_length = window > 0 ? static_cast<double>(weighted / window) : 0.0;
    }
    out.queues.push_back(std::move(q));
  }
}

void copies(const std::vector<StatRow>& rows, const std::vector<std::string>& names,
            TraceStats& out) {
  std::map<uint32_t, CopyRow> by_name;
  for (const StatRow& r : rows) {
    if (r.kind == ActivityKind::kKernel) continue;
    CopyRow& c = by_name[r.name_id];
    c.kind = r.kind;
    ++c.count;
    if (r.bytes < 0) continue;
    ++c.rows_with_bytes;
    c.bytes += r.bytes;
    c.total_ns += r.end_ns - r.start_ns;
  }
  for (auto& [id, c] : by_name) {
    c.name = names[id];
    c.bytes_per_s = c.total_ns > 0 ? double(c.bytes) * 1e9 / double(c.total_ns) : 0.0;
    out.copies.push_back(std::move(c));
  }
  std::sort(out.copies.begin(), out.copies.end(), [](const CopyRow& a, const CopyRow& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
}

void host_op_census(const std::vector<StatRow>& rows, const std::vector<StatLaunch>& launches,
                    const std::vector<StatOp>& ops, const std::vector<uint8_t>& selected,
                    const std::vector<std::string>& op_names, TraceStats& out) {
  HostOpCensus& c = out.host_ops;
  std::vector<std::size_t> order(ops.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const StatOp &x = ops[a], &y = ops[b];
    if (x.tid != y.tid) return x.tid < y.tid;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (x.end_ns != y.end_ns) return x.end_ns > y.end_ns;
    return a < b;
  });
  // Top-level ops per thread, by start; their ends increase strictly (each ends after every op
  // before it), so the one holding a time t is the last starting at or before t, if it reaches t.
  std::map<int64_t, std::vector<std::size_t>> top;
  std::vector<HostOpRow> by_id(op_names.size());
  int64_t max_end = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const StatOp& op = ops[order[k]];
    const bool new_tid = k == 0 || ops[order[k - 1]].tid != op.tid;
    const bool is_top = new_tid || op.end_ns > max_end;
    max_end = new_tid ? op.end_ns : std::max(max_end, op.end_ns);
    if (is_top) top[op.tid].push_back(order[k]);
    if (!selected.empty() && !selected[order[k]]) continue;
    HostOpRow& row = by_id[op.name_id];
    ++row.calls;
    ++c.ops;
    if (is_top) {
      ++row.top_level_calls;
      ++c.top_level_ops;
    }
  }
  for (const StatRow& r : rows) {
    const StatOp* holder = nullptr;
    if (r.launch >= 0) {
      const StatLaunch& l = launches[static_cast<std::size_t>(r.launch)];
      auto it = top.find(l.tid);
      if (it != top.end()) {
        const std::vector<std::size_t>& v = it->second;
        auto after = std::upper_bound(v.begin(), v.end(), l.ts_ns, [&](int64_t t, std::size_t i) {
          return t < ops[i].start_ns;
        });
        if (after != v.begin() && ops[*(after - 1)].end_ns >= l.ts_ns) holder = &ops[*(after - 1)];
      }
    }
    if (holder == nullptr) {
      ++c.rows_outside_op;
      continue;
    }
    ++c.rows_in_op;
    HostOpRow& row = by_id[holder->name_id];
    ++row.device_rows;
    row.device_ns += r.end_ns - r.start_ns;
  }
  for (std::size_t id = 0; id < by_id.size(); ++id) {
    HostOpRow& row = by_id[id];
    if (row.calls == 0 && row.device_rows == 0) continue;
    row.name = op_names[id];
    c.by_name.push_back(std::move(row));
  }
  std::sort(c.by_name.begin(), c.by_name.end(), [](const HostOpRow& a, const HostOpRow& b) {
    if (a.calls != b.calls) return a.calls > b.calls;
    if (a.top_level_calls != b.top_level_calls) return a.top_level_calls > b.top_level_calls;
    return a.name < b.name;
  });
}

// Keeps the kMaxStreamRows streams and kMaxDeviceRows devices with the most device time; folds
// the rest into the other_* sums.
void fold(TraceStats& out) {
  std::map<int32_t, int64_t> device_ns;
  for (const StreamRow& s : out.streams) device_ns[s.device] += s.sum_ns;
  if (static_cast<int64_t>(out.streams.size()) > TraceStats::kMaxStreamRows) {
    std::vector<StreamRow> ranked = out.streams;
    std::stable_sort(ranked.begin(), ranked.end(), [](const StreamRow& a, const StreamRow& b) {
      return a.sum_ns > b.sum_ns;  // stable: ties keep ascending (device, stream)
    });
    std::set<std::pair<int32_t, int64_t>> kept;
    for (int64_t i = 0; i < TraceStats::kMaxStreamRows; ++i)
      kept.insert({ranked[i].device, ranked[i].stream});
    std::vector<StreamRow> streams;
    OtherStreams& o = out.other_streams;
    for (const StreamRow& s : out.streams) {
      if (kept.count({s.device, s.stream})) {
        streams.push_back(s);
        continue;
      }
      ++o.streams;
      o.rows += s.rows;
      o.kernels += s.kernels;
      o.memcpys += s.memcpys;
      o.memsets += s.memsets;
      o.kernel_ns += s.kernel_ns;
      o.memcpy_ns += s.memcpy_ns;
      o.memset_ns += s.memset_ns;
      o.sum_ns += s.sum_ns;
      o.busy_ns += s.busy_ns;
    }
    out.streams = std::move(streams);
    std::vector<QueueRow> queues;
    OtherQueues& q = out.other_queues;
    for (QueueRow& r : out.queues) {
      if (kept.count({r.device, r.stream})) {
        queues.push_back(std::move(r));
        continue;
      }
      ++q.queues;
      q.rows += r.rows;
      q.unlaunched_rows += r.unlaunched_rows;
      q.max_length = std::max(q.max_length, r.max_length);
    }
    out.queues = std::move(queues);
  }
  if (static_cast<int64_t>(out.idle.size()) > TraceStats::kMaxDeviceRows) {
    std::vector<std::pair<int64_t, int32_t>> ranked;  // (-device time, device)
    for (const IdleSplit& s : out.idle) {
      auto it = device_ns.find(s.device);
      ranked.push_back({it == device_ns.end() ? 0 : -it->second, s.device});
    }
    std::sort(ranked.begin(), ranked.end());
    std::set<int32_t> kept;
    for (int64_t i = 0; i < TraceStats::kMaxDeviceRows; ++i) kept.insert(ranked[i].second);
    std::vector<IdleSplit> idle;
    OtherIdle& o = out.other_idle;
    for (const IdleSplit& s : out.idle) {
      if (kept.count(s.device)) {
        idle.push_back(s);
        continue;
      }
      ++o.devices;
      o.idle_ns += s.idle_ns;
      o.gaps += s.gaps;
      o.host_wait_ns += s.host_wait_ns;
      o.kernel_wait_ns += s.kernel_wait_ns;
      o.unlaunched_ns += s.unlaunched_ns;
      o.host_wait_gaps += s.host_wait_gaps;
    }
    out.idle = std::move(idle);
  }
}

}  // namespace

TraceStats compute_trace_stats(const std::vector<StatRow>& rows,
                               const std::vector<StatLaunch>& launches,
                               const std::vector<StatOp>& ops,
                               const std::vector<uint8_t>& op_selected,
                               const std::vector<std::string>& row_names,
                               const std::vector<std::string>& op_names) {
  TraceStats out;
  streams(rows, out);
  idle_split(rows, launches, out);
  launch_stats(rows, launches, row_names, out);
  queue_lengths(rows, launches, out);
  copies(rows, row_names, out);
  host_op_census(rows, launches, ops, op_selected, op_names, out);
  fold(out);
  return out;
}

}  // namespace detail
}  // namespace tprobe::core
