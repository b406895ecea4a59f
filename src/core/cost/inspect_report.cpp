// Views of the inspect analysis: evidence JSON and tables (core/cost/inspect.hpp has the data).
#include "tprobe/core/cost/inspect_report.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "base/math_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {

namespace {
using detail::ratio;
}  // namespace

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

Table memory_check_table(const MemoryCheck& c) {
  Table t(fmt::format("the ESTIMATE beside what profile's memory step measured ({}{})", c.source,
                      c.device.empty() ? "" : ", " + c.device));
  if (!c.done) {
    t.column("status", Align::kLeft);
    t.row({"not compared: " + c.why_not});
    return t;
  }
  t.column("item", Align::kLeft).column("estimated").column("measured").column("error");
  t.column("measured as", Align::kLeft).column("note", Align::kLeft);
  for (const auto& r : c.rows) {
    std::string err = "-";
    if (r.estimated && r.measured && *r.measured > 0) {
      err = fmt::format("{:+.1f} %", 100.0 * (static_cast<double>(*r.estimated) /
                                                  static_cast<double>(*r.measured) -
                                              1.0));
    }
    t.row({r.label, r.estimated ? format_bytes(static_cast<double>(*r.estimated)) : "-",
           r.measured ? format_bytes(static_cast<double>(*r.measured)) : "-", err, r.measured_items,
           r.note});
  }
  return t;
}

