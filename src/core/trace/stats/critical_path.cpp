// The critical path of a traced step (critical_path.hpp; docs/kernels.md, "Critical path"): the
// host threads' event chains and the device streams' row chains, linked by launches, stream waits,
// synchronisations and autograd's hand-overs, walked backward from the window's last node along
// each node's latest-finishing predecessor. Every predecessor is looked up when the walk reaches
// its node (sorted arrays, binary searches, cursors), so the cost is a few passes and sorts, and
// the memory 13 bytes a host event beside the reader's own arrays, which it reads in place.
// Size: over the house's 800 lines for a stated reason: it is one class (Analysis) whose graph
// — the threads' chains, the streams' orders, the sync edges — is the state the walk reads at
// every node; split across files it would be a second header of accessors crossed per node.
// Its evidence, reader, tables and report figure are critical_path_report.cpp.
#include "tprobe/core/trace/stats/critical_path.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "trace/stats/detail/critical_path_internal.hpp"

namespace tprobe::core {

namespace detail {
namespace {

using Index = int64_t;
constexpr Index kNone = -1;

// The names of the runtime calls that matter here (runtime and driver spellings).
enum class CallClass : uint8_t { kOther, kRecord, kContextSync, kStreamSync, kEventSync };

CallClass call_class(const std::string& n) {
  if (n == "cudaEventRecord" || n == "cudaEventRecordWithFlags" || n == "cuEventRecord" ||
      n == "cuEventRecordWithFlags")
    return CallClass::kRecord;
  if (n == "cudaDeviceSynchronize" || n == "cuCtxSynchronize") return CallClass::kContextSync;
  if (n == "cudaStreamSynchronize" || n == "cuStreamSynchronize") return CallClass::kStreamSync;
  if (n == "cudaEventSynchronize" || n == "cuEventSynchronize") return CallClass::kEventSync;
  return CallClass::kOther;
}

int64_t add_saturating(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

// How the walk reached a node from its predecessor; what the segment between them is.
enum class Step : uint8_t { kThread, kJoin, kFork, kRow, kLaunch, kStream, kWait, kSync };

// A stream's rows in launch order with the latest-ending row so far: "of the rows launched
// before t, the one that ends last" in one binary search.
struct LaunchOrder {
  std::vector<int64_t> launch_ns;    // ascending
  std::vector<uint32_t> row;         // the row launched there
  std::vector<uint32_t> last_ending;  // of row[0..k], the one ending last (the first of equals)
};

class Analysis {
 public:
  Analysis(const CriticalPathInput& in, CriticalPath& out)
      : in_(in),
        out_(out),
        n_ops_(in.ops ? in.ops->size() : 0),
        n_ranges_(in.ranges ? in.ranges->size() : 0),
        n_calls_(in.calls ? in.calls->size() : 0),
        n_rows_(in.rows ? in.rows->size() : 0) {}

  void run() {
    out_.window_start_ns = in_.window_start_ns;
    out_.window_end_ns = in_.window_end_ns;
    constexpr std::size_t kMax = std::size_t{1} << 31;  // node ids are 32-bit
    if (n_ops_ + n_ranges_ + n_calls_ >= kMax || n_rows_ >= kMax) {
      out_.why_not = "more than 2^31 host events or device rows";
      return;
    }
    build_threads();
    build_streams();
    resolve_syncs();
    if (!check_available()) return;
    walk();
    finish_tables();
    set_path_shares(out_);
  }

 private:
  const CriticalPathInput& in_;
  CriticalPath& out_;
  // Host event h: [0, ops) a cpu_op, then the user ranges, then the runtime calls.
  const std::size_t n_ops_, n_ranges_, n_calls_, n_rows_;

  using Ev = uint32_t;
  static constexpr Ev kNoEvent = UINT32_MAX;

  // ---- host events, read in place ----
  std::size_t n_host() const { return n_ops_ + n_ranges_ + n_calls_; }
  CpHostKind kind(Ev h) const {
    return h < n_ops_ ? CpHostKind::kOp
                      : h < n_ops_ + n_ranges_ ? CpHostKind::kAnnotation : CpHostKind::kRuntime;
  }
  const RuntimeCall& call(Ev h) const { return (*in_.calls)[h - n_ops_ - n_ranges_]; }
  int64_t start(Ev h) const {
    if (h < n_ops_) return (*in_.ops)[h].start_ns;
    if (h < n_ops_ + n_ranges_) return (*in_.ranges)[h - n_ops_].start_ns;
    return call(h).ts_ns;
  }
  int64_t end(Ev h) const {
    if (h < n_ops_) return (*in_.ops)[h].end_ns;
    if (h < n_ops_ + n_ranges_) return (*in_.ranges)[h - n_ops_].end_ns;
    return add_saturating(call(h).ts_ns, call(h).dur_ns);
  }
  int64_t tid(Ev h) const {
    if (h < n_ops_) return (*in_.ops)[h].tid;
    if (h < n_ops_ + n_ranges_) return (*in_.ranges)[h - n_ops_].tid;
    return call(h).tid;
  }
  uint32_t name(Ev h) const {
    if (h < n_ops_) return (*in_.ops)[h].name_id;
    if (h < n_ops_ + n_ranges_) return (*in_.ranges)[h - n_ops_].name_id;
    return call(h).name_id;
  }
  // An interval: a call needs a usable duration; an event ending before it starts is none.
  bool interval(Ev h) const {
    if (kind(h) == CpHostKind::kRuntime && call(h).dur_ns < 0) return false;
    return end(h) >= start(h);
  }

  // ---- host: one chain of nodes per thread ----
  std::vector<int64_t> tids_;          // thread index -> tid, ascending
  std::vector<Index> thread_begin_;    // chain positions [begin[k], begin[k + 1])
  std::vector<uint32_t> chain_;        // node: event << 1 | is_end
  std::vector<Ev> parent_;             // per event: the innermost event holding it, or none
  std::vector<CpPhase> phase_;         // per event
  std::vector<bool> top_level_;        // per event
  std::vector<uint32_t> call_start_;   // per runtime call: its start node
  struct Top {
    Ev event;
    uint32_t end_pos;
  };
  std::vector<std::vector<Top>> tops_;  // per thread: top-level events, ascending start and end
  std::vector<uint8_t> worker_;         // per thread: one of autograd's workers
  std::vector<std::size_t> join_cursor_;  // per thread: its top-level events ending before now
  std::vector<CallClass> name_class_;   // per host name
  std::vector<std::pair<int64_t, Ev>> calls_by_corr_;  // (correlation, call)
  std::vector<std::vector<Ev>> records_;  // per thread: cudaEventRecord calls by start

  // ---- device ----
  std::vector<uint32_t> stream_prev_;            // per row: the previous row on its stream
  std::vector<std::pair<int64_t, int64_t>> stream_keys_;  // (device, stream), ascending
  std::vector<LaunchOrder> by_stream_;           // launch order per stream_keys_ entry
  std::vector<LaunchOrder> by_thread_;           // per thread index, built on first use
  bool by_thread_built_ = false;
  std::vector<std::pair<uint32_t, uint32_t>> wait_src_;  // (waiting row, source row)
  std::vector<std::pair<Ev, uint32_t>> sync_rows_;       // (blocking call, row it waited for)

  const StatRow& row(Index r) const { return (*in_.rows)[static_cast<std::size_t>(r)]; }
  CpPhase row_phase(Index r) const {
    return static_cast<std::size_t>(r) < in_.row_phase.size()
               ? in_.row_phase[static_cast<std::size_t>(r)]
               : CpPhase::kUnknown;
  }
  // The host event of row r's launch call, when it is an interval.
  Ev launch_of(Index r) const {
    const int64_t l = row(r).launch;
    if (l < 0 || static_cast<std::size_t>(l) >= n_calls_) return kNoEvent;
    const Ev h = static_cast<Ev>(n_ops_ + n_ranges_ + static_cast<std::size_t>(l));
    return call(h).dur_ns >= 0 && call_start_[h - n_ops_ - n_ranges_] != UINT32_MAX ? h : kNoEvent;
  }

  Ev ev_at(Index p) const { return chain_[static_cast<std::size_t>(p)] >> 1; }
  bool end_at(Index p) const { return chain_[static_cast<std::size_t>(p)] & 1; }
  int64_t t_at(Index p) const { return end_at(p) ? end(ev_at(p)) : start(ev_at(p)); }
  std::size_t thread_at(Index p) const {
    const auto it = std::upper_bound(thread_begin_.begin(), thread_begin_.end(), p);
    return static_cast<std::size_t>(it - thread_begin_.begin() - 1);
  }
  // The first position of thread k's chain whose node is at t or later (strictly later: after).
  Index first_at(std::size_t k, int64_t t, bool after) const {
    Index lo = thread_begin_[k], hi = thread_begin_[k + 1];
    while (lo < hi) {
      const Index mid = lo + (hi - lo) / 2;
      if (after ? t_at(mid) <= t : t_at(mid) < t) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
  // The event holding the segment that ends at node p: after a start node its event, after an
  // end node that event's parent (none on the thread's first node).
  Ev held(Index p) const {
    if (p == thread_begin_[thread_at(p)]) return kNoEvent;
    const Ev before = ev_at(p - 1);
    return end_at(p - 1) ? parent_[before] : before;
  }

  Index thread_of(int64_t t) const {
    auto it = std::lower_bound(tids_.begin(), tids_.end(), t);
    return it != tids_.end() && *it == t ? it - tids_.begin() : kNone;
  }

  CallClass cls(Ev h) const {
    const uint32_t id = name(h);
    return id < name_class_.size() ? name_class_[id] : CallClass::kOther;
  }

  void build_threads() {
    const std::size_t n = n_host();
    name_class_.assign(in_.host_names ? in_.host_names->size() : 0, CallClass::kOther);
    for (std::size_t i = 0; i < name_class_.size(); ++i)
      name_class_[i] = call_class((*in_.host_names)[i]);

    // Per thread by start, the longer first, then input order: a depth-first walk of the nesting.
    // The reader's events come in a few runs already in that order per thread (ops as Kineto
    // writes them, then ranges, then calls by correlation), so the threads are bucketed and
    // their runs merged: linear on such input, n log n on any other.
    for (Ev h = 0; h < n; ++h) {
      if (tids_.empty() || tids_.back() != tid(h)) tids_.push_back(tid(h));
    }
    std::sort(tids_.begin(), tids_.end());
    tids_.erase(std::unique(tids_.begin(), tids_.end()), tids_.end());
    std::vector<std::size_t> begin(tids_.size() + 1, 0);
    std::vector<Ev> order;
    {
      int64_t last_tid = 0;
      std::size_t last = SIZE_MAX;
      auto index = [&](Ev h) {
        if (last == SIZE_MAX || tid(h) != last_tid) {
          last_tid = tid(h);
          last = static_cast<std::size_t>(thread_of(last_tid));
        }
        return last;
      };
      for (Ev h = 0; h < n; ++h)
        if (interval(h)) ++begin[index(h) + 1];
      for (std::size_t k = 1; k < begin.size(); ++k) begin[k] += begin[k - 1];
      order.resize(begin.back());
      std::vector<std::size_t> at(begin.begin(), begin.end() - 1);
      for (Ev h = 0; h < n; ++h)
        if (interval(h)) order[at[index(h)]++] = h;
    }
    out_.graph.host_events = static_cast<int64_t>(order.size());
    auto less = [&](Ev a, Ev b) {
      if (start(a) != start(b)) return start(a) < start(b);
      if (end(a) != end(b)) return end(a) > end(b);
      return a < b;
    };
    std::vector<std::size_t> runs;
    for (std::size_t k = 0; k + 1 < begin.size(); ++k) {
      runs.assign(1, begin[k]);
      for (std::size_t i = begin[k] + 1; i < begin[k + 1]; ++i)
        if (less(order[i], order[i - 1])) runs.push_back(i);
      runs.push_back(begin[k + 1]);
      while (runs.size() > 2) {  // merge neighbouring runs until one is left
        std::vector<std::size_t> next;
        for (std::size_t r = 0; r + 1 < runs.size(); r += 2) {
          next.push_back(runs[r]);
          if (r + 2 < runs.size()) {
            const auto o = order.begin();
            std::inplace_merge(o + static_cast<std::ptrdiff_t>(runs[r]),
                               o + static_cast<std::ptrdiff_t>(runs[r + 1]),
                               o + static_cast<std::ptrdiff_t>(runs[r + 2]), less);
          }
        }
        next.push_back(runs.back());
        runs.swap(next);
      }
    }
    set_phases(order, begin);

    // The chain: the nesting's depth-first order of starts and ends.
    parent_.assign(n, kNoEvent);
    top_level_.assign(n, false);
    chain_.reserve(2 * order.size());
    tops_.resize(tids_.size());
    std::vector<Ev> stack;
    for (std::size_t k = 0; k + 1 < begin.size(); ++k) {
      thread_begin_.push_back(static_cast<Index>(chain_.size()));
      for (std::size_t i = begin[k]; i < begin[k + 1]; ++i) {
        const Ev h = order[i];
        // The open event contains h when h ends no later (it started no later, by the order).
        while (!stack.empty() && end(stack.back()) < end(h)) {
          chain_.push_back(stack.back() << 1 | 1u);
          stack.pop_back();
        }
        if (stack.empty()) {
          top_level_[h] = true;
        } else {
          parent_[h] = stack.back();
        }
        chain_.push_back(h << 1);
        stack.push_back(h);
      }
      while (!stack.empty()) {
        chain_.push_back(stack.back() << 1 | 1u);
        stack.pop_back();
      }
      close_thread();
    }
    thread_begin_.push_back(static_cast<Index>(chain_.size()));
    std::vector<Ev>().swap(order);
    out_.graph.threads = static_cast<int64_t>(tids_.size());
    worker_.assign(tids_.size(), 0);
    for (std::size_t k = 0; k < tids_.size(); ++k)
      worker_[k] = std::binary_search(in_.worker_tids.begin(), in_.worker_tids.end(), tids_[k]);

    // The runtime calls' start nodes (for launch edges), the top-level events' end nodes (for
    // joins), and the cudaEventRecord calls per thread by start.
    call_start_.assign(n_calls_, UINT32_MAX);
    records_.assign(tids_.size(), {});
    for (std::size_t k = 0; k + 1 < thread_begin_.size(); ++k) {
      for (Index p = thread_begin_[k]; p < thread_begin_[k + 1]; ++p) {
        const Ev h = ev_at(p);
        if (end_at(p)) {
          if (top_level_[h]) tops_[k].push_back({h, static_cast<uint32_t>(p)});
        } else if (kind(h) == CpHostKind::kRuntime) {
          call_start_[h - n_ops_ - n_ranges_] = static_cast<uint32_t>(p);
          if (cls(h) == CallClass::kRecord) records_[k].push_back(h);
        }
      }
    }
    for (std::size_t i = 0; i < n_calls_; ++i) {
      if (call_start_[i] != UINT32_MAX)
        calls_by_corr_.emplace_back((*in_.calls)[i].correlation,
                                    static_cast<Ev>(n_ops_ + n_ranges_ + i));
    }
    auto by_corr = [&](const std::pair<int64_t, Ev>& a, const std::pair<int64_t, Ev>& b) {
      if (a.first != b.first) return a.first < b.first;
      if (start(a.second) != start(b.second)) return start(a.second) < start(b.second);
      return a.second < b.second;
    };
    // The reader hands them over sorted so.
    if (!std::is_sorted(calls_by_corr_.begin(), calls_by_corr_.end(), by_corr))
      std::sort(calls_by_corr_.begin(), calls_by_corr_.end(), by_corr);
  }

  // Each event's phase, as the kernel table has a launch's: optimizer inside an Optimizer.* range
  // on its thread, backward inside an evaluate_function range or on a worker thread, else
  // forward (ranges merged per thread, both ends inclusive). One sweep per thread: `order` holds
  // each thread's events by start.
  void set_phases(const std::vector<Ev>& order, const std::vector<std::size_t>& begin) {
    phase_.assign(n_host(), CpPhase::kForward);
    std::vector<CpRange> ranges = in_.phase_ranges;
    std::sort(ranges.begin(), ranges.end(), [](const CpRange& a, const CpRange& b) {
      if (a.tid != b.tid) return a.tid < b.tid;
      if (a.optimizer != b.optimizer) return a.optimizer < b.optimizer;
      return a.start_ns < b.start_ns;
    });
    std::vector<std::pair<int64_t, int64_t>> merged[2];  // backward, optimizer
    std::size_t at = 0;
    for (std::size_t k = 0; k < tids_.size(); ++k) {
      const bool worker =
          std::binary_search(in_.worker_tids.begin(), in_.worker_tids.end(), tids_[k]);
      while (at < ranges.size() && ranges[at].tid < tids_[k]) ++at;
      for (auto& m : merged) m.clear();
      for (; at < ranges.size() && ranges[at].tid == tids_[k]; ++at) {
        auto& m = merged[ranges[at].optimizer ? 1 : 0];
        if (!m.empty() && ranges[at].start_ns <= m.back().second) {
          m.back().second = std::max(m.back().second, ranges[at].end_ns);
        } else {
          m.emplace_back(ranges[at].start_ns, ranges[at].end_ns);
        }
      }
      std::size_t cur[2] = {0, 0};
      for (std::size_t i = begin[k]; i < begin[k + 1]; ++i) {
        const int64_t t = start(order[i]);
        bool inside[2] = {false, false};
        for (int j = 0; j < 2; ++j) {
          auto& m = merged[j];
          while (cur[j] < m.size() && m[cur[j]].second < t) ++cur[j];
          inside[j] = cur[j] < m.size() && m[cur[j]].first <= t;
        }
        phase_[order[i]] = inside[1]             ? CpPhase::kOptimizer
                           : inside[0] || worker ? CpPhase::kBackward
                                                 : CpPhase::kForward;
      }
    }
  }

  // The emitted order is the nesting's; partly overlapping events (a broken trace) can put an
  // end before an earlier start: time order wins, the nesting order breaks ties.
  void close_thread() {
    const auto b = static_cast<std::size_t>(thread_begin_.back());
    bool sorted = true;
    for (std::size_t p = b + 1; p < chain_.size() && sorted; ++p)
      sorted = t_at(static_cast<Index>(p - 1)) <= t_at(static_cast<Index>(p));
    if (sorted) return;
    std::stable_sort(chain_.begin() + static_cast<std::ptrdiff_t>(b), chain_.end(),
                     [&](uint32_t x, uint32_t y) {
                       return ((x & 1) ? end(x >> 1) : start(x >> 1)) <
                              ((y & 1) ? end(y >> 1) : start(y >> 1));
                     });
  }

  static void seal(LaunchOrder& o, std::vector<std::pair<int64_t, uint32_t>>& v,
                   const std::vector<StatRow>& rows) {
    std::sort(v.begin(), v.end());
    o.launch_ns.reserve(v.size());
    o.row.reserve(v.size());
    o.last_ending.reserve(v.size());
    uint32_t best = 0;
    for (std::size_t k = 0; k < v.size(); ++k) {
      o.launch_ns.push_back(v[k].first);
      o.row.push_back(v[k].second);
      if (k == 0 || rows[v[k].second].end_ns > rows[best].end_ns) best = v[k].second;
      o.last_ending.push_back(best);
    }
  }

  void build_streams() {
    out_.graph.device_rows = static_cast<int64_t>(n_rows_);
    stream_prev_.assign(n_rows_, UINT32_MAX);
    std::vector<uint32_t> order(n_rows_);
    std::iota(order.begin(), order.end(), uint32_t{0});
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return before(a, b); });
    std::vector<std::pair<int64_t, uint32_t>> launched;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const StatRow& r = row(order[k]);
      const auto key = std::make_pair(int64_t{r.device}, r.stream);
      if (stream_keys_.empty() || stream_keys_.back() != key) {
        if (!stream_keys_.empty()) seal(by_stream_.emplace_back(), launched, *in_.rows);
        launched.clear();
        stream_keys_.push_back(key);
      } else {
        stream_prev_[order[k]] = order[k - 1];
      }
      const Ev l = launch_of(order[k]);
      if (l != kNoEvent) {
        launched.emplace_back(start(l), order[k]);
        ++out_.graph.rows_with_launch;
      }
    }
    if (!stream_keys_.empty()) seal(by_stream_.emplace_back(), launched, *in_.rows);
    out_.graph.streams = static_cast<int64_t>(stream_keys_.size());
  }
  // Stream order: by device, stream, start, end, then input order.
  bool before(Index a, Index b) const {
    const StatRow &x = row(a), &y = row(b);
    if (x.device != y.device) return x.device < y.device;
    if (x.stream != y.stream) return x.stream < y.stream;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (x.end_ns != y.end_ns) return x.end_ns < y.end_ns;
    return a < b;
  }

  // Of the rows in `o` launched strictly before t: the one ending last (kNone: none).
  static Index last_ending_before(const LaunchOrder& o, int64_t t) {
    const auto k =
        std::lower_bound(o.launch_ns.begin(), o.launch_ns.end(), t) - o.launch_ns.begin();
    return k == 0 ? kNone : Index{o.last_ending[static_cast<std::size_t>(k - 1)]};
  }
  // Of the rows in `o` launched strictly before t: the one launched last.
  static Index launched_last_before(const LaunchOrder& o, int64_t t) {
    const auto k =
        std::lower_bound(o.launch_ns.begin(), o.launch_ns.end(), t) - o.launch_ns.begin();
    return k == 0 ? kNone : Index{o.row[static_cast<std::size_t>(k - 1)]};
  }
  const LaunchOrder* stream_order(int64_t device, int64_t stream) const {
    const auto key = std::make_pair(device, stream);
    auto it = std::lower_bound(stream_keys_.begin(), stream_keys_.end(), key);
    return it != stream_keys_.end() && *it == key
               ? &by_stream_[static_cast<std::size_t>(it - stream_keys_.begin())]
               : nullptr;
  }
  // Of the rows on a device launched strictly before t: the one ending last, over its streams.
  Index device_last_ending_before(int64_t device, int64_t t) const {
    Index best = kNone;
    auto it = std::lower_bound(stream_keys_.begin(), stream_keys_.end(),
                               std::make_pair(device, INT64_MIN));
    for (; it != stream_keys_.end() && it->first == device; ++it) {
      const Index r =
          last_ending_before(by_stream_[static_cast<std::size_t>(it - stream_keys_.begin())], t);
      if (r != kNone && (best == kNone || row(r).end_ns > row(best).end_ns)) best = r;
    }
    return best;
  }

  Ev call_of(int64_t correlation) const {
    auto it = std::lower_bound(
        calls_by_corr_.begin(), calls_by_corr_.end(), correlation,
        [](const std::pair<int64_t, Ev>& a, int64_t c) { return a.first < c; });
    return it != calls_by_corr_.end() && it->first == correlation ? it->second : kNoEvent;
  }

  // The row launched last from call h's thread before h started (the thread's current stream).
  Index last_launch_of_thread(Ev h) {
    if (!by_thread_built_) {  // only blocking calls without sync events and event waits ask
      by_thread_built_ = true;
      std::vector<std::vector<std::pair<int64_t, uint32_t>>> per(tids_.size());
      for (uint32_t r = 0; r < n_rows_; ++r) {
        const Ev l = launch_of(r);
        if (l == kNoEvent) continue;
        per[static_cast<std::size_t>(thread_of(tid(l)))].emplace_back(start(l), r);
      }
      by_thread_.resize(tids_.size());
      for (std::size_t k = 0; k < per.size(); ++k) seal(by_thread_[k], per[k], *in_.rows);
    }
    const Index k = thread_of(tid(h));
    if (k == kNone) return kNone;
    return launched_last_before(by_thread_[static_cast<std::size_t>(k)], start(h));
  }

  // The cudaEventRecord an event wait or sync call c waits on: by the correlation the sync event
  // names, else the last one its thread called before it.
  Ev record_for(int64_t record_correlation, Ev c) {
    if (record_correlation > 0) return call_of(record_correlation);
    const std::vector<Ev>& v = records_[static_cast<std::size_t>(thread_of(tid(c)))];
    auto it = std::lower_bound(v.begin(), v.end(), start(c),
                               [&](Ev h, int64_t t) { return start(h) < t; });
    if (it == v.begin()) return kNoEvent;
    ++out_.graph.record_by_thread;
    return *(it - 1);
  }

  // The row a recorded event completes with: of the rows on the recorded stream launched before
  // the record call, the one ending last. The stream is the sync event's, else the stream of the
  // row the recording thread launched last before the call.
  Index recorded_row(Ev record, int64_t device, int64_t wait_stream) {
    if (record == kNoEvent) return kNone;
    if (wait_stream < 0) {
      const Index last = last_launch_of_thread(record);
      if (last == kNone) return kNone;
      device = row(last).device;
      wait_stream = row(last).stream;
    }
    const LaunchOrder* o = stream_order(device, wait_stream);
    return o ? last_ending_before(*o, start(record)) : kNone;
  }

  void add_sync(Ev call, Index r) {
    sync_rows_.emplace_back(call, static_cast<uint32_t>(r));
    ++out_.graph.sync_edges;
  }
  Index sync_row(Ev c) const {
    auto it = std::lower_bound(sync_rows_.begin(), sync_rows_.end(), c,
                               [](const std::pair<Ev, uint32_t>& a, Ev x) { return a.first < x; });
    return it != sync_rows_.end() && it->first == c ? Index{it->second} : kNone;
  }
  Index wait_source(Index r) const {
    auto it = std::lower_bound(
        wait_src_.begin(), wait_src_.end(), static_cast<uint32_t>(r),
        [](const std::pair<uint32_t, uint32_t>& a, uint32_t x) { return a.first < x; });
    return it != wait_src_.end() && it->first == r ? Index{it->second} : kNone;
  }
  // One source per key: of several, the row ending last.
  template <class Key>
  void keep_latest(std::vector<std::pair<Key, uint32_t>>& v) const {
    std::sort(v.begin(), v.end(),
              [&](const std::pair<Key, uint32_t>& a, const std::pair<Key, uint32_t>& b) {
                if (a.first != b.first) return a.first < b.first;
                if (row(a.second).end_ns != row(b.second).end_ns)
                  return row(a.second).end_ns > row(b.second).end_ns;
                return a.second < b.second;
              });
    v.erase(std::unique(v.begin(), v.end(),
                        [](const std::pair<Key, uint32_t>& a, const std::pair<Key, uint32_t>& b) {
                          return a.first == b.first;
                        }),
            v.end());
  }

  void resolve_syncs() {
    PathGraph& g = out_.graph;
    std::vector<Ev> with_event;  // calls a cuda_sync event names
    for (const SyncEvent& s : in_.syncs) {
      ++g.syncs;
      switch (s.kind) {
        case SyncKind::kStream: ++g.stream_syncs; break;
        case SyncKind::kContext: ++g.context_syncs; break;
        case SyncKind::kEvent: ++g.event_syncs; break;
        case SyncKind::kStreamWaitEvent: ++g.stream_wait_events; break;
        case SyncKind::kOther: ++g.other_syncs; continue;
      }
      const Ev c = call_of(s.correlation);
      if (c == kNoEvent) {
        ++g.unresolved_syncs;
        continue;
      }
      with_event.push_back(c);
      const int64_t t = start(c);
      Index r = kNone;
      switch (s.kind) {
        case SyncKind::kStream: {
          const LaunchOrder* o = stream_order(s.device, s.stream);
          r = o ? last_ending_before(*o, t) : kNone;
          break;
        }
        case SyncKind::kContext:
          r = device_last_ending_before(s.device, t);
          break;
        case SyncKind::kEvent:
          // cudaEventQuery is written as an Event Sync too, but it returns at once.
          if (cls(c) != CallClass::kEventSync) {
            ++g.event_queries;
            continue;
          }
          r = recorded_row(record_for(s.wait_record_correlation, c), s.device, s.wait_stream);
          break;
        case SyncKind::kStreamWaitEvent: {
          const Index src =
              recorded_row(record_for(s.wait_record_correlation, c), s.device, s.wait_stream);
          const LaunchOrder* o = stream_order(s.device, s.stream);
          Index target = kNone;
          if (o != nullptr) {  // the first row the waiting stream was given after the call
            const auto k = std::lower_bound(o->launch_ns.begin(), o->launch_ns.end(), t) -
                           o->launch_ns.begin();
            if (static_cast<std::size_t>(k) < o->row.size())
              target = o->row[static_cast<std::size_t>(k)];
          }
          if (src == kNone || target == kNone) {
            ++g.unresolved_syncs;
            continue;
          }
          wait_src_.emplace_back(static_cast<uint32_t>(target), static_cast<uint32_t>(src));
          ++g.wait_edges;
          continue;
        }
        case SyncKind::kOther:
          break;
      }
      if (r == kNone) {
        ++g.unresolved_syncs;
        continue;
      }
      add_sync(c, r);
    }
    std::sort(with_event.begin(), with_event.end());
    // Blocking calls the trace has no cuda_sync event for: what they wait on, from their names.
    for (const auto& entry : calls_by_corr_) {
      const Ev c = entry.second;
      const CallClass k = cls(c);
      if (k == CallClass::kOther || k == CallClass::kRecord ||
          std::binary_search(with_event.begin(), with_event.end(), c))
        continue;
      Index r = kNone;
      if (k == CallClass::kEventSync) {
        r = recorded_row(record_for(0, c), 0, -1);
      } else {
        const Index last = last_launch_of_thread(c);
        if (last != kNone && k == CallClass::kContextSync) {
          r = device_last_ending_before(row(last).device, start(c));
        } else if (last != kNone) {
          const LaunchOrder* o = stream_order(row(last).device, row(last).stream);
          r = o ? last_ending_before(*o, start(c)) : kNone;
        }
      }
      if (r == kNone) {
        ++g.unresolved_syncs;
        continue;
      }
      ++g.inferred_syncs;
      add_sync(c, r);
    }
    keep_latest(sync_rows_);
    keep_latest(wait_src_);
  }

  bool check_available() {
    const int64_t w0 = in_.window_start_ns, w1 = in_.window_end_ns;
    if (w1 <= w0) {
      out_.why_not = "the selection's window is empty";
      return false;
    }
    if (n_rows_ == 0) {
      out_.why_not = "no device rows in the selection";
      return false;
    }
    std::size_t inside = 0;
    for (std::size_t r = 0; r < n_rows_; ++r) inside += row(r).end_ns > w0 && row(r).start_ns < w1;
    if (inside == 0) {
      out_.why_not =
          fmt::format("none of the selection's {} device row(s) runs inside the window", n_rows_);
      return false;
    }
    if (out_.graph.rows_with_launch == 0) {
      out_.why_not =
          "no device row has its launch call in the trace (no cuda_runtime / cuda_driver event "
          "with a usable duration carries its correlation): nothing links the host to the device";
      return false;
    }
    out_.available = true;
    return true;
  }

  // ---- the walk ----
  // A node: a chain position (host) or 2 * row + is_end past the chain (device).
  Index host_nodes() const { return static_cast<Index>(chain_.size()); }
  Index row_node(Index r, bool end_node) const { return host_nodes() + 2 * r + (end_node ? 1 : 0); }
  int64_t time_of(Index node) const {
    if (node < host_nodes()) return t_at(node);
    const Index r = (node - host_nodes()) / 2;
    return (node - host_nodes()) % 2 ? row(r).end_ns : row(r).start_ns;
  }

  struct Pred {
    Index node = kNone;
    int64_t t = 0;
    Step step = Step::kThread;
  };

  // Replaces `best` when the candidate is later (ties keep the earlier-listed candidate).
  static void consider(Pred& best, Index node, int64_t t, Step step) {
    if (best.node == kNone || t > best.t) best = {node, t, step};
  }

  Pred host_predecessor(Index p) {
    Pred best;
    const std::size_t k = thread_at(p);
    const Ev h = ev_at(p);
    const int64_t t = t_at(p);
    const bool first = p == thread_begin_[k];
    if (!first) consider(best, p - 1, t_at(p - 1), Step::kThread);
    // Sync: the blocking call's end waits for the row it synchronised with.
    if (end_at(p) && kind(h) == CpHostKind::kRuntime) {
      const Index r = sync_row(h);
      if (r != kNone) {
        if (row(r).end_ns < t) {
          consider(best, row_node(r, true), row(r).end_ns, Step::kSync);
        } else {
          ++out_.graph.skewed_edges;
        }
      }
    }
    if (worker_[k]) {
      // Fork: a worker's top-level event starts after the last node of a thread that hands it
      // work (the one that called backward()).
      if (end_at(p) || !top_level_[h]) return best;
      for (std::size_t a = 0; a < tops_.size(); ++a) {
        if (worker_[a]) continue;
        const Index q = first_at(a, t, false);  // the first node at or after h's start
        if (q == thread_begin_[a]) continue;
        consider(best, q - 1, t_at(q - 1), Step::kFork);
      }
      return best;
    }
    // Join: the last top-level event of a worker that ran inside this thread's gap before the
    // node (from the previous node on, ending before the node).
    const int64_t gap = first ? INT64_MIN : t_at(p - 1);
    for (std::size_t b = 0; b < tops_.size(); ++b) {
      if (!worker_[b]) continue;
      // The walk's times never increase: each worker's cursor only moves back.
      const std::vector<Top>& v = tops_[b];
      std::size_t& c = join_cursor_[b];
      while (c > 0 && end(v[c - 1].event) >= t) --c;
      if (c == 0 || start(v[c - 1].event) < gap) continue;
      consider(best, v[c - 1].end_pos, end(v[c - 1].event), Step::kJoin);
    }
    return best;
  }

  Pred row_predecessor(Index r, bool end_node) {
    Pred best;
    const StatRow& x = row(r);
    if (end_node) {
      best = {row_node(r, false), x.start_ns, Step::kRow};
      return best;
    }
    const uint32_t prev = stream_prev_[static_cast<std::size_t>(r)];
    if (prev != UINT32_MAX) {
      if (row(prev).end_ns <= x.start_ns) {
        consider(best, row_node(prev, true), row(prev).end_ns, Step::kStream);
      } else {
        ++out_.graph.skewed_edges;  // rows that overlap on one stream
      }
    }
    const Index src = wait_source(r);
    if (src != kNone) {
      if (row(src).end_ns < x.start_ns) {
        consider(best, row_node(src, true), row(src).end_ns, Step::kWait);
      } else {
        ++out_.graph.skewed_edges;
      }
    }
    const Ev l = launch_of(r);
    if (l != kNoEvent) {
      if (start(l) < x.start_ns) {
        consider(best, call_start_[l - n_ops_ - n_ranges_], start(l), Step::kLaunch);
      } else {
        ++out_.graph.skewed_edges;  // the row starts before its launch call (clock skew)
      }
    }
    return best;
  }

  // The walk's first node: the latest node at or before the window's end (a host node before a
  // device node, a lower thread first, and a row earlier in stream order first, among equals).
  Index last_node() const {
    const int64_t w1 = in_.window_end_ns;
    Index best = kNone;
    int64_t bt = 0;
    for (std::size_t k = 0; k + 1 < thread_begin_.size(); ++k) {
      const Index q = first_at(k, w1, true);  // the first node after the window's end
      if (q == thread_begin_[k]) continue;
      if (best == kNone || t_at(q - 1) > bt) {
        best = q - 1;
        bt = t_at(q - 1);
      }
    }
    for (Index r = 0; r < static_cast<Index>(n_rows_); ++r) {
      const StatRow& x = row(r);
      const bool end_node = x.end_ns <= w1;
      if (!end_node && x.start_ns > w1) continue;
      const int64_t t = end_node ? x.end_ns : x.start_ns;
      if (best == kNone || t > bt ||
          (t == bt && best >= host_nodes() && before(r, (best - host_nodes()) / 2))) {
        best = row_node(r, end_node);
        bt = t;
      }
    }
    return best;
  }

  // Per segment: what it is, and the event it belongs to.
  enum class Kind : uint8_t { kHostEvent, kUntraced, kDevice, kLaunch, kQueue, kWait, kSync };
  struct Owner {
    bool is_row = false;
    Index index = kNone;
  };

  CpPhase phase_of(const Owner& o) const {
    return o.is_row ? row_phase(o.index) : phase_[static_cast<std::size_t>(o.index)];
  }

  static void add_kind(PathShares& s, Kind kind, int64_t len, bool runtime, bool copy) {
    switch (kind) {
      case Kind::kHostEvent:
        s.host_event_ns += len;
        if (runtime) s.runtime_ns += len;
        break;
      case Kind::kUntraced: s.host_untraced_ns += len; break;
      case Kind::kDevice:
        s.device_ns += len;
        if (copy) s.copy_ns += len;
        break;
      case Kind::kLaunch: s.launch_delay_ns += len; break;
      case Kind::kQueue: s.queue_ns += len; break;
      case Kind::kWait: s.wait_ns += len; break;
      case Kind::kSync: s.sync_ns += len; break;
    }
  }

  std::vector<CpStep> steps_;
  bool disjoint_steps_ = true;
  std::vector<PathShares> phase_shares_ = std::vector<PathShares>(4);
  std::vector<bool> host_seen_, row_seen_;
  std::vector<int64_t> op_ns_[3], op_events_[3];  // per host name, by kind
  std::vector<int64_t> row_name_ns_, row_name_rows_;

  void account(int64_t lo, int64_t hi, Kind kind_of, const Owner& o) {
    const int64_t len = hi - lo;
    if (len < 0) return;
    const bool runtime = !o.is_row && kind(static_cast<Ev>(o.index)) == CpHostKind::kRuntime;
    const bool copy = o.is_row && row(o.index).kind != ActivityKind::kKernel;
    add_kind(out_.total, kind_of, len, runtime, copy);
    add_kind(phase_shares_[static_cast<std::size_t>(phase_of(o))], kind_of, len, runtime, copy);
    // The steps holding [lo, hi] (ascending start; the overlap with each).
    int64_t covered = 0;
    auto it = std::upper_bound(steps_.begin(), steps_.end(), hi,
                               [](int64_t t, const CpStep& s) { return t < s.start_ns; });
    while (it != steps_.begin()) {
      --it;
      // Steps that do not overlap (Kineto's never do): the earlier ones end earlier still.
      if (disjoint_steps_ && it->end_ns <= lo) break;
      const int64_t a = std::max(lo, it->start_ns), b = std::min(hi, it->end_ns);
      if (b > a) {
        add_kind(out_.steps[static_cast<std::size_t>(it - steps_.begin())].shares, kind_of, b - a,
                 runtime, copy);
        covered += b - a;
      }
    }
    add_kind(out_.outside_steps, kind_of, len - std::min(covered, len), runtime, copy);
    if (len == 0) return;
    if (kind_of == Kind::kHostEvent) {
      const Ev h = static_cast<Ev>(o.index);
      const auto kk = static_cast<std::size_t>(kind(h));
      if (name(h) < op_ns_[kk].size()) {
        op_ns_[kk][name(h)] += len;
        if (!host_seen_[h]) {
          host_seen_[h] = true;
          ++op_events_[kk][name(h)];
        }
      }
    } else if (kind_of == Kind::kDevice && row(o.index).name_id < row_name_ns_.size()) {
      const StatRow& r = row(o.index);
      row_name_ns_[r.name_id] += len;
      if (!row_seen_[static_cast<std::size_t>(o.index)]) {
        row_seen_[static_cast<std::size_t>(o.index)] = true;
        ++row_name_rows_[r.name_id];
      }
    }
  }

  void walk() {
    steps_ = in_.step_ranges;
    std::sort(steps_.begin(), steps_.end(), [](const CpStep& a, const CpStep& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.step < b.step;
    });
    for (std::size_t i = 1; i < steps_.size(); ++i)
      disjoint_steps_ = disjoint_steps_ && steps_[i - 1].end_ns <= steps_[i].start_ns;
    for (const CpStep& s : steps_) out_.steps.push_back({s.step, s.start_ns, s.end_ns, {}});
    host_seen_.assign(n_host(), false);
    row_seen_.assign(n_rows_, false);
    const std::size_t host_names = in_.host_names ? in_.host_names->size() : 0;
    for (int k = 0; k < 3; ++k) {
      op_ns_[k].assign(host_names, 0);
      op_events_[k].assign(host_names, 0);
    }
    const std::size_t row_names = in_.row_names ? in_.row_names->size() : 0;
    row_name_ns_.assign(row_names, 0);
    row_name_rows_.assign(row_names, 0);
    join_cursor_.resize(tops_.size());
    for (std::size_t k = 0; k < tops_.size(); ++k) join_cursor_[k] = tops_[k].size();

    const int64_t w0 = in_.window_start_ns, w1 = in_.window_end_ns;
    Index node = last_node();
    out_.last_node_ns = time_of(node);
    out_.path_nodes = 1;
    // Every edge goes back in time or along a chain, so the walk ends; the bound is a guard.
    const Index limit = host_nodes() + 2 * static_cast<Index>(n_rows_) + 1;
    for (Index steps = 0; steps < limit; ++steps) {
      const int64_t t = time_of(node);
      if (t <= w0) break;
      const bool is_host = node < host_nodes();
      const Pred p = is_host ? host_predecessor(node)
                             : row_predecessor((node - host_nodes()) / 2,
                                               (node - host_nodes()) % 2 == 1);
      if (p.node == kNone) break;
      const int64_t lo = std::max(p.t, w0), hi = std::min(t, w1);
      Kind kind_of = Kind::kUntraced;
      Owner o;
      switch (p.step) {
        case Step::kThread:
        case Step::kJoin: {
          // A join's wait is this thread's gap: held as the gap is, by the event open across it.
          const Ev by = held(node);
          ++(p.step == Step::kThread ? out_.edges.thread : out_.edges.join);
          o = {false, Index{by != kNoEvent ? by : ev_at(node)}};
          kind_of = by != kNoEvent ? Kind::kHostEvent : Kind::kUntraced;
          break;
        }
        case Step::kFork:
          ++out_.edges.fork;
          o = {false, Index{ev_at(node)}};
          kind_of = Kind::kUntraced;
          break;
        case Step::kSync:
          ++out_.edges.sync;
          o = {false, Index{ev_at(node)}};
          kind_of = Kind::kSync;
          break;
        case Step::kRow:
          ++out_.edges.row;
          o = {true, (node - host_nodes()) / 2};
          kind_of = Kind::kDevice;
          break;
        case Step::kLaunch:
          ++out_.edges.launch;
          o = {true, (node - host_nodes()) / 2};
          kind_of = Kind::kLaunch;
          break;
        case Step::kStream:
          ++out_.edges.stream;
          o = {true, (node - host_nodes()) / 2};
          kind_of = Kind::kQueue;
          break;
        case Step::kWait:
          ++out_.edges.stream_wait;
          o = {true, (node - host_nodes()) / 2};
          kind_of = Kind::kWait;
          break;
      }
      account(lo, hi, kind_of, o);
      node = p.node;
      ++out_.path_nodes;
    }
    out_.first_node_ns = time_of(node);
    out_.length_ns = out_.total.total_ns();
    out_.outside_path_ns = (w1 - w0) - out_.length_ns;
  }

  void finish_tables() {
    static const char* const kPhase[] = {"unknown", "forward", "backward", "optimizer"};
    for (int ph : {1, 2, 3, 0})
      out_.phases.push_back({kPhase[ph], phase_shares_[static_cast<std::size_t>(ph)]});
    static const char* const kKind[] = {"op", "annotation", "runtime"};
    for (int k = 0; k < 3; ++k) {
      for (std::size_t id = 0; id < op_ns_[k].size(); ++id) {
        if (op_ns_[k][id] == 0) continue;
        out_.host_ops.push_back(
            {(*in_.host_names)[id], kKind[k], op_ns_[k][id], op_events_[k][id]});
      }
    }
    std::sort(out_.host_ops.begin(), out_.host_ops.end(),
              [](const PathHostOp& a, const PathHostOp& b) {
                if (a.ns != b.ns) return a.ns > b.ns;
                if (a.name != b.name) return a.name < b.name;
                return a.kind < b.kind;
              });
    // Kernels by family; memcpy / memset rows by their name as written.
    std::vector<ActivityKind> kind_of(row_name_ns_.size(), ActivityKind::kKernel);
    for (std::size_t r = 0; r < n_rows_; ++r)
      if (row(r).name_id < kind_of.size()) kind_of[row(r).name_id] = row(r).kind;
    std::vector<PathKernel> fams;
    for (std::size_t id = 0; id < row_name_ns_.size(); ++id) {
      if (row_name_ns_[id] == 0) continue;
      const std::string d = demangle((*in_.row_names)[id]);
      const bool kernel = kind_of[id] == ActivityKind::kKernel;
      fams.push_back({kernel ? kernel_family(d) : d, categorize(kind_of[id], d), row_name_ns_[id],
                      row_name_rows_[id]});
    }
    std::sort(fams.begin(), fams.end(),
              [](const PathKernel& a, const PathKernel& b) { return a.family < b.family; });
    for (const PathKernel& f : fams) {
      if (!out_.kernels.empty() && out_.kernels.back().family == f.family) {
        out_.kernels.back().ns += f.ns;
        out_.kernels.back().rows += f.rows;
      } else {
        out_.kernels.push_back(f);
      }
    }
    std::sort(out_.kernels.begin(), out_.kernels.end(),
              [](const PathKernel& a, const PathKernel& b) {
                return a.ns != b.ns ? a.ns > b.ns : a.family < b.family;
              });
  }
};

}  // namespace

CriticalPath analyze_critical_path(const CriticalPathInput& in) {
  CriticalPath p;
  Analysis(in, p).run();
  return p;
}

}  // namespace detail

}  // namespace tprobe::core
