// Streaming reader of torch.profiler / Kineto Chrome traces into core::KernelRecord and the table.
#include "tprobe/core/trace/read/trace_reader.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <map>
#include <set>

#include "base/string_util.hpp"
#include "base/decoded_file.hpp"
#include "base/out_of_memory.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "trace/read/detail/json_tokenizer.hpp"
#include "trace/stats/detail/critical_path_internal.hpp"
#include "trace/stats/detail/kernel_sequences_internal.hpp"
#include "trace/record/detail/trace_events_internal.hpp"
#include "trace/stats/detail/trace_memory_internal.hpp"
#include "trace/attribute/detail/trace_parts_internal.hpp"
#include "trace/read/detail/trace_parse_internal.hpp"
#include "trace/read/detail/trace_reader_internal.hpp"
#include "trace/stats/detail/trace_stats_internal.hpp"
#include "trace/stats/detail/user_ranges_internal.hpp"

namespace tprobe::core {
namespace {

using detail::Annotation;
using detail::DeviceRow;
using detail::HostOp;
using detail::HostRange;
using detail::JsonTokenizer;
using detail::RangeKind;
using detail::saturating_add;
using detail::StepSeen;
using Launch = detail::RuntimeCall;

// ---------------------------------------------------------------------------------------------
// Bytes in: a gzip or plain file (base/decoded_file.hpp), or a buffer
// (inflated here when it starts with the gzip magic).
class ByteSource : public detail::JsonByteSource {
 public:
  // read(): the next chunk into buf; 0 at the end. Throws tprobe::Error on a read or inflate
  // failure.
  virtual bool gzip() const = 0;
};

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      fail("cannot open trace '{}': {}", path, std::strerror(errno));
    if (S_ISDIR(st.st_mode))
      fail("trace '{}' is a directory (give the directory alone for per-rank traces)", path);
    const int fd = open_input(path);  // a FIFO does not hold a signal off (input_file.hpp)
    if (fd < 0) fail("cannot open trace '{}': {}", path, std::strerror(errno));
    // Plain or gzip by content; bytes after the last gzip member are an error (padding's reader).
    file_ = std::make_unique<detail::DecodedFile>(fd, path);
  }

  std::size_t read(char* buf, std::size_t size) override {
    const std::size_t n = file_->read(buf, size, fmt::format("after {} bytes", total_));
    total_ += static_cast<int64_t>(n);
    return n;
  }
  bool gzip() const override { return file_->gzip(); }

 private:
  std::string path_;
  std::unique_ptr<detail::DecodedFile> file_;
  int64_t total_ = 0;
};

class BufferSource : public ByteSource {
 public:
  BufferSource(std::string_view bytes, std::string label)
      : bytes_(bytes), label_(std::move(label)) {
    gzip_ = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
            static_cast<unsigned char>(bytes[1]) == 0x8b;
    if (gzip_) {
      std::memset(&z_, 0, sizeof z_);
      if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) fail("{}: cannot start zlib", label_);
      z_open_ = true;
      feed();
    }
  }
  ~BufferSource() override {
    if (z_open_) inflateEnd(&z_);
  }
  BufferSource(const BufferSource&) = delete;
  BufferSource& operator=(const BufferSource&) = delete;

  std::size_t read(char* buf, std::size_t size) override {
    if (!gzip_) {
      const std::size_t n = std::min(size, bytes_.size() - pos_);
      std::memcpy(buf, bytes_.data() + pos_, n);
      pos_ += n;
      return n;
    }
    if (done_) return 0;
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(size);
    while (z_.avail_out == size) {
      if (z_.avail_in == 0 && fed_ < bytes_.size()) feed();
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        // Another member may follow (gzip allows it); anything else after the stream is an
        // error, as for files.
        const std::size_t at = fed_ - z_.avail_in;
        if (at < bytes_.size()) {
          if (static_cast<unsigned char>(bytes_[at]) != 0x1f) {
            fail("{}: {} bytes of data that are not gzip follow the gzip stream at byte {} (a "
                 "damaged or concatenated file?)",
                 label_, bytes_.size() - at, at);
          }
          inflateReset(&z_);
          continue;
        }
        done_ = true;
        break;
      }
      if ((rc == Z_BUF_ERROR || rc == Z_OK) && z_.avail_in == 0 && z_.avail_out == size) {
        fail(
            "{}: gzip data ends after {} compressed bytes before its end marker (truncated "
            "gzip file?)",
            label_, z_.total_in);
      }
      if (rc != Z_OK) {
        fail("{}: gzip data is corrupt after {} compressed bytes: {}", label_, z_.total_in,
             z_.msg ? z_.msg : "inflate failed");
      }
    }
    return size - z_.avail_out;
  }
  bool gzip() const override { return gzip_; }

 private:
  std::string_view bytes_;
  std::string label_;
  // zlib counts input in 32 bits: a large buffer is handed over 1 GiB at a time.
  void feed() {
    const std::size_t n = std::min<std::size_t>(bytes_.size() - fed_, std::size_t{1} << 30);
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes_.data() + fed_));
    z_.avail_in = static_cast<uInt>(n);
    fed_ += n;
  }

  std::size_t pos_ = 0;
  std::size_t fed_ = 0;
  bool gzip_ = false;
  bool z_open_ = false;
  bool done_ = false;
  z_stream z_;
};

