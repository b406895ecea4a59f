// The Gemma-4 text decoder (MoE) in libtorch, op for op as docs/gemma4-model.md
// describes Hugging Face's, with LoRA adapters, per-layer gradient checkpointing and a
// sequence-chunked softcapped cross-entropy.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/step/step_config.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"
#include "tprobe/model/torch_compat.hpp"

namespace tprobe::model {

// LoRA as PEFT applies it: y = x·Wᵀ + (alpha/rank)·(x·Aᵀ)·Bᵀ, dropout 0, on every nn.Linear
// whose module name (core::layer_linear_modules: q/k/v/o_proj, gate/up/down_proj) is listed.
// The fused 3-D expert tensors are not nn.Linear modules and never receive adapters (domain
// item 11), exactly as with PEFT.
struct LoraConfig {
  std::vector<std::string> targets;  // empty: no adapters
  int64_t rank = 0;
  double alpha = 0.0;
  // The adapter factors in fp32 while the model runs in bf16/fp16, as PEFT's default
  // (`autocast_adapter_dtype=True`) keeps them: the LoRA branch is computed in fp32 and the layer
  // output cast back to the model dtype (docs/gemma4-engine.md, "LoRA").
  bool fp32 = false;
  double scale() const { return rank > 0 ? alpha / static_cast<double>(rank) : 0.0; }
};

// Throws UsageError for an unknown target (the known ones: core::linear_module_names()) or a
// non-positive rank or alpha.
void validate_lora(const LoraConfig& lora);

// The cross-entropy's forms (core::CeForm): kChunked, tprobe's one autograd node over every chunk
// (the backward in place, one fp32 [chunk, V] buffer at a time); kChunkCheckpoint, the Hugging Face
// harness's form (benchmarks/hf_lora_step.py's chunked_ce_loss): each chunk's matmul, softcap,
// fp32 cast and cross_entropy under its own checkpoint, recomputed op by op in the backward, so its
// saved tensors (the tanh output, the log-softmax) and their gradients are what HF allocates;
// kNaive, the whole logits at once.

struct ModelOptions {
  torch::Dtype dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  core::AttentionPath attn = core::AttentionPath::kEager;  // sliding and full layers alike
  core::MoeDispatch moe = core::MoeDispatch::kLoop;
  bool gradient_checkpointing = false;
  // HF's enable_input_require_grads: the embedding output requires grad so that a checkpointed
  // block whose base is frozen still carries gradients into its adapters (docs/findings.md#f13).
  // false reproduces the inert-adapter trap; only tests turn it off.
  bool input_requires_grad = true;
  core::CeForm ce = core::CeForm::kChunked;
  int64_t ce_chunk = 4096;  // rows (tokens) per CE chunk
  // RMSNorm: false, the reference formula op by op as transformers writes it (bit-identical to
  // HF); true, libtorch's at::rms_norm (one fused kernel each way on CUDA, libtorch >= 2.9).
  bool fused_rms_norm = false;
  // Hugging Face handed an all-ones [B, S] attention_mask (a collator's): the step's attend-masks
  // are built at [B, 1, S, S] with the padding mask and-ed in, where without one they are
  // [1, 1, S, S] and broadcast over the batch. Either way the masks a layer type materialises
  // (sdpa: the sliding layers once S >= the window, the full ones skip to is_causal; eager: both)
  // are built once per forward and handed to every layer; a checkpointed layer saves its mask for
  // the recompute, so the masks live as long as the step's graph, as HF's mask mapping does.
  // Values are identical; only the bytes held differ.
  bool attention_mask_passed = false;
  // The MoE layers' top-k: the router's own, or forced onto core::forced_assignment's (the gates'
  // values kept).
  core::Routing routing;
  // Told which phase, part and layer of the model is running (the profile probe's CUPTI
  // tagging, core/trace/step_trace.hpp); not owned, may be null.
  core::StepObserver* observer = nullptr;
};

// One nn.Linear (no bias) with an optional LoRA pair.
struct Linear {
  torch::Tensor weight;  // [out, in], frozen
  torch::Tensor lora_a;  // [rank, in]   (undefined without an adapter)
  torch::Tensor lora_b;  // [out, rank]
  double lora_scale = 0.0;
  bool has_lora() const { return lora_a.defined(); }
};

// x·Wᵀ plus the LoRA branch when there is one; fp32 factors under a bf16/fp16 x run the branch and
// the sum in fp32 and return x's dtype (PEFT's LoRA Linear).
torch::Tensor apply_linear(const Linear& l, const torch::Tensor& x);

// The expert block's row gathers, differentiable with a gather as their backward (no index_add_).
// permute_rows: x[perm], `inverse` the inverse permutation of `perm`. gather_token_copies:
// row i is x[perm[i] / k], where perm orders the T·k (token, slot) pairs of x's T tokens; the
// gradient of a token sums its k rows.
torch::Tensor permute_rows(const torch::Tensor& x, const torch::Tensor& perm,
                           const torch::Tensor& inverse);
torch::Tensor gather_token_copies(const torch::Tensor& x, const torch::Tensor& perm,
                                  const torch::Tensor& inverse, int64_t k);

// transformers 5.17's grouped_mm_experts_forward (integrations/moe.py), op for op: one row per
// (token, k) pair by advanced indexing (hidden_states[token_idx]), a stable argsort by expert and
// its inverse, a second gather into expert order, histc counts and int32 offsets, the gate/up
// grouped GEMM, gelu_tanh(gate)·up, the down grouped GEMM, × the routing weight, back to pair
// order, and index_add_ into a zero tensor of x's dtype. `gemm(a, b, offs)` is the grouped GEMM
// (at::_grouped_mm on CUDA; a test passes a per-expert loop). x [T, H]; idx, w [T, k];
// gate_up [E, 2I, H]; down [E, H, I].
using GroupedGemm = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&,
                                                const torch::Tensor&)>;
