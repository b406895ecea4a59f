// `tprobe parity`: does tprobe compute what Hugging Face computes for this checkpoint — the
// forward's logits, or with --backward the loss and every LoRA gradient of a PEFT adapter?
#include <fmt/format.h>

#include "probes/probe.hpp"
#include "tprobe/runs/parity_analysis.hpp"
#include "tprobe/runs/parity_report.hpp"

namespace tprobe::probes {
namespace {

struct ParityOptions {
  // --attn (default eager), --moe (default loop), --checkpointing (default off): the knob registry's
  // options with parity's defaults.
  core::StepConfig knobs;
  bool gradient_checkpointing = false;  // the old spelling of --checkpointing reentrant
  bool no_input_grads = false;
  std::string dump_hidden;
  engine::ParityOptions analysis;
};

core::Outcome run(ParityOptions& o, RunContext& ctx) {
  engine::ParityOptions& a = o.analysis;
  a.attn = *o.knobs.attn;
  a.moe = *o.knobs.moe;
  if (o.gradient_checkpointing) o.knobs.checkpointing = core::Checkpointing::kReentrant;
  a.gradient_checkpointing = o.knobs.checkpointing != core::Checkpointing::kOff;
  // as set by either spelling
  ctx.evidence.options()["checkpointing"] = core::to_string(o.knobs.checkpointing);
  a.input_grads = !o.no_input_grads;
  a.dump_hidden_path = side_output_path(ctx, o.dump_hidden);
  const runs::ParityReport report = runs::analyze_parity(&engine::load, a);
  const engine::ParityResult& r = report.result;
  ctx.environment.attn_requested = core::to_string(a.attn);
  ctx.environment.attn_resolved = fmt::format("sliding: {}; full: {}", r.attn_sliding, r.attn_full);
  const std::vector<core::Table> tables = runs::parity_tables(report);
  for (size_t i = 0; i < tables.size(); ++i) ctx.out << (i > 0 ? "\n" : "") << tables[i].render();
  ctx.evidence.results() = runs::to_json(report);
  add_diagnostics(ctx.evidence, report.diagnostics);
  return report.outcome;
}

}  // namespace

void register_parity(CLI::App& app, ProbeSet& set) {
  auto cli = std::make_shared<ParityOptions>();
  CLI::App* cmd = app.add_subcommand(
      "parity",
      "Compare tprobe's forward (logits) or backward (LoRA gradients) with Hugging Face's");
  cmd->add_option("--checkpoint", cli->analysis.checkpoint_dir,
                  "Checkpoint directory (config.json + safetensors)")
      ->required();
  cmd->add_option("--reference", cli->analysis.reference_path,
                  "safetensors with input_ids [B,S] int64, logits [B,S,V] and optionally loss; "
                  "with --backward: loss and '<PEFT name>.grad' for every LoRA tensor")
      ->required();
  cmd->add_option("--logits-key", cli->analysis.logits_key, "Reference tensor to compare with")
      ->capture_default_str();
  cmd->add_option("--loss-key", cli->analysis.loss_key,
                  "Reference loss tensor (skipped when absent)")
      ->capture_default_str();
  cmd->add_option(
      "--baseline-key", cli->analysis.baseline_key,
      "Another implementation's logits in REF (e.g. HF's bf16 run), measured against the "
      "same reference and shown beside tprobe's; for bf16 the default is HF's own bf16 run "
      "(logits_hf_bf16_<attn>) when REF has one, and the verdict is judged against it");
  cmd->add_option("--dtype", cli->analysis.dtype,
                  "Compute dtype: fp32 (tolerance 1e-4) or bf16 (at most 2x HF's own bf16 error "
                  "when REF carries it, else 5e-2)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  add_knob_option(cmd, core::Knob::kAttn, cli->knobs, true, "eager");
  cmd->add_option("--device", cli->analysis.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  add_knob_option(cmd, core::Knob::kMoe, cli->knobs, true, "loop");
  cmd->add_option("--ce-chunk", cli->analysis.ce_chunk, "Tokens per cross-entropy chunk")
      ->capture_default_str();
  cmd->add_option("--dump-hidden", cli->dump_hidden,
                  "Diagnostics: write the embedding output and each layer's output (fp32) to this "
                  "safetensors file, to find where two implementations part");
  cmd->add_option("--adapter", cli->analysis.adapter_dir,
                  "PEFT adapter directory (adapter_config.json + adapter_model.safetensors as "
                  "save_pretrained writes them)");
  CLI::Option* backward = cmd->add_flag("--backward", cli->analysis.backward,
                "Compare the loss and every LoRA gradient (one forward + backward) instead of the "
                "logits; needs --adapter");
  // With --backward: per-layer gradient checkpointing (either spelling runs the engine's one
  // per-layer recompute), or none.
  CLI::Option* checkpointing =
      add_knob_option(cmd, core::Knob::kCheckpointing, cli->knobs, true, "off")->needs(backward);
  set.deprecated(cmd,
                 cmd->add_flag("--gradient-checkpointing", cli->gradient_checkpointing,
                               "Deprecated: --checkpointing reentrant")
                     ->needs(backward),
                 checkpointing,
                 "--gradient-checkpointing is deprecated (removed in the next release): write "
                 "--checkpointing reentrant");
  cmd->add_flag("--no-input-grads", cli->no_input_grads,
                "With --backward: no input grads (HF without enable_input_require_grads); under "
                "checkpointing this is the inert-adapter trap")
      ->needs(backward);
  cmd->add_option("--grad-baseline-suffix", cli->analysis.grad_baseline_suffix,
                  "With --backward: suffix of HF's own bf16 gradients in REF (default for bf16: "
                  "_hf_bf16_<attn> when present)")
      ->needs(backward);
  set.add(
      cmd, [cli](RunContext& ctx) { return run(*cli, ctx); }, Needs::kTorch,
      {{"--checkpoint", "--reference", "--adapter"}, {"--dump-hidden"}, {}});
}

ProbeInfo parity_probe() {
  return {"parity",
          register_parity,
          "Parity with Hugging Face",
          runs::parity_report_section,
          {{"parity",
            {"parity", "--checkpoint", "{fixtures}/gemma4-tiny-hf", "--reference",
             "{fixtures}/gemma4-tiny-hf/reference.safetensors"},
            "gemma4-tiny-hf/reference.safetensors"}}};
}

}  // namespace tprobe::probes
