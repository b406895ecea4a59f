// `tprobe lora-gate`: is a saved LoRA adapter trained (every lora_B non-zero), and does it hold
// the modules its targets imply on the base model? docs/lora-gate.md.
#include <fmt/format.h>

#include <optional>

#include "probes/probe.hpp"
#include "tprobe/core/adapter/lora_gate_report.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"

namespace tprobe::probes {

namespace {

struct LoraGateOptions {
  std::string adapter;
  std::string model;       // embedded base
  std::string checkpoint;  // or a checkpoint directory (headers only)
};

core::Outcome run(const LoraGateOptions& o, RunContext& ctx) {
  const core::LoraAdapter adapter = core::read_lora_adapter(o.adapter);
  std::optional<core::GateBase> base;
  if (!o.checkpoint.empty()) {
    // Refused (exit 1) when the checkpoint disagrees with its config, as parity refuses it.
    base = core::gate_base_from_checkpoint(core::Checkpoint::open(o.checkpoint));
  } else if (!o.model.empty()) {
    base = core::gate_base_from_model(o.model);
  } else {
    base = core::gate_base_from_adapter(adapter);
  }
  const core::LoraGateReport report = core::gate_lora_adapter(adapter, base);
  for (const auto& table : core::lora_gate_tables(report)) ctx.out << table.render() << "\n";
  ctx.evidence.results() = core::to_json(report);
  add_diagnostics(ctx.evidence, report.diagnostics);
  return report.outcome;
}

}  // namespace

void register_lora_gate(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<LoraGateOptions>();
  CLI::App* cmd = app.add_subcommand("lora-gate",
                                     "Is a saved LoRA adapter real? Norms every lora_B/lora_A; "
                                     "real, inert or partial; module count");
  cmd->add_option(
         "adapter", o->adapter,
         "PEFT adapter directory (adapter_config.json + adapter_model.safetensors or shards)")
      ->required();  // a missing directory is the reader's error (exit 1), like every input
  CLI::Option* model = cmd->add_option("--model", o->model,
                  "Embedded base model for the expected-module count (default: the adapter "
                  "config's base_model_name_or_path when it names one)")
      ->check(CLI::IsMember(core::embedded_model_names()));
  cmd->add_option("--checkpoint", o->checkpoint,
                  "Base checkpoint directory (config.json + safetensors headers) for the count")
      ->check(CLI::ExistingDirectory)
      ->excludes(model);
  set.add(
      cmd, [o](RunContext& ctx) { return run(*o, ctx); }, Needs::kCore,
      {{"adapter", "--checkpoint"}, {}, {}});
}

ProbeInfo lora_gate_probe() {
  return {"lora-gate",
          register_lora_gate,
          "LoRA adapter gate",
          core::lora_gate_report_section,
          {{"lora-gate",
            {"lora-gate", "{fixtures}/adapters/after-step", "--checkpoint",
             "{fixtures}/gemma4-tiny-hf"},
            "adapters/after-step/adapter_config.json"},
           {"lora-gate-trap",
            {"lora-gate", "{fixtures}/adapters/checkpointing-without-input-grads", "--checkpoint",
             "{fixtures}/gemma4-tiny-hf"},
            "adapters/checkpointing-without-input-grads/adapter_config.json",
            true,
            "the inert-adapter trap, caught"}}};
}

}  // namespace tprobe::probes
