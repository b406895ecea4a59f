// `tprobe parity`: does tprobe's forward compute what Hugging Face computes for this checkpoint?
#include "tprobe/model/parity.hpp"

#include <fmt/format.h>

#include "probes/probe.hpp"
#include "tprobe/core/error.hpp"

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
  model::ParityResult r = model::run_parity(o);

  ctx.environment.attn_requested = cli.attn;
  ctx.environment.attn_resolved = fmt::format("sliding: {}; full: {}", r.attn_sliding, r.attn_full);

  core::Json& res = ctx.evidence.results();
  res["batch"] = r.batch;
  res["seq"] = r.seq;
  res["vocab"] = r.vocab;
  res["text_prefix"] = r.text_prefix;
  res["tensors_loaded"] = r.tensors_loaded;
  res["dtype"] = cli.dtype;
  res["attn_sliding"] = r.attn_sliding;
  res["attn_full"] = r.attn_full;
  res["moe_dispatch"] = r.moe;
  res["max_abs_error"] = r.max_abs_error;
  res["rel_l2_error"] = r.rel_l2_error;
  res["argmax_agreement_ratio"] = r.argmax_agreement_ratio;
  res["position_rel_l2_median"] = r.error.position_rel_l2_median;
  res["position_rel_l2_p99"] = r.error.position_rel_l2_p99;
  if (r.baseline) {
    res["baseline"] = {{"key", cli.baseline_key},
                       {"max_abs_error", r.baseline->max_abs_error},
                       {"rel_l2_error", r.baseline->rel_l2_error},
                       {"position_rel_l2_median", r.baseline->position_rel_l2_median},
                       {"position_rel_l2_p99", r.baseline->position_rel_l2_p99},
                       {"argmax_agreement_ratio", r.baseline->argmax_agreement_ratio}};
  } else {
    res["baseline"] = nullptr;
  }
  res["loss"] = r.loss;
  res["reference_loss"] = r.reference_loss ? core::Json(*r.reference_loss) : core::Json(nullptr);
  res["loss_abs_diff"] = r.loss_abs_diff ? core::Json(*r.loss_abs_diff) : core::Json(nullptr);
  res["tolerance_rel_l2"] = r.tolerance_rel_l2;
  res["within_tolerance"] = r.within_tolerance;
  res["forward_s"] = r.forward_s;

  core::Table t(fmt::format("parity: {} vs {} ({}, {}×{}, vocab {})", cli.checkpoint, cli.reference,
                            cli.dtype, r.batch, r.seq, r.vocab));
  const std::string base_head = r.baseline ? cli.baseline_key : "";
  t.column("quantity", core::Align::kLeft).column("tprobe").column("tolerance").column(base_head);
  auto b = [&](double model::LogitsError::*field) {
    return r.baseline ? core::format_sci((*r.baseline).*field) : std::string();
  };
  t.row({"attention (sliding)", r.attn_sliding, "", ""});
  t.row({"attention (full)", r.attn_full, "", ""});
  t.row({"moe dispatch", r.moe, "", ""});
  t.row({"max |Δ logit|", core::format_sci(r.max_abs_error), "",
         b(&model::LogitsError::max_abs_error)});
  t.row({"relative L2 error", core::format_sci(r.rel_l2_error),
         core::format_sci(r.tolerance_rel_l2), b(&model::LogitsError::rel_l2_error)});
  t.row({"per-position rel. L2, median", core::format_sci(r.error.position_rel_l2_median), "",
         b(&model::LogitsError::position_rel_l2_median)});
  t.row({"per-position rel. L2, p99", core::format_sci(r.error.position_rel_l2_p99), "",
         b(&model::LogitsError::position_rel_l2_p99)});
  t.row({"argmax agreement", core::format_percent(r.argmax_agreement_ratio, 2), "",
         r.baseline ? core::format_percent(r.baseline->argmax_agreement_ratio, 2) : ""});
  t.row({"loss (tprobe, chunked CE)", fmt::format("{:.8f}", r.loss), "", ""});
  if (r.reference_loss) {
    t.row({"loss (reference)", fmt::format("{:.8f}", *r.reference_loss), "", ""});
    t.row({"|Δ loss|", core::format_sci(*r.loss_abs_diff), "", ""});
  }
  t.note(r.within_tolerance ? "within tolerance" : "OUTSIDE tolerance");
  ctx.out << t.render();
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
  set.add(cmd, [cli](RunContext& ctx) { return run_parity(*cli, ctx); });
}

}  // namespace tprobe::probes
