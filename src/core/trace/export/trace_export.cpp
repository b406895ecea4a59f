// A traced step as a Chrome / Kineto JSON trace (see trace_export.hpp; docs/profile.md, "The step
// in a trace viewer"). Written as text, event by event: a trace of 10^5 rows as one nlohmann tree
// would hold every field as a node.
#include "tprobe/core/trace/export/trace_export.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

// A JSON string literal: nlohmann's escaping, invalid UTF-8 replaced rather than refused.
std::string json_string(std::string_view s) {
  return Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Microseconds with three decimals from nanoseconds: exact both ways.
std::string us(int64_t ns) {
  const bool neg = ns < 0;
  const uint64_t a = neg ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return fmt::format("{}{}.{:03}", neg ? "-" : "", a / 1000, a % 1000);
}

const char* row_category(ActivityKind k) {
  switch (k) {
    case ActivityKind::kKernel:
      return "kernel";
    case ActivityKind::kMemcpy:
      return "gpu_memcpy";
    case ActivityKind::kMemset:
      return "gpu_memset";
  }
  return "kernel";
}

class Writer {
 public:
  void event(const std::string& body) {
    out_ += events_ == 0 ? "\n  " : ",\n  ";
    out_ += '{';
    out_ += body;
    out_ += '}';
    ++events_;
  }
  std::string& text() { return out_; }
  int64_t events() const { return events_; }

 private:
  std::string out_;
  int64_t events_ = 0;
};

void name_process(Writer& w, int64_t pid, const std::string& name, int64_t sort) {
  w.event(fmt::format(R"("ph": "M", "name": "process_name", "pid": {}, "tid": 0, "ts": 0, )"
                      R"("args": {{"name": {}}})",
                      pid, json_string(name)));
  w.event(fmt::format(R"("ph": "M", "name": "process_sort_index", "pid": {}, "tid": 0, "ts": 0, )"
                      R"("args": {{"sort_index": {}}})",
                      pid, sort));
}
void name_thread(Writer& w, int64_t pid, int64_t tid, const std::string& name, int64_t sort) {
  w.event(fmt::format(R"("ph": "M", "name": "thread_name", "pid": {}, "tid": {}, "ts": 0, )"
                      R"("args": {{"name": {}}})",
                      pid, tid, json_string(name)));
  w.event(fmt::format(R"("ph": "M", "name": "thread_sort_index", "pid": {}, "tid": {}, "ts": 0, )"
                      R"("args": {{"sort_index": {}}})",
                      pid, tid, sort));
}

std::string layer_label(const KernelRecord& r) {
  if (r.layer < 0) return r.phase == "untagged" ? "untagged" : "outside the layers";
  return r.layer_kind.empty() || r.layer_kind == "-"
             ? fmt::format("layer {}", r.layer)
             : fmt::format("layer {} ({})", r.layer, r.layer_kind);
}

// One level of the attribution slices on one stream: consecutive rows with the same key make one
// slice from the first start to the last end. Rows of one stream do not overlap, so neither do
// the slices of one track, and every row lies inside its slice.
struct OpenSlice {
  bool open = false;
  std::string key, name;
  int64_t start = 0, end = 0;
  int64_t rows = 0, kernel_ns = 0;
  std::string phase, part;
  int32_t layer = -1;
};

}  // namespace

bool wants_gzip(std::string_view path) {
  return path.size() >= 3 && path.substr(path.size() - 3) == ".gz";
}

std::string gzip_compress(std::string_view text) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    fail("gzip: cannot start compressing (zlib: out of memory)");
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(std::min<size_t>(text.size(), 1u << 30))) + 64);
  size_t done = 0;
  const size_t kChunk = size_t{1} << 30;  // avail_in is 32-bit
  int rc = Z_OK;
  size_t fed = 0;
  while (rc != Z_STREAM_END) {
    if (z.avail_in == 0 && fed < text.size()) {
      const size_t n = std::min(kChunk, text.size() - fed);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data() + fed));
      z.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    if (done == out.size()) out.resize(out.size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + done);
    z.avail_out = static_cast<uInt>(std::min(out.size() - done, kChunk));
    const uInt before = z.avail_out;
    rc = deflate(&z, fed == text.size() ? Z_FINISH : Z_NO_FLUSH);
    done += before - z.avail_out;
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      deflateEnd(&z);
      fail("gzip: zlib error {} while compressing", rc);
    }
  }
  deflateEnd(&z);
  out.resize(done);
  return out;
}

