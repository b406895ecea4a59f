// Block table, linear-only 4-bit estimate, LoRA plan and memory budget: data and their views.
#include "tprobe/core/cost/inspect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/checked_math.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

namespace {

using detail::ends_with;
using detail::starts_with;
bool contains(const std::string& s, const char* p) { return s.find(p) != std::string::npos; }

constexpr Block kAllBlocks[] = {Block::kExperts,     Block::kAttention, Block::kDenseMlp,
                                Block::kRouterNorms, Block::kEmbedding, Block::kLmHead,
                                Block::kNonText,     Block::kBuffers,   Block::kOther};

double ratio(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

}  // namespace

const char* to_string(Block block) {
  switch (block) {
    case Block::kExperts:
      return "experts";
    case Block::kAttention:
      return "attention";
    case Block::kDenseMlp:
      return "dense_mlp";
    case Block::kRouterNorms:
      return "router_norms";
    case Block::kEmbedding:
      return "embedding";
    case Block::kLmHead:
      return "lm_head";
    case Block::kNonText:
      return "non_text";
    case Block::kBuffers:
      return "buffers";
    case Block::kOther:
      return "other";
  }
  return "other";
}

const char* block_label(Block block) {
  switch (block) {
    case Block::kExperts:
      return "experts (fused 3-D)";
    case Block::kAttention:
      return "attention projections";
    case Block::kDenseMlp:
      return "dense MLP";
    case Block::kRouterNorms:
      return "router, norms";
    case Block::kEmbedding:
      return "embedding (tied)";
    case Block::kLmHead:
      return "lm_head (stored copy)";
    case Block::kNonText:
      return "non-text towers (skipped)";
    case Block::kBuffers:
      return "buffers (layer_scalar)";
    case Block::kOther:
      return "other text tensors";
  }
  return "other";
}

Block classify_tensor(const std::string& name, const std::string& prefix) {
  for (const char* tower :
       {"model.vision_tower.", "model.embed_vision.", "model.audio_tower.", "model.embed_audio."}) {
    if (starts_with(name, tower)) return Block::kNonText;
  }
  if (name == "lm_head.weight") return Block::kLmHead;
  if (!starts_with(name, prefix)) return Block::kNonText;
  const std::string local = name.substr(prefix.size());
  if (starts_with(local, "embed_tokens")) return Block::kEmbedding;
  if (is_buffer(local)) return Block::kBuffers;
  if (contains(local, ".experts.")) return Block::kExperts;
  if (contains(local, ".self_attn.") && ends_with(local, "_proj.weight")) return Block::kAttention;
  if (contains(local, ".mlp.")) return Block::kDenseMlp;
  if (contains(local, ".router.") || contains(local, "norm")) {
    return Block::kRouterNorms;
  }
  return Block::kOther;
}

bool is_buffer(const std::string& name) {
  return name == "layer_scalar" || ends_with(name, ".layer_scalar");
}

BlockSummary summarize_blocks(const std::vector<TensorMeta>& tensors, const std::string& prefix) {
  std::map<Block, BlockRow> rows;
  BlockSummary s;
  for (const auto& t : tensors) {
    Block b = classify_tensor(t.name, prefix);
    BlockRow& r = rows[b];
    r.block = b;
    r.tensors += 1;
    r.params += t.numel();
    r.bytes += t.nbytes();
    s.total_bytes += t.nbytes();
    if (b != Block::kNonText) s.text_bytes += t.nbytes();
    if (b == Block::kBuffers) {
      s.buffer_elements += t.numel();
      continue;
    }
    s.total_params += t.numel();
    if (b != Block::kNonText) {
      s.text_params += t.numel();
    }
  }
  for (Block b : kAllBlocks) {
    if (rows.count(b)) s.rows.push_back(rows[b]);
  }
  return s;
}

bool is_quantizable_linear(const TensorMeta& t) {
  return t.shape.size() == 2 && ends_with(t.name, ".weight") && !contains(t.name, "embed_tokens") &&
         t.name != "lm_head.weight";
}

QuantizationEstimate estimate_linear_only_4bit(const std::vector<TensorMeta>& tensors,
                                               const std::string& prefix) {
  QuantizationEstimate q;
  for (const auto& t : tensors) {
    const int64_t n = t.numel();
    q.bytes_before += t.nbytes();
    if (is_buffer(t.name)) {  // bytes, not parameters
      q.untouched_bytes += t.nbytes();
      continue;
    }
    q.total_params += n;
    if (is_quantizable_linear(t)) {
      q.quantized_tensors += 1;
      q.quantized_params += n;
      q.quantized_bytes_before += t.nbytes();
      // 4 bits per weight, one fp32 absmax per block of 64 (rounded up per tensor).
      uint64_t packed = (static_cast<uint64_t>(n) * 4 + 7) / 8;
      uint64_t blocks = (static_cast<uint64_t>(n) + 63) / 64;
      q.quantized_bytes_after += packed + blocks * static_cast<uint64_t>(q.absmax_bytes);
    } else {
      q.untouched_params += n;
      q.untouched_bytes += t.nbytes();
      if (classify_tensor(t.name, prefix) == Block::kExperts) {
        q.untouched_expert_params += n;
        q.untouched_expert_bytes += t.nbytes();
      }
    }
  }
  q.bytes_after = q.bytes_before - q.quantized_bytes_before + q.quantized_bytes_after;
  return q;
}

MemoryEstimate estimate_memory(const ModelConfig& c, const MemoryInputs& in) {
  auto dt = dtype_from_torch_name(c.dtype);
  if (!dt) fail("model '{}': dtype '{}' is not bfloat16, float16 or float32", c.name, c.dtype);
  detail::require_count("--batch", in.batch, detail::kMaxBatch);
  detail::require_count("--width", in.width, detail::kMaxWidth);
  detail::require_count("--ce-chunk", in.ce_chunk_tokens, detail::kMaxWidth);
  if (in.trainable_params < 0) fail("memory estimate: negative trainable parameter count");
  // Every product is checked: a wrapped byte count would print as a small, plausible number.
  using detail::add_or_refuse;
  using detail::mul_or_refuse;
  const uint64_t act = static_cast<uint64_t>(dtype_size(*dt));
  const uint64_t tokens = mul_or_refuse(static_cast<uint64_t>(in.batch),
                                        static_cast<uint64_t>(in.width), "--batch x --width");
  const uint64_t vocab = static_cast<uint64_t>(c.vocab_size);
  const uint64_t per_logit = 3 * act + 8;
  const uint64_t chunk = std::min<uint64_t>(static_cast<uint64_t>(in.ce_chunk_tokens), tokens);
  const char* what = "memory estimate for --batch x --width";
  MemoryEstimate m;
  m.inputs = in;
  const uint64_t adapters = mul_or_refuse(static_cast<uint64_t>(in.trainable_params), 16, what);
  m.rows.push_back({"weights_bytes", "weights (as stored)", in.weight_bytes,
                    "text-decoder tensors, stored dtype"});
  m.rows.push_back({"adapter_state_bytes", "adapters + grads + AdamW state", adapters,
                    fmt::format("{} params x 16 B (fp32 weight, grad, 2 moments)",
                                format_count(in.trainable_params))});
  const uint64_t layer_inputs = mul_or_refuse(
      mul_or_refuse(static_cast<uint64_t>(c.num_layers), tokens, what),
      mul_or_refuse(static_cast<uint64_t>(c.hidden_size), act, what), what);
  m.rows.push_back(
      {"checkpointed_inputs_bytes", "checkpointed layer inputs", layer_inputs,
       fmt::format("{} layers x {} tokens x {} x {} B", c.num_layers, tokens, c.hidden_size, act)});
  m.rows.push_back({"ce_naive_bytes", "CE transient, naive",
                    mul_or_refuse(mul_or_refuse(tokens, vocab, what), per_logit, what),
                    fmt::format("{} tokens x {} vocab x {} B", tokens, vocab, per_logit)});
  m.rows.push_back({"ce_chunked_bytes", "CE transient, chunked",
                    mul_or_refuse(mul_or_refuse(chunk, vocab, what), per_logit, what),
                    fmt::format("{} tokens x {} vocab x {} B", chunk, vocab, per_logit)});
  const uint64_t base =
      add_or_refuse(add_or_refuse(m.rows[0].bytes, m.rows[1].bytes, what), m.rows[2].bytes, what);
  m.total_naive_ce_bytes = add_or_refuse(base, m.rows[3].bytes, what);
  m.total_chunked_ce_bytes = add_or_refuse(base, m.rows[4].bytes, what);
  return m;
}

Json to_json(const BlockSummary& s) {
  Json rows = Json::array();
  for (const auto& r : s.rows) {
    rows.push_back({{"block", to_string(r.block)},
                    {"label", block_label(r.block)},
                    {"tensors", r.tensors},
                    {"params", r.params},
                    {"counted_in_total_params", r.block != Block::kBuffers},
                    {"bytes", r.bytes},
                    {"params_share_ratio", r.block == Block::kBuffers
                                               ? 0.0
                                               : ratio(static_cast<double>(r.params),
                                                       static_cast<double>(s.total_params))},
                    {"bytes_share_ratio",
                     ratio(static_cast<double>(r.bytes), static_cast<double>(s.total_bytes))}});
  }
  return rows;
}

Json to_json(const QuantizationEstimate& q) {
  return {{"scheme", "linear_only_4bit"},
          {"description",
           "replaces only 2-D linear weights (nn.Linear walk); 3-D fused experts, "
           "embeddings, norms and lm_head stay as stored"},
          {"bits_per_param", q.bits_per_param},
          {"block_size", q.block_size},
          {"absmax_bytes", q.absmax_bytes},
          {"quantized_tensors", q.quantized_tensors},
          {"quantized_params", q.quantized_params},
          {"quantized_bytes_before", q.quantized_bytes_before},
          {"quantized_bytes_after", q.quantized_bytes_after},
          {"untouched_params", q.untouched_params},
          {"untouched_bytes", q.untouched_bytes},
          {"untouched_expert_params", q.untouched_expert_params},
          {"untouched_expert_bytes", q.untouched_expert_bytes},
          {"untouched_params_ratio",
           ratio(static_cast<double>(q.untouched_params), static_cast<double>(q.total_params))},
          {"untouched_expert_params_ratio", ratio(static_cast<double>(q.untouched_expert_params),
                                                  static_cast<double>(q.total_params))},
          {"total_params", q.total_params},
          {"bytes_before", q.bytes_before},
          {"bytes_after", q.bytes_after},
          {"saved_bytes", q.bytes_before - q.bytes_after},
          {"saved_ratio", ratio(static_cast<double>(q.bytes_before - q.bytes_after),
                                static_cast<double>(q.bytes_before))}};
}

Json to_json(const LoraPlan& p) {
  Json per_target = Json::array();
  for (const auto& s : p.per_target) {
    per_target.push_back({{"target", s.target},
                          {"modules", s.modules},
                          {"sliding_modules", s.sliding_modules},
                          {"full_modules", s.full_modules},
                          {"trainable_params", s.trainable_params},
                          {"absent_layers", s.absent_layers}});
  }
  Json missing = Json::array();
  for (const auto& m : p.missing) {
    missing.push_back({{"target", m.target},
                       {"layers", m.layers},
                       {"layer_types", m.layer_types},
                       {"message", m.message}});
  }
  Json modules = Json::array();
  for (const auto& m : p.modules) {
    modules.push_back({{"name", m.name},
                       {"target", m.target},
                       {"layer", m.layer},
                       {"layer_type", to_string(m.layer_type)},
                       {"in_features", m.in_features},
                       {"out_features", m.out_features},
                       {"params", m.params}});
  }
  return {{"targets", p.targets},
          {"rank", p.rank},
          {"modules", static_cast<int64_t>(p.modules.size())},
          {"trainable_params", p.trainable_params},
          {"modules_by_layer_type",
           {{"sliding_attention", p.sliding_modules}, {"full_attention", p.full_modules}}},
          {"per_target", per_target},
          {"missing", missing},
          {"module_list", modules}};
}

Json to_json(const MemoryEstimate& m) {
  Json rows = Json::array();
  for (const auto& r : m.rows) {
    rows.push_back({{"key", r.key}, {"label", r.label}, {"bytes", r.bytes}, {"basis", r.basis}});
  }
  Json out = {{"is_estimate", true},
              {"measured_by", "tprobe profile"},
              {"batch", m.inputs.batch},
              {"width", m.inputs.width},
              {"ce_chunk_tokens", m.inputs.ce_chunk_tokens},
              {"rows", rows}};
  for (const auto& r : m.rows) out[r.key] = r.bytes;
  out["total_naive_ce_bytes"] = m.total_naive_ce_bytes;
  out["total_chunked_ce_bytes"] = m.total_chunked_ce_bytes;
  out["excludes"] =
      "the recomputed layer's working set (MoE routing buffers), allocator "
      "fragmentation, CUDA context";
  return out;
}

Table blocks_table(const BlockSummary& s) {
  Table t("Parameters by block");
  t.column("block", Align::kLeft)
      .column("tensors")
      .column("params")
      .column("bytes")
      .column("share");
  for (const auto& r : s.rows) {
    t.row({block_label(r.block), format_count(r.tensors), format_count(r.params),
           format_bytes(static_cast<double>(r.bytes)),
           r.block == Block::kBuffers
               ? std::string("buffer")
               : format_percent(
                     ratio(static_cast<double>(r.params), static_cast<double>(s.total_params)))});
  }
  t.separator();
  t.row({"total parameters", "", format_count(s.total_params),
         format_bytes(static_cast<double>(s.total_bytes)),
         format_percent(s.total_params > 0 ? 1.0 : 0.0)});
  if (s.text_params != s.total_params) {
    t.row({"text decoder parameters", "", format_count(s.text_params),
           format_bytes(static_cast<double>(s.text_bytes)),
           format_percent(
               ratio(static_cast<double>(s.text_params), static_cast<double>(s.total_params)))});
  }
  return t;
}

Table quantization_table(const QuantizationEstimate& q) {
  Table t("Linear-only 4-bit quantization (what an nn.Linear walk replaces)");
  t.column("part", Align::kLeft)
      .column("params")
      .column("share")
      .column("bytes now")
      .column("bytes after");
  const double total = static_cast<double>(q.total_params);
  t.row({"linear weights -> 4-bit", format_count(q.quantized_params),
         format_percent(ratio(static_cast<double>(q.quantized_params), total)),
         format_bytes(static_cast<double>(q.quantized_bytes_before)),
         format_bytes(static_cast<double>(q.quantized_bytes_after))});
  t.row({"fused 3-D experts, untouched", format_count(q.untouched_expert_params),
         format_percent(ratio(static_cast<double>(q.untouched_expert_params), total)),
         format_bytes(static_cast<double>(q.untouched_expert_bytes)),
         format_bytes(static_cast<double>(q.untouched_expert_bytes))});
  const int64_t other = q.untouched_params - q.untouched_expert_params;
  const uint64_t other_bytes = q.untouched_bytes - q.untouched_expert_bytes;
  t.row({"embeddings, norms, buffers, untouched", format_count(other),
         format_percent(ratio(static_cast<double>(other), total)),
         format_bytes(static_cast<double>(other_bytes)),
         format_bytes(static_cast<double>(other_bytes))});
  t.separator();
  t.row({"model", format_count(q.total_params), format_percent(total > 0 ? 1.0 : 0.0),
         format_bytes(static_cast<double>(q.bytes_before)),
         format_bytes(static_cast<double>(q.bytes_after))});
  t.note(fmt::format("saves {} of {} ({}); {} of the parameters stay in their stored dtype",
                     format_bytes(static_cast<double>(q.bytes_before - q.bytes_after)),
                     format_bytes(static_cast<double>(q.bytes_before)),
                     format_percent(ratio(static_cast<double>(q.bytes_before - q.bytes_after),
                                          static_cast<double>(q.bytes_before))),
                     format_percent(ratio(static_cast<double>(q.untouched_params), total))));
  t.note("4-bit = NF4-style 0.5 B/param + one fp32 absmax per 64 weights");
  return t;
}

Table lora_table(const LoraPlan& p) {
  Table t(fmt::format("LoRA targets at rank {}", p.rank));
  t.column("target", Align::kLeft)
      .column("sliding")
      .column("full")
      .column("modules")
      .column("trainable params");
  for (const auto& s : p.per_target) {
    t.row({s.target, format_count(s.sliding_modules), format_count(s.full_modules),
           format_count(s.modules), format_count(s.trainable_params)});
  }
  t.separator();
  t.row({"total", format_count(p.sliding_modules), format_count(p.full_modules),
         format_count(static_cast<int64_t>(p.modules.size())), format_count(p.trainable_params)});
  return t;
}

Table memory_table(const MemoryEstimate& m) {
  Table t(fmt::format("Memory budget ESTIMATE at batch {} x width {} (tprobe profile measures it)",
                      m.inputs.batch, m.inputs.width));
  t.column("item", Align::kLeft).column("bytes").column("basis", Align::kLeft);
  for (const auto& r : m.rows) {
    t.row({r.label, format_bytes(static_cast<double>(r.bytes)), r.basis});
  }
  t.separator();
  t.row({"total with naive CE", format_bytes(static_cast<double>(m.total_naive_ce_bytes)), ""});
  t.row({"total with chunked CE", format_bytes(static_cast<double>(m.total_chunked_ce_bytes)), ""});
  t.note(
      "a lower bound: excludes the recomputed layer's working set (MoE routing buffers), "
      "allocator fragmentation and the CUDA context");
  return t;
}

std::vector<DtypeRow> tally_dtypes(const std::vector<TensorMeta>& tensors) {
  std::map<std::string, DtypeRow> by_name;
  for (const auto& t : tensors) {
    DtypeRow& row = by_name[to_string(t.dtype)];
    row.dtype = to_string(t.dtype);
    row.tensors += 1;
    row.bytes += t.nbytes();
    row.supported = dtype_is_supported(t.dtype);
  }
  std::vector<DtypeRow> out;
  for (auto& [name, row] : by_name) out.push_back(row);
  return out;
}

Json config_summary_json(const ModelConfig& c) {
  Json layers = Json::array();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerGeometry g = c.layer(i);
    layers.push_back({{"layer", i},
                      {"type", to_string(g.type)},
                      {"head_dim", g.head_dim},
                      {"num_kv_heads", g.num_kv_heads},
                      {"has_v_proj", g.has_v_proj}});
  }
  return {{"name", c.name},
          {"hidden_size", c.hidden_size},
          {"num_layers", c.num_layers},
          {"sliding_layers", c.count_layers(LayerType::kSliding)},
          {"full_layers", c.count_layers(LayerType::kFull)},
          {"num_attention_heads", c.num_attention_heads},
          {"intermediate_size", c.intermediate_size},
          {"num_experts", c.num_experts},
          {"top_k_experts", c.top_k_experts},
          {"moe_intermediate_size", c.moe_intermediate_size},
          {"vocab_size", c.vocab_size},
          {"attention_k_eq_v", c.attention_k_eq_v},
          {"sliding_window", c.sliding_window},
          {"dtype", c.dtype},
          {"layers", layers}};
}

