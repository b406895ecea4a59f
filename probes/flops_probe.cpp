// `tprobe flops`: FLOPs of one LoRA fwd+bwd step, intended vs performed, and the MFU of each.
#include "probes/option_checks.hpp"
#include "probes/probe.hpp"
#include "tprobe/core/step/attention_path.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/cost/flops_report.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/gemma4/config_json.hpp"

namespace tprobe::probes {
namespace {

struct FlopsOptions {
  std::string model = "gemma4-26b-a4b";
  std::string config_path;  // a config.json instead of an embedded model
  int64_t batch = 2;
  int64_t width = 16384;
  std::vector<int64_t> lengths;
  // --attn (every path with a FLOP rule, default sdpa) and --checkpointing (default reentrant:
  // recompute counted): the knob registry's options.
  core::StepConfig knobs;
  std::vector<std::string> targets = core::linear_module_names();
  int64_t rank = 64;
  double step_time = 0;  // 0: not given
  double peak_tflops = core::kDefaultPeakTflops;
};

core::Outcome run(const FlopsOptions& o, RunContext& ctx) {
  core::ModelConfig config = core::model_config_of(o.model, "", o.config_path);
  core::FlopsRequest req;
  req.batch = o.batch;
  req.width = o.width;
  req.lengths = o.lengths;  // count_flops checks them against batch and width
  req.path = *o.knobs.attn;
  req.lora_targets = lora_targets(o.targets);
  req.lora_rank = o.rank;
  req.gradient_checkpointing = o.knobs.checkpointing != core::Checkpointing::kOff;
  core::FlopsRates rates;
  if (o.step_time > 0) rates.step_time_s = o.step_time;
  rates.peak_tflops = o.peak_tflops;

  core::FlopsReport report = core::count_flops(config, req);
  if (rates.step_time_s) {
    // An MFU above 100 % is no measurement: the step time (or the peak) is wrong.
    const double performed = core::total(report.performed_total);
    const double fastest = performed / (rates.peak_tflops * 1e12);
    if (core::mfu(performed, *rates.step_time_s, rates.peak_tflops) > 1.0) {
      fail_usage("--step-time {:g} s: the step's {:.4g} performed FLOPs take at least {:.4g} s at "
                 "--peak-tflops {:g}; a shorter step time would mean an MFU above 100 %",
                 *rates.step_time_s, performed, fastest, rates.peak_tflops);
    }
  }
  for (const auto& table : core::flops_tables(report, rates)) ctx.out << table.render() << "\n";
  ctx.evidence.results() = core::to_json(report, rates);
  add_diagnostics(ctx.evidence, report.diagnostics);
  return report.outcome;
}

}  // namespace

void register_flops(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<FlopsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "flops", "FLOPs of one LoRA fwd+bwd step per component: intended vs performed, and MFU");
  CLI::Option* model = cmd->add_option("--model", o->model, "Embedded model name")
                           ->check(CLI::IsMember(core::embedded_model_names()))
                           ->capture_default_str();
  cmd->add_option("--config", o->config_path,
                  "A Gemma-4 config.json (multimodal or text-only) instead of --model")
      ->excludes(model);
  cmd->add_option("--batch", o->batch, "Sequences per micro-batch")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--width", o->width, "Padded per-sequence width (tokens)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option(
         "--lengths", o->lengths,
         "Real tokens per sequence, right-padded to --width (comma list, one per sequence)")
      ->delimiter(',');
  add_knob_option(cmd, core::Knob::kAttn, o->knobs, false, "sdpa");
  add_lora_options(cmd, o->targets, o->rank);
  add_knob_option(cmd, core::Knob::kCheckpointing, o->knobs, true, "reentrant");
  cmd->add_option("--step-time", o->step_time, "Measured step time in seconds, for the MFUs")
      ->check(positive_number())
      ->check(max_step_time());
  cmd->add_option("--peak-tflops", o->peak_tflops,
                  "Peak TFLOP/s for MFU (default: measured H200 bf16 dense GEMM)")
      ->check(positive_number())
      ->check(max_peak_tflops())
      ->capture_default_str();
  set.add(
      cmd, [o](RunContext& ctx) { return run(*o, ctx); }, Needs::kCore, {{"--config"}, {}, {}});
}

ProbeInfo flops_probe() {
  return {"flops",
          register_flops,
          "FLOPs: intended vs performed, MFU",
          core::flops_report_section,
          // The measured 2x16,384 step with 50 % padding on one row (16.39 s, H200,
          // docs/findings.md).
          {{"flops",
            {"flops", "--model", "gemma4-26b-a4b", "--batch", "2", "--width", "16384", "--lengths",
             "16384,8192", "--attn", "sdpa", "--step-time", "16.39"}}}};
}

}  // namespace tprobe::probes
