// What a measured step will certainly hold at once, known before it runs: a lower bound on its
// memory from the model's shapes and the point, so that a point that cannot fit on the device (or,
// on the CPU, in the host) is refused with the sizes instead of asking the allocator for them
// (issue 33: a 1,048,576-token CPU point asked for 17.6 TB). The bound counts only tensors the
// step cannot run without, at the moment they are all alive:
//   - the weights and the adapters (measured by the caller after building the model);
//   - the decoder layers' inputs, every one alive from its layer's forward to its backward (saved
//     by its checkpoint, or among the layer's own saved tensors without checkpointing):
//     layers × batch × tokens × hidden at the model's dtype;
//   - the largest single tensor of one op, alive beside them: an eager layer's fp32 attention
//     probabilities [B, H, S, S]; the mask a path materialises; a blockwise block row's fp32
//     scores [B, H, 512, keys]; the loss head's fp32 logits (the whole [B·S, V] for the naive
//     cross-entropy, one chunk of the chunked forms).
// Everything else (the MLP's and experts' working sets, gradients, workspaces, the allocator's
// rounding) is left out: the real peak is higher, never lower, so a refused point could not have
// run, and a point that passes may still run out of memory — that stays a measured OOM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/step/attention_path.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::core {

struct StepPlanRequest {
  int64_t batch = 1;
  int64_t width = 1;
  std::vector<int64_t> lengths;  // real tokens per row (empty: all real)
  AttentionPath attn = AttentionPath::kEager;
  bool cuda = false;
  bool naive_ce = false;      // the whole logits at once; otherwise chunks of ce_chunk tokens
  int64_t ce_chunk = 4096;
  int64_t dtype_bytes = 2;    // the model's dtype: bf16 2, fp32 4, fp64 8
  bool mask_per_row = false;  // an attention_mask was passed: masks are [B, 1, S, S]
};

// One planned tensor; bytes in double (a typo'd width can make it past 2^63).
struct PlannedTensor {
  std::string what;            // "eager attention probabilities of a full layer"
  std::vector<int64_t> shape;  // as the engine allocates it
  int64_t element_bytes = 0;
  double bytes = 0;
};

struct StepPlan {
  PlannedTensor largest;    // the largest single tensor of one op
  double layer_inputs_bytes = 0;
  int64_t layers = 0;
  // layer_inputs_bytes + largest.bytes: the activations' lower bound (weights not included).
  double activation_floor_bytes = 0;
};

StepPlan plan_step(const ModelConfig& config, const StepPlanRequest& request);

// The memory a run may use, with its source: on the CPU the least of the host's physical memory,
// its available memory (MemAvailable in /proc/meminfo), its cgroup's memory.max and the
// process's RLIMIT_AS and RLIMIT_DATA; on a GPU the device's total memory (the caller's figure).
// bytes 0: unknown (nothing is refused). For the tests, TPROBE_FAULT_MEMORY_LIMIT=<bytes> in the
// environment is one more limit ("the injected limit"): AddressSanitizer's shadow memory cannot
// start under a small RLIMIT_AS, so a test cannot set one.
struct MemoryLimit {
  int64_t bytes = 0;
  std::string what;  // "the host's physical memory", "the cgroup's memory.max", "RLIMIT_AS", ...
};
MemoryLimit host_memory_limit();

// Why the point cannot run, when weights_bytes + the plan's floor exceed the limit: one sentence
// with every size ("" when it fits or the limit is unknown). weights_bytes counts the weights,
// the adapters and the adapters' gradients (every step's backward makes them).
std::string plan_refusal(const StepPlan& plan, int64_t weights_bytes, const MemoryLimit& limit);

// What the model and its LoRA adapters take once built, from the config and the options alone,
// so that a model the machine cannot hold is refused before any of it is allocated (issue 46: a
// CPU profile at LoRA rank 1,048,576 grew to 18.3 GB and was killed). Bytes in double: they are
// compared, never wrapped.
struct ModelPlanRequest {
  int64_t dtype_bytes = 2;             // the engine's dtype for the weights
  std::vector<std::string> lora_targets;  // linear module names; empty: no adapters
  int64_t lora_rank = 0;
  int64_t lora_dtype_bytes = 4;        // fp32 adapters, or the model's dtype
};
struct ModelPlan {
  double weights_bytes = 0;
  int64_t lora_modules = 0;
  double lora_parameters = 0;
  double adapter_bytes = 0;       // LoRA A and B
  double adapter_grad_bytes = 0;  // their gradients, as large (no optimizer state: none runs)
  double total_bytes() const { return weights_bytes + adapter_bytes + adapter_grad_bytes; }
};
ModelPlan plan_model(const ModelConfig& config, const ModelPlanRequest& request);

// Why the model cannot be built, when the plan's total exceeds the limit: one sentence with every
// size ("" when it fits or the limit is unknown). `what` names the run ("profile", "parity").
std::string model_refusal(const ModelPlan& plan, int64_t lora_rank, const MemoryLimit& limit);

// What `parity` certainly holds at once, before it loads the model (issue 46: a 200,000-token
// reference asked the allocator for 40 GB): the weights; the forward's largest single tensor (the
// step plan's, at the reference's batch and sequence); the logits [B, S, V] at the model's dtype
// and both fp64 copies the comparison holds (tprobe's and the reference's); with --dump-hidden,
// every layer's fp32 hidden states; with --backward, the layers' saved inputs instead of the
// fp64 copies.
struct ParityPlan {
  ModelPlan model;
  StepPlan step;
  double logits_bytes = 0;
  double hidden_dump_bytes = 0;
  double total_bytes() const;
};
ParityPlan plan_parity(const ModelConfig& config, const StepPlanRequest& request, bool backward,
                       bool dump_hidden);
// Why parity cannot run: one sentence with every size ("" when it fits or the limit is unknown).
std::string parity_refusal(const ParityPlan& plan, const MemoryLimit& limit);

}  // namespace tprobe::core