torch::Tensor hf_grouped_experts(const torch::Tensor& x, const torch::Tensor& idx,
                                 const torch::Tensor& w, const torch::Tensor& gate_up,
                                 const torch::Tensor& down, const GroupedGemm& gemm);

struct DecoderLayer {
  core::LayerGeometry geometry;
  Linear q_proj, k_proj, v_proj, o_proj;  // v_proj.weight undefined on key=value layers
  torch::Tensor q_norm, k_norm;           // [head_dim]
  torch::Tensor input_layernorm, post_attention_layernorm;
  torch::Tensor pre_feedforward_layernorm, post_feedforward_layernorm;
  torch::Tensor post_feedforward_layernorm_1, pre_feedforward_layernorm_2,
      post_feedforward_layernorm_2;
  Linear gate_proj, up_proj, down_proj;   // dense MLP
  Linear router_proj;                     // [E, H]; never a LoRA target here
  torch::Tensor router_scale;             // [H]
  torch::Tensor router_per_expert_scale;  // [E]
  torch::Tensor experts_gate_up;          // [E, 2I, H]
  torch::Tensor experts_down;             // [E, H, I]
  torch::Tensor layer_scalar;             // [1]
};

// What one forward resolved to (recorded in evidence as attn_requested / attn_resolved).
struct ForwardRecord {
  std::string
      attn_sliding;  // e.g. "eager", "sdpa(mask=bool,repeat_kv)", "flash_varlen(window=1023)"
  std::string attn_full;
  std::string moe;  // "loop" or "grouped_mm"
  // Diagnostics: when set (and checkpointing is off), the embedding output and every layer's
  // output are appended here, detached.
  std::vector<torch::Tensor>* layer_outputs = nullptr;
  // Tokens per expert ([E] int64 on the device, one per layer, undefined for a layer without
  // experts) summed over this forward's MoE layers (never a recompute's), and the (token, choice)
  // pairs one layer routed.
  std::vector<torch::Tensor> expert_tokens;
  int64_t routed_per_layer = 0;
};

struct LossResult {
  torch::Tensor loss;  // fp32 scalar (mean over non-ignored targets)
  int64_t num_targets = 0;
};

