// `tprobe padding`: padding waste, widths, truncation per source and loss-head memory of a dataset.
#include "probes/probe.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/data/padding_report.hpp"

namespace tprobe::probes {
namespace {

struct PaddingOptions {
  std::string dataset = "synthetic";
  std::string format = "auto";
  std::string order = "sequential";
  bool seed_given = false;
  core::PaddingOptions options;
};

core::Outcome run(PaddingOptions& o, RunContext& ctx) {
  o.options.order = core::parse_batch_order(o.order);
  if (o.seed_given && o.options.order != core::BatchOrder::kShuffled) {
    fail_usage("--seed seeds the shuffled order: give --order shuffled with it (the {} order "
               "takes no seed)",
               o.order);
  }
  core::validate(o.options);
  const core::LengthDataset ds = core::load_dataset(o.dataset, core::parse_length_format(o.format));
  const core::PaddingReport report = core::analyze_padding(ds, o.options);
  for (const auto& t : core::padding_tables(report)) ctx.out << t.render() << "\n";
  ctx.evidence.results() = core::to_json(report);
  add_diagnostics(ctx.evidence, report.diagnostics);
  return report.outcome;
}

}  // namespace

void register_padding(CLI::App& app, ProbeSet& set) {
  auto args = std::make_shared<PaddingOptions>();
  CLI::App* cmd = app.add_subcommand(
      "padding", "Padding waste, micro-batch widths, truncation per source, loss-head memory");
  add_dataset_options(cmd, args->dataset, args->format);
  cmd->add_option("--micro-batch", args->options.micro_batch, "Records per micro-batch")
      ->capture_default_str();
  cmd->add_option("--order", args->order, "sequential (file order) or shuffled (with --seed)")
      ->capture_default_str();
  CLI::Option* seed =
      cmd->add_option("--seed", args->options.seed, "Seed of the shuffled order (--order shuffled)")
          ->capture_default_str();
  cmd->add_option("--max-seq-len", args->options.max_seq_len,
                  "Truncate records to this many tokens")
      ->capture_default_str();
  cmd->add_option("--vocab", args->options.vocab, "Vocabulary size (loss-head sizing)")
      ->capture_default_str();
  cmd->add_option("--ce-chunk", args->options.ce_chunk, "Tokens per cross-entropy chunk")
      ->capture_default_str();
  set.add(
      cmd,
      [args, seed](RunContext& ctx) {
        args->seed_given = seed->count() > 0;
        return run(*args, ctx);
      },
      Needs::kCore,
      {{"dataset", "--dataset"}, {}, {}});
}

ProbeInfo padding_probe() {
  return {"padding",
          register_padding,
          "Padding and truncation",
          core::padding_report_section,
          {{"padding", {"padding", "--max-seq-len", "8192"}}}};
}

}  // namespace tprobe::probes
