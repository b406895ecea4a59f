// The trace reader's hand-over to the part attribution (internal to tprobe_core).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/trace/record/kernel_record.hpp"
#include "tprobe/core/trace/attribute/trace_parts.hpp"

namespace tprobe::core::detail {

// A python_function event the attribution keeps: a module call, one of the few plain Python
// functions that name a part (an attention kernel's wrapper, HF's mask builders, a loss), or
// torch's own `backward` call (torch/_tensor.py, torch/autograd/): the phase of the ops the
// harness launches in it outside every module (the seed gradient of loss.backward()).
enum class PyKind : uint8_t {
  kModule,
  kAttentionFunction,
  kMaskFunction,
  kLossFunction,
  kBackwardCall
};
struct PyEvent {
  int64_t tid = 0;
  int64_t start_ns = 0, end_ns = 0;
  uint32_t module = 0;  // kModule: index into the module instance names
  PyKind kind = PyKind::kModule;
};

// One end of a fwdbwd flow: "s" at the forward op, "f" at the backward op (same id).
struct FlowEnd {
  int64_t id = 0;
  int64_t tid = 0;
  int64_t ts_ns = 0;
  bool start = false;
};

struct PartsOp {  // a cpu_op
  int64_t tid = 0;
  int64_t start_ns = 0, end_ns = 0;
  uint32_t name_id = 0;
  int64_t seq = -1;  // its "Sequence number" argument, -1 if absent
};
struct PartsRange {  // autograd::engine::evaluate_function / Optimizer.* ranges
  int64_t tid = 0;
  int64_t start_ns = 0, end_ns = 0;
  // evaluate_function: the evaluated node's "Sequence number" (-1 absent), and whether the node
  // is torch::autograd::AccumulateGrad (a leaf's gradient written: no forward op, no number).
  int64_t seq = -1;
  bool accumulate_grad = false;
};

// A selected device row: its launch call's thread and start (launched == false: none).
struct PartsRow {
  bool launched = false;
  int64_t tid = 0;
  int64_t launch_ns = 0;
  int64_t start_ns = 0, end_ns = 0;
  ActivityKind kind = ActivityKind::kKernel;
  int64_t recorded_tag = -1;  // index into PartsInput::recorded_tags, -1: none
};

struct PartsInput {
  std::vector<PyEvent> python;
  std::vector<std::string> module_names;  // instance names without "nn.Module: "
  int64_t python_events = 0;
  std::vector<FlowEnd> flows;
  const std::vector<PartsOp>* ops = nullptr;
  const std::vector<std::string>* op_names = nullptr;
  std::vector<PartsRange> backward_ranges;
  std::vector<PartsRange> optimizer_ranges;
  std::vector<PartsRow> rows;  // filled only when there are module events or recorded tags
  // The attributions the rows carried as written (tprobe's own traces; nullopt: "untagged").
  std::vector<std::optional<StepTag>> recorded_tags;
  int64_t selected_rows = 0;
};

// A moment on a thread to place with the rule that places a row's launch (docs/kernels.md,
// "Parts"): a memory event's allocation (trace_memory.hpp).
struct PartsPoint {
  int64_t tid = 0;
  int64_t ts_ns = 0;
};
// Why a placed moment has no tag: outside every module event and backward op with no cpu_op
// holding it (kNoModule), inside a backward op no flow links (kUnlinked), inside modules none of
// which names a part (kNoPart), inside a decoder layer's module no rule places (kUnplaced).
enum class PlaceWhy : uint8_t { kTagged, kNoModule, kUnlinked, kNoPart, kUnplaced };
struct PointPlace {
  bool tagged = false;
  StepTag tag;
  PlaceWhy why = PlaceWhy::kNoModule;
  std::string outside_op;  // tagged by an op outside the model's modules: that op ("" otherwise)
};

// `points` (may be null) are placed into `placed` (one per point, in order) by the same rule as
// the rows; nothing is placed when the trace has no module events (`placed` left empty).
TraceParts attribute_trace_parts(const PartsInput& in, const TracePartsOptions& options,
                                 const std::vector<PartsPoint>* points = nullptr,
                                 std::vector<PointPlace>* placed = nullptr);

}  // namespace tprobe::core::detail