Json to_json(const MemoryCheck& c) {
  Json rows = Json::array();
  for (const auto& r : c.rows) {
    rows.push_back({{"label", r.label},
                    {"estimated_bytes", r.estimated ? Json(*r.estimated) : Json(nullptr)},
                    {"measured_bytes", r.measured ? Json(*r.measured) : Json(nullptr)},
                    {"error_ratio", r.estimated && r.measured && *r.measured > 0
                                        ? Json(static_cast<double>(*r.estimated) /
                                                   static_cast<double>(*r.measured) -
                                               1.0)
                                        : Json(nullptr)},
                    {"measured_items", r.measured_items},
                    {"note", r.note}});
  }
  return {{"done", c.done},
          {"why_not", c.done ? Json(nullptr) : Json(c.why_not)},
          {"source", c.source},
          {"device", c.device},
          {"rows", std::move(rows)}};
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

Json checkpoint_source_json(const CheckpointSource& s) {
  Json files = Json::array();
  for (const auto& f : s.files) {
    files.push_back({{"path", f.path},
                     {"tensors", f.tensors},
                     {"file_bytes", f.file_bytes},
                     {"header_bytes", f.header_bytes}});
  }
  return {{"kind", "checkpoint"},
          {"dir", s.dir},
          {"sharded", s.sharded},
          {"text_prefix", s.text_prefix},
          {"tensors", s.tensors},
          {"files", files},
          {"config_defaulted_fields", s.config_defaulted_fields},
          {"per_layer_config_form", s.per_layer_config_form},
          {"warnings", s.warnings}};
}

Json to_json(const std::vector<DtypeRow>& rows) {
  Json out = Json::array();
  for (const auto& r : rows) {
    out.push_back({{"dtype", r.dtype},
                   {"tensors", r.tensors},
                   {"bytes", r.bytes},
                   {"supported", r.supported}});
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

Json to_json(const InspectReport& r) {
  Json j;
  if (r.source) {
    j["source"] = checkpoint_source_json(*r.source);
  } else {
    j["source"] = {{"kind", "embedded"},
                   {"name", r.embedded_name},
                   {"text_prefix", r.prefix},
                   {"tensors", r.tensor_count}};
  }
  j["config"] = config_summary_json(r.config);
  j["total_params"] = r.blocks.total_params;
  j["total_bytes"] = r.blocks.total_bytes;
  j["text_params"] = r.blocks.text_params;
  j["text_bytes"] = r.blocks.text_bytes;
  j["blocks"] = to_json(r.blocks);
  j["dtypes"] = to_json(r.dtypes);
  j["quantization"] = to_json(r.quantization);
  j["lora"] = to_json(r.lora);
  j["memory_estimate"] = to_json(r.memory);
  j["memory_check"] = r.memory_check ? to_json(*r.memory_check) : Json(nullptr);
  j["cross_check"] = {{"checked", r.source.has_value()},
                      {"disagreements", to_json(r.disagreements)}};
  return j;
}

// ---- reading the evidence back ----

namespace {

// results.config: the ModelConfig fields config_summary_json writes. Each layer's geometry is
// folded back into the fields ModelConfig::layer() resolves it from: the first sliding layer
// gives head_dim and num_kv_heads, the first full layer global_head_dim (and num_global_kv_heads
// under attention_k_eq_v), and a layer unlike those is a per_layer override.
ModelConfig config_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  ModelConfig c;
  c.name = string(j, "name", where);
  c.hidden_size = integer(j, "hidden_size", where, 0);
  c.num_layers = integer(j, "num_layers", where, 0);
  c.num_attention_heads = integer(j, "num_attention_heads", where, 0);
  c.intermediate_size = integer(j, "intermediate_size", where, 0);
  c.num_experts = integer(j, "num_experts", where, 0);
  c.top_k_experts = integer(j, "top_k_experts", where, 0);
  c.moe_intermediate_size = integer(j, "moe_intermediate_size", where, 0);
  c.vocab_size = integer(j, "vocab_size", where, 0);
  c.attention_k_eq_v = boolean(j, "attention_k_eq_v", where);
  c.sliding_window = integer(j, "sliding_window", where, 0);
  c.dtype = string(j, "dtype", where);
  // sliding_layers and full_layers count the layers' types: recomputed on writing.
  const Json& layers = array(j, "layers", where);
  if (static_cast<int64_t>(layers.size()) != c.num_layers) {
    fail("{}: field 'layers' holds {} layer(s) for num_layers {}", where, layers.size(),
         c.num_layers);
  }
  std::vector<LayerGeometry> geometry;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string lw = at(where, "layers", i);
    const auto index = static_cast<int64_t>(i);
    integer(layers[i], "layer", lw, index, index);
    LayerGeometry g;
    g.type = enum_value(layers[i], "type", lw, {LayerType::kSliding, LayerType::kFull});
    g.head_dim = integer(layers[i], "head_dim", lw, 0);
    g.num_kv_heads = integer(layers[i], "num_kv_heads", lw, 0);
    g.has_v_proj = boolean(layers[i], "has_v_proj", lw);
    // ModelConfig has no field for it: it follows from the type and attention_k_eq_v.
    const bool v_proj = !(g.type == LayerType::kFull && c.attention_k_eq_v);
    if (g.has_v_proj != v_proj) {
      fail("{}: field 'has_v_proj' must be {} for a {} layer when attention_k_eq_v is {}", lw,
           v_proj, to_string(g.type), c.attention_k_eq_v);
    }
    c.layer_types.push_back(g.type);
    geometry.push_back(g);
  }
  for (const auto& g : geometry) {
    if (g.type != LayerType::kSliding) continue;
    c.head_dim = g.head_dim;
    c.num_kv_heads = g.num_kv_heads;
    break;
  }
  for (const auto& g : geometry) {
    if (g.type != LayerType::kFull) continue;
    c.global_head_dim = g.head_dim;
    if (c.attention_k_eq_v) c.num_global_kv_heads = g.num_kv_heads;
    break;
  }
  for (std::size_t i = 0; i < geometry.size(); ++i) {
    const LayerGeometry resolved = c.layer(static_cast<int64_t>(i));
    if (resolved.head_dim != geometry[i].head_dim) {
      c.per_layer[static_cast<int64_t>(i)].head_dim = geometry[i].head_dim;
    }
    if (resolved.num_kv_heads != geometry[i].num_kv_heads) {
      c.per_layer[static_cast<int64_t>(i)].num_key_value_heads = geometry[i].num_kv_heads;
    }
  }
  return c;
}

CheckpointSource checkpoint_source_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  CheckpointSource s;
  s.dir = string(j, "dir", where);
  s.sharded = boolean(j, "sharded", where);
  s.text_prefix = string(j, "text_prefix", where);
  s.tensors = static_cast<uint64_t>(integer(j, "tensors", where, 0));
  const Json& files = array(j, "files", where);
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string fw = at(where, "files", i);
    CheckpointFile f;
    f.path = string(files[i], "path", fw);
    f.tensors = static_cast<uint64_t>(integer(files[i], "tensors", fw, 0));
    f.file_bytes = unsigned_integer(files[i], "file_bytes", fw);
    f.header_bytes = unsigned_integer(files[i], "header_bytes", fw);
    s.files.push_back(std::move(f));
  }
  s.config_defaulted_fields = strings(j, "config_defaulted_fields", where);
  s.per_layer_config_form = boolean(j, "per_layer_config_form", where);
  s.warnings = strings(j, "warnings", where);
  return s;
}

