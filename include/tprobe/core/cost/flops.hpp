// FLOPs of one LoRA fwd+bwd step of a Gemma-4 decoder, intended vs performed (docs/flops.md).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/step/attention_path.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::core {

// The attention path (core/gemma4/attention_path.hpp) decides what "performed" means
// (docs/flops.md has the table).

struct FlopsRequest {
  int64_t batch = 2;
  int64_t width = 16384;         // padded per-sequence width n
  std::vector<int64_t> lengths;  // real tokens per sequence (right-padded); empty: all = width
  AttentionPath path = AttentionPath::kSdpa;
  std::vector<std::string> lora_targets;  // e.g. q_proj,k_proj,...; empty: no adapters
  int64_t lora_rank = 64;
  bool gradient_checkpointing = true;
};

enum class Pass { kForward = 0, kBackward = 1, kRecompute = 2 };
inline constexpr int kPasses = 3;

// FLOPs of one pass split, for one quantity (intended or performed).
using PassFlops = std::array<double, kPasses>;
double total(const PassFlops& f);

// One component on one layer type (layer_type "model" for embedding, head and loss).
struct FlopsRow {
  std::string component;   // "attn_scores", "q_proj", "experts", "lora", "lm_head", ...
  std::string layer_type;  // "sliding_attention", "full_attention", "model"
  int64_t layers = 0;      // how many layers the row sums over (1 for model rows)
  PassFlops intended{};
  PassFlops performed{};
};

struct LoraModules {
  std::string target;
  int64_t modules = 0;  // layers that have this module
  int64_t trainable_params = 0;
};

struct FlopsReport {
  FlopsRequest request;
  std::string model;
  int64_t real_tokens = 0;    // Σ lengths
  int64_t padded_tokens = 0;  // batch · width
  bool padded = false;        // some sequence shorter than width
  // Query-key pairs per layer type, summed over the batch, one forward.
  double pairs_intended_sliding = 0;
  double pairs_performed_sliding = 0;
  double pairs_intended_full = 0;
  double pairs_performed_full = 0;
  std::vector<FlopsRow> rows;
  std::vector<LoraModules> lora;
  PassFlops intended_total{};
  PassFlops performed_total{};
  std::vector<Diagnostic> diagnostics;  // none today: every input it cannot count is an error
  Outcome outcome = Outcome::kOk;       // a count is never a "no"

  // Sum of rows matching component (empty: any) and layer type (empty: any).
  PassFlops sum(bool performed, std::string_view component, std::string_view layer_type) const;
};

// Throws tprobe::Error for an unknown LoRA target, a length outside 1..width, a lengths list
// whose size is not batch, or a non-positive batch/width/rank.
FlopsReport count_flops(const ModelConfig& config, const FlopsRequest& request);

// Query-key pairs one sequence of `length` real tokens attends to under each rule.
double causal_pairs(int64_t length);                  // L(L+1)/2
double window_pairs(int64_t length, int64_t window);  // Σ_q min(q+1, W)

// Model FLOP utilisation: flops / (seconds · peak_tflops · 1e12).
double mfu(double flops, double step_time_s, double peak_tflops);

}  // namespace tprobe::core