// Merged ranges of one kind on one thread, for "is this launch inside a backward op?".
class RangeIndex {
 public:
  void add(int64_t tid, int64_t start, int64_t end) { by_tid_[tid].emplace_back(start, end); }
  void seal() {
    for (auto& [tid, v] : by_tid_) merge_intervals(v);
  }
  bool contains(int64_t tid, int64_t ts) const {
    auto it = by_tid_.find(tid);
    if (it == by_tid_.end()) return false;
    const auto& v = it->second;
    auto r = std::upper_bound(v.begin(), v.end(), std::make_pair(ts, INT64_MAX));
    if (r == v.begin()) return false;
    --r;
    return ts >= r->first && ts <= r->second;
  }
  std::vector<int64_t> tids() const {
    std::vector<int64_t> out;
    for (const auto& [tid, v] : by_tid_) out.push_back(tid);
    return out;
  }

 private:
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_tid_;
};

// The bytes a source has handed the tokenizer, for the out-of-memory message.
class CountingSource : public detail::JsonByteSource {
 public:
  explicit CountingSource(ByteSource& in) : in_(in) {}
  std::size_t read(char* buf, std::size_t size) override {
    const std::size_t n = in_.read(buf, size);
    delivered_ += n;
    return n;
  }
  uint64_t delivered() const { return delivered_; }

 private:
  ByteSource& in_;
  uint64_t delivered_ = 0;
};

// Trace kinds that hold no device rows or no traceEvents at all, each refused naming what it is.
void refuse_traces_without_a_table(const detail::ParsedEvents& ev, const TraceSummary& s,
                                   const std::string& label) {
  if (!ev.saw_events) {
    if (ev.has_top_key("nodes")) {
      fail("{}: a PyTorch execution trace (ExecutionTraceObserver's graph of 'nodes'), not a "
           "Chrome trace: it holds no device rows; record the step with torch.profiler (Kineto)",
           label);
    }
    fail("{}: no 'traceEvents' array: not a Chrome trace written by torch.profiler / Kineto",
         label);
  }
  // Trace kinds that hold events but no device rows, each named for what it is.
  if (ev.rows.empty()) {
    const auto count = [&](const char* cat) {
      const auto it = s.categories.find(cat);
      return it == s.categories.end() ? int64_t{0} : it->second;
    };
    if (const int64_t n = count("cuda_profiler_range"); n > 0) {
      fail("{}: a CUPTI range-profiler trace ({} cuda_profiler_range events: counter metrics per "
           "range, no kernel rows); record with ProfilerActivity.CUDA and without "
           "profiler_metrics for a kernel table",
           label, n);
    }
    if (count("kernel") == 0 && count("cuda_runtime") == 0 && count("cuda_driver") == 0 &&
        count("cpu_op") > 0) {
      fail("{}: a CPU-only trace ({} cpu_op events, no CUDA runtime or device activity): record "
           "with ProfilerActivity.CUDA for a kernel table",
           label, count("cpu_op"));
    }
  }
}

