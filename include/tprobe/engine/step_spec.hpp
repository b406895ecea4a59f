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

#include "tprobe/core/evidence/profile_point.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/step/step_config.hpp"
#include "tprobe/core/trace/attribute/step_memory.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"

namespace tprobe::engine {

// A point's shape and its outcome are evidence types (core/evidence/profile_point.hpp).
using StepPoint = core::StepPoint;
using PointOutcome = core::PointOutcome;

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

// A measured point: its evidence (core::PointFigures, each field declared once there) and what
// the evidence writes apart or not at all.
struct PointResult : core::PointFigures {
  bool extra = false;  // one of spec.extra_points' (StepReport::extra), not of the sweep
  // Wall time of the point's steps (warm-up and timed, until the one that failed), steady clock.
  double wall_s = 0;
  // The memory step (spec.record_memory): its replay, its time and the allocator's own peak over
  // it (the replay's peak must equal it), or why there is none (memory_message).
  std::optional<core::StepMemory> memory;
  std::optional<core::RawMemory> raw_memory;  // the first recorded point's, with keep_raw_memory
  double memory_step_s = 0;
  int64_t memory_step_peak_allocated_bytes = 0;
};

// The sweep: its own facts (core::StepFigures, declared there) and its points.
struct StepReport : core::StepFigures {
  core::ModelConfig config;  // what was built
  std::vector<PointResult> points;
  std::vector<std::vector<PointResult>> extra;  // spec.extra_points' groups, measured
};


}  // namespace tprobe::engine