// results.blocks and the totals beside it.
BlockSummary blocks_from_json(const Json& results, const std::string& where) {
  using namespace json_read;
  BlockSummary s;
  s.total_params = integer(results, "total_params", where, 0);
  s.total_bytes = unsigned_integer(results, "total_bytes", where);
  s.text_params = integer(results, "text_params", where, 0);
  s.text_bytes = unsigned_integer(results, "text_bytes", where);
  const Json& rows = array(results, "blocks", where);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string rw = at(where, "blocks", i);
    BlockRow r;
    r.block = enum_value(rows[i], "block", rw,
                         {Block::kExperts, Block::kAttention, Block::kDenseMlp,
                          Block::kRouterNorms, Block::kEmbedding, Block::kLmHead, Block::kNonText,
                          Block::kBuffers, Block::kOther});
    r.tensors = integer(rows[i], "tensors", rw, 0);
    r.params = integer(rows[i], "params", rw, 0);
    r.bytes = unsigned_integer(rows[i], "bytes", rw);
    // label, counted_in_total_params and the share ratios follow from the block and the totals.
    // buffer_elements is not written: it is the buffers' row.
    if (r.block == Block::kBuffers) s.buffer_elements = r.params;
    s.rows.push_back(r);
  }
  return s;
}

QuantizationEstimate quantization_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  choice(j, "scheme", where, {"linear_only_4bit"});
  // description is a constant; saved_bytes and the ratios follow from the counts.
  QuantizationEstimate q;
  q.bits_per_param = number(j, "bits_per_param", where);
  q.block_size = integer(j, "block_size", where, 1);
  q.absmax_bytes = integer(j, "absmax_bytes", where, 0);
  q.quantized_tensors = integer(j, "quantized_tensors", where, 0);
  q.quantized_params = integer(j, "quantized_params", where, 0);
  q.quantized_bytes_before = unsigned_integer(j, "quantized_bytes_before", where);
  q.quantized_bytes_after = unsigned_integer(j, "quantized_bytes_after", where);
  q.untouched_params = integer(j, "untouched_params", where, 0);
  q.untouched_bytes = unsigned_integer(j, "untouched_bytes", where);
  q.untouched_expert_params = integer(j, "untouched_expert_params", where, 0);
  q.untouched_expert_bytes = unsigned_integer(j, "untouched_expert_bytes", where);
  q.total_params = integer(j, "total_params", where, 0);
  q.bytes_before = unsigned_integer(j, "bytes_before", where);
  q.bytes_after = unsigned_integer(j, "bytes_after", where);
  return q;
}

LoraPlan lora_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  LoraPlan p;
  p.targets = strings(j, "targets", where);
  p.rank = integer(j, "rank", where, 1);
  p.trainable_params = integer(j, "trainable_params", where, 0);
  // modules is module_list's length: recomputed on writing.
  const std::string bw = where + ".modules_by_layer_type";
  const Json& by_type = object(j, "modules_by_layer_type", where);
  p.sliding_modules = integer(by_type, "sliding_attention", bw, 0);
  p.full_modules = integer(by_type, "full_attention", bw, 0);
  const Json& per = array(j, "per_target", where);
  for (std::size_t i = 0; i < per.size(); ++i) {
    const std::string pw = at(where, "per_target", i);
    LoraTargetSummary t;
    t.target = string(per[i], "target", pw);
    t.modules = integer(per[i], "modules", pw, 0);
    t.sliding_modules = integer(per[i], "sliding_modules", pw, 0);
    t.full_modules = integer(per[i], "full_modules", pw, 0);
    t.trainable_params = integer(per[i], "trainable_params", pw, 0);
    t.absent_layers = integers(per[i], "absent_layers", pw, 0);
    p.per_target.push_back(std::move(t));
  }
  const Json& missing = array(j, "missing", where);
  for (std::size_t i = 0; i < missing.size(); ++i) {
    const std::string mw = at(where, "missing", i);
    LoraMissing m;
    m.target = string(missing[i], "target", mw);
    m.layers = integers(missing[i], "layers", mw, 0);
    m.layer_types = string(missing[i], "layer_types", mw);
    m.message = string(missing[i], "message", mw);
    p.missing.push_back(std::move(m));
  }
  const Json& modules = array(j, "module_list", where);
  for (std::size_t i = 0; i < modules.size(); ++i) {
    const std::string mw = at(where, "module_list", i);
    LoraModule m;
    m.name = string(modules[i], "name", mw);
    m.target = string(modules[i], "target", mw);
    m.layer = integer(modules[i], "layer", mw, 0);
    m.layer_type =
        enum_value(modules[i], "layer_type", mw, {LayerType::kSliding, LayerType::kFull});
    m.in_features = integer(modules[i], "in_features", mw, 0);
    m.out_features = integer(modules[i], "out_features", mw, 0);
    m.params = integer(modules[i], "params", mw, 0);
    p.modules.push_back(std::move(m));
  }
  return p;
}