// Every difference taken from the rows and launches (spans, launch delays, idle waits) must fit
// int64: their times must lie within 2^63 ns (292 years) of each other.
void check_time_span(const detail::ParsedEvents& ev, const std::string& label) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const DeviceRow& r : ev.rows) {
    lo = std::min(lo, r.start_ns);
    hi = std::max(hi, r.end_ns);
  }
  for (const Launch& l : ev.launches) {
    lo = std::min(lo, l.ts_ns);
    hi = std::max(hi, l.ts_ns);
  }
  int64_t width = 0;
  if (lo <= hi && __builtin_sub_overflow(hi, lo, &width)) {
    fail("{}: the device rows and launches span {} us .. {} us, more than int64 nanoseconds "
         "hold (292 years)",
         label, lo / 1000, hi / 1000);
  }
}

// ProfilerStep#N on the host (several threads may carry the same N: keep the widest).
std::vector<TraceStepRange> profiler_steps(const detail::ParsedEvents& ev) {
  std::map<int64_t, TraceStepRange> steps;
  for (const StepSeen& st : ev.steps) {
    auto it = steps.find(st.step);
    if (it == steps.end()) {
      steps[st.step] = TraceStepRange{st.step, st.start_ns, st.end_ns};
    } else {
      it->second.start_ns = std::min(it->second.start_ns, st.start_ns);
      it->second.end_ns = std::max(it->second.end_ns, st.end_ns);
    }
  }
  std::vector<TraceStepRange> out;
  for (const auto& [n, r] : steps) out.push_back(r);
  return out;
}

// Frees each vector's storage (clear() keeps its capacity).
template <typename... V>
void release(V&... v) {
  (V().swap(v), ...);
}

// Repeated kernel sequences over the selected rows (kernel_sequences.hpp).
KernelSequences kernel_sequences_of(const detail::ParsedEvents& ev,
                                    const std::vector<std::size_t>& selected_rows,
                                    const std::vector<int64_t>& row_launch) {
  std::vector<detail::SequenceRow> seq;
  seq.reserve(selected_rows.size());
  for (const std::size_t i : selected_rows) {
    const DeviceRow& r = ev.rows[i];
    detail::SequenceRow q;
    q.start_ns = r.start_ns;
    q.end_ns = r.end_ns;
    q.device = r.device;
    q.stream = r.stream;
    q.name_id = r.name_id;
    q.kind = r.kind;
    if (row_launch[i] >= 0) {
      const Launch& l = ev.launches[static_cast<std::size_t>(row_launch[i])];
      q.launched = true;
      q.tid = l.tid;
      q.launch_dur_ns = l.dur_ns;
    }
    seq.push_back(q);
  }
  return detail::find_kernel_sequences(seq, ev.names);
}

// The selected rows by the user's own ranges (user_ranges.hpp).
UserRanges user_ranges_of(const detail::ParsedEvents& ev,
                          const std::vector<std::size_t>& selected_rows,
                          const std::vector<int64_t>& row_launch) {
  detail::UserRangesInput ur;
  std::vector<detail::DeviceRange> device_ranges;
  device_ranges.reserve(ev.annotations.size());
  for (const Annotation& a : ev.annotations) device_ranges.push_back(a.range);
  ur.ranges = &ev.user_ranges;
  ur.devices = &device_ranges;
  ur.names = &ev.op_names;
  ur.rows.reserve(selected_rows.size());
  for (const std::size_t i : selected_rows) {
    const DeviceRow& r = ev.rows[i];
    detail::RangeRow rr;
    rr.start_ns = r.start_ns;
    rr.end_ns = r.end_ns;
    rr.device = r.device;
    rr.stream = r.stream;
    rr.kind = r.kind;
    if (row_launch[i] >= 0) {
      const Launch& l = ev.launches[static_cast<std::size_t>(row_launch[i])];
      rr.launched = true;
      rr.tid = l.tid;
      rr.launch_ns = l.ts_ns;
    }
    ur.rows.push_back(rr);
  }
  return detail::analyze_user_ranges(ur);
}

