// `tprobe kernels`: the device-only kernel table of a torch.profiler trace (or two, compared).
#include "tprobe/core/trace/compare/kernels.hpp"

#include "probes/probe.hpp"
#include "tprobe/core/trace/stats/kernel_table_report.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/gemma4/layer_kinds_json.hpp"

namespace tprobe::probes {
namespace {

struct KernelsOptions {
  std::vector<std::string> inputs;
  core::KernelTableOptions table;
  int top = 25;
  std::string config_path;  // the model's config.json: the layer kinds of the phase × part table
  std::string checkpoint;   // or a checkpoint directory holding one
  std::string model;        // or an embedded model name
  std::string parts = "on";  // off: no phase × part attribution (module events not kept)
};

// The per-layer kinds (sliding / full, MoE / dense) of the model the trace ran, when the user
// names it.
core::TracePartsOptions parts_options(const KernelsOptions& a) {
  core::TracePartsOptions o;
  o.attribute = a.parts == "on";
  if (a.config_path.empty() && a.checkpoint.empty() && a.model.empty()) return o;
  // The layer kinds label the phase × part table: without it they would be silently ignored.
  if (!o.attribute) {
    fail_usage("--{} gives the layer kinds of the phase x part table, which --parts off turns off",
               !a.config_path.empty() ? "config" : !a.checkpoint.empty() ? "checkpoint" : "model");
  }
  if (a.model.empty()) {
    // Any transformers decoder's config (docs/kernels.md, "Layer kinds"); a Gemma-4 one through
    // the Gemma-4 reader, as before.
    o.model = !a.config_path.empty() ? a.config_path : a.checkpoint + "/config.json";
    const core::ConfigLayerKinds kinds = core::read_layer_kinds_json(o.model);
    o.layer_types = kinds.attention;
    o.layer_ffn = kinds.ffn;
    o.kind_notes = kinds.notes;
    return o;
  }
  const core::ModelConfig config = core::embedded_model(a.model);
  o.model = a.model;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    o.layer_types.push_back(config.layer(i).type);
  }
  return o;
}

core::Outcome run(const KernelsOptions& o, RunContext& ctx) {
  const core::KernelsRequest request{o.inputs, o.table, parts_options(o)};
  const core::KernelsReport report = core::analyze_kernels(request);
  for (const auto& table : core::kernels_tables(report, o.top)) ctx.out << table.render() << "\n";
  ctx.evidence.results() = core::to_json(report);
  add_diagnostics(ctx.evidence, report.diagnostics);
  return report.outcome;
}

}  // namespace

void register_kernels(CLI::App& app, ProbeSet& set) {
  auto args = std::make_shared<KernelsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kernels",
      "Device-only kernel table of a torch.profiler trace (.json/.json.gz), a directory of "
      "per-rank traces, or A B compared; by phase and part when the trace has module events");
  cmd->add_option("inputs", args->inputs,
                  "A trace or tprobe evidence file; a directory of per-rank traces; or two inputs "
                  "A B to compare")
      ->required()
      ->expected(1, 2);
  cmd->add_option("--step", args->table.steps,
                  "Only these profiler steps (N of ProfilerStep#N; comma list)")
      ->delimiter(',');
  cmd->add_option("--skip-first", args->table.skip_first,
                  "Leave out the first K profiler steps present (warm-up)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  CLI::Option* device_id =
      cmd->add_option("--device-id", args->table.device,
                      "Only the kernels of this device index of the trace (-1: all)")
          ->check(CLI::Range(-1, 1 << 20))
          ->capture_default_str();
  set.deprecated(cmd,
                 cmd->add_option("--device", args->table.device, "Deprecated: --device-id")
                     ->check(CLI::Range(-1, 1 << 20)),
                 device_id,
                 "kernels --device N is deprecated (removed in the next release; --device names "
                 "cpu or cuda elsewhere): write --device-id N");
  cmd->add_option("--top", args->top, "Kernels listed in the table (0: all; the evidence has all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  CLI::Option* config = cmd->add_option("--config", args->config_path,
                  "The traced model's config.json (Gemma-4, or any transformers decoder's): the "
                  "sliding/full and MoE/dense kind of each decoder layer in the phase x part "
                  "table");
  CLI::Option* checkpoint =
      cmd->add_option("--checkpoint", args->checkpoint,
                      "A checkpoint directory whose config.json gives the layer kinds")
          ->excludes(config);
  cmd->add_option("--parts", args->parts,
                  "The phase x part attribution of traces with module events; off reads the "
                  "python_function and fwdbwd events without keeping them")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--model", args->model, "An embedded model whose layer kinds to use")
      ->check(CLI::IsMember(core::embedded_model_names()))
      ->excludes(config)
      ->excludes(checkpoint);
  set.add(
      cmd, [args](RunContext& ctx) { return run(*args, ctx); }, Needs::kCore,
      {{"inputs", "--config", "--checkpoint"}, {}, {}});
}

ProbeInfo kernels_probe() {
  return {"kernels",
          register_kernels,
          "Kernel table",
          core::kernels_report_section,
          // A real torch.profiler trace of an HF + PEFT LoRA step (H200), warm-up step left out.
          {{"kernels",
            {"kernels", "{fixtures}/traces/hf-sdpa-2x256.json.gz", "--skip-first", "1", "--top",
             "15"},
            "traces/hf-sdpa-2x256.json.gz"}}};
}

}  // namespace tprobe::probes
