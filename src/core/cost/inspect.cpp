// `inspect` analysis: block table, linear-only 4-bit estimate, LoRA plan, memory budget, checks.
#include "tprobe/core/cost/inspect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/checked_math.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/evidence/step_memory.hpp"

namespace tprobe::core {

namespace {

using detail::ends_with;
using detail::starts_with;
bool contains(const std::string& s, const char* p) { return s.find(p) != std::string::npos; }

constexpr Block kAllBlocks[] = {Block::kExperts,     Block::kAttention, Block::kDenseMlp,
                                Block::kRouterNorms, Block::kEmbedding, Block::kLmHead,
                                Block::kNonText,     Block::kBuffers,   Block::kOther};


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
  detail::require_count("batch", in.batch, detail::kMaxBatch);
  detail::require_count("width", in.width, detail::kMaxWidth);
  detail::require_count("CE chunk", in.ce_chunk_tokens, detail::kMaxWidth);
  if (in.trainable_params < 0) fail("memory estimate: negative trainable parameter count");
  // Every product is checked: a wrapped byte count would print as a small, plausible number.
  using detail::add_or_refuse;
  using detail::mul_or_refuse;
  const uint64_t act = static_cast<uint64_t>(dtype_size(*dt));
  const uint64_t tokens = mul_or_refuse(static_cast<uint64_t>(in.batch),
                                        static_cast<uint64_t>(in.width), "batch x width");
  const uint64_t vocab = static_cast<uint64_t>(c.vocab_size);
  const uint64_t per_logit = 3 * act + 8;
  const uint64_t chunk = std::min<uint64_t>(static_cast<uint64_t>(in.ce_chunk_tokens), tokens);
  const char* what = "memory estimate for batch x width";
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

MemoryCheck check_memory_estimate(const MemoryEstimate& est, const Json& results,
                                  const std::string& source) {
  MemoryCheck c;
  c.source = source;
  const Json* points = results.is_object() && results.contains("points") && results["points"].is_array()
                           ? &results["points"]
                           : nullptr;
  if (points == nullptr) {
    c.why_not = "no results.points[] (not a profile evidence)";
    return c;
  }
  const Json* mem = nullptr;
  for (const Json& p : *points) {
    if (!p.is_object() || !p.contains("batch") || !p.contains("width")) continue;
    if (!p["batch"].is_number_integer() || !p["width"].is_number_integer()) continue;
    if (p["batch"].get<int64_t>() != est.inputs.batch || p["width"].get<int64_t>() != est.inputs.width)
      continue;
    if (p.contains("memory") && p["memory"].is_object()) mem = &p["memory"];
    break;
  }
  if (mem == nullptr) {
    c.why_not = fmt::format(
        "no unpadded {}x{} point with a memory step (results.points[].memory): run profile at "
        "--batch {} --widths {} (memory step on)",
        est.inputs.batch, est.inputs.width, est.inputs.batch, est.inputs.width);
    return c;
  }
  StepMemory m;
  try {
    m = step_memory_from_json(*mem, "results.points[].memory");
  } catch (const Error& e) {
    c.why_not = e.what();
    return c;
  }
  std::map<std::string, int64_t> items;
  bool states_in_peak = false;  // the step ran AdamW (--optimizer adamw): its moments are resident
  for (const MemoryItem& it : m.items) {
    items[it.key] = it.bytes;
    if (it.key == memory_item::kAdamwStates) states_in_peak = it.in_peak;
  }
  if (items.empty()) {
    c.why_not = "the memory step has no items (results.points[].memory.items)";
    return c;
  }
  c.done = true;
  c.device = m.device;
  auto sum = [&](std::initializer_list<const char*> keys, std::string* names) -> std::optional<int64_t> {
    int64_t total = 0;
    bool any = false;
    for (const char* k : keys) {
      auto it = items.find(k);
      if (it == items.end()) continue;
      any = true;
      total += it->second;
      if (!names->empty()) *names += " + ";
      *names += k;
    }
    return any ? std::optional<int64_t>(total) : std::nullopt;
  };
  auto row = [&](const MemoryRow& r, std::initializer_list<const char*> keys, std::string note) {
    MemoryCheckRow x;
    x.label = r.label;
    x.estimated = r.bytes;
    x.measured = sum(keys, &x.measured_items);
    x.note = std::move(note);
    c.rows.push_back(std::move(x));
  };
  row(est.rows[0], {memory_item::kWeights},
      "the estimate counts the stored text tensors; the step's weights are the base parameters it "
      "built");
  row(est.rows[1],
      {memory_item::kLoraParameters, memory_item::kLoraGradients, memory_item::kAdamwStates},
      states_in_peak
          ? "AdamW's moments measured: resident since the optimizer's first step (--optimizer "
            "adamw); the gradients are what is alive at the peak"
          : "AdamW's moments are computed on the measured side too (the step ran no optimizer: "
            "--optimizer none); the gradients are what is alive at the peak");
  row(est.rows[2], {memory_item::kForwardKept}, "forward allocations alive at the peak");
  row(est.rows[4], {"loss_head"},
      "the loss head's transient alive at the peak: 0 when the peak is elsewhere (it is then not "
      "what sets the peak)");
  MemoryCheckRow total;
  total.label = "total with chunked CE";
  total.estimated = est.total_chunked_ce_bytes;
  total.measured = m.peak_allocated;
  total.measured_items = "peak allocated";
  total.note = states_in_peak ? "the measured peak, AdamW's states in it"
                              : "the measured peak; AdamW's states are beside it, not in it";
  // The measured items the estimate has no row for: its named limits.
  for (const auto& [key, label] : std::vector<std::pair<const char*, const char*>>{
           {"recompute", "recompute working set"},
           {"backward", "backward gradients in flight"},
           {"resident_other", "workspace and inputs"},
           {"fragmentation", "reserved minus allocated"}}) {
    auto it = items.find(key);
    if (it == items.end()) continue;
    MemoryCheckRow x;
    x.label = label;
    x.measured = it->second;
    x.measured_items = key;
    x.note = "not in the estimate";
    c.rows.push_back(std::move(x));
  }
  c.rows.push_back(std::move(total));
  return c;
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

CheckpointSource checkpoint_source(const Checkpoint& ck) {
  CheckpointSource s;
  s.dir = ck.dir();
  s.sharded = ck.sharded();
  s.text_prefix = ck.text_prefix();
  s.tensors = ck.tensor_count();
  for (std::size_t i = 0; i < ck.file_count(); ++i) {
    const SafetensorsFile& f = ck.file(i);
    s.files.push_back({f.path(), f.tensors().size(), f.file_size(), f.header_size()});
  }
  s.config_defaulted_fields = ck.config_info().defaulted_fields;
  s.per_layer_config_form = ck.config_info().per_layer_config_form;
  s.warnings = ck.warnings();
  return s;
}

void add_inspect_diagnostics(InspectReport& r) {
  if (r.source) {
    for (const auto& w : r.source->warnings) {
      r.diagnostics.push_back({Severity::kWarning, "checkpoint_index", w});
    }
    const auto& defaulted = r.source->config_defaulted_fields;
    if (!defaulted.empty()) {
      r.diagnostics.push_back(
          {Severity::kInfo, "config_defaults",
           fmt::format("config.json left {} field(s) to Hugging Face defaults: {}",
                       defaulted.size(), fmt::join(defaulted, ", "))});
    }
  }
  // Dtypes present, so an unsupported one (F8, I64, ...) is visible rather than a crash later.
  for (const auto& d : r.dtypes) {
    if (d.supported) continue;
    r.diagnostics.push_back({Severity::kWarning, "unsupported_dtype",
                             fmt::format("{} tensor(s) are {}, which tprobe cannot compute with "
                                         "(BF16, F16, F32 only)",
                                         d.tensors, d.dtype)});
  }
  for (const auto& m : r.lora.missing) {
    r.diagnostics.push_back({Severity::kWarning, "lora_target_absent", m.message});
  }
  if (!r.disagreements.empty()) {
    r.diagnostics.push_back({Severity::kError, "config_checkpoint_disagree",
                             fmt::format("{} disagreement(s) between config.json and the tensors",
                                         r.disagreements.size())});
    r.outcome = Outcome::kNo;
  }
}

InspectReport analyze_inspect(const InspectInput& in) {
  InspectReport r;
  r.config = in.config;
  r.prefix = in.prefix;
  if (in.checkpoint) r.source = checkpoint_source(*in.checkpoint);
  r.embedded_name = in.embedded_name;
  r.tensor_count = static_cast<int64_t>(in.tensors.size());
  if (in.checkpoint) r.disagreements = cross_check(in.config, in.tensors, in.prefix);
  r.blocks = summarize_blocks(in.tensors, in.prefix);
  r.quantization = estimate_linear_only_4bit(in.tensors, in.prefix);
  r.lora = plan_lora(in.config, in.tensors, in.prefix, in.targets, in.rank);
  MemoryInputs mem = in.memory;
  mem.weight_bytes = r.blocks.text_bytes;
  mem.trainable_params = r.lora.trainable_params;
  r.memory = estimate_memory(in.config, mem);
  if (in.measured != nullptr) {
    r.memory_check = check_memory_estimate(r.memory, *in.measured, in.measured_source);
  }
  r.dtypes = tally_dtypes(in.tensors);
  add_inspect_diagnostics(r);
  return r;
}

}  // namespace tprobe::core
