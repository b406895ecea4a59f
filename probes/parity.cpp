// `tprobe parity`: does tprobe's forward compute what Hugging Face computes for this checkpoint?
#include "tprobe/model/parity_report.hpp"
#include "tprobe/model/torch_api.hpp"

#include <fmt/format.h>

#include "probes/probe.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::probes {
namespace {

struct ParityCliOptions {
  std::string checkpoint;
  std::string reference;
  std::string logits_key = "logits";
  std::string loss_key = "loss";
  std::string baseline_key;
  std::string dtype = "fp32";
  std::string attn = "eager";
  std::string device = "cpu";
  std::string moe = "loop";
  int64_t ce_chunk = 4096;
  std::string dump_hidden;
};

core::Outcome run_parity(const ParityCliOptions& cli, RunContext& ctx) {
  model::ParityOptions o;
  o.checkpoint_dir = cli.checkpoint;
  o.reference_path = cli.reference;
  o.logits_key = cli.logits_key;
  o.loss_key = cli.loss_key;
  o.baseline_key = cli.baseline_key;
  o.dtype = cli.dtype;
  o.device = cli.device;
  o.attn = model::parse_attn(cli.attn);
  o.moe = model::parse_moe(cli.moe);
  o.ce_chunk = cli.ce_chunk;
  o.dump_hidden_path = cli.dump_hidden;
  if (cli.ce_chunk <= 0) fail_usage("--ce-chunk {}: must be positive", cli.ce_chunk);
  model::ParityResult r = model::torch_api().run_parity(o);

  ctx.environment.attn_requested = cli.attn;
  ctx.environment.attn_resolved = fmt::format("sliding: {}; full: {}", r.attn_sliding, r.attn_full);

  ctx.evidence.results() = model::to_json(r, o);
  ctx.out << model::parity_table(r, o).render();
  if (!r.within_tolerance) {
    ctx.evidence.diagnose(core::Severity::kError, "parity_outside_tolerance",
                          fmt::format("relative L2 error {:.3e} exceeds {:.1e} for {}",
                                      r.rel_l2_error, r.tolerance_rel_l2, cli.dtype));
    return core::Outcome::kNo;
  }
  return core::Outcome::kOk;
}

}  // namespace

void register_parity(CLI::App& app, ProbeSet& set) {
  auto cli = std::make_shared<ParityCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "parity", "Compare tprobe's forward with Hugging Face reference logits for a checkpoint");
  cmd->add_option("--checkpoint", cli->checkpoint,
                  "Checkpoint directory (config.json + safetensors)")
      ->required();
  cmd->add_option("--reference", cli->reference,
                  "safetensors with input_ids [B,S] int64, logits [B,S,V] and optionally loss")
      ->required();
  cmd->add_option("--logits-key", cli->logits_key, "Reference tensor to compare with")
      ->capture_default_str();
  cmd->add_option("--loss-key", cli->loss_key, "Reference loss tensor (skipped when absent)")
      ->capture_default_str();
  cmd->add_option(
      "--baseline-key", cli->baseline_key,
      "Another implementation's logits in REF (e.g. HF's bf16 run), measured against the "
      "same reference and shown beside tprobe's");
  cmd->add_option("--dtype", cli->dtype, "Compute dtype: fp32 (tolerance 1e-4) or bf16 (5e-2)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--attn", cli->attn,
                  "Attention path: eager, sdpa (libtorch >= 2) or flash-window (CUDA)")
      ->check(CLI::IsMember({"eager", "sdpa", "flash-window"}))
      ->capture_default_str();
  cmd->add_option("--device", cli->device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--moe", cli->moe, "Expert dispatch: loop or grouped_mm (CUDA, libtorch >= 2.8)")
      ->check(CLI::IsMember({"loop", "grouped_mm"}))
      ->capture_default_str();
  cmd->add_option("--ce-chunk", cli->ce_chunk, "Tokens per cross-entropy chunk")
      ->capture_default_str();
  cmd->add_option("--dump-hidden", cli->dump_hidden,
                  "Diagnostics: write the embedding output and each layer's output (fp32) to this "
                  "safetensors file, to find where two implementations part");
  set.add(cmd, [cli](RunContext& ctx) { return run_parity(*cli, ctx); }, Needs::kTorch);
}

}  // namespace tprobe::probes
