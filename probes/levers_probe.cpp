// `tprobe levers`: at the user's widths and batch, the faithful baseline (what a default
// transformers + PEFT run computes), then each lever alone, then the best combination — step
// time against the baseline with the spread of both, peak memory, MFU, and every failure as a row
// (docs/levers.md).
#include <fmt/format.h>

#include "probes/option_checks.hpp"
#include "probes/probe.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/cost/levers.hpp"
#include "tprobe/runs/lever_runs.hpp"

namespace tprobe::probes {
namespace {

std::string row_line(const core::LeverRow& r) {
  std::string line = fmt::format("{:<13} {:<26} {}x{}{}: ", r.lever,
                                 r.setting.empty() ? "(baseline)" : r.setting, r.batch, r.width,
                                 r.lengths.empty() ? "" : " padded");
  if (r.outcome == "ok" && !r.timing.samples_s.empty()) {
    line += fmt::format("{} (min {}, max {})", core::format_seconds(r.timing.median_s),
                        core::format_seconds(r.timing.min_s),
                        core::format_seconds(r.timing.max_s));
  } else {
    line += r.outcome + (r.message.empty() ? "" : ": " + r.message);
  }
  return line;
}

core::Outcome run(const runs::LeversOptions& o, RunContext& ctx) {
  const core::LeversReport report = runs::analyze_levers(
      &engine::load, o, [] { return core::interrupt_requested(); },
      [&](const core::LeverRow& r) { ctx.out << row_line(r) << std::endl; },
      [&](const std::string& line) { ctx.out << line << std::endl; });
  ctx.out << "\n";
  for (const auto& t : core::levers_tables(report)) ctx.out << t.render() << "\n";
  ctx.evidence.results() = core::to_json(report);
  add_diagnostics(ctx.evidence, report.diagnostics);
  return report.outcome;
}

}  // namespace

void register_levers(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<runs::LeversOptions>();
  CLI::App* cmd = app.add_subcommand(
      "levers",
      "Which levers move the LoRA step: the faithful HF + PEFT baseline, each lever alone, the "
      "best combination (time with spread, memory, MFU)");
  CLI::Option* pad_fraction = add_step_options(cmd, o->step, core::WidthsUse::kLevers);
  std::vector<std::string> names;
  for (const core::LeverInfo& l : core::lever_catalogue()) names.push_back(l.name);
  cmd->add_option("--levers", o->levers,
                  fmt::format("Levers to measure (comma list; default all): {}",
                              fmt::join(names, ", ")))
      ->delimiter(',')
      ->check(CLI::IsMember(names));
  CLI::Option* gpu_memory = cmd->add_option("--gpu-memory", o->gpu_memory_gib,
                  "The memory edge: a card size in GiB; after each configuration's sweep, its "
                  "largest batch at its widest width is measured step by step under an allocator "
                  "cap of this less --reserve (CUDA only)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--reserve", o->reserve_gib,
                  "GiB kept free on the --gpu-memory card (CUDA context, co-tenants)")
      ->check(CLI::NonNegativeNumber)
      ->needs(gpu_memory);
  // The epoch (docs/levers.md, "The epoch"): without --dataset nothing of it runs, so each of its
  // options needs --dataset (given alone, it would be silently ignored).
  runs::EpochOptions& e = o->epoch;
  CLI::Option* dataset = cmd->add_option(
      "--dataset", e.dataset,
      "Predict and measure the epoch over these token lengths: a JSONL/CSV/text file (.gz too) "
      "as padding/bucket read, or 'synthetic' / 'synthetic:N'");
  cmd->add_option("--format", e.format, "The dataset's format: auto, jsonl, csv or text")
      ->capture_default_str()
      ->needs(dataset);
  cmd->add_option("--sampler", e.sampler,
                  "The epoch's micro-batches: sequential (file order), shuffled, bucket:N "
                  "(bucket's sampler), order:FILE (an order bucket --emit-order wrote) or packed")
      ->capture_default_str()
      ->needs(dataset);
  cmd->add_option("--accum", e.accumulation, "Micro-batches per optimizer step")
      ->check(positive_number())
      ->capture_default_str()
      ->needs(dataset);
  cmd->add_option("--epoch-samples", e.samples,
                  "Sampled micro-batches per measured configuration (0: planned from a pilot of 8 "
                  "for a ±5 % interval, at most 64)")
      ->check(CLI::Range(int64_t{0}, int64_t{4096}))
      ->capture_default_str()
      ->needs(dataset);
  cmd->add_option("--epoch-measure", e.measure,
                  "Configurations measured on sampled micro-batches (comma list of lever names, "
                  "baseline, best; none)")
      ->delimiter(',')
      ->capture_default_str()
      ->needs(dataset);
  cmd->add_option("--max-seq-len", e.max_seq_len,
                  "Records truncated to this (the packed rows' width); 0: the widest --widths")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str()
      ->needs(dataset);
  cmd->add_option("--sampler-seed", e.seed, "Seed of the shuffled and bucket samplers and of the draw")
      ->capture_default_str()
      ->needs(dataset);
  set.add(
      cmd,
      [o, pad_fraction](RunContext& ctx) {
        o->step.pad_fraction_given = pad_fraction->count() > 0;
        return run(*o, ctx);
      },
      Needs::kTorch,
      {{"--checkpoint", "--dataset"},
       {},
       [o](core::OutputGuard& guard) {
         // An order file is read: no output may be written over it.
         const std::string& s = o->epoch.sampler;
         if (s.rfind("order:", 0) == 0 && s.size() > 6) guard.input("--sampler", s.substr(6));
       }});
}

ProbeInfo levers_probe() {
  return {"levers",
          register_levers,
          "Levers: what moves the step",
          core::levers_report_section,
          // The levers on the CPU (tiny shapes, random weights, fp32): every lever measured or
          // refused with the engine's reason at one width, and one padded point for packing.
          // On a CUDA device: every lever on the 26B-A4B shapes (random weights) at 2x2,048 plus
          // its half-padded point (docs/suite.md, "On a GPU": each configuration rebuilds the
          // model; about 45 steps of about a second).
          {{"levers",
            {"levers", "--device", "cpu", "--model", "gemma4-tiny", "--dtype", "fp32", "--widths",
             "48", "--pad-fraction", "0.5", "--rank", "8", "--ce-chunk", "256", "--repeats",
             "3"},
            "",
            false,
            "",
            {"levers", "--device", "cuda", "--model", "gemma4-26b-a4b", "--random-init",
             "--widths", "2048", "--pad-fraction", "0.5", "--repeats", "3"}}}};
}

}  // namespace tprobe::probes
