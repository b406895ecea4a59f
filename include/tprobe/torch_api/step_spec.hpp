// The measured LoRA training step: build a Gemma-4 model (embedded shapes with random weights, or a
// checkpoint), attach adapters and time forward, loss and backward at each requested point.
// Torch-free interface: the profile probe and benchmarks/step_bench.cpp call it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tprobe/core/evidence/operator_inputs.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/step/step_config.hpp"
#include "tprobe/core/trace/attribute/step_memory.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"

namespace tprobe::torch_api {

// One shape to measure: `batch` rows of `width` tokens; `lengths` (one per row, or empty = all
// real) are the real tokens of each row, the rest right-padding.
struct StepPoint {
  StepPoint() = default;
  StepPoint(int64_t b, int64_t w, std::vector<int64_t> l = {})
      : batch(b), width(w), lengths(std::move(l)) {}
  int64_t batch = 2;
  int64_t width = 2048;
  std::vector<int64_t> lengths;
  // The user's tokens (profile --dataset): batch × width ids, row-major, and where they came
  // from; empty ids: the step draws random ids (seeded by the point's shape).
  std::vector<int64_t> ids;
  std::optional<core::PointTokens> tokens;
  std::string tokens_error;  // the dataset could not make this point's batch: its outcome, error
  bool padded() const;
  int64_t real_tokens() const;
};

struct StepReport;

// Points measured after the sweep, under a cap of the caching allocator (memory_cap_bytes; 0 none,
// and no cap on the CPU): `steps` consecutive warm-up-free timed steps each (an OOM at any of them
// is the point's outcome, and ends it), no traced or memory step.
struct ExtraPoints {
  std::vector<StepPoint> points;
  int64_t memory_cap_bytes = 0;
  int64_t steps = 1;
};

inline constexpr int kMaxExtraRounds = 32;

struct StepSpec {
  std::string model = "gemma4-tiny";  // embedded shapes (random init) when checkpoint_dir is empty
  std::string checkpoint_dir;         // config.json + safetensors: real weights
  uint64_t seed = 1;
  std::vector<std::string> lora_targets;  // empty: no adapters (then nothing trains)
  int64_t lora_rank = 64;
  double lora_alpha = 128;
  // The knobs (core/step/step_config.hpp); attn and moe left open are resolved by the engine
  // (core::resolve_defaults against its facts) before anything runs. Checkpointing: the engine
  // runs reentrant and non-reentrant by one mechanism, the layer recomputed inside its checkpoint
  // node's backward (libtorch's C++ API has no saved-tensor hooks: said in the report).
  core::StepConfig config;
  bool input_requires_grad = true;
  int64_t ce_chunk = 4096;
  std::string dtype = "bf16";  // bf16 | fp32 | fp64
  std::string device = "cpu";  // cpu | cuda
  std::vector<StepPoint> points;
  int64_t warmup = 1;
  int64_t repeats = 3;
  core::StepTracer* tracer = nullptr;  // not owned; null: no traced step
  // One more step per point under the allocator's event hook (never a timed one): where the
  // memory goes (PointResult::memory). keep_raw_memory keeps the first point's events.
  bool record_memory = false;
  bool keep_raw_memory = false;
  // Asked once the sweep has run (not after a signal): the groups to measure next
  // (StepReport::extra, one vector per group, in order); asked again, with the report holding
  // what they measured, until it returns none (at most kMaxExtraRounds times).
  std::function<std::vector<ExtraPoints>(const StepReport&)> extra_points;
  // Asked before each point (and before its traced step): true stops the sweep, and the report
  // holds the points measured so far with `interrupted` set. The caller's signal flag, passed in
  // because the module has its own copy of tprobe_core.
  std::function<bool()> should_stop;
  std::function<void(const StepPoint&)> on_start;  // as each point starts (a live indicator)
};

enum class PointOutcome { kOk, kOom, kError };
const char* to_string(PointOutcome outcome);  // "ok", "oom", "error"

struct PointResult {
  StepPoint point;
  bool extra = false;  // one of spec.extra_points' (StepReport::extra), not of the sweep
  PointOutcome outcome = PointOutcome::kOk;
  std::string message;                     // why, when not ok
  std::optional<int64_t> oom_tried_bytes;  // what the failed allocation asked for, when known
  // The point's certain memory before it ran (core/cost/step_plan.hpp: weights and adapters, the
  // layer inputs and its largest single tensor; a lower bound of its peak). Above the device's
  // memory (the host's on the CPU) the point is refused before it runs: outcome kOom,
  // refused_before_running, the sizes in `message`, the largest tensor in oom_tried_bytes.
  double planned_floor_bytes = 0;
  bool refused_before_running = false;
  // One entry per timed repeat (warm-up excluded). CUDA events on a GPU, steady clock on CPU.
  // forward: embedding + layers + final norm; loss: the CE forward; backward: the whole
  // backward call (CE backward, layer recompute and backward); optimizer: its step (--optimizer
  // adamw; empty with none); step: all of them, one interval.
  std::vector<double> step_s, forward_s, loss_s, backward_s, optimizer_s;
  // Wall time of the point's steps (warm-up and timed, until the one that failed), steady clock.
  double wall_s = 0;
  double loss_value = 0;             // the first timed repeat's loss
  int64_t loss_targets = 0;          // positions that carried a label
  int64_t inert_adapters = 0;        // lora_B without a gradient after the first step
  // CUDA's caching allocator, reset at the start of the point; the CPU has no such allocator, and
  // memory_measured is false there (the evidence writes null, the line says "not measured").
  bool memory_measured = false;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  std::string attn_sliding, attn_full, moe;  // what ran
  // The tokens each expert of each MoE layer got in the point's first step (its forward, never
  // a recompute), and the (token, choice) pairs each layer routed: tokens × top-k.
  core::ExpertLoad expert_load;
  bool traced = false;                       // the tracer's step ran (its records are the tracer's)
  double traced_step_s = 0;   // that step's time (same clock), for the overhead check
  // The first traced point only: the discarded priming step's time (0 elsewhere).
  double trace_priming_step_s = 0;
  std::string trace_message;  // why the traced step failed, when it did
  // The memory step (spec.record_memory): its replay, its time and the allocator's own peak over
  // it (the replay's peak must equal it), or why there is none.
  std::optional<core::StepMemory> memory;
  std::optional<core::RawMemory> raw_memory;  // the first recorded point's, with keep_raw_memory
  double memory_step_s = 0;
  int64_t memory_step_peak_allocated_bytes = 0;
  std::string memory_message;
};

struct StepReport {
  core::ModelConfig config;     // what was built
  std::string model;            // config name
  std::string source;           // "random init" or the checkpoint directory
  std::string config_digest;    // hex digest of the model's config facts (core::ModelConfig)
  std::string device_resolved;  // "cpu" or "cuda:0"
  std::string dtype;
  std::string clock;  // "cuda_events" or "steady_clock"
  double init_s = 0;
  core::LoadFigures load;  // how the weights got onto the device
  int64_t base_parameters = 0;
  int64_t lora_modules = 0;
  int64_t lora_parameters = 0;
  int64_t weights_allocated_bytes = 0;  // after init and adapters, before any step
  std::vector<PointResult> points;
  bool interrupted = false;  // should_stop said stop: points holds those measured before it
  // Where a signal cut a step short ("decoder layer 3 (forward)"): that point is not in points
  // (nothing of it was measured); empty when the signal came between points.
  std::string interrupted_at;
  std::vector<std::vector<PointResult>> extra;  // spec.extra_points' groups, measured
};


}  // namespace tprobe::torch_api
