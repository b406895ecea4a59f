// Counts matrix-multiply FLOPs per component, layer type and pass; conventions in docs/flops.md.
#include "tprobe/core/cost/flops.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

#include "base/checked_math.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"

namespace tprobe::core {
namespace {

// Elementwise FLOPs per logit of the softcapped cross-entropy: softcap (divide, tanh, multiply)
// and log-sum-exp (subtract max, exp, add); the backward is counted the same. A rough estimate,
// under 0.5 % of the head GEMM; every other elementwise op (norms, RoPE, GELU) is not counted.
constexpr double kLossFlopsPerLogit = 6;

// Forward FLOPs of one token through a linear module.
double linear_flops(const LinearModule& m) {
  return 2.0 * static_cast<double>(m.in_features) * static_cast<double>(m.out_features);
}

}  // namespace

double total(const PassFlops& f) { return f[0] + f[1] + f[2]; }

double causal_pairs(int64_t length) {
  const double l = static_cast<double>(length);
  return l * (l + 1) / 2;
}

double window_pairs(int64_t length, int64_t window) {
  if (window <= 0 || length <= window) return causal_pairs(length);
  const double w = static_cast<double>(window);
  return w * (w + 1) / 2 + static_cast<double>(length - window) * w;
}

double mfu(double flops, double step_time_s, double peak_tflops) {
  return flops / (step_time_s * peak_tflops * 1e12);
}

PassFlops FlopsReport::sum(bool performed, std::string_view component,
                           std::string_view layer_type) const {
  PassFlops s{};
  for (const auto& r : rows) {
    if (!component.empty() && r.component != component) continue;
    if (!layer_type.empty() && r.layer_type != layer_type) continue;
    const PassFlops& f = performed ? r.performed : r.intended;
    for (int p = 0; p < kPasses; ++p) s[p] += f[p];
  }
  return s;
}

namespace {

// The request comes from the command line: nonsense in it is a usage error (exit 2). Returns the
// real length of every sequence (the width where none were given).
std::vector<int64_t> checked_lengths(const FlopsRequest& req) {
  detail::require_count("flops: batch", req.batch, detail::kMaxBatch);
  detail::require_count("flops: width", req.width, detail::kMaxWidth);
  detail::mul_or_refuse(req.batch, req.width, "flops: batch x width");
  std::vector<int64_t> lengths = req.lengths;
  if (lengths.empty()) lengths.assign(static_cast<size_t>(req.batch), req.width);
  if (static_cast<int64_t>(lengths.size()) != req.batch) {
    fail_usage("flops: {} lengths given for batch {}; give one real length per sequence",
               lengths.size(), req.batch);
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1 || lengths[i] > req.width) {
      fail_usage("flops: length {} of sequence {} is outside 1..{} (the width)", lengths[i], i,
                 req.width);
    }
  }
  return lengths;
}

std::set<std::string> checked_targets(const FlopsRequest& req) {
  for (const auto& t : req.lora_targets) {
    if (t == "none") {
      fail_usage("flops: LoRA target 'none' means no adapters and cannot be combined with "
                 "targets ({})",
                 fmt::join(req.lora_targets, ","));
    }
  }
  check_known_targets(req.lora_targets, "flops");
  std::set<std::string> targets;
  for (const auto& t : req.lora_targets) {
    if (!targets.insert(t).second) fail_usage("flops: LoRA target '{}' given twice", t);
  }
  if (!targets.empty()) {
    detail::require_count("flops: LoRA rank", req.lora_rank, detail::kMaxLoraRank);
  }
  return targets;
}

// Tokens and query-key pairs: intended (causal, + window, over each sequence's real tokens) and
// performed (what the attention path computes; docs/gemma4-model.md#attention for HF's
// is_causal rules).
void count_tokens_and_pairs(const ModelConfig& c, const FlopsRequest& req,
                            const std::vector<int64_t>& lengths, FlopsReport& rep) {
  for (int64_t l : lengths) {
    rep.real_tokens += l;
    rep.padded = rep.padded || l < req.width;
  }
  rep.padded_tokens = req.batch * req.width;
  for (int64_t l : lengths) {
    rep.pairs_intended_sliding += window_pairs(l, c.sliding_window);
    rep.pairs_intended_full += causal_pairs(l);
  }
  const double n = static_cast<double>(req.width);
  const double batch = static_cast<double>(req.batch);
  const double dense = batch * n * n;
  const double causal = batch * causal_pairs(req.width);
  // The path's pair rule per kind of layer (the attention registry's entry).
  const AttentionPathInfo& info = attention_info(req.path);
  auto performed = [&](PairRule rule, bool sliding, double intended) {
    switch (rule) {
      case PairRule::kDense:
        return dense;
      case PairRule::kCausal:
        return causal;
      case PairRule::kHfSdpa:
        // is_causal while nothing is padded and (sliding layers) the sequence is shorter than the
        // window; a materialised mask, every pair, otherwise.
        return rep.padded || (sliding && c.sliding_window > 0 && req.width >= c.sliding_window)
                   ? dense
                   : causal;
      case PairRule::kIntended:
        // Right padding packs the rows (src/model/gemma4.cpp, hidden_states): every layer sees the
        // real tokens only, causal and windowed within each row. Counted like the causal kernels:
        // the blockwise path's block-row granularity (block/n more) is left out.
        return intended;
    }
    return dense;
  };
  rep.pairs_performed_full = performed(info.full_pairs, false, rep.pairs_intended_full);
  rep.pairs_performed_sliding = performed(info.sliding_pairs, true, rep.pairs_intended_sliding);
}

// Rows per (component, layer type), in first-seen order.
class RowAccumulator {
 public:
  explicit RowAccumulator(bool recompute) : recompute_(recompute ? 1.0 : 0.0) {}
  // Frozen weights: the backward computes activation gradients only (bwd_factor 1); trainable
  // LoRA factors also get weight gradients (2). Attention backward: dQ, dK, dV and dP are four
  // pair×head_dim products against the forward's two (2).
  void add(const std::string& comp, LayerType type, double fwd_int, double fwd_perf,
           double bwd_factor) {
    auto key = std::make_pair(comp, std::string(to_string(type)));
    auto it = acc_.find(key);
    if (it == acc_.end()) {
      FlopsRow row;
      row.component = comp;
      row.layer_type = key.second;
      it = acc_.emplace(key, row).first;
      order_.push_back(key);
    }
    it->second.layers += 1;
    const PassFlops fi = pass(fwd_int, bwd_factor), fp = pass(fwd_perf, bwd_factor);
    for (int p = 0; p < kPasses; ++p) {
      it->second.intended[p] += fi[p];
      it->second.performed[p] += fp[p];
    }
  }
  void append_to(std::vector<FlopsRow>& rows) const {
    for (const auto& key : order_) rows.push_back(acc_.at(key));
  }

