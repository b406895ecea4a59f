// The engine's hook for whoever wants to know which part of a step is running (the CUPTI source
// tags launches with it). Torch-free and CUPTI-free: tprobe_model only calls it.
#pragma once

namespace tprobe::model {

// Where a launch comes from. Phase: what the step is doing; part: which piece of the model.
enum class StepPhase { kForward, kBackward, kLoss };
enum class StepPart {
  kOther,             // embedding, final norm, LoRA-free glue, anything not below
  kSlidingAttention,  // q/k/v/o projections, norms, RoPE and attention of a sliding layer
  kFullAttention,     // the same on a global (full-attention) layer
  kDenseMlp,          // the dense gate/up/down MLP
  kExperts,           // router and the routed experts
  kLossHead,          // tied head + softcapped cross-entropy
};
// Inline so that a tracer (tprobe_cupti) can name tags without linking tprobe_model.
inline const char* to_string(StepPhase phase) {
  switch (phase) {
    case StepPhase::kForward:
      return "forward";
    case StepPhase::kBackward:
      return "backward";
    case StepPhase::kLoss:
      return "loss";
  }
  return "?";
}
inline const char* to_string(StepPart part) {
  switch (part) {
    case StepPart::kOther:
      return "other";
    case StepPart::kSlidingAttention:
      return "sliding_attention";
    case StepPart::kFullAttention:
      return "full_attention";
    case StepPart::kDenseMlp:
      return "dense_mlp";
    case StepPart::kExperts:
      return "experts";
    case StepPart::kLossHead:
      return "loss_head";
  }
  return "?";
}

// Called on the thread that launches the work (the autograd engine's thread during backward).
// enter/leave nest; the innermost (phase, part) applies to launches in between.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void enter(StepPhase phase, StepPart part) = 0;
  virtual void leave() = 0;
};

// Around the one extra step per point that is traced (never a timed one): the step runner calls
// begin() before it and end() after the step has synchronised; in between the engine tags.
// discard() drops what the last begin()..end() recorded: the priming step before the first
// traced step of a run (CUPTI's one-time setup of the process would otherwise land in it).
class StepTracer : public StepObserver {
 public:
  virtual void begin() = 0;
  virtual void end() = 0;
  virtual void discard() = 0;
};

// RAII: enter on construction, leave on destruction; nothing when observer is null.
class ObserverScope {
 public:
  ObserverScope(StepObserver* observer, StepPhase phase, StepPart part) : observer_(observer) {
    if (observer_) observer_->enter(phase, part);
  }
  ~ObserverScope() {
    if (observer_) observer_->leave();
  }
  ObserverScope(const ObserverScope&) = delete;
  ObserverScope& operator=(const ObserverScope&) = delete;

 private:
  StepObserver* observer_;
};

}  // namespace tprobe::model
