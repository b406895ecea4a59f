// The Gemma-4 MoE text decoder, LoRA, per-layer gradient checkpointing and the chunked
// softcapped cross-entropy (docs/gemma4-model.md is the spec; its #traps section lists what silently differs).
// Size: the decoder op for op in one libtorch translation unit (each costs about a minute to
// compile, docs/ARCHITECTURE.md); the lead is splitting it (issue 47).
#include "tprobe/model/gemma4.hpp"

#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/autograd_links.hpp"

namespace tprobe::model {

using core::ObserverScope;
using core::StepObserver;
using core::StepPart;
using core::StepPhase;
using core::StepTag;
using torch::Tensor;
using torch::indexing::Slice;

namespace {

constexpr int64_t kIgnoreIndex = -100;

Tensor linear(const Linear& l, const Tensor& x) { return apply_linear(l, x); }

Tensor gelu_tanh(const Tensor& x) { return torch::gelu(x, "tanh"); }

Tensor rotate_half(const Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat(
      {-x.index({"...", Slice(half, torch::indexing::None)}), x.index({"...", Slice(0, half)})},
      -1);
}

// x [B, S, H, D]; cos/sin [1, S, D] → broadcast over heads (HF unsqueeze_dim=2).
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  Tensor c = cos.unsqueeze(2);
  Tensor s = sin.unsqueeze(2);
  return x * c + rotate_half(x) * s;
}

// The member of a decoder layer that holds a linear module.
Linear* linear_of(DecoderLayer& L, core::TensorRole role) {
  switch (role) {
    case core::TensorRole::kQProj:
      return &L.q_proj;
    case core::TensorRole::kKProj:
      return &L.k_proj;
    case core::TensorRole::kVProj:
      return &L.v_proj;
    case core::TensorRole::kOProj:
      return &L.o_proj;
    case core::TensorRole::kMlpGateProj:
      return &L.gate_proj;
    case core::TensorRole::kMlpUpProj:
      return &L.up_proj;
    case core::TensorRole::kMlpDownProj:
      return &L.down_proj;
    default:
      return nullptr;
  }
}

// The tensor a checkpoint-layout entry loads into (nullptr: the model holds none, i.e. lm_head,
// which tprobe always ties to the embedding).
Tensor* tensor_of(DecoderLayer* L, Tensor* embed, Tensor* final_norm, core::TensorRole role) {
  using R = core::TensorRole;
  switch (role) {
    case R::kEmbedTokens:
      return embed;
    case R::kFinalNorm:
      return final_norm;
    case R::kLmHead:
      return nullptr;
    case R::kQNorm:
      return &L->q_norm;
    case R::kKNorm:
      return &L->k_norm;
    case R::kInputLayernorm:
      return &L->input_layernorm;
    case R::kPostAttentionLayernorm:
      return &L->post_attention_layernorm;
    case R::kPreFeedforwardLayernorm:
      return &L->pre_feedforward_layernorm;
    case R::kPostFeedforwardLayernorm:
      return &L->post_feedforward_layernorm;
    case R::kPostFeedforwardLayernorm1:
      return &L->post_feedforward_layernorm_1;
    case R::kPreFeedforwardLayernorm2:
      return &L->pre_feedforward_layernorm_2;
    case R::kPostFeedforwardLayernorm2:
      return &L->post_feedforward_layernorm_2;
    case R::kRouterProj:
      return &L->router_proj.weight;
    case R::kRouterScale:
      return &L->router_scale;
    case R::kRouterPerExpertScale:
      return &L->router_per_expert_scale;
    case R::kExpertsGateUp:
      return &L->experts_gate_up;
    case R::kExpertsDown:
      return &L->experts_down;
    case R::kLayerScalar:
      return &L->layer_scalar;
    default: {
      Linear* lin = linear_of(*L, role);
      return lin ? &lin->weight : nullptr;
    }
  }
}

bool is_target(const LoraConfig& lora, const std::string& name) {
  return std::find(lora.targets.begin(), lora.targets.end(), name) != lora.targets.end();
}

// Row gathers whose backward is a gather too. index_select's backward is index_add_, an atomic
// scatter: on the H200 at 2x16,384 the two of each expert block took 339 ms of the 6.1 s
// flash-window step (60 calls of 5-6 ms). Both gathers below are by a permutation (the second by
// a permutation of k copies of each token), so the backward is the inverse gather: no atomics, and
// the k contributions of a token are summed in a fixed order.
struct PermuteRows : public torch::autograd::Function<PermuteRows> {
  // y = x[perm]; inverse is perm's inverse permutation.
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor x, Tensor perm,
                        Tensor inverse) {
    ctx->save_for_backward({inverse});
    return x.index_select(0, perm);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    if (!grad[0].defined()) return {Tensor(), Tensor(), Tensor()};
    return {grad[0].index_select(0, ctx->get_saved_variables()[0]), Tensor(), Tensor()};
  }
};

