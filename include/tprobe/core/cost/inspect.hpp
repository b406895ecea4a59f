// `tprobe inspect` analysis: parameters and bytes by block, the linear-only 4-bit trap, LoRA
// targets, the memory budget estimate and the config check. Plain inputs, a plain report; the
// views are in inspect_report.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::core {

// kBuffers: persistent buffers stored in the checkpoint (layer_scalar); they are counted in bytes
// but not in parameter totals, as torch's parameters() does not list them.
enum class Block {
  kExperts,
  kAttention,
  kDenseMlp,
  kRouterNorms,
  kEmbedding,
  kLmHead,
  kNonText,
  kBuffers,
  kOther
};

const char* to_string(Block block);    // evidence key: "experts", "attention", ...
const char* block_label(Block block);  // table label
// Which block a tensor belongs to, given the text decoder's prefix.
Block classify_tensor(const std::string& name, const std::string& prefix);
bool is_buffer(const std::string& name);

struct BlockRow {
  Block block = Block::kOther;
  int64_t tensors = 0;
  int64_t params = 0;
  uint64_t bytes = 0;
};

struct BlockSummary {
  std::vector<BlockRow> rows;  // every block that has tensors, in enum order
  int64_t total_params = 0;    // parameters: every block but kBuffers
  uint64_t total_bytes = 0;    // every tensor
  int64_t buffer_elements = 0;
  int64_t text_params = 0;  // parameters outside kNonText
  uint64_t text_bytes = 0;
};

BlockSummary summarize_blocks(const std::vector<TensorMeta>& tensors, const std::string& prefix);

// What a quantizer that replaces only linear-layer weights (bitsandbytes-style: walks nn.Linear)
// would do: every 2-D ".weight" tensor except embeddings and lm_head becomes 4-bit NF4 with one
// fp32 absmax per 64 weights (0.5625 bytes/param); everything else, above all the fused 3-D
// expert tensors, stays as stored.
struct QuantizationEstimate {
  double bits_per_param = 4.0;
  int64_t block_size = 64;
  int64_t absmax_bytes = 4;
  int64_t quantized_tensors = 0;
  int64_t quantized_params = 0;
  uint64_t quantized_bytes_before = 0;
  uint64_t quantized_bytes_after = 0;
  int64_t untouched_params = 0;  // everything not quantized
  uint64_t untouched_bytes = 0;
  int64_t untouched_expert_params = 0;  // of which the fused 3-D experts
  uint64_t untouched_expert_bytes = 0;
  uint64_t bytes_before = 0;
  uint64_t bytes_after = 0;
  int64_t total_params = 0;
};

bool is_quantizable_linear(const TensorMeta& tensor);
QuantizationEstimate estimate_linear_only_4bit(const std::vector<TensorMeta>& tensors,
                                               const std::string& prefix);

// Memory budget of one LoRA training step, estimated from shapes (profile measures it).
struct MemoryInputs {
  int64_t batch = 2;
  int64_t width = 16384;           // tokens per sequence
  int64_t ce_chunk_tokens = 4096;  // tokens per cross-entropy chunk
  uint64_t weight_bytes = 0;       // text weights as stored
  int64_t trainable_params = 0;    // LoRA parameters
};

struct MemoryRow {
  std::string key;    // evidence key, ends in _bytes
  std::string label;  // table label
  uint64_t bytes = 0;
  std::string basis;  // the formula, in words
};

struct MemoryEstimate {
  MemoryInputs inputs;
  std::vector<MemoryRow> rows;  // weights, adapter state, checkpointed inputs, CE naive, CE chunked
  uint64_t total_naive_ce_bytes = 0;
  uint64_t total_chunked_ce_bytes = 0;
};

// Assumptions (docs/inspect.md): adapters, their grads and AdamW's two moments in fp32
// (16 bytes/param); gradient checkpointing keeps each layer's input (batch x width x hidden in
// the activation dtype); cross-entropy over a softcapped head materialises per logit: the logits,
// the saved tanh input and the capped logits in the activation dtype plus an fp32 upcast and an
// fp32 softmax/gradient (3 x act + 8 bytes: 14 for bf16). Not included: the recomputed layer's
// working set (MoE routing buffers), allocator fragmentation, CUDA context.
MemoryEstimate estimate_memory(const ModelConfig& config, const MemoryInputs& inputs);