// The estimate's inputs weight_bytes and trainable_params are not written: analyze_inspect takes
// them from the text bytes and the LoRA plan, and so does this.
MemoryEstimate memory_from_json(const Json& j, const std::string& where, const BlockSummary& blocks,
                                const LoraPlan& lora) {
  using namespace json_read;
  MemoryEstimate m;
  m.inputs.batch = integer(j, "batch", where, 1);
  m.inputs.width = integer(j, "width", where, 1);
  m.inputs.ce_chunk_tokens = integer(j, "ce_chunk_tokens", where, 1);
  m.inputs.weight_bytes = blocks.text_bytes;
  m.inputs.trainable_params = lora.trainable_params;
  const Json& rows = array(j, "rows", where);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string rw = at(where, "rows", i);
    MemoryRow r;
    r.key = string(rows[i], "key", rw);
    r.label = string(rows[i], "label", rw);
    r.bytes = unsigned_integer(rows[i], "bytes", rw);
    r.basis = string(rows[i], "basis", rw);
    m.rows.push_back(std::move(r));
  }
  // Each row's bytes, written again under its key, and is_estimate, measured_by and excludes
  // (constants) are rewritten from the rows.
  m.total_naive_ce_bytes = unsigned_integer(j, "total_naive_ce_bytes", where);
  m.total_chunked_ce_bytes = unsigned_integer(j, "total_chunked_ce_bytes", where);
  return m;
}

MemoryCheck memory_check_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  MemoryCheck c;
  c.done = boolean(j, "done", where);
  // why_not is written as null once the comparison is done.
  if (!c.done) c.why_not = string(j, "why_not", where);
  c.source = string(j, "source", where);
  c.device = string(j, "device", where);
  const Json& rows = array(j, "rows", where);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string rw = at(where, "rows", i);
    MemoryCheckRow r;
    r.label = string(rows[i], "label", rw);
    if (auto e = nullable_integer(rows[i], "estimated_bytes", rw, 0)) {
      r.estimated = static_cast<uint64_t>(*e);
    }
    r.measured = nullable_integer(rows[i], "measured_bytes", rw);
    // error_ratio follows from the two.
    r.measured_items = string(rows[i], "measured_items", rw);
    r.note = string(rows[i], "note", rw);
    c.rows.push_back(std::move(r));
  }
  return c;
}

}  // namespace

InspectReport inspect_report_from_json(const Json& results, const std::string& where) {
  using namespace json_read;
  if (!results.is_object()) fail("{} must be an object", where);
  InspectReport r;
  const std::string sw = where + ".source";
  const Json& source = object(results, "source", where);
  if (choice(source, "kind", sw, {"checkpoint", "embedded"}) == 0) {
    r.source = checkpoint_source_from_json(source, sw);
    // Not written for a checkpoint: analyze_inspect's caller passes the checkpoint's prefix and
    // every tensor of it.
    r.prefix = r.source->text_prefix;
    r.tensor_count = static_cast<int64_t>(r.source->tensors);
  } else {
    r.embedded_name = string(source, "name", sw);
    r.prefix = string(source, "text_prefix", sw);
    r.tensor_count = integer(source, "tensors", sw, 0);
  }
  r.config = config_from_json(object(results, "config", where), where + ".config");
  r.blocks = blocks_from_json(results, where);
  const Json& dtypes = array(results, "dtypes", where);
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    const std::string rw = at(where, "dtypes", i);
    DtypeRow d;
    d.dtype = string(dtypes[i], "dtype", rw);
    d.tensors = integer(dtypes[i], "tensors", rw, 0);
    d.bytes = unsigned_integer(dtypes[i], "bytes", rw);
    d.supported = boolean(dtypes[i], "supported", rw);
    r.dtypes.push_back(std::move(d));
  }
  r.quantization =
      quantization_from_json(object(results, "quantization", where), where + ".quantization");
  r.lora = lora_from_json(object(results, "lora", where), where + ".lora");
  r.memory = memory_from_json(object(results, "memory_estimate", where), where + ".memory_estimate",
                              r.blocks, r.lora);
  if (!field(results, "memory_check", where).is_null()) {
    r.memory_check =
        memory_check_from_json(object(results, "memory_check", where), where + ".memory_check");
  }
  const std::string cw = where + ".cross_check";
  const Json& cross = object(results, "cross_check", where);
  const bool checked = boolean(cross, "checked", cw);
  if (checked != r.source.has_value()) {
    fail("{}: field 'checked' must be {} for {} source", cw, r.source.has_value(),
         r.source ? "a checkpoint" : "an embedded");
  }
  const Json& disagreements = array(cross, "disagreements", cw);
  for (std::size_t i = 0; i < disagreements.size(); ++i) {
    const std::string rw = at(cw, "disagreements", i);
    r.disagreements.push_back({string(disagreements[i], "tensor", rw),
                               string(disagreements[i], "field", rw),
                               string(disagreements[i], "message", rw)});
  }
  // Not in results (the evidence keeps them beside it): rebuilt from what is, as
  // analyze_inspect made them.
  add_inspect_diagnostics(r);
  return r;
}