struct GatherTokenCopies : public torch::autograd::Function<GatherTokenCopies> {
  // y[i] = x[perm[i] / k]: perm orders the T·k (token, slot) pairs; inverse is its inverse.
  // Backward: dx[t] = sum over slots c of dy[inverse[t·k + c]].
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor x, Tensor perm,
                        Tensor inverse, int64_t k) {
    ctx->save_for_backward({inverse});
    ctx->saved_data["k"] = k;
    return x.index_select(0, perm.div(k, "floor"));
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    if (!grad[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor()};
    const int64_t k = ctx->saved_data["k"].toInt();
    Tensor g = grad[0].index_select(0, ctx->get_saved_variables()[0]);
    return {g.view({-1, k, g.size(1)}).sum(1), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor gather_token_copies(const Tensor& x, const Tensor& perm, const Tensor& inverse,
                           int64_t k) {
  note_custom_node();
  return GatherTokenCopies::apply(x, perm, inverse, k);
}

Tensor permute_rows(const Tensor& x, const Tensor& perm, const Tensor& inverse) {
  note_custom_node();
  return PermuteRows::apply(x, perm, inverse);
}

Tensor hf_grouped_experts(const Tensor& x, const Tensor& idx, const Tensor& w,
                          const Tensor& gate_up, const Tensor& down, const GroupedGemm& gemm) {
  const int64_t tokens = x.size(0), top_k = idx.size(1);
  const int64_t num_experts = gate_up.size(0);
  Tensor final_states = torch::zeros_like(x);
  Tensor expert_ids = idx.reshape({-1});
  Tensor token_idx = torch::arange(tokens, idx.options())
                         .unsqueeze(1)
                         .expand({-1, top_k})
                         .reshape({-1});
  // torch.argsort(stable=True): the indices of a stable ascending sort.
  Tensor perm = std::get<1>(expert_ids.sort(/*stable=*/true, 0, false));
  Tensor inv_perm = std::get<1>(perm.sort(/*stable=*/true, 0, false));
  Tensor sample_weights = w.reshape({-1});
  Tensor current = x.index({token_idx});
  Tensor expert_ids_g = expert_ids.index({perm});
  Tensor sample_weights_g = sample_weights.index({perm});
  Tensor current_g = current.index({perm});
  Tensor per_expert = torch::histc(expert_ids_g.to(torch::kFloat), num_experts, 0,
                                   static_cast<double>(num_experts - 1));
  Tensor offsets = per_expert.cumsum(0, torch::kInt);
  Tensor gu = gemm(current_g, gate_up.transpose(-2, -1), offsets);
  auto halves = gu.chunk(2, -1);
  Tensor act = gelu_tanh(halves[0]) * halves[1];
  Tensor out_g = gemm(act, down.transpose(-2, -1), offsets);
  out_g = out_g * sample_weights_g.unsqueeze(-1);
  Tensor out = out_g.index({inv_perm});
  return final_states.index_add_(0, token_idx, out.to(final_states.scalar_type()));
}

namespace {

// Experts with the grouped_mm semantics of HF's default dispatch (§2.6): gather one row per
// (token, k) pair, sort by expert, per-expert GEMMs, activation, down GEMM, × routing weight,
// un-permute, one reduction over k.
Tensor experts_forward(const DecoderLayer& layer, const Tensor& x, const Tensor& idx,
                       const Tensor& w, core::MoeDispatch dispatch) {
  if (dispatch == core::MoeDispatch::kHfGroupedMm) {
    return hf_grouped_experts(x, idx, w, layer.experts_gate_up, layer.experts_down, grouped_mm);
  }
  const int64_t tokens = x.size(0), top_k = idx.size(1), hidden = x.size(1);
  const int64_t num_experts = layer.experts_gate_up.size(0);
  const int64_t inter = layer.experts_down.size(2);
  Tensor flat_idx = idx.reshape({-1});
  Tensor perm = std::get<1>(flat_idx.sort(/*stable=*/true, 0, false));
  Tensor inverse =
      torch::empty_like(perm).scatter_(0, perm, torch::arange(perm.numel(), perm.options()));
  Tensor xs = gather_token_copies(x, perm, inverse, top_k);
  Tensor counts = torch::bincount(flat_idx, {}, num_experts);
  Tensor ys;
  if (dispatch == core::MoeDispatch::kGroupedMm) {
    Tensor offs = counts.cumsum(0).to(torch::kInt);
    Tensor gu = grouped_mm(xs, layer.experts_gate_up.transpose(1, 2), offs);
    Tensor a = gelu_tanh(gu.index({Slice(), Slice(0, inter)})) *
               gu.index({Slice(), Slice(inter, torch::indexing::None)});
    ys = grouped_mm(a, layer.experts_down.transpose(1, 2), offs);
  } else {
    Tensor counts_cpu = counts.to(torch::kCPU);
    const int64_t* c = counts_cpu.data_ptr<int64_t>();
    std::vector<Tensor> parts;
    int64_t start = 0;
    for (int64_t e = 0; e < num_experts; ++e) {
      if (c[e] == 0) continue;
      Tensor xe = xs.narrow(0, start, c[e]);
      Tensor gu = torch::matmul(xe, layer.experts_gate_up[e].t());
      Tensor a = gelu_tanh(gu.narrow(1, 0, inter)) * gu.narrow(1, inter, inter);
      parts.push_back(torch::matmul(a, layer.experts_down[e].t()));
      start += c[e];
    }
    ys = torch::cat(parts, 0);
  }
  ys = ys * w.reshape({-1}).index_select(0, perm).unsqueeze(1);
  Tensor out = permute_rows(ys, inverse, perm);
  return out.view({tokens, top_k, hidden}).sum(1).to(x.scalar_type());
}

// Reentrant per-layer checkpoint (HF's gradient_checkpointing with use_reentrant=True): only the
// hidden state is an input, nothing inside is saved; backward recomputes the layer with grad
// enabled and back-propagates through it, accumulating into the adapters' .grad directly. If the
// input does not require grad the output does not either, and the adapters stay inert — the trap
// of docs/findings.md#f13 that ModelOptions::input_requires_grad avoids.
struct CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
  // Non-tensor arguments travel as integers: IValue holds no raw pointers. The model outlives
  // every graph built from it.
  // `mask_address`: the forward's attend-mask for the layer's type (a const Tensor*, possibly
  // undefined, which an autograd input may not be), kept in saved_data for the recompute: HF's
  // checkpoint keeps its mask argument the same way, so it lives as long as the graph.
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor x, int64_t model_address,
                        int64_t index, int64_t record_address, std::vector<int64_t> lengths,
                        int64_t mask_address) {
    const Tensor& mask = *reinterpret_cast<const Tensor*>(mask_address);
    ctx->save_for_backward({x});
    ctx->saved_data["mask"] = mask;
    ctx->saved_data["model"] = model_address;
    ctx->saved_data["index"] = index;
    ctx->saved_data["lengths"] = lengths;
    const auto* model = reinterpret_cast<const Gemma4Model*>(model_address);
    return model->layer_forward(static_cast<size_t>(index), x,
                                reinterpret_cast<ForwardRecord*>(record_address), lengths,
                                StepPhase::kForward, mask);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto* model = reinterpret_cast<const Gemma4Model*>(ctx->saved_data["model"].toInt());
    const int64_t index = ctx->saved_data["index"].toInt();
    const std::vector<int64_t> lengths = ctx->saved_data["lengths"].toIntVector();
    Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    const Tensor mask = ctx->saved_data["mask"].toTensor();
    Tensor y;
    {
      torch::AutoGradMode enable(true);
      y = model->layer_forward(static_cast<size_t>(index), x, nullptr, lengths,
                               StepPhase::kRecompute, mask);
    }
    // The layer's own backward: each node the recompute made takes the part of the recompute
    // scope that made it (core/trace/step_trace.hpp); the engine's glue between them takes this
    // checkpoint node's own tag, the layer's `other`.
    torch::autograd::backward({y}, {grad_out[0]});
    return {x.grad(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

struct ChunkedSoftcapCe : public torch::autograd::Function<ChunkedSoftcapCe> {
  static Tensor capped_logits(const Tensor& h, const Tensor& head, double softcap) {
    Tensor logits = torch::matmul(h, head.t());
    if (softcap > 0) logits = torch::tanh(logits / softcap) * softcap;
    return logits;
  }

  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor hidden, Tensor head,
                        Tensor labels, double softcap, int64_t chunk, int64_t observer_address) {
    const int64_t n = hidden.size(0);
    Tensor valid = labels.ne(kIgnoreIndex);
    const int64_t count = valid.sum().item<int64_t>();
    Tensor total = torch::zeros({}, hidden.options().dtype(torch::kFloat));
    if (hidden.scalar_type() == torch::kDouble) total = total.to(torch::kDouble);
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t len = std::min(chunk, n - s);
      Tensor lf = capped_logits(hidden.narrow(0, s, len), head, softcap).to(total.scalar_type());
      Tensor lab = labels.narrow(0, s, len);
      Tensor tgt = lf.gather(1, lab.clamp_min(0).unsqueeze(1)).squeeze(1);
      Tensor lse = torch::logsumexp(lf, -1);
      lf.reset();  // the chunk's logits go before the next chunk's are made
      total = total + ((lse - tgt) * valid.narrow(0, s, len).to(lse.scalar_type())).sum();
    }
    ctx->save_for_backward({hidden, head, labels});
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["count"] = count;
    ctx->saved_data["observer"] = observer_address;
    return total / static_cast<double>(count);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    Tensor hidden = saved[0], head = saved[1], labels = saved[2];
    const double softcap = ctx->saved_data["softcap"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const int64_t count = ctx->saved_data["count"].toInt();
    ObserverScope scope(reinterpret_cast<StepObserver*>(ctx->saved_data["observer"].toInt()),
                        StepTag{StepPhase::kLoss, StepPart::kLossHead, -1, std::nullopt});
    Tensor scale = grad_out[0] / static_cast<double>(count);
    const int64_t n = hidden.size(0);
    Tensor grad_hidden = torch::empty_like(hidden);
    const auto acc = hidden.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t len = std::min(chunk, n - s);
      // In place wherever possible: at vocab 262,144 every [chunk, V] fp32 temporary is 4 GiB
      // per 4,096 rows.
      Tensor capped = capped_logits(hidden.narrow(0, s, len), head, softcap).to(acc);
      Tensor lab = labels.narrow(0, s, len);
      Tensor row_scale = lab.ne(kIgnoreIndex).to(acc).mul_(scale.to(acc)).unsqueeze(1);
      Tensor g = torch::softmax(capped, -1);
      g.scatter_add_(1, lab.clamp_min(0).unsqueeze(1), -torch::ones({len, 1}, g.options()));
      g.mul_(row_scale);
      if (softcap > 0) g.mul_(capped.div_(softcap).pow_(2).neg_().add_(1.0));  // d(c·tanh(z/c))/dz
      capped.reset();
      grad_hidden.narrow(0, s, len).copy_(torch::matmul(g.to(hidden.scalar_type()), head));
    }
    return {grad_hidden, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

// One chunk of the Hugging Face harness's loss, under a checkpoint of its own (chunked_ce_loss:
// torch.utils.checkpoint(chunk_loss, h[s:s+chunk], lab[s:s+chunk])). The forward runs without
// autograd and keeps only its inputs; the backward runs chunk_loss again op by op with autograd
// (logits = h·Wᵀ, /cap, tanh, ·cap, .float(), cross_entropy(sum)) and back-propagates through it,
// so the tensors alive in it are the ones PyTorch's own recompute holds.
struct CheckpointedCeChunk : public torch::autograd::Function<CheckpointedCeChunk> {
  static Tensor chunk_loss(const Tensor& h, const Tensor& head, const Tensor& labels,
                           double softcap) {
    // Python frees a temporary when the op that consumes it returns: `logits / cap` once tanh has
    // its output, the old `logits` when the name is rebound; `logits` itself (bf16) and its fp32
    // copy stay alive through cross_entropy.
    Tensor logits = torch::matmul(h, head.t());
    if (softcap > 0) {
      Tensor z = logits / softcap;
      Tensor t = torch::tanh(z);
      z.reset();
      logits = t * softcap;
    }
    const auto acc = h.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    return torch::nn::functional::cross_entropy(
        logits.to(acc), labels,
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex).reduction(
            torch::kSum));
  }

  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor hidden, Tensor head,
                        Tensor labels, double softcap, int64_t observer_address) {
    ctx->save_for_backward({hidden, head, labels});
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["observer"] = observer_address;
    torch::NoGradGuard no_grad;
    return chunk_loss(hidden, head, labels, softcap);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    ObserverScope scope(reinterpret_cast<StepObserver*>(ctx->saved_data["observer"].toInt()),
                        StepTag{StepPhase::kLoss, StepPart::kLossHead, -1, std::nullopt});
    Tensor h = saved[0].detach().requires_grad_(true);
    Tensor loss;
    {
      torch::AutoGradMode enable(true);
      loss = chunk_loss(h, saved[1], saved[2], ctx->saved_data["softcap"].toDouble());
    }
    torch::autograd::backward({loss}, {grad_out[0]});
    return {h.grad(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor apply_linear(const Linear& l, const Tensor& x) {
  Tensor y = torch::matmul(x, l.weight.t());
  if (l.has_lora()) {
    if (l.lora_a.scalar_type() != x.scalar_type()) {
      // fp32 factors under a bf16/fp16 model (PEFT's default): the branch and the sum in fp32,
      // the result back in the model dtype, as PEFT's LoRA Linear does.
      const Tensor xa = x.to(l.lora_a.scalar_type());
      const Tensor d = torch::matmul(torch::matmul(xa, l.lora_a.t()), l.lora_b.t()) * l.lora_scale;
      return (y.to(d.scalar_type()) + d).to(x.scalar_type());
    }
    y = y + torch::matmul(torch::matmul(x, l.lora_a.t()), l.lora_b.t()) * l.lora_scale;
  }
  return y;
}

void validate_lora(const LoraConfig& lora) {
  if (lora.targets.empty()) return;
  core::check_known_targets(lora.targets, "LoRA targets");
  if (lora.rank <= 0) fail_usage("LoRA rank {}: must be positive", lora.rank);
  if (!(lora.alpha > 0)) fail_usage("LoRA alpha {}: must be positive", lora.alpha);
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps, bool fused) {
  if (fused) return fused_rms_norm(x, weight, eps);
  const auto acc = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  Tensor xf = x.to(acc);
  Tensor mean_sq = xf.pow(2).mean(-1, true) + eps;
  Tensor out = xf * torch::pow(mean_sq, -0.5);
  if (weight.defined()) out = out * weight.to(acc);
  return out.to(x.scalar_type());
}

Tensor rope_inv_freq(const core::RopeParams& rope, int64_t head_dim) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  if (rope.type == core::RopeType::kDefault) {
    Tensor exps = torch::arange(0, head_dim, 2, torch::TensorOptions().dtype(torch::kLong))
                      .to(torch::kFloat) /
                  static_cast<double>(head_dim);
    return 1.0 / torch::pow(rope.theta, exps);
  }
  // proportional: the first int(p·D//2) frequencies use exponent 2i/D over the FULL head_dim,
  // the remaining D/2 − that many are zero (cos 1, sin 0: pass-through lanes).
  const auto angles =
      static_cast<int64_t>(rope.partial_rotary_factor * static_cast<double>(head_dim) / 2.0);
  Tensor exps = torch::arange(0, 2 * angles, 2, torch::TensorOptions().dtype(torch::kLong))
                    .to(torch::kFloat) /
                static_cast<double>(head_dim);
  Tensor rotated = 1.0 / torch::pow(rope.theta, exps);
  return torch::cat({rotated, torch::zeros({head_dim / 2 - angles}, f32)});
}

std::pair<Tensor, Tensor> rope_cos_sin(const core::RopeParams& rope, int64_t head_dim,
                                       const Tensor& position_ids, torch::Dtype dtype) {
  Tensor inv = rope_inv_freq(rope, head_dim).to(position_ids.device());
  Tensor freqs = position_ids.to(torch::kFloat).unsqueeze(-1) * inv;  // fp32 angles
  Tensor emb = torch::cat({freqs, freqs}, -1);
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

Gemma4Model::Gemma4Model(core::ModelConfig config, ModelOptions options)
    : config_(std::move(config)), options_(options) {
  const auto& c = config_;
  if (!c.enable_moe_block)
    fail("model '{}': tprobe implements the MoE Gemma-4 (enable_moe_block=true) only", c.name);
  if (c.hidden_size_per_layer_input != 0) {
    fail("model '{}': hidden_size_per_layer_input={} (per-layer embeddings) is not supported",
         c.name, c.hidden_size_per_layer_input);
  }
  if (c.num_kv_shared_layers != 0)
    fail("model '{}': num_kv_shared_layers != 0 is not supported", c.name);
  if (c.attention_bias) fail("model '{}': attention_bias=true is not supported", c.name);
  if (static_cast<int64_t>(c.layer_types.size()) != c.num_layers) {
    fail("model '{}': {} layer_types for {} layers", c.name, c.layer_types.size(), c.num_layers);
  }
  auto opts = torch::TensorOptions().dtype(options_.dtype).device(options_.device);
  auto mk = [&](std::vector<int64_t> shape) { return torch::empty(shape, opts); };
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  embed_ = mk({c.vocab_size, H});
  final_norm_ = mk({H});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    DecoderLayer L;
    L.geometry = c.layer(i);
    const int64_t D = L.geometry.head_dim, Hq = c.num_attention_heads,
                  Hkv = L.geometry.num_kv_heads;
    L.q_proj.weight = mk({Hq * D, H});
    L.k_proj.weight = mk({Hkv * D, H});
    if (L.geometry.has_v_proj) L.v_proj.weight = mk({Hkv * D, H});
    L.o_proj.weight = mk({H, Hq * D});
    L.q_norm = mk({D});
    L.k_norm = mk({D});
    for (Tensor* t :
         {&L.input_layernorm, &L.post_attention_layernorm, &L.pre_feedforward_layernorm,
          &L.post_feedforward_layernorm, &L.post_feedforward_layernorm_1,
          &L.pre_feedforward_layernorm_2, &L.post_feedforward_layernorm_2, &L.router_scale}) {
      *t = mk({H});
    }
    L.gate_proj.weight = mk({c.intermediate_size, H});
    L.up_proj.weight = mk({c.intermediate_size, H});
    L.down_proj.weight = mk({H, c.intermediate_size});
    L.router_proj.weight = mk({E, H});
    L.router_per_expert_scale = mk({E});
    L.experts_gate_up = mk({E, 2 * I, H});
    L.experts_down = mk({E, H, I});
    L.layer_scalar = mk({1});
    layers_.push_back(std::move(L));
  }
}

Gemma4Model Gemma4Model::empty(const core::ModelConfig& config, const ModelOptions& options) {
  return Gemma4Model(config, options);
}

Gemma4Model Gemma4Model::random(const core::ModelConfig& config, const ModelOptions& options,
                                uint64_t seed) {
  Gemma4Model m(config, options);
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : m.parameters()) {
    const bool is_one = t->dim() == 1;  // norms, router scales, layer_scalar
    if (is_one) {
      t->fill_(1.0);
    } else {
      t->normal_(0.0, 0.02);
    }
  }
  return m;
}

std::vector<std::pair<std::string, Tensor*>> Gemma4Model::parameters() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (const core::TextTensor& t : core::text_tensor_layout(config_, "")) {
    DecoderLayer* L = t.layer >= 0 ? &layers_[static_cast<size_t>(t.layer)] : nullptr;
    Tensor* slot = tensor_of(L, &embed_, &final_norm_, t.role);
    if (slot) out.emplace_back(t.meta.name, slot);
  }
  return out;
}

void Gemma4Model::add_lora(const LoraConfig& lora, uint64_t seed) {
  validate_lora(lora);
  lora_ = lora;
  if (lora.targets.empty()) return;
  torch::manual_seed(seed);
  auto opts = torch::TensorOptions()
                  .dtype(lora.fp32 ? torch::kFloat : options_.dtype)
                  .device(options_.device);
  auto attach = [&](Linear& l) {
    const int64_t out = l.weight.size(0), in = l.weight.size(1);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // kaiming_uniform(a=√5)
    l.lora_a = torch::empty({lora.rank, in}, opts).uniform_(-bound, bound).requires_grad_(true);
    l.lora_b = torch::zeros({out, lora.rank}, opts).requires_grad_(true);
    l.lora_scale = lora.scale();
  };
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (const core::LinearModule& m :
         core::layer_linear_modules(config_, static_cast<int64_t>(i))) {
      if (is_target(lora, m.target)) attach(*linear_of(layers_[i], m.role));
    }
  }
}

std::vector<std::pair<std::string, Tensor*>> Gemma4Model::lora_parameters() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (const core::LinearModule& m :
         core::layer_linear_modules(config_, static_cast<int64_t>(i))) {
      Linear* lin = linear_of(layers_[i], m.role);
      if (!lin->has_lora()) continue;
      out.emplace_back(fmt::format("layers.{}.{}.lora_A.weight", i, m.path), &lin->lora_a);
      out.emplace_back(fmt::format("layers.{}.{}.lora_B.weight", i, m.path), &lin->lora_b);
    }
  }
  return out;
}

int64_t Gemma4Model::count_base_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : const_cast<Gemma4Model*>(this)->parameters()) {
    if (name.find("layer_scalar") == std::string::npos) n += t->numel();
  }
  return n;
}

int64_t Gemma4Model::count_lora_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : const_cast<Gemma4Model*>(this)->lora_parameters()) n += t->numel();
  return n;
}

