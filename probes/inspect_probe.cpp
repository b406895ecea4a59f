// `tprobe inspect`: a checkpoint (headers only) or an embedded model, by block, with the 4-bit
// trap, LoRA target discovery and a memory budget estimate. docs/inspect.md.
#include <memory>

#include "probes/option_checks.hpp"
#include "probes/probe.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/cost/inspect_report.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::probes {

namespace {

struct InspectOptions {
  std::string model = "gemma4-26b-a4b";
  std::string checkpoint;
  std::string targets = core::default_lora_targets();
  int64_t rank = 64;
  int64_t batch = 2;
  int64_t width = 16384;
  int64_t ce_chunk = 4096;
  std::string measured;  // a profile evidence to set the estimate beside
};

core::Outcome run(const InspectOptions& opt, RunContext& ctx) {
  core::InspectInput in;
  in.targets = core::parse_target_list(opt.targets, "--targets");
  in.rank = opt.rank;
  in.memory.batch = opt.batch;
  in.memory.width = opt.width;
  in.memory.ce_chunk_tokens = opt.ce_chunk;
  std::unique_ptr<core::Checkpoint> ck;
  if (!opt.checkpoint.empty()) {
    ck = std::make_unique<core::Checkpoint>(core::Checkpoint::open(opt.checkpoint));
    in.config = ck->config();
    in.tensors = ck->tensors();
    in.prefix = ck->text_prefix();
    in.checkpoint = ck.get();
  } else {
    in.config = core::embedded_model(opt.model);
    in.tensors = core::expected_text_tensors(in.config, in.prefix);
    in.embedded_name = opt.model;
  }

  core::Json measured;
  if (!opt.measured.empty()) {
    const core::Json doc = core::read_evidence_file(opt.measured, "profile");
    measured = core::json_read::object(doc, "results", "'" + opt.measured + "'");
    in.measured = &measured;
    in.measured_source = opt.measured;
  }
  const core::InspectReport report = core::analyze_inspect(in);
  for (const auto& t : core::inspect_tables(report)) ctx.out << t.render() << "\n";
  ctx.evidence.results() = core::to_json(report);
  add_diagnostics(ctx.evidence, report.diagnostics);
  return report.outcome;
}

}  // namespace

void register_inspect(CLI::App& app, ProbeSet& set) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Parameters by block, the 4-bit trap, LoRA targets and a memory estimate, from "
      "checkpoint headers or an embedded model");
  CLI::Option* model =
      cmd->add_option("--model", opt->model, "Embedded model name")
          ->check(CLI::IsMember(core::embedded_model_names()))
          ->capture_default_str();
  cmd->add_option("checkpoint,--checkpoint", opt->checkpoint,
                  "Checkpoint directory (config.json + safetensors); headers only")
      ->excludes(model);
  cmd->add_option("--targets", opt->targets, "LoRA target modules, comma-separated")
      ->capture_default_str();
  cmd->add_option("--rank", opt->rank, "LoRA rank")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--batch", opt->batch, "Sequences per step (memory estimate)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--width", opt->width, "Tokens per sequence (memory estimate)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--ce-chunk", opt->ce_chunk, "Tokens per cross-entropy chunk")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--measured", opt->measured,
                  "A profile evidence file: each estimate row beside what its memory step "
                  "measured at --batch x --width, with the error, and the items the estimate "
                  "leaves out");
  set.add(
      cmd, [opt](RunContext& ctx) { return run(*opt, ctx); }, Needs::kCore,
      {{"checkpoint", "--measured"}, {}, {}});
}

ProbeInfo inspect_probe() {
  return {"inspect",
          register_inspect,
          "Checkpoint: parameters, the 4-bit trap, LoRA targets",
          core::inspect_report_section,
          {{"inspect", {"inspect", "--model", "gemma4-26b-a4b"}}}};
}

}  // namespace tprobe::probes
