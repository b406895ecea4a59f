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
    fail_usage("--sampler-seed seeds the shuffled order: give --sampler shuffled with it (the {} "
               "order takes no seed)",
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
  CLI::Option* batch =
      cmd->add_option("--batch", args->options.micro_batch, "Rows (records) per micro-batch")
          ->capture_default_str();
  CLI::Option* sampler =
      cmd->add_option("--sampler", args->order,
                      "The loader's order: sequential (file order) or shuffled (with "
                      "--sampler-seed)")
          ->capture_default_str();
  CLI::Option* seed = cmd->add_option("--sampler-seed", args->options.seed,
                                      "Seed of the shuffled order (--sampler shuffled)")
                          ->capture_default_str();
  // The spellings before one spelling per fact (docs/ARCHITECTURE.md), hidden for one release.
  CLI::Option* old_seed =
      cmd->add_option("--seed", args->options.seed, "Deprecated: --sampler-seed");
  set.deprecated(cmd, cmd->add_option("--micro-batch", args->options.micro_batch,
                                      "Deprecated: --batch"),
                 batch, "padding --micro-batch is deprecated (removed in the next release): write "
                        "--batch, the rows per micro-batch of every probe");
  set.deprecated(cmd, cmd->add_option("--order", args->order, "Deprecated: --sampler"), sampler,
                 "padding --order is deprecated (removed in the next release): write --sampler, "
                 "the loader's order of every probe");
  set.deprecated(cmd, old_seed, seed,
                 "padding --seed is deprecated (removed in the next release): write "
                 "--sampler-seed (--seed seeds the weights and inputs of the measured step)");
  cmd->add_option("--max-seq-len", args->options.max_seq_len,
                  "Truncate records to this many tokens")
      ->capture_default_str();
  cmd->add_option("--vocab", args->options.vocab, "Vocabulary size (loss-head sizing)")
      ->capture_default_str();
  cmd->add_option("--ce-chunk", args->options.ce_chunk, "Tokens per cross-entropy chunk")
      ->capture_default_str();
  set.add(
      cmd,
      [args, seed, old_seed](RunContext& ctx) {
        args->seed_given = seed->count() + old_seed->count() > 0;
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
