// A training step's phases and parts — the one vocabulary `profile` (tprobe's engine) and
// `kernels` (a user's trace) attribute device time to — the engine's observer interface, and the
// raw trace of a traced step with its attribution (docs/profile.md, "Attribution").
//
// Attribution in short: every launch carries the innermost entry of its thread's stack, either an
// engine scope (a StepTag) or a backward node of autograd (forward thread, sequence number). A
// forward op recorded while grad mode is on carries the sequence number its backward node will
// carry; the forward op's scope is recorded with it, so a backward node's launches take the part,
// layer and layer kind of the forward (or recompute) scope that made the node. A node without a
// recorded forward op is untagged — never given to a part.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/layer_type.hpp"
#include "tprobe/core/evidence/kernel_trace.hpp"
#include "tprobe/core/trace/record/kernel_record.hpp"

namespace tprobe::core {

// forward: the first pass of the layers; loss: the head's softcapped CE, forward and its own
// backward; recompute: a checkpointed layer's forward run again inside the backward; backward:
// the gradients of every forward/recompute operation; optimizer: the update (user traces).
enum class StepPhase { kForward, kLoss, kRecompute, kBackward, kOptimizer };
// attention_proj: q/k/v/o projections, q/k/v norms, RoPE and the post-attention norm;
// attention_core: the attention math itself (SDPA, flash, blockwise or eager softmax, and the
// mask it builds); router: router norm, projection, softmax, top-k; experts: the routed experts
// and their norms; shared_experts: the experts every token goes through beside the routed ones
// (a user's trace only: Qwen2-MoE's shared_expert and its gate, DeepSeek's shared_experts);
// other: residual adds, the layer's closing norm, the final norm, glue.
enum class StepPart {
  kEmbedding,
  kAttentionProj,
  kAttentionCore,
  kDenseMlp,
  kRouter,
  kExperts,
  kLossHead,
  kOther,
  // Last in the enum so that the engine's parts keep their numbers (step_memory's slots are
  // indexed by them); shown after experts (all_step_parts() is the display order).
  kSharedExperts,
};

const char* to_string(StepPhase phase);  // "forward", "loss", "recompute", "backward", "optimizer"
const char* to_string(StepPart part);    // "embedding", "attention_proj", "attention_core", ...
std::optional<StepPhase> parse_step_phase(std::string_view text);
std::optional<StepPart> parse_step_part(std::string_view text);
// Every value, in display order.
const std::vector<StepPhase>& all_step_phases();
const std::vector<StepPart>& all_step_parts();
// The one display order of rows by phase, part and layer kind, wherever they are listed (the
// breakdown's rows, the phase x part matrix, the memory by part, the part diff): phases and parts
// in the order above; layer kinds sliding, full, then "-" (the rows outside the decoder layers:
// embedding, loss head, the rest); a word outside the vocabulary ("untagged") after every other.
int phase_rank(std::string_view phase);
int part_rank(std::string_view part);
int layer_kind_rank(std::string_view kind);
int layer_kind_rank(std::optional<LayerType> type);

struct StepTag {
  StepPhase phase = StepPhase::kForward;
  StepPart part = StepPart::kOther;
  int32_t layer = -1;  // decoder layer index, -1 outside the layers
  std::optional<LayerType> layer_kind;  // the layer's type; none outside the decoder layers
  bool operator==(const StepTag& o) const {
    return phase == o.phase && part == o.part && layer == o.layer && layer_kind == o.layer_kind;
  }
  bool operator<(const StepTag& o) const;
};
// The tag a backward node's launches get from the tag of the scope that made the node: the same
// part and layer, phase backward (loss for the loss head's own nodes).
StepTag backward_of(const StepTag& made_by);

// The engine calls this as it runs (the autograd engine's thread during backward); enter/leave
// nest, and the innermost entry applies to launches in between. The link calls come from the
// engine's RecordFunction hooks while wants_links() is true.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void enter(const StepTag& tag) = 0;
  virtual void leave() = 0;
  virtual bool wants_links() const { return false; }
  // A forward op on logical thread `thread` recorded autograd sequence number `seq` under the
  // calling thread's innermost scope (the node it makes, if any, carries the same number).
  virtual void forward_op(uint64_t thread, int64_t seq) {
    (void)thread;
    (void)seq;
  }
  // A backward node made on `forward_thread` with `seq` starts / ends on the calling thread.
  virtual void node_enter(uint64_t forward_thread, int64_t seq) {
    (void)forward_thread;
    (void)seq;
  }
  virtual void node_leave() {}
};