int64_t Gemma4Model::count_lora_modules() const {
  return static_cast<int64_t>(const_cast<Gemma4Model*>(this)->lora_parameters().size() / 2);
}

Tensor Gemma4Model::layer_forward(size_t index, const Tensor& x, ForwardRecord* record,
                                  const std::vector<int64_t>& lengths, StepPhase phase,
                                  const Tensor& mask) const {
  // An op boundary where a signal stops the step (the forward and each checkpointed recompute
  // come through here): the evidence names the layer and phase.
  if (core::interrupt_requested()) {
    throw core::Interrupted(fmt::format("decoder layer {} ({})", index, core::to_string(phase)));
  }
  const auto& c = config_;
  const DecoderLayer& L = layers_[index];
  const auto& g = L.geometry;
  const double eps = c.rms_norm_eps;
  const bool fused_norm = options_.fused_rms_norm;
  auto norm = [eps, fused_norm](const Tensor& t, const Tensor& weight) {
    return rms_norm(t, weight, eps, fused_norm);
  };
  const int64_t B = x.size(0), S = x.size(1), H = x.size(2);
  const int64_t Hq = c.num_attention_heads, Hkv = g.num_kv_heads, D = g.head_dim;

  StepObserver* observer = options_.observer;
  const StepTag layer_tag{phase, StepPart::kOther, static_cast<int32_t>(index), g.type};
  auto tag = [&layer_tag](StepPart part) {
    StepTag t = layer_tag;
    t.part = part;
    return t;
  };
  ObserverScope layer_scope(observer, layer_tag);  // residuals, the closing norm
  // attention block (§2.3)
  auto attn_scope = std::make_unique<ObserverScope>(observer, tag(StepPart::kAttentionProj));
  Tensor residual = x;
  Tensor h = norm(x, L.input_layernorm);
  const auto& rope = g.type == core::LayerType::kFull ? c.rope_full : c.rope_sliding;
  // Packed rows (hidden_states): x is [1, T, H] holding the rows of `lengths` one after another,
  // each with its own positions from 0.
  const bool packed = static_cast<int64_t>(lengths.size()) > B;
  const auto long_opts = torch::TensorOptions().dtype(torch::kLong).device(x.device());
  Tensor positions;
  if (packed) {
    std::vector<Tensor> rows;
    for (int64_t l : lengths) rows.push_back(torch::arange(l, long_opts));
    positions = torch::cat(rows).unsqueeze(0);
  } else {
    positions = torch::arange(S, long_opts).unsqueeze(0);
  }
  auto [cos, sin] = rope_cos_sin(rope, D, positions, x.scalar_type());
  Tensor q = norm(linear(L.q_proj, h).view({B, S, Hq, D}), L.q_norm);
  q = apply_rope(q, cos, sin).transpose(1, 2);
  Tensor k_raw = linear(L.k_proj, h).view({B, S, Hkv, D});
  Tensor v_raw = g.has_v_proj ? linear(L.v_proj, h).view({B, S, Hkv, D}) : k_raw;
  Tensor k = apply_rope(norm(k_raw, L.k_norm), cos, sin).transpose(1, 2);
  Tensor v = norm(v_raw, Tensor()).transpose(1, 2);
  const int64_t window = g.type == core::LayerType::kSliding ? c.sliding_window : 0;
  std::string resolved;
  Tensor attn;
  {
    ObserverScope core_scope(observer, tag(StepPart::kAttentionCore));
    attn = packed ? packed_attention(options_.attn, q, k, v, window, &resolved, lengths)
                  : attention(options_.attn, q, k, v, window, &resolved, lengths, mask);
  }
  if (record) {
    std::string& slot = g.type == core::LayerType::kFull ? record->attn_full : record->attn_sliding;
    if (slot.empty()) slot = resolved;
  }
  attn = attn.transpose(1, 2).reshape({B, S, Hq * D});
  h = norm(linear(L.o_proj, attn), L.post_attention_layernorm);
  Tensor xs = residual + h;
  attn_scope.reset();

  // feed-forward block (§2.7): dense MLP and MoE side by side
  residual = xs;
  Tensor d;
  {
    ObserverScope scope(observer, tag(StepPart::kDenseMlp));
    d = norm(residual, L.pre_feedforward_layernorm);
    d = linear(L.down_proj, gelu_tanh(linear(L.gate_proj, d)) * linear(L.up_proj, d));
    d = norm(d, L.post_feedforward_layernorm_1);
  }
  auto router_scope = std::make_unique<ObserverScope>(observer, tag(StepPart::kRouter));
  Tensor flat = residual.reshape({B * S, H});
  Tensor r = norm(flat, Tensor());
  r = r * L.router_scale;
  r = r * std::pow(static_cast<double>(H), -0.5);
  // transformers 5.17 takes the router softmax in fp32 (dtype=torch.float32), so the routing
  // weights, their renormalisation, the per-expert scale and (through type promotion) the
  // weighted sum over k are fp32; an older reading of the HF source had it in bf16 (docs/gemma4-model.md#router).
  // Matching this took tprobe's bf16 error from 3x Hugging Face's to HF's level (docs/parity.md).
  const auto router_acc = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  Tensor probs = torch::softmax(linear(L.router_proj, r), -1, router_acc);
  auto [w, idx] = probs.topk(c.top_k_experts, -1);
  w = w / w.sum(-1, true);
  if (options_.routing.kind != core::RoutingKind::kComputed) {
    // --routing balanced | zipf:S: the same gates on a forced assignment (core/step/routing.hpp).
    Tensor& forced = forced_idx_[idx.size(0)];
    if (!forced.defined()) {
      const std::vector<int32_t> a =
          core::forced_assignment(idx.size(0), c.num_experts, c.top_k_experts, options_.routing);
      forced = torch::tensor(std::vector<int64_t>(a.begin(), a.end()),
                             torch::TensorOptions().dtype(torch::kLong))
                   .view(idx.sizes())
                   .to(idx.device());
    }
    idx = forced;
  }
  w = w * L.router_per_expert_scale.index_select(0, idx.reshape({-1})).view(idx.sizes());
  router_scope.reset();
  if (record) {
    // Tokens per expert, on the device and without a sync (no bincount: it reads the max first).
    const Tensor flat_idx = idx.reshape({-1});
    Tensor counts = torch::zeros({c.num_experts}, flat_idx.options())
                        .index_add_(0, flat_idx, torch::ones_like(flat_idx));
    if (record->expert_tokens.size() < layers_.size()) record->expert_tokens.resize(layers_.size());
    Tensor& slot = record->expert_tokens[index];
    slot = slot.defined() ? slot + counts : counts;
    record->routed_per_layer = flat_idx.numel();
  }
  auto experts_scope = std::make_unique<ObserverScope>(observer, tag(StepPart::kExperts));
  Tensor m = norm(flat, L.pre_feedforward_layernorm_2);
  m = experts_forward(L, m, idx, w, options_.moe);
  if (record && record->moe.empty()) record->moe = core::to_string(options_.moe);
  m = norm(m, L.post_feedforward_layernorm_2).view({B, S, H});
  experts_scope.reset();
  h = norm(d + m, L.post_feedforward_layernorm);
  return (residual + h) * L.layer_scalar;
}

