// `tprobe profile`: the measured LoRA step — time, memory, FLOPs/MFU, scaling fit and the CUPTI
// phase table of tprobe's own step, per point of batch × widths (docs/profile.md).
#include "tprobe/runs/profile_analysis.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

#include "probes/option_checks.hpp"
#include "probes/probe.hpp"
#include "tprobe/runs/profile_report.hpp"
#include "tprobe/runs/step_report.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::probes {
namespace {

core::Outcome run(const runs::ProfileOptions& o, RunContext& ctx) {
  runs::ProfileHooks hooks;
  hooks.should_stop = [] { return core::interrupt_requested(); };
  const bool tty = ctx.out.rdbuf() == std::cout.rdbuf() && isatty(STDOUT_FILENO);
  if (tty) {
    // The live indicator: what is being measured now, replaced by the point's line when done.
    hooks.on_start = [&](const engine::StepPoint& p) {
      ctx.out << fmt::format("measuring {}x{}{} ...", p.batch, p.width, p.padded() ? " (padded)" : "")
              << std::flush;
    };
  }
  hooks.on_point = [&](const engine::PointResult& p) {
    if (tty) ctx.out << "\r\033[K";
    ctx.out << runs::point_line(p) << std::endl;
  };
  // One line per probe of the edge search, on stderr: the search's progress, not its result.
  hooks.on_progress = [](const std::string& line) { std::cerr << line << std::endl; };
  runs::ProfileAnalysis report =
      runs::analyze_profile(&engine::load, o, side_output_path(ctx, o.raw_trace), hooks,
                                 side_output_path(ctx, o.raw_memory));

  ctx.environment.attn_requested = o.config.attn ? core::to_string(*o.config.attn) : "default";
  if (const std::string attn = runs::resolved_attention(report); !attn.empty()) {
    ctx.environment.attn_resolved = attn;
  }
  // The traced step for a trace viewer; an interrupted run writes no side output.
  if (!o.trace_out.empty() && !report.report.steps.interrupted) {
    write_side_output(ctx, o.trace_out, runs::trace_out_bytes(report, o));
  }
  add_diagnostics(ctx.evidence, report.report.diagnostics);
  ctx.out << runs::interrupted_note(report);
  ctx.evidence.results() = runs::to_json(report);
  ctx.out << "\n";
  for (const auto& t : runs::profile_tables(report)) ctx.out << t.render() << "\n";
  return report.outcome;
}

}  // namespace