// Size: one pipeline over the parse's arrays, read in place and freed as it goes (the peak
// heap per trace byte is bounded: tests/scale): steps, selection, table, then each analysis.
TraceResult read_counted(ByteSource& src, CountingSource& counted, const std::string& label,
                         const KernelTableOptions& options, const TracePartsOptions& parts_options,
                         std::size_t chunk) {
  TraceResult result;
  TraceSummary& s = result.summary;
  s.source = label;
  JsonTokenizer tz(counted, label, chunk);
  if (tz.empty_input()) fail("{}: the file is empty (no JSON)", label);
  detail::ParsedEvents ev = detail::parse_trace_events(tz, label, s, parts_options.attribute);
  s.gzip = src.gzip();
  s.uncompressed_bytes = tz.bytes_read();
  refuse_traces_without_a_table(ev, s, label);
  check_time_span(ev, label);
  s.steps = profiler_steps(ev);
  std::set<int64_t> step_tids;
  for (const StepSeen& st : ev.steps) step_tids.insert(st.tid);

  // Phase ranges, and the threads that only ever run backward work (autograd's device threads).
  RangeIndex backward, optimizer;
  for (const HostRange& r : ev.ranges) {
    (r.kind == RangeKind::kBackward ? backward : optimizer).add(r.tid, r.start_ns, r.end_ns);
  }
  backward.seal();
  optimizer.seal();
  std::set<int64_t> backward_only;
  for (int64_t tid : backward.tids()) {
    if (!step_tids.count(tid)) backward_only.insert(tid);
  }

  std::vector<Launch>& launches = ev.launches;
  std::sort(launches.begin(), launches.end(),
            [](const Launch& a, const Launch& b) {
              // Ties (one correlation written twice): the earlier call, whatever the file order.
              return a.correlation != b.correlation ? a.correlation < b.correlation
                                                    : a.ts_ns < b.ts_ns;
            });
  std::vector<int64_t>& ext = ev.host_external_ids;
  std::sort(ext.begin(), ext.end());
  ext.erase(std::unique(ext.begin(), ext.end()), ext.end());

  auto step_of = [&](int64_t ts) -> int64_t {
    // The step whose host range holds the launch (the last one starting at or before ts).
    auto it = std::upper_bound(s.steps.begin(), s.steps.end(), ts,
                               [](int64_t t, const TraceStepRange& r) { return t < r.start_ns; });
    if (it == s.steps.begin()) return -1;
    --it;
    return ts <= it->end_ns ? it->step : -1;
  };

  // Resolve each device row's launch, step and phase.
  std::vector<DeviceRow>& rows = ev.rows;
  std::vector<int64_t> row_step(rows.size(), -1);
  std::vector<uint8_t> row_phase(rows.size(), 0);  // 0 unknown, 1 forward, 2 backward, 3 optimizer
  std::vector<int64_t> row_launch(rows.size(), -1);  // index into launches
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DeviceRow& r = rows[i];
    const Launch* launch = nullptr;
    if (r.correlation != 0) {
      auto it = std::lower_bound(launches.begin(), launches.end(), r.correlation,
                                 [](const Launch& l, int64_t c) { return l.correlation < c; });
      if (it != launches.end() && it->correlation == r.correlation) {
        launch = &*it;
        row_launch[i] = it - launches.begin();
      }
    }
    const int64_t when = launch ? launch->ts_ns : r.start_ns;
    row_step[i] = step_of(when);
    if (launch) {
      if (optimizer.contains(launch->tid, launch->ts_ns)) {
        row_phase[i] = 3;
      } else if (backward.contains(launch->tid, launch->ts_ns) ||
                 backward_only.count(launch->tid)) {
        row_phase[i] = 2;
      } else {
        row_phase[i] = 1;
      }
    }
  }
  std::set<int64_t> present_set(row_step.begin(), row_step.end());
  std::vector<int64_t> present(present_set.begin(), present_set.end());
  std::vector<int64_t> selected = select_steps(present, options);

  // Health over every device row (not only the selection: a broken trace is broken).
  TraceHealth& h = s.health;
  h.unmatched_begin = ev.unmatched_begin;
  {
    std::vector<std::size_t> order(rows.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const DeviceRow &x = rows[a], &y = rows[b];
      if (x.device != y.device) return x.device < y.device;
      if (x.stream != y.stream) return x.stream < y.stream;
      return x.start_ns < y.start_ns;
    });
    for (std::size_t k = 1; k < order.size(); ++k) {
      const DeviceRow &p = rows[order[k - 1]], &c = rows[order[k]];
      if (p.device == c.device && p.stream == c.stream && c.start_ns < p.end_ns) {
        ++h.stream_overlaps;
        h.stream_overlap_ns += std::min(p.end_ns, c.end_ns) - c.start_ns;
      }
    }
    constexpr int64_t kSlack = 1000000000;  // 1 s
    for (const DeviceRow& r : rows) {
      if (ev.has_host &&
          (r.start_ns < saturating_add(ev.host_min_ns, -kSlack) ||
           r.end_ns > saturating_add(ev.host_max_ns, kSlack))) {
        ++h.out_of_range;
      }
      if (ev.has_window_end && r.end_ns > ev.window_end_ns) ++h.past_trace_end;
    }
  }

  // The table, and the key_averages()-style double count over the same selection.
  auto table_builder = std::make_unique<KernelTableBuilder>(s.devices, options, present, selected);
  KernelTableBuilder& builder = *table_builder;
  KernelRecord rec;
  static const char* const kPhase[] = {"", "forward", "backward", "optimizer"};
  DoubleCount& dc = s.double_count;
  const std::vector<std::string>& names = ev.names;
  std::vector<detail::StatRow> stat_rows;
  // Module attribution only when there are modules to attribute with: a trace without them pays
  // nothing (the phase split above is all it can have).
  const bool parts = ev.has_modules || !ev.recorded_tags.empty();
  detail::PartsInput parts_in;
  std::vector<std::size_t> selected_rows;  // indices into rows, in file order
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DeviceRow& r = rows[i];
    rec.kind = r.kind;
    rec.name = names[r.name_id];
    rec.start_ns = r.start_ns;
    rec.end_ns = r.end_ns;
    rec.device = r.device;
    rec.stream = r.stream;
    rec.correlation_id = r.correlation;
    rec.step = row_step[i];
    rec.phase = kPhase[row_phase[i]];
    const int64_t before = builder.added();
    builder.add(rec);
    if (builder.added() == before) continue;  // outside the selection
    selected_rows.push_back(i);
    detail::StatRow sr;
    sr.start_ns = r.start_ns;
    sr.end_ns = r.end_ns;
    sr.stream = r.stream;
    sr.bytes = r.bytes;
    sr.launch = row_launch[i];
    sr.name_id = r.name_id;
    sr.device = r.device;
    sr.kind = r.kind;
    stat_rows.push_back(sr);
    dc.device_rows_ns += r.end_ns - r.start_ns;
    if (r.external_id != 0 && std::binary_search(ext.begin(), ext.end(), r.external_id)) {
      dc.host_attributed_ns += r.end_ns - r.start_ns;
      ++dc.linked_rows;
    } else {
      ++dc.unlinked_rows;
    }
  }
  // gpu_user_annotation rows: a ProfilerStep#N range belongs to step N; others (Optimizer.step
  // on the device) to the device-side ProfilerStep range holding their start.
  std::vector<Annotation>& anns = ev.annotations;
  for (Annotation& a : anns) {
    if (a.step >= 0) continue;
    for (const Annotation& st : anns) {
      if (st.step >= 0 && a.start_ns >= st.start_ns && a.start_ns <= st.end_ns) a.step = st.step;
    }
  }
  for (const Annotation& a : anns) {
    if (std::binary_search(selected.begin(), selected.end(), a.step) ||
        (options.steps.empty() && options.skip_first <= 0)) {
      dc.annotation_ns += a.end_ns - a.start_ns;
      ++dc.annotations;
      if (dc.annotation_names.size() < 8 &&
          std::find(dc.annotation_names.begin(), dc.annotation_names.end(), a.name) ==
              dc.annotation_names.end()) {
        dc.annotation_names.push_back(a.name);
      }
    }
  }
  if (builder.added() == 0 && !rows.empty()) {
    // The trace has device activity, just none selected: say what it holds, not how to record.
    std::set<int32_t> devices;
    for (const DeviceRow& r : rows) devices.insert(r.device);
    std::string list, chosen;
    for (int32_t d : devices) list += (list.empty() ? "" : ", ") + std::to_string(d);
    for (int64_t st : selected)
      chosen += (chosen.empty() ? "steps " : ", ") + (st < 0 ? "outside" : std::to_string(st));
    if (options.device >= 0) chosen += fmt::format(", device {}", options.device);
    fail("{}: none of the trace's {} device row(s) (on device {}) is in the selection ({})", label,
         rows.size(), list, chosen);
  }
  result.table = builder.finish();
  table_builder.reset();  // its per-row intervals and durations
  release(ext);           // the host ops' External ids: the double count above alone reads them

  // The launch-bound statistics over the same selection.
  std::vector<detail::StatLaunch> stat_launches(launches.size());
  for (std::size_t i = 0; i < launches.size(); ++i)
    stat_launches[i] = {launches[i].ts_ns, launches[i].dur_ns, launches[i].tid};
  const bool all_steps = options.steps.empty() && options.skip_first <= 0;
  // The host ops are the parse's array, read in place; which lie in the selected steps, one byte
  // each (none: every op does).
  const std::vector<HostOp>& stat_ops = ev.host_ops;
  std::vector<uint8_t> op_selected;
  if (!all_steps) {
    op_selected.reserve(stat_ops.size());
    for (const HostOp& op : stat_ops) {
      op_selected.push_back(
          std::binary_search(selected.begin(), selected.end(), step_of(op.start_ns)) ? 1 : 0);
    }
  }
  s.stats = detail::compute_trace_stats(stat_rows, stat_launches, stat_ops, op_selected, names,
                                        ev.op_names);
  s.series = detail::compute_trace_series(stat_rows, stat_launches, names);

  s.kernel_sequences = kernel_sequences_of(ev, selected_rows, row_launch);
  s.user_ranges = user_ranges_of(ev, selected_rows, row_launch);

  // The critical path over the selection's window (critical_path.hpp), read from the arrays above
  // in place.
  {
    detail::CriticalPathInput cp;
    cp.ops = &stat_ops;
    cp.ranges = &ev.user_ranges;
    cp.calls = &launches;
    cp.host_names = &ev.op_names;
    cp.rows = &stat_rows;
    cp.row_names = &names;
    static const detail::CpPhase kRowPhase[] = {detail::CpPhase::kUnknown, detail::CpPhase::kForward,
                                                detail::CpPhase::kBackward,
                                                detail::CpPhase::kOptimizer};
    cp.row_phase.reserve(selected_rows.size());
    for (const std::size_t i : selected_rows) cp.row_phase.push_back(kRowPhase[row_phase[i]]);
    cp.syncs = std::move(ev.syncs);
    // The whole trace without steps, or with every step; else the selected steps' span.
    const bool whole = all_steps || std::all_of(selected.begin(), selected.end(),
                                                [](int64_t st) { return st < 0; });
    cp.window_start_ns = std::numeric_limits<int64_t>::max();
    cp.window_end_ns = std::numeric_limits<int64_t>::min();
    auto widen = [&](int64_t a, int64_t b) {
      cp.window_start_ns = std::min(cp.window_start_ns, a);
      cp.window_end_ns = std::max(cp.window_end_ns, b);
    };
    if (whole) {
      for (const detail::StatOp& op : stat_ops) widen(op.start_ns, op.end_ns);
      for (const detail::UserRange& u : ev.user_ranges) widen(u.start_ns, u.end_ns);
      for (const Launch& l : launches) {
        if (l.dur_ns >= 0) widen(l.ts_ns, saturating_add(l.ts_ns, l.dur_ns));
      }
      for (const detail::StatRow& r : stat_rows) widen(r.start_ns, r.end_ns);
    } else {
      for (const TraceStepRange& st : s.steps) {
        if (std::binary_search(selected.begin(), selected.end(), st.step))
          widen(st.start_ns, st.end_ns);
      }
    }
    if (cp.window_start_ns > cp.window_end_ns) cp.window_start_ns = cp.window_end_ns = 0;
    for (const TraceStepRange& st : s.steps) {
      if (whole || std::binary_search(selected.begin(), selected.end(), st.step))
        cp.step_ranges.push_back({st.step, st.start_ns, st.end_ns});
    }
    cp.worker_tids.assign(backward_only.begin(), backward_only.end());
    for (const HostRange& r : ev.ranges)
      cp.phase_ranges.push_back({r.tid, r.start_ns, r.end_ns, r.kind == RangeKind::kOptimizer});
    s.critical_path = detail::analyze_critical_path(cp);
  }
  parts_in.selected_rows = static_cast<int64_t>(stat_rows.size());
  // The selected rows for the part attribution (built here, after the first half's analyses, so
  // that the two halves' arrays are not held at once).
  if (parts) {
    parts_in.rows.reserve(selected_rows.size());
    for (const std::size_t i : selected_rows) {
      const DeviceRow& r = rows[i];
      detail::PartsRow pr;
      pr.start_ns = r.start_ns;
      pr.end_ns = r.end_ns;
      pr.kind = r.kind;
      if (r.recorded_tag != detail::kNoRecordedTag) pr.recorded_tag = r.recorded_tag;
      if (row_launch[i] >= 0) {
        const Launch& l = launches[static_cast<std::size_t>(row_launch[i])];
        pr.launched = true;
        pr.tid = l.tid;
        pr.launch_ns = l.ts_ns;
      }
      parts_in.rows.push_back(pr);
    }
  }
  // What only the table, the statistics and the critical path read is freed before the part
  // attribution builds its thread trees: the peak is the larger of the two halves, not their sum.
  release(op_selected, stat_launches, stat_rows, selected_rows, row_step, row_phase, row_launch,
          ev.rows, ev.launches, ev.annotations, ev.user_ranges, ev.steps);
  backward = RangeIndex();
  optimizer = RangeIndex();

  // Phase × part × layer through the module events and the fwdbwd flows (trace_parts.hpp).
  if (parts) {
    for (const HostRange& r : ev.ranges) {
      (r.kind == RangeKind::kBackward ? parts_in.backward_ranges : parts_in.optimizer_ranges)
          .push_back({r.tid, r.start_ns, r.end_ns, r.seq, r.accumulate_grad});
    }
    parts_in.python = std::move(ev.python);
    parts_in.module_names = std::move(ev.module_names);
    parts_in.flows = std::move(ev.flows);
    parts_in.ops = &ev.host_ops;  // HostOp is PartsOp: the parse's array, read in place
    parts_in.op_names = &ev.op_names;
  }
  parts_in.recorded_tags = std::move(ev.recorded_tags);
  parts_in.python_events = ev.python_events;

  // The [memory] events: timeline, peak and the allocations alive at it, which the attribution
  // places with the rule it places launches by (trace_memory.hpp).
  std::vector<detail::PartsPoint> mem_points;
  std::vector<detail::MemoryAlive> mem_alive;
  std::vector<detail::PointPlace> mem_placed;
  s.memory.skipped_events = ev.memory_skipped;
  s.memory.attribution_off = !parts_options.attribute;
  s.memory.first_skipped = ev.memory_first_skipped;
  detail::analyze_memory(ev.memory_events, s.steps, label, s.memory, mem_points, mem_alive);
  std::vector<detail::MemEvent>().swap(ev.memory_events);
  s.parts = detail::attribute_trace_parts(parts_in, parts_options, &mem_points, &mem_placed);
  detail::attribute_memory(
      s.memory, mem_alive, s.parts.module_events && !s.parts.recorded_tags ? &mem_placed : nullptr,
      parts_options.attribute ? "the trace holds no module events (record with with_stack=True)"
                              : "the phase × part attribution was turned off (--parts off)");
  return result;
}