Tensor Gemma4Model::run_layers(Tensor x, ForwardRecord* record,
                               const std::vector<int64_t>& lengths, const StepMasks& masks) {
  const bool checkpoint = options_.gradient_checkpointing && torch::GradMode::is_enabled();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (checkpoint) {
      // The checkpoint node's own tag (the layer's `other`): its backward's engine glue.
      const core::LayerType kind = config_.layer(static_cast<int64_t>(i)).type;
      ObserverScope scope(options_.observer,
                          StepTag{StepPhase::kForward, StepPart::kOther, static_cast<int32_t>(i),
                                  kind});
      note_custom_node();
      x = CheckpointedLayer::apply(x, reinterpret_cast<int64_t>(this), static_cast<int64_t>(i),
                                   reinterpret_cast<int64_t>(record), lengths,
                                   reinterpret_cast<int64_t>(
                                       &masks.of(config_.layer(static_cast<int64_t>(i)).type)));
    } else {
      if (i == 0 && record && record->layer_outputs)
        record->layer_outputs->push_back(x.detach().clone());
      x = layer_forward(i, x, record, lengths, StepPhase::kForward,
                        masks.of(config_.layer(static_cast<int64_t>(i)).type));
      if (record && record->layer_outputs) record->layer_outputs->push_back(x.detach().clone());
    }
  }
  return x;
}

