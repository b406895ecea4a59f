// The CUPTI activity source: concurrent-kernel, memcpy and memset records into core::KernelRecord
// at once; buffers of a few MB, forced flush, dropped-record count. Step tags come from a callback
// subscriber on the launch, copy and set APIs, which also finds another profiler attached: a
// refused subscription is reported, never an empty table passed off as a result.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/trace/record/activity_name.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"
#include "tprobe/cupti/kernel_source.hpp"

#if TPROBE_HAS_CUPTI
#include <cupti.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#endif

namespace tprobe::cupti {

#if TPROBE_HAS_CUPTI
namespace {

#if CUPTI_API_VERSION >= 130000
using KernelActivity = CUpti_ActivityKernel10;
using MemcpyActivity = CUpti_ActivityMemcpy6;
#else
using KernelActivity = CUpti_ActivityKernel9;
using MemcpyActivity = CUpti_ActivityMemcpy5;
#endif
using MemsetActivity = CUpti_ActivityMemset4;

std::string result_text(CUptiResult rc) {
  const char* text = nullptr;
  cuptiGetResultString(rc, &text);
  return text ? text : fmt::format("CUPTI error {}", static_cast<int>(rc));
}

// CUPTI's buffer callbacks are plain functions on its own thread: one process-wide collector.
struct Collector {
  std::mutex mu;
  core::RawTrace trace;
  std::vector<std::string> problems;
  int64_t buffer_bytes = int64_t{4} << 20;
  uint64_t origin_ns = 0;  // CUPTI timestamp at begin(): record times are relative to it
};

Collector& collector() {
  static Collector c;
  return c;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const auto bytes = static_cast<size_t>(collector().buffer_bytes);
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer ? bytes : 0;
  *max_records = 0;
}

int64_t rel(uint64_t t, uint64_t origin) {
  return t >= origin ? static_cast<int64_t>(t - origin) : -static_cast<int64_t>(origin - t);
}

// The fields memcpy and memset records share, into tprobe's record.
template <typename Activity>
void copy_transfer_fields(const Activity& m, uint64_t origin_ns, core::KernelRecord& r) {
  r.start_ns = rel(m.start, origin_ns);
  r.end_ns = rel(m.end, origin_ns);
  r.device = static_cast<int32_t>(m.deviceId);
  r.stream = m.streamId;
  r.correlation_id = m.correlationId;
  r.bytes = static_cast<int64_t>(m.bytes);
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t,
                               size_t valid) {
  Collector& c = collector();
  std::lock_guard<std::mutex> lock(c.mu);
  CUpti_Activity* record = nullptr;
  while (true) {
    CUptiResult rc = cuptiActivityGetNextRecord(buffer, valid, &record);
    if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (rc != CUPTI_SUCCESS) {
      c.problems.push_back("reading an activity buffer: " + result_text(rc));
      break;
    }
    core::KernelRecord r;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const KernelActivity*>(record);
        r.kind = core::ActivityKind::kKernel;
        r.name = core::demangle(k->name ? k->name : "?");
        r.start_ns = rel(k->start, c.origin_ns);
        r.end_ns = rel(k->end, c.origin_ns);
        r.device = static_cast<int32_t>(k->deviceId);
        r.stream = k->streamId;
        r.correlation_id = k->correlationId;
        r.grid = {{k->gridX, k->gridY, k->gridZ}};
        r.block = {{k->blockX, k->blockY, k->blockZ}};
        r.registers_per_thread = k->registersPerThread;
        r.shared_memory_bytes = int64_t{k->staticSharedMemory} + k->dynamicSharedMemory;
        c.trace.records.push_back(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const MemcpyActivity*>(record);
        r.kind = core::ActivityKind::kMemcpy;
        r.name = core::memcpy_activity_name(static_cast<int>(m->copyKind));
        copy_transfer_fields(*m, c.origin_ns, r);
        c.trace.records.push_back(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const MemsetActivity*>(record);
        r.kind = core::ActivityKind::kMemset;
        r.name = core::kMemsetActivityName;
        copy_transfer_fields(*m, c.origin_ns, r);
        c.trace.records.push_back(std::move(r));
        break;
      }
      default:
        break;
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS) {
    c.trace.dropped_records += static_cast<int64_t>(dropped);
  }
  std::free(buffer);
}

// The launch contexts. The engine's enter()/leave() (scopes) and node_enter()/node_leave()
// (autograd's backward nodes, from the engine's RecordFunction hooks) nest on the launching thread
// (the autograd engine's thread during backward); a CUPTI callback on the API calls that launch,
// copy or set reads the innermost entry of the calling thread and keeps (correlation id,
// context). Device records carry the same correlation id, so the join is exact, and no API
// activity record is written: with the runtime and driver activity kinds on (CUPTI's own
// external-correlation records need them) the traced step on the H200 ran 7.9 % slower than an
// untraced one at 2x2,048.
thread_local std::vector<core::LaunchContext> t_stack;

struct Links {
  std::mutex mu;  // apart from Collector::mu: launches never wait for a buffer being decoded
  TagTable table;
  std::vector<std::pair<uint32_t, core::LaunchContext>> launches;
  std::vector<core::ForwardLink> forward_ops;
};

Links& links() {
  static Links l;
  return l;
}

// The calls this thread entered and has not left: (correlation id, index into Links::launches),
// so that the exit callback gives its call an end time (`profile --trace-out`'s host launches).
thread_local std::vector<std::pair<uint32_t, size_t>> t_open;

int64_t os_thread_id() {
  static thread_local const auto tid = static_cast<int64_t>(syscall(SYS_gettid));
  return tid;
}

void CUPTIAPI api_entered(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  uint64_t now = 0;
  if (cb->callbackSite == CUPTI_API_EXIT) {
    if (t_open.empty() || t_open.back().first != cb->correlationId) return;
    const size_t i = t_open.back().second;
    t_open.pop_back();
    cuptiGetTimestamp(&now);
    Links& l = links();
    std::lock_guard<std::mutex> lock(l.mu);
    // end() may have taken the list between the two callbacks: then the index is someone else's.
    if (i < l.launches.size() && l.launches[i].first == cb->correlationId)
      l.launches[i].second.host_end_ns = static_cast<int64_t>(now);
    return;
  }
  if (cb->callbackSite != CUPTI_API_ENTER || t_stack.empty()) return;
  core::LaunchContext c = t_stack.back();
  cuptiGetTimestamp(&now);
  c.host_start_ns = static_cast<int64_t>(now);  // absolute here; end() makes it relative
  c.host_thread = os_thread_id();
  Links& l = links();
  std::lock_guard<std::mutex> lock(l.mu);
  t_open.emplace_back(cb->correlationId, l.launches.size());
  l.launches.emplace_back(cb->correlationId, c);
}

// The runtime and driver calls that put work on a stream, by CUPTI's own names for this version
// (kernel launches in every form, graph launches, copies, sets): matching names rather than a
// list of ids keeps new API versions in.
std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> work_api_callbacks() {
  std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> ids;
  const std::pair<CUpti_CallbackDomain, uint32_t> domains[] = {
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE}};
  for (const auto& [domain, size] : domains) {
    for (uint32_t id = 1; id < size; ++id) {
      const char* name = nullptr;
      if (cuptiGetCallbackName(domain, id, &name) != CUPTI_SUCCESS || name == nullptr) continue;
      if (std::strstr(name, "Launch") || std::strstr(name, "Memcpy") ||
          std::strstr(name, "Memset")) {
        ids.emplace_back(domain, id);
      }
    }
  }
  return ids;
}

// TPROBE_CUPTI_TAGS=off: device records only, no subscriber and no step tags (every record is
// then untagged, and the point says so) — the A/B knob that isolates what the tags cost.
bool tags_wanted() {
  const char* e = std::getenv("TPROBE_CUPTI_TAGS");
  if (e == nullptr || *e == '\0' || std::string(e) == "on") return true;
  if (std::string(e) == "off") return false;
  fail("TPROBE_CUPTI_TAGS='{}': expected on or off", e);
}

const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                     CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

class CuptiSource : public KernelSource {
 public:
  explicit CuptiSource(int64_t buffer_bytes) { collector().buffer_bytes = buffer_bytes; }
  ~CuptiSource() override {
    if (active_) end();
    if (subscribed_) cuptiUnsubscribe(subscriber_);
  }
  bool usable(std::string* why) const override {
    uint32_t v = 0;
    CUptiResult rc = cuptiGetVersion(&v);
    if (rc != CUPTI_SUCCESS) {
      if (why) *why = "cuptiGetVersion: " + result_text(rc);
      return false;
    }
    return true;
  }
  std::string name() const override {
    uint32_t v = 0;
    cuptiGetVersion(&v);
    return fmt::format("cupti (API {})", v);
  }
  void begin() override {
    if (refused_) return;
    if (!registered_) {
      CUptiResult rc = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
      if (rc != CUPTI_SUCCESS) {
        refuse("cuptiActivityRegisterCallbacks", rc);
        return;
      }
      registered_ = true;
    }
    tags_ = tags_wanted();
    if (!tags_) {
      std::lock_guard<std::mutex> lock(collector().mu);
      collector().problems.push_back(
          "TPROBE_CUPTI_TAGS=off: no step tags, so no phase or part split of this step");
    }
    if (tags_ && !subscribed_) {
      // One subscriber per process (CUDA 13): another profiler attached makes this fail, and the
      // failure is the loud refusal the table reports.
      CUptiResult rc = cuptiSubscribe(&subscriber_, api_entered, nullptr);
      if (rc != CUPTI_SUCCESS) {
        refuse("cuptiSubscribe", rc);
        return;
      }
      subscribed_ = true;
      callbacks_ = work_api_callbacks();
    }
    for (const auto& [domain, id] : callbacks_) {
      if (!tags_) break;
      CUptiResult rc = cuptiEnableCallback(1, subscriber_, domain, id);
      if (rc != CUPTI_SUCCESS) {
        refuse(fmt::format("cuptiEnableCallback(domain {}, id {})", static_cast<int>(domain), id),
               rc);
        disable_all();
        return;
      }
    }
    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    {
      std::lock_guard<std::mutex> lock(collector().mu);
      collector().origin_ns = now;
    }
    for (CUpti_ActivityKind kind : kKinds) {
      CUptiResult rc = cuptiActivityEnable(kind);
      if (rc != CUPTI_SUCCESS) {
        refuse(fmt::format("cuptiActivityEnable(kind {})", static_cast<int>(kind)), rc);
        disable_all();
        return;
      }
    }
    active_ = true;
  }
  void end() override {
    if (!active_) return;
    active_ = false;
    CUptiResult rc = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (rc != CUPTI_SUCCESS) {
      std::lock_guard<std::mutex> lock(collector().mu);
      collector().problems.push_back("cuptiActivityFlushAll: " + result_text(rc));
    }
    disable_all();
    std::vector<std::pair<uint32_t, core::LaunchContext>> launches;
    std::vector<core::ForwardLink> forward_ops;
    std::vector<core::StepTag> tags;
    {
      std::lock_guard<std::mutex> lock(links().mu);
      launches.swap(links().launches);
      forward_ops.swap(links().forward_ops);
      tags = links().table.tags();
    }
    std::lock_guard<std::mutex> lock(collector().mu);
    core::RawTrace& t = collector().trace;
    for (auto& [correlation, context] : launches) {
      // The launch call's CUPTI timestamps onto the records' clock (a call not seen to return
      // ends where it started).
      if (context.host_start_ns >= 0) {
        const auto start = static_cast<uint64_t>(context.host_start_ns);
        const uint64_t stop =
            context.host_end_ns >= context.host_start_ns ? static_cast<uint64_t>(context.host_end_ns)
                                                         : start;
        context.host_start_ns = rel(start, collector().origin_ns);
        context.host_end_ns = rel(stop, collector().origin_ns);
        if (context.host_start_ns < 0) context.host_start_ns = context.host_end_ns = -1;
      }
      t.launches[correlation] = context;
    }
    t.forward_ops.insert(t.forward_ops.end(), forward_ops.begin(), forward_ops.end());
    t.tags = std::move(tags);  // ids are stable within a window and only grow
  }
  // Called on the launching thread; the engine pairs them, including on the autograd thread.
  void discard() override {
    {
      std::lock_guard<std::mutex> lock(links().mu);
      links().table.clear();
    }
    std::lock_guard<std::mutex> lock(collector().mu);
    collector().trace = core::RawTrace();
    collector().problems.clear();
  }
  // Outside begin()..end() the callbacks are off and the stack is simply not read.
  void enter(const core::StepTag& tag) override {
    core::LaunchContext c;
    {
      std::lock_guard<std::mutex> lock(links().mu);
      c.tag = links().table.intern(tag);
    }
    t_stack.push_back(c);
  }
  void leave() override {
    if (!t_stack.empty()) t_stack.pop_back();
  }
  bool wants_links() const override { return active_ && tags_; }
  void forward_op(uint64_t thread, int64_t seq) override {
    // The scope of the op is the innermost engine scope, when that is the top entry; an op run
    // directly inside a backward node (double backward) has none.
    const int64_t tag = !t_stack.empty() && !t_stack.back().node ? t_stack.back().tag : 0;
    std::lock_guard<std::mutex> lock(links().mu);
    links().forward_ops.push_back({thread, seq, tag});
  }
  void node_enter(uint64_t forward_thread, int64_t seq) override {
    core::LaunchContext c;
    c.node = true;
    c.node_thread = forward_thread;
    c.node_seq = seq;
    t_stack.push_back(c);
  }
  void node_leave() override {
    if (!t_stack.empty()) t_stack.pop_back();
  }
  const core::RawTrace& raw() const override {
    std::lock_guard<std::mutex> lock(collector().mu);
    return collector().trace;
  }
  TraceCapture take() override {
    TraceCapture c;
    {
      std::lock_guard<std::mutex> lock(collector().mu);
      core::RawTrace t = std::move(collector().trace);
      collector().trace = core::RawTrace();
      std::vector<std::string> problems = std::move(collector().problems);
      collector().problems.clear();
      c = capture_of(std::move(t));
      c.problems = std::move(problems);
    }
    {
      std::lock_guard<std::mutex> lock(links().mu);
      links().table.clear();
    }
    c.refused = refused_;
    c.refusal = refusal_;
    return c;
  }

