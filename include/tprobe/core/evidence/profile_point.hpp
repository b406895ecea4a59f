// profile's measured points and its sweep's own facts, each field declared once
// (core/evidence/fields.hpp): the engine fills these structs (engine's PointResult and
// StepReport are them plus what the evidence does not hold), runs' step_report writes and reads
// them through these tables, and the views read the typed members.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"
#include "tprobe/core/evidence/operator_inputs.hpp"

namespace tprobe::core {

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
  std::optional<PointTokens> tokens;
  std::string tokens_error;  // the dataset could not make this point's batch: its outcome, error
  bool padded() const;
  int64_t real_tokens() const;
};

enum class PointOutcome { kOk, kOom, kError };
const char* to_string(PointOutcome outcome);  // "ok", "oom", "error"

// A point's measurements as the evidence holds them (results.points[] and padded_points[]).
struct PointFigures {
  StepPoint point;
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
  double loss_value = 0;       // the first timed repeat's loss
  int64_t loss_targets = 0;    // positions that carried a label
  int64_t inert_adapters = 0;  // lora_B without a gradient after the first step
  // CUDA's caching allocator, reset at the start of the point; the CPU has no such allocator, and
  // memory_measured is false there (the evidence writes null, the line says "not measured").
  bool memory_measured = false;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  std::string attn_sliding, attn_full, moe;  // what ran
  // The tokens each expert of each MoE layer got in the point's first step (its forward, never
  // a recompute), and the (token, choice) pairs each layer routed: tokens × top-k.
  ExpertLoad expert_load;
  bool traced = false;       // the tracer's step ran (its records are the tracer's)
  double traced_step_s = 0;  // that step's time (same clock), for the overhead check
  // The first traced point only: the discarded priming step's time (0 elsewhere).
  double trace_priming_step_s = 0;
  std::string trace_message;   // why the traced step failed, when it did
  std::string memory_message;  // why the memory step (PointResult::memory) has no record
};

// A series' summary, written beside its samples: {median_s, min_s, max_s, spread_ratio}, or null
// for no samples.
Json series_stats_json(const std::vector<double>& samples);
// The median of the step samples (0 for none).
double median_step_s(const PointFigures& p);