// HF builds one mask per layer type per forward (its mask mapping) and hands it to every layer;
// the checkpointed layers keep it for their recompute, so the step's graph holds it until the
// backward has run. sdpa materialises the sliding layers' once S reaches the window (below it,
// and on full layers, the mask is skipped for is_causal), eager both. An all-ones
// attention_mask makes it [B, 1, S, S]; none, [1, 1, S, S] broadcast over the batch. A padded
// batch keeps the per-layer padded masks (attention()).
Gemma4Model::StepMasks Gemma4Model::step_masks(int64_t batch, int64_t width,
                                               const std::vector<int64_t>& lengths) const {
  StepMasks m;
  const bool sdpa = options_.attn == core::AttentionPath::kSdpa;
  if ((!sdpa && options_.attn != core::AttentionPath::kEager) || has_padding(lengths, width)) return m;
  auto build = [&](int64_t window) {
    return options_.attention_mask_passed
               ? padded_bool_mask(width, window, std::vector<int64_t>(static_cast<size_t>(batch), width),
                                  embed_.device())
               : causal_bool_mask(width, window, embed_.device());
  };
  bool has_sliding = false, has_full = false;
  for (const auto& L : layers_) {
    (L.geometry.type == core::LayerType::kSliding ? has_sliding : has_full) = true;
  }
  const int64_t window = config_.sliding_window;
  if (has_sliding && (!sdpa || (window > 0 && width >= window))) m.sliding = build(window);
  if (has_full && !sdpa) m.full = build(0);
  return m;
}