// The estimate set beside what `tprobe profile`'s memory step measured (results.points[].memory of
// a profile evidence) at the same batch × width: each estimate row with the measured item(s) it
// stands for and the error, and the measured items the estimate has no row for (its limits).
struct MemoryCheckRow {
  std::string label;
  std::optional<uint64_t> estimated;  // none: the estimate has no such row
  std::optional<int64_t> measured;    // none: the memory step has no such item
  std::string measured_items;         // the measured item keys summed
  std::string note;
};
struct MemoryCheck {
  bool done = false;
  std::string why_not;  // no matching point, no memory step in the evidence
  std::string source;   // the evidence file
  std::string device;   // the memory step's
  std::vector<MemoryCheckRow> rows;
};
// `profile_results` is a profile evidence's `results`; throws nothing for a missing field (that is
// `why_not`).
MemoryCheck check_memory_estimate(const MemoryEstimate& estimate, const Json& profile_results,
                                  const std::string& source);

// Tensors and bytes per stored dtype; `supported` is false for dtypes tprobe cannot compute with.
struct DtypeRow {
  std::string dtype;
  int64_t tensors = 0;
  uint64_t bytes = 0;
  bool supported = false;
};
std::vector<DtypeRow> tally_dtypes(const std::vector<TensorMeta>& tensors);

// What the report keeps of the checkpoint it read (results.source), as values: the report must not
// borrow the Checkpoint, so that it can be read back from its evidence.
struct CheckpointFile {
  std::string path;
  uint64_t tensors = 0;
  uint64_t file_bytes = 0;
  uint64_t header_bytes = 0;  // the JSON header's length
};
struct CheckpointSource {
  std::string dir;
  bool sharded = false;
  std::string text_prefix;
  uint64_t tensors = 0;
  std::vector<CheckpointFile> files;
  std::vector<std::string> config_defaulted_fields;  // ConfigJsonInfo::defaulted_fields
  bool per_layer_config_form = false;
  std::vector<std::string> warnings;  // the index's non-fatal observations
};
CheckpointSource checkpoint_source(const Checkpoint& checkpoint);

// Everything `tprobe inspect` reads: a checkpoint's headers, or an embedded config's layout.
struct InspectInput {
  ModelConfig config;
  std::vector<TensorMeta> tensors;
  std::string prefix = kMultimodalTextPrefix;
  const Checkpoint* checkpoint = nullptr;  // the source of `tensors`; nullptr: embedded config
  std::string embedded_name;               // when checkpoint is nullptr
  std::vector<std::string> targets;        // LoRA targets (unknown names are reported missing)
  int64_t rank = 64;
  MemoryInputs memory;  // batch, width, ce_chunk_tokens; weights and trainable are filled in
  const Json* measured = nullptr;  // a profile evidence's results: the estimate is checked against it
  std::string measured_source;
};

struct InspectReport {
  ModelConfig config;
  std::string prefix;
  std::optional<CheckpointSource> source;  // none: an embedded config
  std::string embedded_name;
  int64_t tensor_count = 0;
  std::vector<Disagreement> disagreements;  // config vs tensors (checkpoints only)
  BlockSummary blocks;
  QuantizationEstimate quantization;
  LoraPlan lora;
  MemoryEstimate memory;
  std::optional<MemoryCheck> memory_check;  // with InspectInput::measured
  std::vector<DtypeRow> dtypes;
  std::vector<Diagnostic> diagnostics;  // index warnings, defaults, dtypes, absent targets
  Outcome outcome = Outcome::kOk;       // kNo when config.json disagrees with the tensors
};

// Throws UsageError for a non-positive rank or an empty target list.
InspectReport analyze_inspect(const InspectInput& input);
// The diagnostics and outcome, from the report's source, dtypes, LoRA plan and disagreements:
// what analyze_inspect ends with, and what the evidence reader rebuilds them with.
void add_inspect_diagnostics(InspectReport& report);

}  // namespace tprobe::core