class Gemma4Model {
 public:
  // Random initialisation directly on options.device in options.dtype (no host copy):
  // embedding, projections, router and expert tensors ~ N(0, 0.02²) (HF's initializer_range);
  // RMSNorm weights, router.scale, router.per_expert_scale and layer_scalar = 1.
  static Gemma4Model random(const core::ModelConfig& config, const ModelOptions& options,
                            uint64_t seed);
  // Empty tensors everywhere; a loader fills them by name (see parameters()).
  static Gemma4Model empty(const core::ModelConfig& config, const ModelOptions& options);

  // Adds adapters (lora_A ~ kaiming-uniform(a=√5) like PEFT, lora_B = 0) on options' device.
  void add_lora(const LoraConfig& lora, uint64_t seed);

  const core::ModelConfig& config() const { return config_; }
  ModelOptions& options() { return options_; }
  const ModelOptions& options() const { return options_; }
  const LoraConfig& lora() const { return lora_; }
  std::vector<DecoderLayer>& layers() { return layers_; }
  torch::Tensor& embed_tokens() { return embed_; }
  torch::Tensor& final_norm() { return final_norm_; }

  // Base tensors by their HF names without the model prefix ("embed_tokens.weight",
  // "layers.3.self_attn.q_proj.weight", "layers.3.experts.gate_up_proj", ...), with the shape
  // each must have. Pointers stay valid while the model lives.
  std::vector<std::pair<std::string, torch::Tensor*>> parameters();
  // LoRA tensors by PEFT-relative name ("layers.0.self_attn.q_proj.lora_A.weight").
  std::vector<std::pair<std::string, torch::Tensor*>> lora_parameters();
  int64_t count_base_parameters() const;
  int64_t count_lora_parameters() const;
  int64_t count_lora_modules() const;

  // `lengths` (all three): real tokens per row, the rest of each row is right-padding; empty =
  // every row is real to the end. Padding changes the attention masks as Hugging Face's sdpa
  // masks do (docs/gemma4-engine.md, "Padding"); values at padded positions are not meaningful.
  // Final hidden states [B, S, H] after the final norm.
  torch::Tensor hidden_states(const torch::Tensor& input_ids, ForwardRecord* record = nullptr,
                              const std::vector<int64_t>& lengths = {});
  // Softcapped logits [B, S, V] (materialised: for parity and tests, not for training widths).
  torch::Tensor logits(const torch::Tensor& input_ids, ForwardRecord* record = nullptr,
                       const std::vector<int64_t>& lengths = {});
  // HF's causal-LM loss: labels = input_ids shifted left, the last real position of each row and
  // every padded position ignored, mean over targets.
  LossResult loss(const torch::Tensor& input_ids, ForwardRecord* record = nullptr,
                  const std::vector<int64_t>& lengths = {});
  // The second half of loss(): the tied head and CE on final hidden states (phase loss).
  LossResult head_loss(const torch::Tensor& hidden, const torch::Tensor& input_ids,
                       const std::vector<int64_t>& lengths = {});

  // One decoder layer, outside any checkpointing (the checkpoint Function calls this too, with
  // phase kRecompute).
  // `mask`: the forward's attend-mask for this layer's type (StepMasks; undefined: the attention
  // builds its own where it needs one).
  torch::Tensor layer_forward(size_t index, const torch::Tensor& x, ForwardRecord* record,
                              const std::vector<int64_t>& lengths = {},
                              core::StepPhase phase = core::StepPhase::kForward,
                              const torch::Tensor& mask = {}) const;

  // The attend-masks one forward builds and hands to its layers (ModelOptions::
  // attention_mask_passed); undefined where a layer type needs none or builds its own.
  struct StepMasks {
    torch::Tensor sliding, full;
    const torch::Tensor& of(core::LayerType type) const {
      return type == core::LayerType::kSliding ? sliding : full;
    }
  };
  StepMasks step_masks(int64_t batch, int64_t width, const std::vector<int64_t>& lengths) const;

 private:
  Gemma4Model(core::ModelConfig config, ModelOptions options);
  torch::Tensor run_layers(torch::Tensor x, ForwardRecord* record,
                           const std::vector<int64_t>& lengths, const StepMasks& masks = {});