Tensor Gemma4Model::hidden_states(const Tensor& input_ids, ForwardRecord* record,
                                  const std::vector<int64_t>& lengths) {
  if (input_ids.dim() != 2) fail("input_ids must be [batch, seq], got {} dims", input_ids.dim());
  if (!lengths.empty()) {
    if (static_cast<int64_t>(lengths.size()) != input_ids.size(0))
      fail("{} lengths for a batch of {} rows", lengths.size(), input_ids.size(0));
    for (int64_t l : lengths) {
      if (l < 1 || l > input_ids.size(1))
        fail("row length {} is outside 1..{} (the width)", l, input_ids.size(1));
    }
  }
  Tensor scale = torch::scalar_tensor(std::sqrt(static_cast<double>(config_.hidden_size)),
                                      torch::TensorOptions().dtype(torch::kFloat))
                     .to(embed_.scalar_type())
                     .to(embed_.device());
  Tensor x;
  {
    ObserverScope scope(options_.observer,
                        StepTag{StepPhase::kForward, StepPart::kEmbedding, -1, std::nullopt});
    x = torch::embedding(embed_, input_ids.to(embed_.device())) * scale;
  }
  if (options_.input_requires_grad && torch::GradMode::is_enabled() && !lora_.targets.empty()) {
    x.requires_grad_(true);
  }
  const int64_t batch = input_ids.size(0), width = input_ids.size(1);
  if (has_padding(lengths, width) && packs_padding(options_.attn, embed_.device()) &&
      !(record && record->layer_outputs)) {
    // Packed rows: only the real tokens go through the layers, as one sequence [1, T, H] that
    // the attention splits back into rows (packed_attention); padded positions cost nothing and
    // come back as zeros. Per-layer dumps (parity) keep the padded layout.
    std::vector<int64_t> real;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < lengths[static_cast<size_t>(b)]; ++t) real.push_back(b * width + t);
    }
    Tensor index = torch::tensor(real, torch::TensorOptions().dtype(torch::kLong)).to(x.device());
    Tensor packed = x.reshape({batch * width, x.size(2)}).index_select(0, index).unsqueeze(0);
    packed = run_layers(packed, record, lengths);
    packed = rms_norm(packed, final_norm_, config_.rms_norm_eps, options_.fused_rms_norm);
    return torch::zeros({batch * width, packed.size(2)}, packed.options())
        .index_copy(0, index, packed.squeeze(0))
        .view({batch, width, packed.size(2)});
  }
  x = run_layers(x, record, lengths, step_masks(batch, width, lengths));
  return rms_norm(x, final_norm_, config_.rms_norm_eps, options_.fused_rms_norm);
}