std::vector<Table> inspect_tables(const InspectReport& r) {
  std::vector<Table> out;
  out.emplace_back(r.source
                       ? fmt::format("checkpoint {} ({} tensors in {} file(s), decoder prefix '{}')",
                                     r.source->dir, r.source->tensors, r.source->files.size(),
                                     r.prefix)
                       : fmt::format("embedded model {} (text decoder, no files)", r.embedded_name));
  out.push_back(blocks_table(r.blocks));
  out.push_back(quantization_table(r.quantization));
  out.push_back(lora_table(r.lora));
  out.push_back(memory_table(r.memory));
  if (r.memory_check) out.push_back(memory_check_table(*r.memory_check));
  if (!r.disagreements.empty()) {
    out.push_back(disagreements_table(r.disagreements));
  } else if (r.source) {
    out.emplace_back("config.json and tensor shapes agree");
  }
  return out;
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

void inspect_report_section(SectionBuilder& c) {
  const Json& r = c.results();
  if (auto p = number_at(r, "total_params"))
    c.fact("parameters", format_count(static_cast<int64_t>(*p)), "total_params");
  if (auto b = number_at(r, "total_bytes")) c.fact("bytes", format_bytes(*b), "total_bytes");
  if (auto s = number_at(r, "quantization.saved_ratio")) {
    c.fact("linear-only 4-bit saves",
           format_percent(*s) + " of the bytes; fused experts untouched: " +
               pct(number_at(r, "quantization.untouched_expert_params_ratio")) +
               " of the parameters",
           "quantization.saved_ratio, untouched_expert_params_ratio", true);
  }
  if (auto m = number_at(r, "lora.modules")) {
    c.fact(
        "LoRA modules / trainable",
        format_count(static_cast<int64_t>(*m)) + " / " +
            format_count(static_cast<int64_t>(number_at(r, "lora.trainable_params").value_or(0))),
        {"lora.modules", "lora.trainable_params"});
  }
  if (const Json* blocks = array_at(r, "blocks")) {
    BarChart chart;
    chart.title = "Parameters by block";
    chart.value_label = "parameters";
    chart.highlight_label = "untouched by a linear-only 4-bit quantizer (fused 3-D experts)";
    for (const auto& b : *blocks) {
      auto p = number_at(b, "params");
      if (!p || *p <= 0) continue;
      BarItem item{string_at(b, "label"),
                   {*p},
                   string_at(b, "block") == "experts",
                   pct(number_at(b, "params_share_ratio"))};
      chart.items.push_back(std::move(item));
    }

    c.figure("blocks", chart.title, render_svg(chart),
             {"blocks[].params", "blocks[].params_share_ratio"},
             "Where the parameters are. The experts are fused 3-D tensors, not nn.Linear "
             "modules: a quantizer or LoRA that walks nn.Linear never touches them.");
  } else {
    c.absent("blocks", "the parameters-by-block figure");
  }
  if (const Json* t = array_at(r, "lora.per_target")) {
    c.table(c.generic_table("tab-inspect-lora", "LoRA modules per target", *t,
                            "lora.per_target"));
  }
}
}  // namespace tprobe::core