Json checkpoint_source_json(const Checkpoint& ck) {
  Json files = Json::array();
  for (std::size_t i = 0; i < ck.file_count(); ++i) {
    const SafetensorsFile& f = ck.file(i);
    files.push_back({{"path", f.path()},
                     {"tensors", f.tensors().size()},
                     {"file_bytes", f.file_size()},
                     {"header_bytes", f.header_size()}});
  }
  return {{"kind", "checkpoint"},
          {"dir", ck.dir()},
          {"sharded", ck.sharded()},
          {"text_prefix", ck.text_prefix()},
          {"tensors", ck.tensor_count()},
          {"files", files},
          {"config_defaulted_fields", ck.config_info().defaulted_fields},
          {"per_layer_config_form", ck.config_info().per_layer_config_form},
          {"warnings", ck.warnings()}};
}

Json to_json(const std::vector<DtypeRow>& rows) {
  Json out = Json::array();
  for (const auto& r : rows) {
    out.push_back(
        {{"dtype", r.dtype}, {"tensors", r.tensors}, {"bytes", r.bytes}, {"supported", r.supported}});
  }
  return out;
}

Json to_json(const std::vector<Disagreement>& disagreements) {
  Json out = Json::array();
  for (const auto& d : disagreements) {
    out.push_back({{"tensor", d.tensor}, {"field", d.field}, {"message", d.message}});
  }
  return out;
}

Table disagreements_table(const std::vector<Disagreement>& disagreements) {
  Table t("Config vs checkpoint: disagreements");
  t.column("tensor", Align::kLeft).column("field", Align::kLeft).column("message", Align::kLeft);
  for (const auto& d : disagreements) t.row({d.tensor, d.field, d.message});
  return t;
}

}  // namespace tprobe::core
