// The trace reader's hand-over between its two halves (internal to tprobe_core): the streaming
// parse (trace_events.cpp: every event of the document, classified and kept compactly) hands
// the reader (trace_reader.cpp: steps, phases, the selection and every analysis over it) the
// events as these arrays.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tprobe/core/trace/record/kernel_record.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"
#include "trace/read/detail/json_tokenizer.hpp"
#include "trace/record/detail/trace_events_internal.hpp"
#include "trace/stats/detail/trace_memory_internal.hpp"
#include "trace/attribute/detail/trace_parts_internal.hpp"

namespace tprobe::core::detail {

// a + b, or the int64 limit it passes (host events' ends: an end no device row reaches).
inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

constexpr uint32_t kNoRecordedTag = UINT32_MAX;

// One device row, compact: the name is an index into the interned names.
struct DeviceRow {
  int64_t start_ns;
  int64_t end_ns;
  int64_t correlation;
  int64_t external_id;
  int64_t stream;
  int64_t bytes;  // args.bytes, -1 if absent
  uint32_t name_id;
  int32_t device;
  ActivityKind kind;
  // The row's own attribution as tprobe wrote it (`profile --trace-out`: args tprobe_phase,
  // tprobe_part, tprobe_layer, tprobe_layer_kind): index into ParsedEvents::recorded_tags, or
  // kNoRecordedTag.
  uint32_t recorded_tag = kNoRecordedTag;
};

// A cpu_op event, for the host-op census and the part attribution (the name interned apart from
// the kernels'): the attribution's own PartsOp (tid, start, end, name, "Sequence number"), so that
// the reader hands the attribution the parse's array itself, not a copy.
using HostOp = PartsOp;

enum class RangeKind : uint8_t { kBackward, kOptimizer };

struct HostRange {
  int64_t tid;
  int64_t start_ns;
  int64_t end_ns;
  RangeKind kind;
  int64_t seq = -1;             // kBackward: the evaluated node's sequence number, -1 if absent
  bool accumulate_grad = false;  // kBackward: "evaluate_function: torch::autograd::AccumulateGrad"
};

struct Annotation {
  int64_t start_ns;
  int64_t end_ns;
  int64_t step;  // ProfilerStep#N on the device: N; anything else: -1 until placed
  std::string name;
  DeviceRange range;  // its device, stream and External id
};

struct StepSeen {
  int64_t step;
  int64_t start_ns;
  int64_t end_ns;
  int64_t tid;
};

// Every event the reader keeps, as the parse leaves them (file order).
struct ParsedEvents {
  bool saw_top_object = false;
  bool saw_events = false;  // a traceEvents array
  std::set<std::string> top_keys;  // every key of the top-level object
  std::vector<std::string> names;  // kernel and copy names, interned (DeviceRow::name_id)
  std::vector<DeviceRow> rows;
  // The distinct attributions rows carried (DeviceRow::recorded_tag); none: "untagged" as written.
  std::vector<std::optional<StepTag>> recorded_tags;
  std::vector<RuntimeCall> launches;  // every runtime and driver call with a correlation
  std::vector<HostOp> host_ops;
  std::vector<std::string> op_names;  // host names, interned (HostOp, RuntimeCall, UserRange)
  std::vector<HostRange> ranges;      // evaluate_function and Optimizer.* ranges
  std::vector<StepSeen> steps;
  std::vector<int64_t> host_external_ids;
  std::vector<Annotation> annotations;  // gpu_user_annotation
  std::vector<UserRange> user_ranges;
  std::vector<SyncEvent> syncs;
  std::vector<PyEvent> python;
  std::vector<FlowEnd> flows;
  std::vector<std::string> module_names;
  int64_t python_events = 0;
  bool has_modules = false;
  std::vector<MemEvent> memory_events;
  int64_t memory_skipped = 0;
  std::string memory_first_skipped;
  int64_t host_min_ns = 0, host_max_ns = 0;  // the host events' first start and last end
  bool has_host = false;
  bool has_window_end = false;  // Kineto's "Trace end" instant
  int64_t window_end_ns = 0;
  int64_t unmatched_begin = 0;  // B events never ended

  bool has_top_key(const char* key) const { return top_keys.count(key) > 0; }
};

// Reads every token of the document; fills the summary's categories, devices, messages, health
// counts and top-level facts as it goes, and hands the events over. `keep_parts`: keep the
// module events and flows the part attribution needs.
ParsedEvents parse_trace_events(JsonTokenizer& tz, const std::string& label, TraceSummary& summary,
                                bool keep_parts);

}  // namespace tprobe::core::detail