// Size: one document written in file order (rows, names, slices, counters), one section each.
ChromeTrace chrome_trace(const ChromeTraceInput& in, bool gzip) {
  static const std::vector<KernelRecord> kNone;
  const std::vector<KernelRecord>& records = in.records ? *in.records : kNone;
  ChromeTrace result;
  Writer w;

  // Rows by device and stream, in start order (file order within one start).
  std::vector<size_t> order(records.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const KernelRecord& x = records[a];
    const KernelRecord& y = records[b];
    return std::tie(x.device, x.stream, x.start_ns) < std::tie(y.device, y.stream, y.start_ns);
  });

  // Names of the processes and threads.
  std::set<int32_t> devices;
  std::set<std::pair<int32_t, int64_t>> streams;
  std::set<int64_t> host_threads;
  for (const KernelRecord& r : records) {
    devices.insert(r.device);
    streams.insert({r.device, r.stream});
    if (r.launch_start_ns >= 0) host_threads.insert(r.launch_thread);
  }
  if (!host_threads.empty()) {
    name_process(w, kTraceHostPid, "host: launch calls", 0);
    for (int64_t t : host_threads) name_thread(w, kTraceHostPid, t, fmt::format("thread {}", t), t);
  }
  for (int32_t d : devices) {
    name_process(w, d, fmt::format("GPU {}", d), 1 + 2 * int64_t{d});
    name_process(w, kTraceAttributionPid + d, fmt::format("tprobe attribution, GPU {}", d),
                 2 + 2 * int64_t{d});
  }
  static const char* const kLevel[] = {"", "phase", "layer", "part"};
  for (const auto& [d, s] : streams) {
    name_thread(w, d, s, fmt::format("stream {}", s), s);
    for (int level = 1; level <= 3; ++level) {
      name_thread(w, kTraceAttributionPid + d, s * 4 + level,
                  fmt::format("stream {}: {}", s, kLevel[level]), s * 4 + level);
    }
  }
  const bool memory = in.memory != nullptr && !in.memory->empty();
  if (memory) name_process(w, kTraceMemoryPid, "memory step (its own run of the step)", 1000);

  // The device rows, each with its launch call and the flow between them where recorded.
  for (size_t i : order) {
    const KernelRecord& r = records[i];
    std::string args = fmt::format(
        R"("device": {}, "stream": {}, "correlation": {})", r.device, r.stream, r.correlation_id);
    if (r.kind == ActivityKind::kKernel) {
      args += fmt::format(
          R"(, "grid": [{}, {}, {}], "block": [{}, {}, {}], "registers per thread": {}, )"
          R"("shared memory": {})",
          r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1], r.block[2],
          r.registers_per_thread, r.shared_memory_bytes);
    } else {
      args += fmt::format(R"(, "bytes": {})", r.bytes);
    }
    if (!r.phase.empty()) {
      args += fmt::format(R"(, "tprobe_phase": {}, "tprobe_part": {}, "tprobe_layer": {}, )"
                          R"("tprobe_layer_kind": {})",
                          json_string(r.phase), json_string(r.part), r.layer,
                          json_string(r.layer_kind.empty() ? "-" : r.layer_kind));
    }
    w.event(fmt::format(
        R"("ph": "X", "cat": "{}", "name": {}, "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
        R"("args": {{{}}})",
        row_category(r.kind), json_string(r.name), r.device, r.stream, us(r.start_ns),
        us(r.end_ns - r.start_ns), args));
    ++result.device_rows;
    if (r.launch_start_ns < 0) continue;
    const char* what = r.kind == ActivityKind::kKernel   ? "kernel"
                       : r.kind == ActivityKind::kMemcpy ? "memcpy"
                                                         : "memset";
    w.event(fmt::format(
        R"("ph": "X", "cat": "cuda_runtime", "name": "launch {}", "pid": {}, "tid": {}, )"
        R"("ts": {}, "dur": {}, "args": {{"correlation": {}}})",
        what, kTraceHostPid, r.launch_thread, us(r.launch_start_ns),
        us(std::max<int64_t>(0, r.launch_end_ns - r.launch_start_ns)), r.correlation_id));
    w.event(fmt::format(R"("ph": "s", "cat": "ac2g", "name": "ac2g", "id": {}, "pid": {}, )"
                        R"("tid": {}, "ts": {})",
                        r.correlation_id, kTraceHostPid, r.launch_thread, us(r.launch_start_ns)));
    w.event(fmt::format(R"("ph": "f", "bp": "e", "cat": "ac2g", "name": "ac2g", "id": {}, )"
                        R"("pid": {}, "tid": {}, "ts": {})",
                        r.correlation_id, r.device, r.stream, us(r.start_ns)));
    ++result.host_launches;
  }

  // The attribution slices: per stream, one track each for phase, layer and part.
  auto close = [&](OpenSlice& s, int32_t device, int64_t stream, int level) {
    if (!s.open) return;
    s.open = false;
    std::string args = fmt::format(R"("phase": {}, "rows": {}, "kernel_ns": {})", json_string(s.phase),
                                   s.rows, s.kernel_ns);
    if (level >= 2) args += fmt::format(R"(, "layer": {})", s.layer);
    if (level == 3) args += fmt::format(R"(, "part": {})", json_string(s.part));
    w.event(fmt::format(
        R"("ph": "X", "cat": "tprobe_attribution", "name": {}, "pid": {}, "tid": {}, "ts": {}, )"
        R"("dur": {}, "args": {{{}}})",
        json_string(s.name), kTraceAttributionPid + device, stream * 4 + level, us(s.start),
        us(s.end - s.start), args));
    ++result.attribution_slices;
  };
  OpenSlice open[4];
  int32_t cur_device = 0;
  int64_t cur_stream = 0;
  bool any = false;
  for (size_t i : order) {
    const KernelRecord& r = records[i];
    if (r.phase.empty()) continue;  // a row no attribution ran over
    if (any && (r.device != cur_device || r.stream != cur_stream)) {
      for (int level = 1; level <= 3; ++level) close(open[level], cur_device, cur_stream, level);
    }
    any = true;
    cur_device = r.device;
    cur_stream = r.stream;
    const std::string keys[4] = {"", r.phase, r.phase + "\x1f" + std::to_string(r.layer),
                                 r.phase + "\x1f" + std::to_string(r.layer) + "\x1f" + r.part};
    const std::string names[4] = {"", r.phase, r.phase + " · " + layer_label(r), r.part};
    for (int level = 1; level <= 3; ++level) {
      OpenSlice& s = open[level];
      if (s.open && s.key != keys[level]) {
        // A new slice at this level closes the finer ones too.
        for (int l = level; l <= 3; ++l) close(open[l], cur_device, cur_stream, l);
      }
      if (!s.open) {
        s = OpenSlice{};
        s.open = true;
        s.key = keys[level];
        s.name = names[level];
        s.start = r.start_ns;
        s.end = r.end_ns;
        s.phase = r.phase;
        s.part = r.part;
        s.layer = r.layer;
      }
      s.end = std::max(s.end, r.end_ns);
      ++s.rows;
      if (r.kind == ActivityKind::kKernel) s.kernel_ns += r.duration_ns();
    }
  }
  if (any) {
    for (int level = 1; level <= 3; ++level) close(open[level], cur_device, cur_stream, level);
  }

  // The memory step's counters.
  bool reserved_known = false;
  if (memory) {
    for (const MemorySample& m : *in.memory) reserved_known |= m.reserved >= 0;
    name_thread(w, kTraceMemoryPid, 0, "allocator", 0);
    for (const MemorySample& m : *in.memory) {
      w.event(fmt::format(R"("ph": "C", "name": "allocated", "pid": {}, "tid": 0, "ts": {}, )"
                          R"("args": {{"bytes": {}}})",
                          kTraceMemoryPid, us(m.t_ns), m.allocated));
      ++result.memory_samples;
      if (m.reserved >= 0) {
        w.event(fmt::format(R"("ph": "C", "name": "reserved", "pid": {}, "tid": 0, "ts": {}, )"
                            R"("args": {{"bytes": {}}})",
                            kTraceMemoryPid, us(m.t_ns), m.reserved));
        ++result.memory_samples;
      }
    }
  }

  // The document: Kineto's top-level keys, then the events.
  Json devs = Json::array();
  for (const DeviceProperties& d : in.devices) {
    devs.push_back({{"id", d.id},
                    {"name", d.name},
                    {"totalGlobalMem", d.total_memory_bytes},
                    {"computeMajor", d.compute_major},
                    {"computeMinor", d.compute_minor},
                    {"numSms", d.multiprocessors}});
  }
  Json meta = in.metadata.is_object() ? in.metadata : Json::object();
  meta["device_rows"] = result.device_rows;
  meta["host_launches"] = result.host_launches;
  meta["attribution_slices"] = result.attribution_slices;
  meta["memory_samples"] = result.memory_samples;
  meta["memory_note"] =
      !memory ? Json(in.memory_note)
              : reserved_known ? Json(nullptr)
                               : Json("the allocator reports no reserved total here (the CPU's): "
                                      "the allocated counter only");
  meta["tracks"] = {
      {"devices", "pid = device index, tid = stream (Kineto's layout)"},
      {"host", fmt::format("pid {}: the launch calls, tid = OS thread", kTraceHostPid)},
      {"attribution",
       fmt::format("pid {} + device: tid = stream * 4 + 1 (phase), + 2 (layer), + 3 (part)",
                   kTraceAttributionPid)},
      {"memory", fmt::format("pid {}: counters allocated and reserved (bytes) of the memory "
                             "step, on its own clock",
                             kTraceMemoryPid)}};
  std::string doc = "{\n\"schemaVersion\": 1,\n\"displayTimeUnit\": \"ns\",\n";
  doc += "\"distributedInfo\": {\"rank\": 0, \"world_size\": 1},\n";
  doc += "\"deviceProperties\": " + devs.dump(-1, ' ', false, Json::error_handler_t::replace) +
         ",\n";
  doc += "\"tprobe\": " + meta.dump(-1, ' ', false, Json::error_handler_t::replace) + ",\n";
  doc += "\"traceEvents\": [";
  doc += w.text();
  doc += "\n]\n}\n";
  result.events = w.events();
  result.bytes = gzip ? gzip_compress(doc) : std::move(doc);
  return result;
}

}  // namespace tprobe::core