void register_profile(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<runs::ProfileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Measure the LoRA training step (fwd+bwd+AdamW) per batch x width: time, memory, "
      "FLOPs/MFU, scaling fit, CUPTI phase table");
  CLI::Option* pad_fraction = add_step_options(cmd, *o, core::WidthsUse::kProfile);
  // Every knob of the step, in the registry's order (core/step/knobs.hpp): a new knob's entry is
  // a new option here with no edit (--batch and --optimizer are the step options', which levers
  // shares).
  for (const core::KnobInfo& k : core::knob_registry()) {
    if (k.id != core::Knob::kBatch && k.id != core::Knob::kOptimizer)
      add_knob_option(cmd, k.id, o->config);
  }
  cmd->add_option("--memory", o->memory,
                  "One more step per point under the allocator's event hook: the peak by item, "
                  "phase, part and layer, and its timeline (never a timed step)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  CLI::Option* gpu_memory =
      cmd->add_option("--gpu-memory", o->gpu_memory_gib,
                      "What fits: card sizes in GiB (comma-separated); after the sweep, the memory "
                      "model on its peaks predicts the largest width at --batch and the largest "
                      "batch at the widest width within each card less --reserve, and each edge "
                      "is searched from that prediction by running it under an allocator cap of "
                      "that budget (--edge-search)")
          ->delimiter(',');
  CLI::Option* reserve =
      cmd->add_option("--reserve", o->reserve_gib,
                      "GiB kept free on each --gpu-memory card (CUDA context, co-tenants): one "
                      "value, or one per card")
          ->delimiter(',')
          ->needs(gpu_memory);
  CLI::Option* from_device =
      cmd->add_flag("--reserve-from-device", o->reserve_from_device,
                    "The reserve read off the CUDA device now: what other processes hold "
                    "(cudaMemGetInfo's total - free, less tprobe's own); without --gpu-memory "
                    "the card is the device's total")
          ->excludes(reserve);
  CLI::Option* edge_search =
      cmd->add_option("--edge-search", o->edge_search,
                      "on: search each budget's width and batch edges under its allocator cap "
                      "(from the model's prediction, doubling then bisecting to the step; each "
                      "probe 3 consecutive steps); off: run the predicted edge and the step past "
                      "it once, one step each")
          ->check(CLI::IsMember({"on", "off"}))
          ->capture_default_str();
  CLI::Option* fit_peak = cmd->add_option("--fit-peak", o->fit_peak,
                  "The peak the memory model fits and each budget is held against: reserved (what "
                  "an allocator cap binds) or allocated")
      ->check(CLI::IsMember({"reserved", "allocated"}))
      ->capture_default_str();
  CLI::Option* edge_step =
      cmd->add_option("--edge-step", o->edge_step,
                      "Step of the width edge in tokens: the edge is a multiple of it, and the "
                      "point past it is one step wider")
          ->capture_default_str();
  cmd->add_option("--raw-memory", o->raw_memory,
                  "Write the first point's allocator events with their scopes to this file "
                  "(tprobe.raw_memory JSON; replayable)");
  cmd->add_option("--trace", o->trace, "One extra CUPTI-traced step per point (never a timed one)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--raw-trace", o->raw_trace,
                  "Write the first traced step's records, before attribution, to this file "
                  "(tprobe.raw_trace JSON; replayable)");
  cmd->add_option("--trace-out", o->trace_out,
                  "Write the kernel table point's traced step as a Chrome / Kineto JSON trace "
                  "(Perfetto, chrome://tracing, HTA; gzip when it ends in .gz): every row with "
                  "its phase, layer and part, the launches, memory counters");
  cmd->add_option("--replay-trace", o->replay_trace,
                  "Attribute a recorded raw trace instead of running CUPTI (tests, CPU)");
  // The operator's tokens (docs/profile.md, "The operator's tokens"): without --dataset the
  // step draws random ids, so its sampler options need it.
  CLI::Option* dataset = cmd->add_option(
      "--dataset", o->dataset,
      "Measure each point on this dataset's own tokens: a JSONL file (.gz too) with input_ids "
      "per record, as levers reads; each point's rows are the sampler's first micro-batch at its "
      "batch and width, ids as they are (no BOS added)");
  cmd->add_option("--format", o->dataset_format, "The dataset's format: auto or jsonl")
      ->check(CLI::IsMember({"auto", "jsonl"}))
      ->capture_default_str()
      ->needs(dataset);
  cmd->add_option("--sampler", o->sampler,
                  "Which records fill the rows: filled (file order, each row filled to the width, "
                  "the record reaching it cut there), or levers' sequential, shuffled, bucket:N, "
                  "order:FILE, packed (rows shorter than the width right-padded)")
      ->capture_default_str()
      ->needs(dataset);
  cmd->add_option("--sampler-seed", o->sampler_seed, "Seed of the shuffled and bucket samplers")
      ->capture_default_str()
      ->needs(dataset);
  cmd->add_option("--table-width", o->table_width,
                  "Whose kernel table is results.kernel_table and printed (default: the widest)")
      ->check(positive_number());
  set.add(
      cmd,
      [o, pad_fraction, gpu_memory, from_device, edge_search, edge_step, fit_peak,
       cmd](RunContext& ctx) {
        o->pad_fraction_given = pad_fraction->count() > 0;
        // What fits only: alone these would be silently ignored.
        if (gpu_memory->count() == 0 && from_device->count() == 0) {
          for (const CLI::Option* opt : {edge_search, edge_step, fit_peak}) {
            if (opt->count() > 0)
              fail_usage("{} needs --gpu-memory or --reserve-from-device", opt->get_name());
          }
        }
        const CLI::Option* json = cmd->get_option_no_throw("--json");
        o->json_path = json != nullptr && json->count() > 0 ? json->as<std::string>() : "";
        return run(*o, ctx);
      },
      Needs::kTorch,
      {{"--checkpoint", "--replay-trace", "--dataset"},
       {"--raw-trace", "--raw-memory", "--trace-out"},
       [o](core::OutputGuard& guard) {
         // An order file is read: no output may be written over it.
         const std::string& s = o->sampler;
         if (s.rfind("order:", 0) == 0 && s.size() > 6) guard.input("--sampler", s.substr(6));
       }});
}

ProbeInfo profile_probe() {
  return {"profile",
          register_profile,
          "Profile: time and memory per width",
          runs::profile_report_section,
          // The measured LoRA step on the CPU (tiny shapes, random weights): times, memory, FLOPs
          // and the scaling fit over four widths (the fixed term testable), plus the standard
          // padded point; no kernel table on the CPU (said so in the evidence).
          // On a CUDA device: the 26B-A4B shapes (random weights) at profile's defaults (the
          // HF + PEFT baseline), two widths, one traced step each for the kernel table and the
          // phase x part table (docs/suite.md, "On a GPU").
          {{"profile",
            {"profile", "--device", "cpu", "--model", "gemma4-tiny", "--dtype", "fp32", "--widths",
             "32,64,96,128", "--pad-fraction", "0.5", "--rank", "8", "--alpha", "16",
             "--ce-chunk", "256"},
            "",
            false,
            "",
            {"profile", "--device", "cuda", "--model", "gemma4-26b-a4b", "--random-init",
             "--widths", "2048,4096", "--repeats", "2"}}}};
}

}  // namespace tprobe::probes
