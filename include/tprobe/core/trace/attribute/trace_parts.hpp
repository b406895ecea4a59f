// A user's torch.profiler trace by phase × part × layer, in the vocabulary of `profile`
// (core/trace/step_trace.hpp): every selected device row goes to a phase (forward, loss,
// recompute, backward, optimizer) and a part (embedding, attention_proj, attention_core,
// dense_mlp, router, experts, shared_experts, loss_head, other) through the module events torch.profiler writes
// with `with_stack=True` (python_function "nn.Module: Class_N") and Kineto's forward→backward
// flows ("cat": "fwdbwd"). Rows launched by an op outside every module (the harness around the
// model) are part `other`, layer "-", listed by launching op; rows it cannot place are untagged,
// counted by reason, never guessed.
// docs/kernels.md, "Parts", defines every rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"

namespace tprobe::core {

struct TracePartsOptions {
  // Per decoder layer, from the model's config (layer i of the trace = the i-th distinct decoder
  // layer module); empty: the kinds are unknown and print as "-". A layer whose kind the config
  // does not give is nullopt ("-"), and `kind_notes` says why.
  std::vector<std::optional<LayerType>> layer_types;
  // Per decoder layer, its feed-forward by the config: "moe", "dense" or "-" (not given); empty
  // for a Gemma-4 config (every layer holds both), and not written then.
  std::vector<std::string> layer_ffn;
  std::vector<std::string> kind_notes;  // how the config gave the kinds, and why any is "-"
  std::string model;  // where the kinds came from (a config path, a checkpoint, a model name)
  // false (`kernels --parts off`): python_function and fwdbwd events are read, checked and
  // counted, not kept; no attribution runs (the phase split stays).
  bool attribute = true;
};

struct TracePartsCounts {
  int64_t rows = 0;        // selected device rows
  int64_t attributed = 0;  // rows given a phase and part
  int64_t linked = 0;      // of those: backward rows placed through a fwdbwd flow into the model
  int64_t linked_enclosing = 0;  // of those: through the flow of an enclosing backward op
  // Of the linked: in an evaluate_function range outside its node op (the engine's handling of
  // that node's gradients), through the node op with the range's sequence number
  int64_t linked_evaluate = 0;
  // Of the linked: in an AccumulateGrad range, through the node evaluated just before it
  int64_t linked_accumulate = 0;
  // Of the attributed: launched by an op outside every module event (the harness's code around
  // the model, or the backward op of such an op): part `other`, layer "-", by launching op below.
  int64_t outside_model = 0;
  int64_t untagged = 0;    // every kind below
  int64_t untagged_no_launch = 0;  // no cuda_runtime/cuda_driver event carries its correlation
  // outside every module event and backward op, and no cpu_op holds the launch
  int64_t untagged_no_module = 0;
  int64_t untagged_unlinked = 0;   // inside a backward op without a fwdbwd flow to a forward op
  // inside module events none of which names a part, or a flow to a forward op inside such
  int64_t untagged_no_part = 0;
  // inside a decoder layer's module that no rule places (a class the rules do not know, where a
  // part is expected): listed by module in TraceParts::unplaced, never guessed into a part
  int64_t untagged_unplaced = 0;
  // rows whose phase, part and layer the trace itself carried (tprobe's own traces, written by
  // `profile --trace-out`): taken as written, no module rule run (attributed or untagged above)
  int64_t recorded = 0;
};

// Rows launched by one op outside the model's modules, in one phase.
struct OutsideModelRow {
  std::string op;     // forward side: the outermost cpu_op holding the launch; backward: the
                      // backward op the row's fwdbwd flow binds to
  std::string phase;  // forward | backward (docs/kernels.md, "Parts")
  int64_t rows = 0;   // device rows, memcpy/memset included
  int64_t kernels = 0;
  int64_t kernel_ns = 0;
  int64_t memcpy_memset_ns = 0;
};

// Rows inside one module class the rules cannot place (untagged), in one phase.
struct UnplacedModuleRow {
  std::string module;  // the class ("Qwen3MoeTopKGate"), the instance counter dropped
  std::string phase;   // forward | recompute | backward (of a forward op inside it)
  int64_t rows = 0;
  int64_t kernels = 0;
  int64_t kernel_ns = 0;
  int64_t memcpy_memset_ns = 0;
};

struct TraceParts {
  bool module_events = false;     // the trace holds python_function "nn.Module: ..." events
  // Its rows carry their attribution (args.tprobe_phase ...: a trace `profile --trace-out` wrote):
  // the breakdown is theirs as written, and the module rules do not run.
  bool recorded_tags = false;
  // Whether there is a phase × part breakdown: module events, or recorded attributions.
  bool has_breakdown() const { return module_events || recorded_tags; }
  bool attribution_off = false;   // TracePartsOptions::attribute was false: nothing was kept
  int64_t python_events = 0;      // python_function events in the trace
  int64_t module_event_count = 0;
  int64_t fwdbwd_links = 0;       // flow ids with both a start and an end
  int64_t fwdbwd_unpaired = 0;    // flow ends without the other end (or ids seen twice)
  int64_t backward_ops_linked = 0;  // cpu_ops an "f" end binds to
  std::vector<std::string> decoder_layers;  // instance names, in layer order
  std::string model;
  bool layer_kinds_known = false;
  std::vector<std::string> layer_ffn;  // TracePartsOptions::layer_ffn (written when not empty)
  std::vector<std::string> notes;  // what the reader of the table should know
  TracePartsCounts counts;
  StepBreakdown breakdown;  // rows by phase, layer kind, part (untagged last) and per layer
  std::vector<OutsideModelRow> outside_model;  // by kernel time, descending (then op, phase)
  int64_t outside_model_kernel_ns = 0;
  std::vector<UnplacedModuleRow> unplaced;  // by kernel time, descending (then module, phase)
  int64_t unplaced_kernel_ns = 0;
};

// The one line said when a trace has no module events.
std::string trace_parts_hint();
// Why a trace has no phase × part rows: turned off (--parts off), or trace_parts_hint().
std::string trace_parts_why_none(const TraceParts& parts);

// results.by_phase_part, .by_layer, .attribution and .parts (status) of a trace.
Json to_json(const TraceParts& parts);
// Its reader: every field to_json writes (the rows and layers by step_breakdown_from_json), counts
// within what holds them, the hint, the shares and the kernel totals checked by writing them
// again, so that to_json(trace_parts_from_json(to_json(p))) is to_json(p). Throws tprobe::Error
// naming `where` and the field.
TraceParts trace_parts_from_json(const Json& j, const std::string& where);
// The phase × part matrix, the time outside the model's modules by launching op and the per-layer
// table (or the one-line hint without module events); `title_prefix` heads every title
// ("rank 1: " in a per-rank directory).
std::vector<Table> trace_parts_tables(const TraceParts& parts, const std::string& title_prefix = {});

// ---- the phase × part matrix, shared by `profile` and `kernels` ----------------------------
// Rows (layer kind, part) in display order, one column per phase in `phases`, then all phases and
// the share of `span_ns` (the step's device span; "-" when 0; negative: no share column).
Table phase_part_matrix(const StepBreakdown& b, const std::string& title,
                        const std::vector<std::string>& phases, int64_t span_ns);
// Per decoder layer: one column per (phase) of its kernel time, parts summed.
Table layer_matrix(const StepBreakdown& b, const std::string& title,
                   const std::vector<std::string>& phases);

}  // namespace tprobe::core