 private:
  void refuse(const std::string& call, CUptiResult rc) {
    refused_ = true;
    refusal_ = fmt::format("{} failed: {}{}", call, result_text(rc),
                           rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                               ? " (another profiler is attached to this process: CUPTI allows one "
                                 "subscriber)"
                               : "");
  }
  void disable_all() {
    for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
    for (const auto& [domain, id] : callbacks_) cuptiEnableCallback(0, subscriber_, domain, id);
  }
  bool registered_ = false;
  bool subscribed_ = false;
  bool tags_ = true;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> callbacks_;
  bool active_ = false;
  bool refused_ = false;
  std::string refusal_;
};

}  // namespace

std::unique_ptr<KernelSource> make_cupti_source(int64_t buffer_bytes) {
  return std::make_unique<CuptiSource>(buffer_bytes);
}

#else

namespace {

class UnavailableSource : public KernelSource {
 public:
  bool usable(std::string* why) const override {
    if (why) *why = "tprobe was built without CUPTI (no CUDA toolkit at configure time)";
    return false;
  }
  std::string name() const override { return "cupti (not built)"; }
  void begin() override {}
  void end() override {}
  void discard() override {}
  void enter(const core::StepTag&) override {}
  void leave() override {}
  const core::RawTrace& raw() const override { return empty_; }
  TraceCapture take() override {
    TraceCapture c;
    c.refused = true;
    usable(&c.refusal);
    return c;
  }

 private:
  core::RawTrace empty_;
};

}  // namespace

std::unique_ptr<KernelSource> make_cupti_source(int64_t) {
  return std::make_unique<UnavailableSource>();
}

#endif

}  // namespace tprobe::cupti