// A reader of one trace: the rows, launches and host ops grow through detail::room_for_one (an
// allocation that fails names its bytes); any smaller one that fails names how far it had read.
TraceResult read_from(ByteSource& src, const std::string& label, const KernelTableOptions& options,
                      const TracePartsOptions& parts_options,
                      std::size_t chunk = JsonTokenizer::kDefaultChunk) {
  CountingSource counted(src);
  return detail::reading(
      label, [&] { return counted.delivered(); },
      [&] { return read_counted(src, counted, label, options, parts_options, chunk); });
}

bool has_suffix(const std::string& s, const char* suf) { return detail::ends_with(s, suf); }

}  // namespace

TraceResult read_trace_file(const std::string& path, const KernelTableOptions& options,
                            const TracePartsOptions& parts) {
  FileSource src(path);
  return read_from(src, path, options, parts);
}

TraceResult read_trace_buffer(std::string_view bytes, const std::string& label,
                              const KernelTableOptions& options, const TracePartsOptions& parts) {
  BufferSource src(bytes, label);
  return read_from(src, label, options, parts);
}

namespace detail {
TraceResult read_trace_buffer_in_chunks(std::string_view bytes, const std::string& label,
                                        std::size_t chunk, const KernelTableOptions& options) {
  BufferSource src(bytes, label);
  return read_from(src, label, options, TracePartsOptions{}, chunk);
}
}  // namespace detail

