// The CUPTI activity source: concurrent-kernel, memcpy, memset and external-correlation records
// into core::KernelRecord at once; buffers of a few MB, forced flush, dropped-record count, and a
// refused subscription reported, never an empty table passed off as a result.
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>

#include "tprobe/config.hpp"
#include "tprobe/core/trace/kernel_category.hpp"
#include "tprobe/cupti/kernel_source.hpp"

#if TPROBE_HAS_CUPTI
#include <cupti.h>
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
  RawTrace trace;
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
        r.name = fmt::format("memcpy kind {}", static_cast<int>(m->copyKind));
        copy_transfer_fields(*m, c.origin_ns, r);
        c.trace.records.push_back(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const MemsetActivity*>(record);
        r.kind = core::ActivityKind::kMemset;
        r.name = "memset";
        copy_transfer_fields(*m, c.origin_ns, r);
        c.trace.records.push_back(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
          c.trace.external_of[e->correlationId] = static_cast<int64_t>(e->externalId);
        }
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

// CUPTI writes an external-correlation record for a CUDA runtime or driver API *record*: with
// only the device kinds enabled, no API records exist and no kernel is ever tagged (every record
// fell to "backward / other" on the H200). The runtime and driver kinds are enabled for that
// alone; their records are dropped as they arrive (the default branch above).
const CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

class CuptiSource : public KernelSource {
 public:
  explicit CuptiSource(int64_t buffer_bytes) { collector().buffer_bytes = buffer_bytes; }
  ~CuptiSource() override {
    if (active_) end();
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
  }
  void enter(model::StepPhase phase, model::StepPart part) override {
    if (!active_) return;
    cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                           static_cast<uint64_t>(tag_id(phase, part)));
  }
  void leave() override {
    if (!active_) return;
    uint64_t last = 0;
    cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  }
  const RawTrace& raw() const override {
    std::lock_guard<std::mutex> lock(collector().mu);
    return collector().trace;
  }
  TraceCapture take() override {
    TraceCapture c;
    {
      std::lock_guard<std::mutex> lock(collector().mu);
      RawTrace t = std::move(collector().trace);
      collector().trace = RawTrace();
      c.records = std::move(t.records);
      c.dropped_records = t.dropped_records;
      c.problems = std::move(collector().problems);
      collector().problems.clear();
      c.untagged_records = attribute(c.records, t.external_of);
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
  }
  bool registered_ = false;
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
  void enter(model::StepPhase, model::StepPart) override {}
  void leave() override {}
  const RawTrace& raw() const override { return empty_; }
  TraceCapture take() override {
    TraceCapture c;
    c.refused = true;
    usable(&c.refusal);
    return c;
  }

 private:
  RawTrace empty_;
};

}  // namespace

std::unique_ptr<KernelSource> make_cupti_source(int64_t) {
  return std::make_unique<UnavailableSource>();
}

#endif

}  // namespace tprobe::cupti
