// `tprobe mask`: the attention mask's band per layer, which layers keep the maskless fast path,
// the engine's masks verified as tensors, and which SDPA backends take each layer (docs/mask.md).
#include <fmt/format.h>

#include "probes/option_checks.hpp"
#include "probes/probe.hpp"
#include "tprobe/core/step/attention_path.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/mask/mask_report.hpp"
#include "tprobe/runs/mask_analysis.hpp"

namespace tprobe::probes {
namespace {

struct MaskOptions {
  std::string model = "gemma4-26b-a4b";  // embedded name or a config.json path
  std::string attn = "hf-sdpa";
  int64_t expect_window = 0;  // 0: not asserted
  std::string expect_fast_path;
  runs::MaskOptions analysis;
};

core::Outcome run(MaskOptions& o, RunContext& ctx) {
  const core::ModelConfig config = core::model_config_of(o.model);
  core::MaskRequest& req = o.analysis.request;
  req.rules = *core::parse_mask_rules(o.attn);
  if (o.expect_window > 0) req.expect.window = o.expect_window;
  if (!o.expect_fast_path.empty())
    req.expect.fast_path = core::parse_fast_path_types(o.expect_fast_path);
  const runs::MaskAnalysis report =
      runs::analyze_mask(&engine::load, config, o.analysis);
  for (const auto& t : runs::mask_tables(report)) ctx.out << t.render() << "\n";
  ctx.evidence.results() = runs::to_json(report);
  add_diagnostics(ctx.evidence, report.diagnostics);
  return report.outcome;
}

}  // namespace

void register_mask(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<MaskOptions>();
  CLI::App* cmd = app.add_subcommand(
      "mask",
      "Attention-mask band per layer, which layers keep the is_causal fast path, the engine's "
      "masks as tensors, and which SDPA backends accept each layer");
  const char* model_help = "Embedded model name or a Gemma-4 config.json";
  CLI::Option* positional = cmd->add_option("model", o->model, model_help);
  cmd->add_option("--model", o->model, model_help)->capture_default_str()->excludes(positional);
  cmd->add_option("--width", o->analysis.request.width, "Padded per-sequence width (tokens)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--batch", o->analysis.request.batch, "Sequences per micro-batch")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--lengths", o->analysis.request.lengths,
                  "Real tokens per row, right-padded to --width (comma list, one per row); "
                  "passes a 2-D padding mask")
      ->delimiter(',');
  cmd->add_option("--attn", o->attn,
                  "Rules the assertions use: hf-sdpa (transformers 5.17) or a tprobe engine path "
                  "(" + fmt::format("{}", fmt::join(core::attention_names(
                                                         core::AttentionUse::kEngine), ", ")) +
                  "); the table shows all")
      ->check(CLI::IsMember(core::mask_rules_names()))
      ->capture_default_str();
  cmd->add_option("--expect-window", o->expect_window,
                  "Assert that sliding layers allow exactly N keys per row once saturated (exit 3)")
      ->check(positive_number());
  cmd->add_option("--expect-fast-path", o->expect_fast_path,
                  "Assert which layer types keep the maskless fast path: full, sliding, "
                  "full,sliding or none; every other type must get an explicit mask (exit 3)")
      ->check(CLI::IsMember({"full", "sliding", "full,sliding", "sliding,full", "none"}));
  CLI::Option* materialise = cmd->add_flag("--materialise", o->analysis.materialise,
                "Build the engine's masks as tensors (libtorch) and verify the band from them");
  cmd->add_option("--device", o->analysis.device, "Device of the materialised check: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str()
      ->needs(materialise);
  // The backend trials' options mean nothing without them: alone they would be silently ignored.
  CLI::Option* backends = cmd->add_flag("--backends", o->analysis.backends,
                "CUDA builds: try each SDPA backend pinned alone per layer shape and mask case");
  cmd->add_option("--dtype", o->analysis.dtype, "Backend trials' dtype: bf16 or fp16")
      ->check(CLI::IsMember({"bf16", "fp16"}))
      ->capture_default_str()
      ->needs(backends);
  cmd->add_option("--warmup", o->analysis.warmup, "Backend trials: untimed runs before timing")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str()
      ->needs(backends);
  cmd->add_option("--repeats", o->analysis.repeats,
                  "Backend trials: timed runs (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str()
      ->needs(backends);
  cmd->add_option("--padded-length", o->analysis.padded_length,
                  "Backend trials: real length of the padded row in the padded mask case "
                  "(default width / 2)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 22))
      ->needs(backends);
  // The positional is an embedded name or a config.json: a path only when one exists.
  set.add(
      cmd, [o](RunContext& ctx) { return run(*o, ctx); }, Needs::kCore,
      {{"model", "--model"}, {}, {}});
}

ProbeInfo mask_probe() {
  return {"mask",
          register_mask,
          "Attention masks",
          core::mask_report_section,
          // The 26B-A4B masks at 2x16,384: the sliding band and the full layers' is_causal fast
          // path asserted, the engine's masks verified as tensors; then one row half padded, where
          // the full layers lose the fast path too (asserted: none keeps it).
          {{"mask",
            {"mask", "gemma4-26b-a4b", "--width", "16384", "--batch", "2", "--expect-window",
             "1024", "--expect-fast-path", "full", "--materialise"}},
           {"mask-padded",
            {"mask", "gemma4-26b-a4b", "--width", "16384", "--batch", "2", "--lengths",
             "16384,8192", "--expect-window", "1024", "--expect-fast-path", "none",
             "--materialise"}}}};
}

}  // namespace tprobe::probes