std::vector<RankTrace> read_trace_directory(const std::string& dir,
                                            const KernelTableOptions& options,
                                            const TracePartsOptions& parts) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) fail("cannot open trace directory '{}': {}", dir, std::strerror(errno));
  std::vector<std::string> files;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    if (has_suffix(name, ".json") || has_suffix(name, ".json.gz"))
      files.push_back(dir + "/" + name);
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  if (files.empty()) fail("trace directory '{}' holds no *.json or *.json.gz file", dir);
  // Every entry named like a trace is one: a FIFO, a device, a directory or a broken symbolic
  // link is refused, named, before any file is opened (opening a FIFO would block), rather than
  // left out of the ranks without a word.
  for (const std::string& f : files) {
    struct stat st {};
    if (::lstat(f.c_str(), &st) != 0) {
      fail("trace directory '{}': cannot read entry '{}': {}", dir, f, std::strerror(errno));
    }
    const bool link = S_ISLNK(st.st_mode);
    if (link && ::stat(f.c_str(), &st) != 0) {
      const int err = errno;
      fail("trace directory '{}': entry '{}' is a symbolic link {}: remove it or read the traces "
           "one by one",
           dir, f,
           err == ELOOP    ? "in a loop"
           : err == ENOENT ? "to nothing (dangling)"
                           : std::string("that cannot be followed: ") + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                         : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                      : "not a regular file";
      fail("trace directory '{}': entry '{}' is {}{}, not a trace file: remove it or read the "
           "traces one by one",
           dir, f, link ? "a symbolic link to " : "", kind);
    }
  }
  std::vector<RankTrace> out;
  for (const std::string& f : files) {
    RankTrace t;
    t.path = f;
    t.result = read_trace_file(f, options, parts);
    out.push_back(std::move(t));
  }
  // Two files claiming one rank are two runs' traces, or one copied: refused, never renumbered
  // (issue 46). Without a rank in every file, the ranks are the file-name order.
  bool all_ranked = true;
  std::map<int64_t, const std::string*> ranks;
  for (const RankTrace& t : out) {
    const int64_t rank = t.result.summary.rank;
    if (rank < 0) {
      all_ranked = false;
      continue;
    }
    auto [it, fresh] = ranks.emplace(rank, &t.path);
    if (!fresh) {
      fail("trace directory '{}': '{}' and '{}' both claim rank {} (distributedInfo.rank): one "
           "folder must hold one run's ranks, each once",
           dir, *it->second, t.path, rank);
    }
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].rank = all_ranked ? out[i].result.summary.rank : static_cast<int64_t>(i);
  }
  std::sort(out.begin(), out.end(),
            [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace tprobe::core
