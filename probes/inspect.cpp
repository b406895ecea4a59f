// `tprobe inspect`: a checkpoint (headers only) or an embedded model, by block, with the 4-bit
// trap, LoRA target discovery and a memory budget estimate. docs/inspect.md.
#include "tprobe/core/cost/inspect.hpp"

#include <fmt/format.h>

#include <memory>

#include "probes/probe.hpp"
#include "tprobe/core/io/checkpoint.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"

namespace tprobe::probes {

namespace {

struct InspectOptions {
  std::string model = "gemma4-26b-a4b";
  std::string checkpoint;
  std::string targets = core::default_lora_targets();
  int64_t rank = 64;
  int64_t batch = 2;
  int64_t width = 16384;
  int64_t ce_chunk = 1024;
};

core::Outcome run_inspect(const InspectOptions& opt, RunContext& ctx) {
  if (opt.rank <= 0) fail_usage("--rank {}: must be positive", opt.rank);
  if (opt.batch <= 0) fail_usage("--batch {}: must be positive", opt.batch);
  if (opt.width <= 0) fail_usage("--width {}: must be positive", opt.width);
  if (opt.ce_chunk <= 0) fail_usage("--ce-chunk {}: must be positive", opt.ce_chunk);
  const std::vector<std::string> targets = core::parse_target_list(opt.targets, "--targets");

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
    results["source"] = core::checkpoint_source_json(*ck);
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
  results["config"] = core::config_summary_json(config);

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
  const std::vector<core::DtypeRow> dtypes = core::tally_dtypes(tensors);
  for (const auto& d : dtypes) {
    if (d.supported) continue;
    ctx.evidence.diagnose(core::Severity::kWarning, "unsupported_dtype",
                          fmt::format("{} tensor(s) are {}, which tprobe cannot compute with "
                                      "(BF16, F16, F32 only)",
                                      d.tensors, d.dtype));
  }

  results["total_params"] = blocks.total_params;
  results["total_bytes"] = blocks.total_bytes;
  results["text_params"] = blocks.text_params;
  results["text_bytes"] = blocks.text_bytes;
  results["blocks"] = core::to_json(blocks);
  results["dtypes"] = core::to_json(dtypes);
  results["quantization"] = core::to_json(quant);
  results["lora"] = core::to_json(lora);
  results["memory_estimate"] = core::to_json(memory);
  results["cross_check"] = {{"checked", ck != nullptr}, {"disagreements", core::to_json(disagreements)}};

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
    ctx.out << "\n" << core::disagreements_table(disagreements).render();
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
  cmd->add_option("checkpoint,--checkpoint", opt->checkpoint,
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