  core::ModelConfig config_;
  ModelOptions options_;
  LoraConfig lora_;
  torch::Tensor embed_;       // [V, H]
  torch::Tensor final_norm_;  // [H]
  std::vector<DecoderLayer> layers_;
  // The forced top-k (options_.routing) per token count, on the device: every layer of a forward
  // routes the same tokens, and a point's steps repeat them.
  mutable std::map<int64_t, torch::Tensor> forced_idx_;
};

// HF's Gemma4RMSNorm: fp32 inside, mean of squares + eps, pow(-0.5), weight multiplied in fp32
// (weight as-is, not 1 + w), one rounding at the end. `weight` undefined: the weight-less norm.
// fused: through fused_rms_norm (attention.hpp) instead of the formula.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                       bool fused = false);

// RoPE cos/sin [B or 1, S, D] in `dtype` for a layer type (§2.2), from fp32 angles.
std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const core::RopeParams& rope, int64_t head_dim,
                                                     const torch::Tensor& position_ids,
                                                     torch::Dtype dtype);
torch::Tensor rope_inv_freq(const core::RopeParams& rope, int64_t head_dim);

// Softcapped cross-entropy of hidden [N, H] against the tied head [V, H], mean over labels != -100.
// kChunked never holds more than `chunk` rows of logits, in forward or backward (recomputed per
// chunk); kNaive materialises them as HF does.
// `observer` (may be null) is told when the chunked backward runs (phase loss).
torch::Tensor softcapped_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& head,
                                       const torch::Tensor& labels, double softcap, core::CeForm mode,
                                       int64_t chunk, core::StepObserver* observer = nullptr);

// Sizes from the config alone (no tensors): text parameters (layer_scalar excluded, as HF's
// num_parameters excludes buffers), LoRA modules and LoRA parameters for `lora`.
struct ParameterCounts {
  int64_t base_parameters = 0;
  int64_t lora_modules = 0;
  int64_t lora_parameters = 0;
};
ParameterCounts count_parameters(const core::ModelConfig& config, const LoraConfig& lora);

// lora_B tensors whose gradient is undefined or all zero after a backward (docs/findings.md#f13):
// empty = every adapter learns.
std::vector<std::string> inert_lora_b(Gemma4Model& model);

// The step's optimizer (--optimizer adamw): AdamW on the LoRA parameters as PEFT + Trainer run it,
// TrainingArguments(optim="adamw_torch") with its defaults (below). libtorch's own
// torch::optim::AdamW (the C++ frontend's, in 1.13 and 2.x): each parameter's two moments
// (exp_avg, exp_avg_sq) in its dtype — fp32 for fp32 adapters, 8 B per parameter — allocated
// lazily at its first step, the decoupled weight decay, the bias corrections. The C++ update runs
// parameter by parameter where Python's default is foreach (multi-tensor): the same values, a
// smaller transient in the optimizer's own phase.
struct AdamWSettings {
  double lr = 5e-5;  // TrainingArguments.learning_rate
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // TrainingArguments.weight_decay (torch's own default is 1e-2)
};

class LoraOptimizer {
 public:
  // Every LoRA parameter of `model` (none: an optimizer with nothing to do).
  explicit LoraOptimizer(Gemma4Model& model, AdamWSettings settings = {});
  // Any leaf tensors (the tests' hand-checked parameter).
  explicit LoraOptimizer(std::vector<torch::Tensor> params, AdamWSettings settings = {});
  ~LoraOptimizer();
  LoraOptimizer(const LoraOptimizer&) = delete;
  LoraOptimizer& operator=(const LoraOptimizer&) = delete;

  // optimizer.step(): every parameter with a gradient; the gradients are left as they are.
  void step();
  // model.zero_grad(set_to_none=True): every parameter's gradient undefined.
  void zero_grad();
  // The moments' storage bytes (0 before the first step); the steps taken.
  int64_t state_bytes() const;
  int64_t steps() const { return steps_; }

 private:
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> adamw_;
  int64_t steps_ = 0;
};

}  // namespace tprobe::model