 private:
  PassFlops pass(double fwd, double bwd_factor) const {
    return PassFlops{fwd, bwd_factor * fwd, recompute_ * fwd};
  }
  double recompute_;
  std::map<std::pair<std::string, std::string>, FlopsRow> acc_;
  std::vector<std::pair<std::string, std::string>> order_;
};

// Every decoder layer's rows (attention, projections, dense MLP, router and experts, LoRA), and
// the LoRA modules per target.
void count_decoder_layers(const ModelConfig& c, const FlopsRequest& req,
                          const std::set<std::string>& targets, FlopsReport& rep) {
  const double real = static_cast<double>(rep.real_tokens);
  // What the linear layers run over: every position, or the real tokens where padding is packed.
  const bool packs = attention_info(req.path).packs_padding;
  const double padded = static_cast<double>(packs ? rep.real_tokens : rep.padded_tokens);
  const std::vector<std::string> known = linear_module_names();
  RowAccumulator acc(req.gradient_checkpointing);
  std::map<std::string, LoraModules> lora;
  for (const auto& t : known) {
    if (targets.count(t)) lora[t].target = t;
  }
  const double h = static_cast<double>(c.hidden_size);
  // Layer types in a fixed order so rows come out sliding first, then full.
  for (LayerType type : {LayerType::kSliding, LayerType::kFull}) {
    for (int64_t i = 0; i < c.num_layers; ++i) {
      LayerGeometry g = c.layer(i);
      if (g.type != type) continue;
      const double hd = static_cast<double>(c.num_attention_heads * g.head_dim);
      const bool sliding = type == LayerType::kSliding;
      const double pi = sliding ? rep.pairs_intended_sliding : rep.pairs_intended_full;
      const double pp = sliding ? rep.pairs_performed_sliding : rep.pairs_performed_full;
      acc.add("attn_scores", type, 2 * hd * pi, 2 * hd * pp, 2);
      acc.add("attn_values", type, 2 * hd * pi, 2 * hd * pp, 2);
      const std::vector<LinearModule> lin = layer_linear_modules(c, i);
      double dense_mlp = 0;
      for (const LinearModule& m : lin) {
        if (m.role == TensorRole::kMlpGateProj || m.role == TensorRole::kMlpUpProj ||
            m.role == TensorRole::kMlpDownProj) {
          dense_mlp += linear_flops(m);
        } else {
          const double f = linear_flops(m);
          acc.add(m.target, type, f * real, f * padded, 1);
        }
      }
      if (c.intermediate_size > 0) {
        acc.add("dense_mlp", type, dense_mlp * real, dense_mlp * padded, 1);
      }
      if (c.enable_moe_block && c.num_experts > 0) {
        double fr = 2 * h * static_cast<double>(c.num_experts);
        acc.add("router", type, fr * real, fr * padded, 1);
        // top-k experts per token, each gate_up (H → 2I) and down (I → H).
        double fe = static_cast<double>(c.top_k_experts) * 6 * h *
                    static_cast<double>(c.moe_intermediate_size);
        acc.add("experts", type, fe * real, fe * padded, 1);
      }
      if (!targets.empty()) {
        double f = 0;
        for (const LinearModule& m : lin) {
          auto it = lora.find(m.target);
          if (it == lora.end()) continue;
          // Checked: a wrapped count printed as a small plausible one (issue 46, item 7).
          const int64_t in_out =
              detail::add_or_refuse(m.in_features, m.out_features, "LoRA features (in + out)");
          it->second.modules += 1;
          it->second.trainable_params = detail::add_or_refuse(
              it->second.trainable_params,
              detail::mul_or_refuse(req.lora_rank, in_out, "LoRA parameters (rank x features)"),
              "LoRA parameters");
          f += 2.0 * static_cast<double>(req.lora_rank) * static_cast<double>(in_out);
        }
        acc.add("lora", type, f * real, f * padded, 2);
      }
    }
  }
  acc.append_to(rep.rows);
  for (const auto& t : known) {
    if (lora.count(t)) rep.lora.push_back(lora[t]);
  }
}

// Model-level rows: not inside a checkpointed decoder layer, so never recomputed. The head and
// loss are counted on the real tokens: a chunked CE skips positions without a label.
void count_model_rows(const ModelConfig& c, FlopsReport& rep) {
  auto model_row = [&](const char* comp, double fwd, double bwd) {
    FlopsRow r;
    r.component = comp;
    r.layer_type = "model";
    r.layers = 1;
    r.intended = {fwd, bwd, 0};
    r.performed = {fwd, bwd, 0};
    rep.rows.push_back(r);
  };
  const double h = static_cast<double>(c.hidden_size);
  const double real = static_cast<double>(rep.real_tokens);
  model_row("embedding", 0, 0);  // a gather, no multiply-adds
  const double v = static_cast<double>(c.vocab_size);
  model_row("lm_head", 2 * h * v * real, 2 * h * v * real);  // tied, frozen: activation grad only
  model_row("loss", kLossFlopsPerLogit * v * real, kLossFlopsPerLogit * v * real);
}

}  // namespace

FlopsReport count_flops(const ModelConfig& c, const FlopsRequest& req) {
  FlopsReport rep;
  rep.request = req;
  rep.request.lengths = checked_lengths(req);
  rep.model = c.name;
  const std::set<std::string> targets = checked_targets(req);
  if (c.num_layers != static_cast<int64_t>(c.layer_types.size())) {
    fail("model '{}': num_layers {} but {} layer_types", c.name, c.num_layers,
         c.layer_types.size());
  }
  count_tokens_and_pairs(c, req, rep.request.lengths, rep);
  count_decoder_layers(c, req, targets, rep);
  count_model_rows(c, rep);
  // The views sum the targets' counts unchecked: that sum fits (checked once here).
  int64_t lora_params = 0;
  for (const LoraModules& m : rep.lora) {
    lora_params = detail::add_or_refuse(lora_params, m.trainable_params, "LoRA parameters");
  }
  rep.intended_total = rep.sum(false, "", "");
  rep.performed_total = rep.sum(true, "", "");
  return rep;
}

}  // namespace tprobe::core
