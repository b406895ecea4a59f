// Views of the inspect analysis: evidence JSON and tables (core/cost/inspect.hpp has the data).
#include "tprobe/core/cost/inspect_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/math_util.hpp"
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
  if (r.checkpoint) {
    j["source"] = checkpoint_source_json(*r.checkpoint);
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
  j["cross_check"] = {{"checked", r.checkpoint != nullptr},
                      {"disagreements", to_json(r.disagreements)}};
  return j;
}

std::vector<Table> inspect_tables(const InspectReport& r) {
  std::vector<Table> out;
  out.emplace_back(r.checkpoint
                       ? fmt::format("checkpoint {} ({} tensors in {} file(s), decoder prefix '{}')",
                                     r.checkpoint->dir(), r.checkpoint->tensor_count(),
                                     r.checkpoint->file_count(), r.prefix)
                       : fmt::format("embedded model {} (text decoder, no files)", r.embedded_name));
  out.push_back(blocks_table(r.blocks));
  out.push_back(quantization_table(r.quantization));
  out.push_back(lora_table(r.lora));
  out.push_back(memory_table(r.memory));
  if (r.memory_check) out.push_back(memory_check_table(*r.memory_check));
  if (!r.disagreements.empty()) {
    out.push_back(disagreements_table(r.disagreements));
  } else if (r.checkpoint) {
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
