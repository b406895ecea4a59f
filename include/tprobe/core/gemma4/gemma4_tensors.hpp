// The Gemma-4 text decoder's checkpoint tensor names and shapes, derived from a ModelConfig
// (docs/gemma4-model.md#checkpoint-tensors), and the config-vs-checkpoint cross-check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::core {

// Prefix of the text decoder: multimodal checkpoints (Gemma4ForConditionalGeneration) and
// text-only conversions (Gemma4ForCausalLM).
inline constexpr const char* kMultimodalTextPrefix = "model.language_model.";
inline constexpr const char* kTextOnlyPrefix = "model.";

// What a text-decoder tensor is, so that code holding tensors (the libtorch model) maps the layout
// below onto its members without spelling tensor names itself.
enum class TensorRole {
  kEmbedTokens,
  kFinalNorm,
  kLmHead,  // only when tie_word_embeddings is false
  kQProj,
  kKProj,
  kVProj,  // absent on key=value layers (attention_k_eq_v full layers)
  kOProj,
  kQNorm,
  kKNorm,
  kInputLayernorm,
  kPostAttentionLayernorm,
  kPreFeedforwardLayernorm,
  kPostFeedforwardLayernorm,
  kPostFeedforwardLayernorm1,  // MoE block only (the three norms around the expert branch)
  kPreFeedforwardLayernorm2,
  kPostFeedforwardLayernorm2,
  kMlpGateProj,
  kMlpUpProj,
  kMlpDownProj,
  kRouterProj,  // MoE block only: router and experts
  kRouterScale,
  kRouterPerExpertScale,
  kExpertsGateUp,
  kExpertsDown,
  kLayerScalar,
};

struct TextTensor {
  TensorMeta meta;  // full name (prefix included), the config's dtype, shape
  TensorRole role = TensorRole::kEmbedTokens;
  int64_t layer = -1;  // decoder layer, -1 for model-level tensors
};

// The one definition of the text decoder's checkpoint layout: every tensor it loads, in HF's
// named_parameters order (embedding, layer by layer, final norm, then lm_head when untied). Per
// layer: q/k/(v)/o_proj, q_norm, k_norm, input/post-attention norms, pre/post feed-forward norms,
// the three MoE norms, dense mlp gate/up/down, router.{proj.weight,scale,per_expert_scale} and
// experts.{gate_up_proj,down_proj} when enable_moe_block, and layer_scalar
// (docs/gemma4-model.md#checkpoint-tensors).
std::vector<TextTensor> text_tensor_layout(const ModelConfig& config,
                                           const std::string& prefix = kMultimodalTextPrefix);
// The same, name/dtype/shape only.
std::vector<TensorMeta> expected_text_tensors(const ModelConfig& config,
                                              const std::string& prefix = kMultimodalTextPrefix);

// One linear module (nn.Linear, no bias) of a decoder layer: the candidates for LoRA.
struct LinearModule {
  std::string target;  // PEFT target_modules name, e.g. "q_proj"
  std::string path;    // module path inside the layer, e.g. "self_attn.q_proj"
  TensorRole role = TensorRole::kQProj;
  int64_t in_features = 0;
  int64_t out_features = 0;
};

// The linear modules layer `layer` has, in HF order (q, k, v, o, gate, up, down); v_proj is left
// out on key=value layers and the dense MLP when intermediate_size is 0.
std::vector<LinearModule> layer_linear_modules(const ModelConfig& config, int64_t layer);
// The seven target names of those modules, in that order: the LoRA targets tprobe knows.
std::vector<std::string> linear_module_names();

// The decoder prefix a set of tensor names uses: "model.language_model." if any name starts with
// it, else "model.". Throws if neither holds a "layers." tensor.
std::string detect_text_prefix(const std::vector<std::string>& names);

// One disagreement between the config and the checkpoint.
struct Disagreement {
  std::string tensor;   // full tensor name
  std::string field;    // the config field that disagrees (e.g. "global_head_dim"), or ""
  std::string message;  // one sentence naming expected and found
};

// Compares the tensors of a checkpoint (name, dtype, shape) with what `config` implies: head
// dims via q_norm length, kv heads via k_proj rows / head_dim, presence of v_proj, expert shapes,
// every other expected shape, missing and unexpected text-decoder tensors (per-layer input
// embedding tensors are reported as such). Non-text tensors (outside the prefix and not
// lm_head.weight) are ignored. Empty result = they agree.
std::vector<Disagreement> cross_check(const ModelConfig& config,
                                      const std::vector<TensorMeta>& tensors,
                                      const std::string& prefix);

}  // namespace tprobe::core
