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
// its cgroup's memory.max and the process's RLIMIT_AS; on a GPU the device's total memory (the
// caller's figure). bytes 0: unknown (nothing is refused).
struct MemoryLimit {
  int64_t bytes = 0;
  std::string what;  // "the host's physical memory", "the cgroup's memory.max", "RLIMIT_AS", ...
};
MemoryLimit host_memory_limit();

// Why the point cannot run, when weights_bytes + the plan's floor exceed the limit: one sentence
// with every size ("" when it fits or the limit is unknown).
std::string plan_refusal(const StepPlan& plan, int64_t weights_bytes, const MemoryLimit& limit);

}  // namespace tprobe::core
