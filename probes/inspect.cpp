// `tprobe inspect`: a checkpoint (headers only) or an embedded model, by block, with the 4-bit
// trap, LoRA target discovery and a memory budget estimate. docs/inspect.md.
#include "tprobe/core/inspect.hpp"

#include <fmt/format.h>

#include <memory>

#include "probes/probe.hpp"
#include "tprobe/core/checkpoint.hpp"
#include "tprobe/core/error.hpp"
#include "tprobe/core/gemma4_tensors.hpp"

namespace tprobe::probes {

namespace {

struct InspectOptions {
  std::string model = "gemma4-26b-a4b";
  std::string checkpoint;
  std::string targets = core::kDefaultLoraTargets;
  int64_t rank = 64;
  int64_t batch = 2;
  int64_t width = 16384;
  int64_t ce_chunk = 1024;
};

core::Json config_json_summary(const core::ModelConfig& c) {
  core::Json layers = core::Json::array();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    core::LayerGeometry g = c.layer(i);
    layers.push_back({{"layer", i},
                      {"type", core::to_string(g.type)},
                      {"head_dim", g.head_dim},
                      {"num_kv_heads", g.num_kv_heads},
                      {"has_v_proj", g.has_v_proj}});
  }
  return {{"name", c.name},
          {"hidden_size", c.hidden_size},
          {"num_layers", c.num_layers},
          {"sliding_layers", c.count_layers(core::LayerType::kSliding)},
          {"full_layers", c.count_layers(core::LayerType::kFull)},
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

core::Outcome run_inspect(const InspectOptions& opt, RunContext& ctx) {
  if (opt.rank <= 0) fail_usage("--rank {}: must be positive", opt.rank);
  if (opt.batch <= 0) fail_usage("--batch {}: must be positive", opt.batch);
  if (opt.width <= 0) fail_usage("--width {}: must be positive", opt.width);
  if (opt.ce_chunk <= 0) fail_usage("--ce-chunk {}: must be positive", opt.ce_chunk);
  const std::vector<std::string> targets = core::parse_target_list(opt.targets);

  core::Json& results = ctx.evidence.results();
  core::ModelConfig config;
  std::vector<core::TensorMeta> tensors;
  std::string prefix = core::kMultimodalTextPrefix;
  std::vector<core::Disagreement> disagreements;
  std::unique_ptr<core::Checkpoint> ck;
  if (!opt.checkpoint.empty()) {
    ck = std::make_unique<core::Checkpoint>(core::Checkpoint::open(opt.checkpoint));
    config = ck->config();
    tensors = ck->tensors();
    prefix = ck->text_prefix();
    disagreements = core::cross_check(config, tensors, prefix);
    core::Json files = core::Json::array();
    for (std::size_t i = 0; i < ck->file_count(); ++i) {
      const core::SafetensorsFile& f = ck->file(i);
      files.push_back({{"path", f.path()},
                       {"tensors", f.tensors().size()},
                       {"file_bytes", f.file_size()},
                       {"header_bytes", f.header_size()}});
    }
    results["source"] = {{"kind", "checkpoint"},
                         {"dir", ck->dir()},
                         {"sharded", ck->sharded()},
                         {"text_prefix", prefix},
                         {"tensors", ck->tensor_count()},
                         {"files", files},
                         {"config_defaulted_fields", ck->config_info().defaulted_fields},
                         {"per_layer_config_form", ck->config_info().per_layer_config_form},
                         {"warnings", ck->warnings()}};
    for (const auto& w : ck->warnings()) {
      ctx.evidence.diagnose(core::Severity::kWarning, "checkpoint_index", w);
    }
    if (!ck->config_info().defaulted_fields.empty()) {
      ctx.evidence.diagnose(core::Severity::kInfo, "config_defaults",
                            fmt::format("config.json left {} field(s) to Hugging Face defaults: {}",
                                        ck->config_info().defaulted_fields.size(),
                                        fmt::join(ck->config_info().defaulted_fields, ", ")));
    }
  } else {
    config = core::embedded_model(opt.model);
    tensors = core::expected_text_tensors(config, prefix);
    results["source"] = {{"kind", "embedded"},
                         {"name", opt.model},
                         {"text_prefix", prefix},
                         {"tensors", tensors.size()}};
  }
  results["config"] = config_json_summary(config);

  const core::BlockSummary blocks = core::summarize_blocks(tensors, prefix);
  const core::QuantizationEstimate quant = core::estimate_linear_only_4bit(tensors, prefix);
  const core::LoraPlan lora = core::plan_lora(config, tensors, prefix, targets, opt.rank);
  core::MemoryInputs mem_in;
  mem_in.batch = opt.batch;
  mem_in.width = opt.width;
  mem_in.ce_chunk_tokens = opt.ce_chunk;
  mem_in.weight_bytes = blocks.text_bytes;
  mem_in.trainable_params = lora.trainable_params;
  const core::MemoryEstimate memory = core::estimate_memory(config, mem_in);

  // Dtypes present, so an unsupported one (F8, I64, ...) is visible rather than a crash later.
  std::map<std::string, std::pair<int64_t, uint64_t>> dtypes;
  for (const auto& t : tensors) {
    auto& d = dtypes[core::to_string(t.dtype)];
    d.first += 1;
    d.second += t.nbytes();
  }
  core::Json dtype_rows = core::Json::array();
  for (const auto& [name, d] : dtypes) {
    bool supported = core::dtype_is_supported(*core::parse_dtype(name));
    dtype_rows.push_back(
        {{"dtype", name}, {"tensors", d.first}, {"bytes", d.second}, {"supported", supported}});
    if (!supported) {
      ctx.evidence.diagnose(core::Severity::kWarning, "unsupported_dtype",
                            fmt::format("{} tensor(s) are {}, which tprobe cannot compute with "
                                        "(BF16, F16, F32 only)",
                                        d.first, name));
    }
  }

  results["total_params"] = blocks.total_params;
  results["total_bytes"] = blocks.total_bytes;
  results["text_params"] = blocks.text_params;
  results["text_bytes"] = blocks.text_bytes;
  results["blocks"] = core::to_json(blocks);
  results["dtypes"] = dtype_rows;
  results["quantization"] = core::to_json(quant);
  results["lora"] = core::to_json(lora);
  results["memory_estimate"] = core::to_json(memory);
  core::Json dis = core::Json::array();
  for (const auto& d : disagreements) {
    dis.push_back({{"tensor", d.tensor}, {"field", d.field}, {"message", d.message}});
  }
  results["cross_check"] = {{"checked", ck != nullptr}, {"disagreements", dis}};

  ctx.out << (ck ? fmt::format("checkpoint {} ({} tensors in {} file(s), decoder prefix '{}')\n",
                               ck->dir(), ck->tensor_count(), ck->file_count(), prefix)
                 : fmt::format("embedded model {} (text decoder, no files)\n", opt.model));
  ctx.out << "\n" << core::blocks_table(blocks).render();
  ctx.out << "\n" << core::quantization_table(quant).render();
  ctx.out << "\n" << core::lora_table(lora).render();
  for (const auto& m : lora.missing) {
    ctx.evidence.diagnose(core::Severity::kWarning, "lora_target_absent", m.message);
  }
  ctx.out << "\n" << core::memory_table(memory).render();
  if (!disagreements.empty()) {
    core::Table t("Config vs checkpoint: disagreements");
    t.column("tensor", core::Align::kLeft)
        .column("field", core::Align::kLeft)
        .column("message", core::Align::kLeft);
    for (const auto& d : disagreements) t.row({d.tensor, d.field, d.message});
    ctx.out << "\n" << t.render();
    ctx.evidence.diagnose(core::Severity::kError, "config_checkpoint_disagree",
                          fmt::format("{} disagreement(s) between config.json and the tensors",
                                      disagreements.size()));
    return core::Outcome::kNo;
  }
  if (ck) ctx.out << "\nconfig.json and tensor shapes agree\n";
  return core::Outcome::kOk;
}

}  // namespace

void register_inspect(CLI::App& app, ProbeSet& set) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Parameters by block, the 4-bit trap, LoRA targets and a memory estimate, from "
      "checkpoint headers or an embedded model");
  CLI::Option* model =
      cmd->add_option("--model", opt->model, "Embedded model name")->capture_default_str();
  cmd->add_option("--checkpoint", opt->checkpoint,
                  "Checkpoint directory (config.json + safetensors); headers only")
      ->excludes(model);
  cmd->add_option("--targets", opt->targets, "LoRA target modules, comma-separated")
      ->capture_default_str();
  cmd->add_option("--rank", opt->rank, "LoRA rank")->capture_default_str();
  cmd->add_option("--batch", opt->batch, "Sequences per step (memory estimate)")
      ->capture_default_str();
  cmd->add_option("--width", opt->width, "Tokens per sequence (memory estimate)")
      ->capture_default_str();
  cmd->add_option("--ce-chunk", opt->ce_chunk, "Tokens per chunked cross-entropy chunk")
      ->capture_default_str();
  set.add(cmd, [opt](RunContext& ctx) { return run_inspect(*opt, ctx); });
}

}  // namespace tprobe::probes