// Around the one traced step per point (never a timed one): begin() before it, end() after the
// step has synchronised. discard() drops what the last begin()..end() recorded (the priming step).
class StepTracer : public StepObserver {
 public:
  virtual void begin() = 0;
  virtual void end() = 0;
  virtual void discard() = 0;
};

// RAII: enter on construction, leave on destruction; nothing when observer is null.
class ObserverScope {
 public:
  ObserverScope(StepObserver* observer, const StepTag& tag) : observer_(observer) {
    if (observer_) observer_->enter(tag);
  }
  ~ObserverScope() {
    if (observer_) observer_->leave();
  }
  ObserverScope(const ObserverScope&) = delete;
  ObserverScope& operator=(const ObserverScope&) = delete;

 private:
  StepObserver* observer_;
};

// The innermost stack entry of the thread that launched one device activity.
struct LaunchContext {
  int64_t tag = 0;  // engine scope: 1-based index into RawTrace::tags; 0 when `node` is set
  bool node = false;
  uint64_t node_thread = 0;  // the backward node's forward thread and sequence number
  int64_t node_seq = -1;
  // The launching call itself (the CUPTI source times it; older raw traces have none): start and
  // end on the records' clock, -1 when not recorded, and the OS thread id.
  int64_t host_start_ns = -1;
  int64_t host_end_ns = -1;
  int64_t host_thread = 0;
};
struct ForwardLink {
  uint64_t thread = 0;
  int64_t seq = -1;
  int64_t tag = 0;  // 1-based index into RawTrace::tags; 0: recorded outside any scope
};

// What a kernel source saw in one traced window, before attribution (schema tprobe.raw_trace,
// version 2): replayable without a GPU.
struct RawTrace {
  std::vector<KernelRecord> records;
  std::vector<StepTag> tags;
  std::map<int64_t, LaunchContext> launches;  // correlation id -> context
  std::vector<ForwardLink> forward_ops;       // in recording order: the last of a key wins
  int64_t dropped_records = 0;                // records the source could not store
};
Json to_json(const RawTrace& trace);
// Bounds-checked; throws tprobe::Error naming `where` and the field.
RawTrace parse_raw_trace(std::string_view text, const std::string& where);
RawTrace read_raw_trace(const std::string& path);

struct AttributionCounts {
  int64_t records = 0;
  int64_t untagged = 0;            // every record below
  int64_t untagged_no_context = 0; // launched outside every scope and node
  int64_t untagged_unlinked = 0;   // inside a backward node no recorded forward op made
  int64_t linked = 0;              // attributed through a backward node's forward op
};
// Fills each record's phase, part, layer and layer_kind (and its launch call's times and thread
// where the launch context has them); untagged records get phase and part "untagged".
AttributionCounts attribute(const RawTrace& trace, std::vector<KernelRecord>& records);

// Device time of one traced step by phase × layer kind × part (PartRow), and per layer (LayerRow):
// core/evidence/kernel_trace.hpp.
struct StepBreakdown {
  std::vector<PartRow> rows;  // phase order, then layer kind, then part order; untagged last
  std::vector<LayerRow> layers;
  int64_t kernels = 0;
  int64_t kernel_ns = 0;  // Σ kernel durations (overlapping streams both count)
  int64_t memcpy_memset_ns = 0;
  int64_t span_ns = 0;    // first start to last end over every record
  int64_t untagged_kernel_ns = 0;
};
StepBreakdown break_down(const std::vector<KernelRecord>& attributed);
// Its rows with their shares of the step's kernel time and span, and its layers.
PartCells phase_part_cells(const StepBreakdown& b);
Json to_json(const StepBreakdown& b);
// Its reader: every field, times back to nanoseconds, the shares checked by writing them again
// (unless `check_derived` is false: a caller that holds the breakdown under other names checks
// its own document whole), so that to_json(step_breakdown_from_json(to_json(b))) is to_json(b).
// Throws tprobe::Error naming `where` and the field.
StepBreakdown step_breakdown_from_json(const Json& j, const std::string& where,
                                       bool check_derived = true);

// Whether a part's device time grows with w² on an attention path: the attention core of full
// layers always; that of sliding layers when the path computes them dense.
bool grows_quadratically(std::string_view part, std::string_view layer_kind,
                         bool sliding_dense);

}  // namespace tprobe::core