Tensor Gemma4Model::logits(const Tensor& input_ids, ForwardRecord* record,
                           const std::vector<int64_t>& lengths) {
  Tensor h = hidden_states(input_ids, record, lengths);
  Tensor logits = torch::matmul(h, embed_.t());
  if (config_.final_logit_softcapping) {
    const double cap = *config_.final_logit_softcapping;
    logits = torch::tanh(logits / cap) * cap;
  }
  return logits;
}

LossResult Gemma4Model::loss(const Tensor& input_ids, ForwardRecord* record,
                             const std::vector<int64_t>& lengths) {
  Tensor h;
  {
    ObserverScope scope(options_.observer,
                        StepTag{StepPhase::kForward, StepPart::kOther, -1, std::nullopt});
    h = hidden_states(input_ids, record, lengths);
  }
  return head_loss(h, input_ids, lengths);
}

LossResult Gemma4Model::head_loss(const Tensor& h, const Tensor& input_ids,
                                  const std::vector<int64_t>& lengths) {
  ObserverScope scope(options_.observer,
                      StepTag{StepPhase::kLoss, StepPart::kLossHead, -1, std::nullopt});
  Tensor ids = input_ids.to(h.device());
  Tensor labels = torch::full_like(ids, kIgnoreIndex);
  labels.narrow(1, 0, ids.size(1) - 1).copy_(ids.narrow(1, 1, ids.size(1) - 1));
  if (has_padding(lengths, ids.size(1))) {
    // Row b predicts tokens 1..L_b-1 from positions 0..L_b-2; everything from L_b-1 on is ignored.
    Tensor pos = torch::arange(ids.size(1), ids.options()).unsqueeze(0);
    Tensor len = torch::tensor(lengths, torch::TensorOptions().dtype(torch::kLong))
                     .to(ids.device())
                     .unsqueeze(1);
    labels.masked_fill_(pos.ge(len - 1), kIgnoreIndex);
  }
  LossResult out;
  out.num_targets = labels.ne(kIgnoreIndex).sum().item<int64_t>();
  out.loss = softcapped_cross_entropy(h.reshape({-1, h.size(2)}), embed_, labels.reshape({-1}),
                                      config_.final_logit_softcapping.value_or(0.0), options_.ce,
                                      options_.ce_chunk, options_.observer);
  return out;
}