namespace evidence_detail {
void read_shape(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_lengths(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_outcome(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_stats(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_optimizer(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_peak(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_loss(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_traced_step(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_priming(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_overhead(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_tokens(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_routed(PointFigures& p, const Json& v, const std::string& where, const char* key);
void read_expert_load(PointFigures& p, const Json& v, const std::string& where, const char* key);
}  // namespace evidence_detail

inline auto evidence_fields(const PointFigures*) {
  using evidence::custom;
  using evidence::derived;
  using evidence::field;
  using P = PointFigures;
  namespace d = evidence_detail;
  return std::make_tuple(
      custom<P>("batch", +[](const P& p) { return Json(p.point.batch); }, d::read_shape,
                "integer", "", "rows of the micro-batch, 1..2^31"),
      custom<P>("width", +[](const P& p) { return Json(p.point.width); }, d::read_shape,
                "integer", "tokens", "the row width, 1..2^31"),
      custom<P>("lengths",
                +[](const P& p) {
                  return p.point.lengths.empty() ? Json(nullptr) : Json(p.point.lengths);
                },
                d::read_lengths, "[integer] or null", "tokens",
                "per row, its real tokens (the rest is padding); null: every row is real"),
      derived<P>("padded", +[](const P& p) { return Json(p.point.padded()); }, "boolean", "",
                 "a row shorter than the width"),
      derived<P>("real_tokens", +[](const P& p) { return Json(p.point.real_tokens()); },
                 "integer", "tokens", "the lengths' sum (batch × width without lengths)"),
      derived<P>("padded_tokens", +[](const P& p) { return Json(p.point.batch * p.point.width); },
                 "integer", "tokens", "batch × width"),
      custom<P>("outcome", +[](const P& p) { return Json(to_string(p.outcome)); }, d::read_outcome,
                "string", "", "ok, oom or error"),
      field("message", &P::message, "", "why, when not ok").or_null(),
      field("oom_tried_bytes", &P::oom_tried_bytes, "B",
            "what the failed allocation asked for, when known")
          .at_least(0),
      field("planned_floor_bytes", &P::planned_floor_bytes, "B",
            "the point's certain memory before it ran (a lower bound of its peak)"),
      field("refused_before_running", &P::refused_before_running, "",
            "the floor is above the device's memory: the point did not run"),
      field("samples_s", &P::step_s, "s", "per timed repeat, the whole step"),
      field("forward_samples_s", &P::forward_s, "s", "per timed repeat, the forward"),
      field("loss_samples_s", &P::loss_s, "s", "per timed repeat, the CE forward"),
      field("backward_samples_s", &P::backward_s, "s", "per timed repeat, the backward"),
      custom<P>("optimizer_samples_s", +[](const P& p) { return Json(p.optimizer_s); },
                d::read_optimizer, "[number]", "s",
                "per timed repeat, AdamW's step (empty with --optimizer none; absent before it)")
          .absent_ok(),
      custom<P>("step", +[](const P& p) { return series_stats_json(p.step_s); }, d::read_stats,
                 "object or null", "s", "median_s, min_s, max_s, spread_ratio of samples_s"),
      custom<P>("forward", +[](const P& p) { return series_stats_json(p.forward_s); }, d::read_stats,
                 "object or null", "s", "the same of forward_samples_s"),
      custom<P>("loss", +[](const P& p) { return series_stats_json(p.loss_s); }, d::read_stats,
                 "object or null", "s", "the same of loss_samples_s"),
      custom<P>("backward", +[](const P& p) { return series_stats_json(p.backward_s); }, d::read_stats,
                 "object or null", "s", "the same of backward_samples_s"),
      custom<P>("optimizer", +[](const P& p) { return series_stats_json(p.optimizer_s); }, d::read_stats,
                 "object or null", "s", "the same of optimizer_samples_s")
          .absent_if_null(),
      custom<P>("peak_allocated_bytes",
                +[](const P& p) {
                  return p.memory_measured ? Json(p.peak_allocated_bytes) : Json(nullptr);
                },
                d::read_peak, "integer or null", "B",
                "CUDA's caching allocator's peak over the point; null on the CPU"),
      custom<P>("peak_reserved_bytes",
                +[](const P& p) {
                  return p.memory_measured ? Json(p.peak_reserved_bytes) : Json(nullptr);
                },
                d::read_peak, "integer or null", "B", "its reserved peak; null on the CPU"),
      custom<P>("loss_value",
                +[](const P& p) {
                  return p.outcome == PointOutcome::kOk ? Json(p.loss_value) : Json(nullptr);
                },
                d::read_loss, "number or null", "",
                "the first timed repeat's loss; null when not ok or not finite"),
      field("loss_targets", &P::loss_targets, "tokens", "positions that carried a label")
          .at_least(0),
      field("inert_adapters", &P::inert_adapters, "",
            "lora_B without a gradient after the first step")
          .at_least(0),
      field("attn_sliding", &P::attn_sliding, "", "the attention path the sliding layers ran"),
      field("attn_full", &P::attn_full, "", "the attention path the full layers ran"),
      field("moe_dispatch", &P::moe, "", "the experts' dispatch that ran"),
      field("traced", &P::traced, "", "the traced step ran"),
      custom<P>("traced_step_s",
                +[](const P& p) { return p.traced ? Json(p.traced_step_s) : Json(nullptr); },
                d::read_traced_step, "number or null", "s", "the traced step's time"),
      custom<P>("trace_priming_step_s",
                +[](const P& p) {
                  return p.trace_priming_step_s > 0 ? Json(p.trace_priming_step_s) : Json(nullptr);
                },
                d::read_priming, "number or null", "s",
                "the first traced point's discarded priming step"),
      custom<P>("trace_overhead_ratio",
                +[](const P& p) {
                  const double med = median_step_s(p);
                  return p.traced && !p.step_s.empty()
                             ? Json(med > 0 ? p.traced_step_s / med - 1.0 : 0.0)
                             : Json(nullptr);
                },
                d::read_overhead, "number or null", "",
                "the traced step over the median step, minus 1"),
      field("trace_message", &P::trace_message, "", "why the traced step failed").or_null(),
      field("memory_message", &P::memory_message, "", "why the point has no memory step")
          .or_null(),
      custom<P>("tokens",
                +[](const P& p) {
                  return p.point.tokens ? evidence::to_json(*p.point.tokens) : Json(nullptr);
                },
                d::read_tokens, "object or null", "",
                "the dataset's rows the step ran on (below); null: random ids")
          .absent_ok(),
      custom<P>("routed_per_layer", +[](const P& p) { return Json(p.expert_load.routed_per_layer); },
                d::read_routed, "integer", "",
                "(token, choice) pairs each MoE layer routed: tokens × top-k")
          .absent_ok(),
      custom<P>("expert_load", +[](const P& p) { return evidence::detail::encode(p.expert_load.layers); },
                d::read_expert_load, "[object]", "", "one entry per MoE layer, in layer order")
          .absent_ok());
}

// The sweep's own facts in results (beside its points).
struct StepFigures {
  std::string model;            // config name
  std::string source;           // "random init" or the checkpoint directory
  std::string config_digest;    // hex digest of the model's config facts (core::ModelConfig)
  std::string device_resolved;  // "cpu" or "cuda:0"
  std::string dtype;
  std::string clock;  // "cuda_events" or "steady_clock"
  double init_s = 0;
  LoadFigures load;  // how the weights got onto the device
  int64_t base_parameters = 0;
  int64_t lora_modules = 0;
  int64_t lora_parameters = 0;
  int64_t weights_allocated_bytes = -1;  // after init and adapters, before any step; -1: the CPU
  bool interrupted = false;  // should_stop said stop: points holds those measured before it
  // Where a signal cut a step short ("decoder layer 3 (forward)"): that point is not in points
  // (nothing of it was measured); empty when the signal came between points.
  std::string interrupted_at;
};

namespace evidence_detail {
void read_init_s(StepFigures& s, const Json& v, const std::string& where, const char* key);
void read_load(StepFigures& s, const Json& v, const std::string& where, const char* key);
void read_interrupted_at(StepFigures& s, const Json& v, const std::string& where, const char* key);
}  // namespace evidence_detail

inline auto evidence_fields(const StepFigures*) {
  using evidence::custom;
  using evidence::field;
  using S = StepFigures;
  namespace d = evidence_detail;
  return std::make_tuple(
      field("model", &S::model, "", "the model's config name"),
      field("source", &S::source, "", "random init, or the checkpoint directory"),
      field("config_digest", &S::config_digest, "", "digest of the built model's config facts"),
      field("device", &S::device_resolved, "", "cpu or cuda:0"),
      field("dtype", &S::dtype, "", "the weights' and activations' dtype"),
      field("clock", &S::clock, "", "cuda_events or steady_clock"),
      custom<S>("init_s", +[](const S& s) { return Json(s.init_s); }, d::read_init_s, "number",
                "s", "the model's construction and read, adapters attached"),
      field("base_parameters", &S::base_parameters, "", "the model's own parameters").at_least(0),
      field("lora_modules", &S::lora_modules, "", "the adapted linear layers").at_least(0),
      field("lora_parameters", &S::lora_parameters, "", "the adapters' parameters").at_least(0),
      field("weights_allocated_bytes", &S::weights_allocated_bytes, "B",
            "allocated after init and adapters, before any step; null on the CPU (no allocator)")
          .at_least(0)
          .or_null(),
      custom<S>("load", +[](const S& s) { return evidence::to_json(s.load); }, d::read_load,
                "object", "", "how the weights got onto the device (below)")
          .absent_ok(),
      field("interrupted", &S::interrupted, "", "a signal stopped the sweep: later points are missing"),
      custom<S>("interrupted_at",
                +[](const S& s) {
                  return s.interrupted_at.empty() ? Json(nullptr) : Json(s.interrupted_at);
                },
                d::read_interrupted_at, "string or null", "",
                "the step a signal cut short, null when it came between points"));
}

}  // namespace tprobe::core
