// `tprobe parity`: does tprobe compute what Hugging Face computes for this checkpoint — the
// forward's logits, or with --backward the loss and every LoRA gradient of a PEFT adapter?
#include <fmt/format.h>

#include "probes/probe.hpp"
#include "tprobe/core/gemma4/attention_path.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/torch_api/parity_report.hpp"
#include "tprobe/torch_api/torch_api.hpp"

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
  std::string adapter;
  bool backward = false;
  bool gradient_checkpointing = false;
  bool no_input_grads = false;
  std::string grad_baseline_suffix;
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
  o.attn = core::attention_path_from_name(cli.attn, "--attn");
  o.moe = model::parse_moe(cli.moe);
  o.ce_chunk = cli.ce_chunk;
  o.dump_hidden_path = cli.dump_hidden.empty() ? "" : ctx.files.staged(cli.dump_hidden);
  o.adapter_dir = cli.adapter;
  o.backward = cli.backward;
  o.gradient_checkpointing = cli.gradient_checkpointing;
  o.input_grads = !cli.no_input_grads;
  o.grad_baseline_suffix = cli.grad_baseline_suffix;
  if (cli.ce_chunk <= 0) fail_usage("--ce-chunk {}: must be positive", cli.ce_chunk);
  // Usage errors before libtorch is loaded.
  if (cli.backward && cli.adapter.empty()) fail_usage("--backward needs --adapter DIR");
  if (cli.backward && !cli.dump_hidden.empty())
    fail_usage("--dump-hidden is a forward diagnostic; it does not combine with --backward");
  if (!cli.backward && (cli.gradient_checkpointing || cli.no_input_grads))
    fail_usage("--gradient-checkpointing and --no-input-grads need --backward");
  model::ParityResult r = model::torch_api().run_parity(o);

  ctx.environment.attn_requested = cli.attn;
  ctx.environment.attn_resolved = fmt::format("sliding: {}; full: {}", r.attn_sliding, r.attn_full);

  ctx.evidence.results() = model::to_json(r, o);
  ctx.out << model::parity_table(r, o).render();
  if (r.backward) {
    const model::BackwardParity& b = *r.backward;
    ctx.out << "\n" << model::parity_module_table(b).render();
    if (!b.zero_one_side.empty()) {
      ctx.evidence.diagnose(
          core::Severity::kError, "lora_gradient_zero_on_one_side",
          fmt::format("{} LoRA gradient(s) zero on one side only (the inert-adapter signature), "
                      "first {}",
                      b.zero_one_side.size(), b.zero_one_side.front()));
    }
    if (!b.zero_both.empty()) {
      ctx.evidence.diagnose(core::Severity::kWarning, "lora_gradient_zero_on_both_sides",
                            fmt::format("{} LoRA gradient(s) are zero in tprobe and in the "
                                        "reference alike: those adapters learn nothing{}",
                                        b.zero_both.size(),
                                        b.loss_requires_grad ? ""
                                                             : " (the loss does not require "
                                                               "grad: no path reaches them)"));
    }
    if (!b.within_tolerance) {
      ctx.evidence.diagnose(
          core::Severity::kError, "parity_outside_tolerance",
          fmt::format("LoRA gradients: global relative L2 {:.3e} (tolerance {:.3e}), worst module "
                      "{} {:.3e}, rule {}",
                      b.global_rel_l2, b.verdict.tolerance, b.worst_module, b.worst_module_rel_l2,
                      b.verdict.rule));
      return core::Outcome::kNo;
    }
    return core::Outcome::kOk;
  }
  if (!r.within_tolerance) {
    ctx.evidence.diagnose(
        core::Severity::kError, "parity_outside_tolerance",
        fmt::format("relative L2 error {:.3e} exceeds {:.3e} for {} ({})", r.rel_l2_error,
                    r.tolerance_rel_l2, cli.dtype, r.verdict_rule));
    return core::Outcome::kNo;
  }
  return core::Outcome::kOk;
}

}  // namespace

void register_parity(CLI::App& app, ProbeSet& set) {
  auto cli = std::make_shared<ParityCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "parity",
      "Compare tprobe's forward (logits) or backward (LoRA gradients) with Hugging Face's");
  cmd->add_option("--checkpoint", cli->checkpoint,
                  "Checkpoint directory (config.json + safetensors)")
      ->required();
  cmd->add_option("--reference", cli->reference,
                  "safetensors with input_ids [B,S] int64, logits [B,S,V] and optionally loss; "
                  "with --backward: loss and '<PEFT name>.grad' for every LoRA tensor")
      ->required();
  cmd->add_option("--logits-key", cli->logits_key, "Reference tensor to compare with")
      ->capture_default_str();
  cmd->add_option("--loss-key", cli->loss_key, "Reference loss tensor (skipped when absent)")
      ->capture_default_str();
  cmd->add_option(
      "--baseline-key", cli->baseline_key,
      "Another implementation's logits in REF (e.g. HF's bf16 run), measured against the "
      "same reference and shown beside tprobe's; for bf16 the default is HF's own bf16 run "
      "(logits_hf_bf16_<attn>) when REF has one, and the verdict is judged against it");
  cmd->add_option("--dtype", cli->dtype,
                  "Compute dtype: fp32 (tolerance 1e-4) or bf16 (at most 2x HF's own bf16 error "
                  "when REF carries it, else 5e-2)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--attn", cli->attn, core::attention_help(core::AttentionUse::kEngine))
      ->check(CLI::IsMember(core::attention_names(core::AttentionUse::kEngine)))
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
  cmd->add_option("--adapter", cli->adapter,
                  "PEFT adapter directory (adapter_config.json + adapter_model.safetensors as "
                  "save_pretrained writes them)");
  cmd->add_flag("--backward", cli->backward,
                "Compare the loss and every LoRA gradient (one forward + backward) instead of the "
                "logits; needs --adapter");
  cmd->add_flag("--gradient-checkpointing", cli->gradient_checkpointing,
                "With --backward: reentrant per-layer checkpointing, as HF's use_reentrant=True");
  cmd->add_flag("--no-input-grads", cli->no_input_grads,
                "With --backward: no input grads (HF without enable_input_require_grads); under "
                "checkpointing this is the inert-adapter trap");
  cmd->add_option("--grad-baseline-suffix", cli->grad_baseline_suffix,
                  "With --backward: suffix of HF's own bf16 gradients in REF (default for bf16: "
                  "_hf_bf16_<attn> when present)");
  set.add(
      cmd, [cli](RunContext& ctx) { return run_parity(*cli, ctx); }, Needs::kTorch,
      {{"--checkpoint", "--reference", "--adapter"}, {"--dump-hidden"}, {}});
}

ProbeInfo parity_probe() {
  return {"parity",
          register_parity,
          "Parity with Hugging Face",
          model::parity_report_section,
          {{"parity",
            {"parity", "--checkpoint", "{fixtures}/gemma4-tiny-hf", "--reference",
             "{fixtures}/gemma4-tiny-hf/reference.safetensors"},
            "gemma4-tiny-hf/reference.safetensors"}}};
}

}  // namespace tprobe::probes