Tensor softcapped_cross_entropy(const Tensor& hidden, const Tensor& head, const Tensor& labels,
                                double softcap, core::CeForm mode, int64_t chunk,
                                StepObserver* observer) {
  if (mode == core::CeForm::kChunked) {
    if (chunk <= 0) fail_usage("cross-entropy chunk {}: must be positive", chunk);
    note_custom_node();
    return ChunkedSoftcapCe::apply(hidden, head, labels, softcap, chunk,
                                   reinterpret_cast<int64_t>(observer));
  }
  if (mode == core::CeForm::kChunkCheckpoint) {
    if (chunk <= 0) fail_usage("cross-entropy chunk {}: must be positive", chunk);
    // total = Σ chunk losses (sum), then / the number of targets, as chunked_ce_loss does.
    const int64_t n = hidden.size(0);
    const auto acc = hidden.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    Tensor total = torch::zeros({}, hidden.options().dtype(acc));
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t len = std::min(chunk, n - s);
      note_custom_node();
      total = total + CheckpointedCeChunk::apply(hidden.narrow(0, s, len), head,
                                                 labels.narrow(0, s, len), softcap,
                                                 reinterpret_cast<int64_t>(observer));
    }
    return total / labels.ne(kIgnoreIndex).sum();
  }
  Tensor logits = torch::matmul(hidden, head.t());
  if (softcap > 0) logits = torch::tanh(logits / softcap) * softcap;
  const auto acc = hidden.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  return torch::nn::functional::cross_entropy(
      logits.to(acc), labels,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex));
}

ParameterCounts count_parameters(const core::ModelConfig& c, const LoraConfig& lora) {
  ParameterCounts n;
  for (const core::TextTensor& t : core::text_tensor_layout(c, "")) {
    if (t.role == core::TensorRole::kLayerScalar || t.role == core::TensorRole::kLmHead) continue;
    int64_t numel = 1;
    for (int64_t d : t.meta.shape) numel *= d;
    n.base_parameters += numel;
  }
  if (lora.rank <= 0) return n;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    for (const core::LinearModule& m : core::layer_linear_modules(c, i)) {
      if (!is_target(lora, m.target)) continue;
      n.lora_modules += 1;
      n.lora_parameters += lora.rank * (m.in_features + m.out_features);
    }
  }
  return n;
}

std::vector<std::string> inert_lora_b(Gemma4Model& model) {
  std::vector<std::string> out;
  for (auto& [name, t] : model.lora_parameters()) {
    if (name.find("lora_B") == std::string::npos) continue;
    const Tensor& g = t->grad();
    if (!g.defined() || g.abs().max().item<double>() == 0.0) out.push_back(name);
  }
  return out;
}

namespace {

std::vector<Tensor> lora_tensors(Gemma4Model& model) {
  std::vector<Tensor> out;
  for (auto& [name, t] : model.lora_parameters()) out.push_back(*t);  // shares the storage
  return out;
}

}  // namespace

LoraOptimizer::LoraOptimizer(Gemma4Model& model, AdamWSettings settings)
    : LoraOptimizer(lora_tensors(model), settings) {}

LoraOptimizer::LoraOptimizer(std::vector<Tensor> params, AdamWSettings settings)
    : params_(std::move(params)) {
  if (params_.empty()) return;
  for (const Tensor& p : params_) {
    if (!p.requires_grad()) fail("the optimizer's parameters must require grad");
  }
  torch::optim::AdamWOptions o(settings.lr);
  o.betas(std::make_tuple(settings.beta1, settings.beta2));
  o.eps(settings.eps);
  o.weight_decay(settings.weight_decay);
  o.amsgrad(false);
  adamw_ = std::make_unique<torch::optim::AdamW>(params_, o);
}

LoraOptimizer::~LoraOptimizer() = default;

void LoraOptimizer::step() {
  if (adamw_) adamw_->step();
  ++steps_;
}

void LoraOptimizer::zero_grad() {
  for (Tensor& p : params_) p.mutable_grad() = Tensor();
}

int64_t LoraOptimizer::state_bytes() const {
  if (!adamw_) return 0;
  int64_t n = 0;
  // The state map's key is a string in 1.13 and the TensorImpl's address in 2.x: only its values
  // are read.
  for (const auto& entry : adamw_->state()) {
    const auto& st = static_cast<const torch::optim::AdamWParamState&>(*entry.second);
    for (const Tensor* t : {&st.exp_avg(), &st.exp_avg_sq(), &st.max_exp_avg_sq()}) {
      if (t->defined()) n += static_cast<int64_t>(t->nbytes());
    }
  }
  return n;
}

}  // namespace tprobe::model
