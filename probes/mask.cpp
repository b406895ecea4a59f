// `tprobe mask`: the attention mask's band per layer, which layers keep the maskless fast path,
// the engine's masks verified as tensors, and which SDPA backends take each layer (docs/mask.md).
#include <fmt/format.h>

#include "probes/option_checks.hpp"
#include "probes/probe.hpp"
#include "tprobe/core/gemma4/attention_path.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/mask/mask_report.hpp"
#include "tprobe/torch_api/mask_check_report.hpp"
#include "tprobe/torch_api/torch_api.hpp"

namespace tprobe::probes {
namespace {

struct MaskOptions {
  std::string model = "gemma4-26b-a4b";  // embedded name or a config.json path
  int64_t width = 16384;
  int64_t batch = 2;
  std::vector<int64_t> lengths;
  std::string attn = "hf-sdpa";
  int64_t expect_window = 0;  // 0: not asserted
  std::string expect_fast_path;
  bool materialise = false;
  std::string device = "cpu";
  bool backends = false;
  std::string dtype = "bf16";
  int64_t warmup = 1;
  int64_t repeats = 5;
  int64_t padded_length = 0;
};

// --materialise builds whole masks: refused above this many bytes per mask, with the limit named.
constexpr int64_t kMaxMaterialisedBytes = int64_t{1} << 34;

core::ModelConfig load_config(const std::string& model) {
  for (const std::string& name : core::embedded_model_names()) {
    if (model == name) return core::embedded_model(name);
  }
  return core::read_config_json(model).config;
}

core::Outcome run(const MaskOptions& o, RunContext& ctx) {
  const core::ModelConfig config = load_config(o.model);
  core::MaskRequest req;
  req.width = o.width;
  req.batch = o.batch;
  req.lengths = o.lengths;
  if (!req.lengths.empty() && static_cast<int64_t>(req.lengths.size()) != o.batch) {
    fail_usage("--lengths has {} values for --batch {}: give one real length per row",
               req.lengths.size(), o.batch);
  }
  for (int64_t l : req.lengths) {
    if (l < 1 || l > o.width)
      fail_usage("--lengths value {} is outside 1..{} (--width)", l, o.width);
  }
  if (o.materialise) {
    // Checked before anything runs: one bool mask [B or 1, 1, S, S] per layer type.
    const int64_t rows = o.lengths.empty() ? 1 : o.batch;
    const long double bytes = static_cast<long double>(rows) * o.width * o.width;
    if (bytes > static_cast<long double>(kMaxMaterialisedBytes)) {
      fail_usage("--materialise at --width {}{}: a [{}, 1, {}, {}] bool mask is {:.0f} bytes; at "
                 "most {} (16 GiB) per mask",
                 o.width, o.lengths.empty() ? "" : fmt::format(" --batch {}", o.batch), rows,
                 o.width, o.width, bytes, kMaxMaterialisedBytes);
    }
  }
  req.rules = *core::parse_mask_rules(o.attn);
  if (o.expect_window > 0) req.expect.window = o.expect_window;
  if (!o.expect_fast_path.empty())
    req.expect.fast_path = core::parse_fast_path_types(o.expect_fast_path);

  const core::MaskReport report = core::analyse_mask(config, req);
  for (const auto& t : core::mask_tables(report)) ctx.out << t.render() << "\n";
  core::Json results = core::to_json(report);
  bool ok = report.ok;
  for (const auto& a : report.assertions) {
    if (a.passed) continue;
    ctx.evidence.diagnose(core::Severity::kError, "mask_" + a.name, a.message);
  }

  if (o.materialise) {
    model::MaskCheckOptions m;
    m.width = o.width;
    m.lengths = report.shape.lengths;
    m.padded_input = !o.lengths.empty();
    m.device = o.device;
    for (const char* type : {"sliding_attention", "full_attention"}) {
      const bool sliding = std::string(type) == "sliding_attention";
      if (config.count_layers(sliding ? core::LayerType::kSliding : core::LayerType::kFull) == 0) {
        continue;
      }
      m.layers.push_back({type, sliding ? config.sliding_window : 0});
    }
    const model::MaskCheckResult mr = model::torch_api().run_mask_check(m);
    ctx.out << model::mask_check_table(mr).render() << "\n";
    results["materialised"] = model::to_json(mr);
    if (!mr.ok) {
      ok = false;
      for (const auto& row : mr.rows) {
        if (!row.check.ok()) {
          ctx.evidence.diagnose(core::Severity::kError, "mask_materialised",
                                fmt::format("{}: {}", row.type, row.check.detail));
        }
      }
    }
  }

  results["backends"] = core::Json::array();
  if (o.backends) {
    model::MaskBackendsOptions b;
    b.width = o.width;
    b.batch = o.batch;
    b.padded_length = o.padded_length;
    b.dtype = o.dtype;
    b.warmup = o.warmup;
    b.repeats = o.repeats;
    for (const core::MaskBand& band : report.bands) {
      if (band.rules != req.rules) continue;
      const core::MaskLayer& l = report.layers[static_cast<size_t>(band.first_layer)];
      b.shapes.push_back(
          {core::to_string(l.type), l.window, l.query_heads, l.kv_heads, l.head_dim});
    }
    const model::MaskBackendsResult br = model::torch_api().run_mask_backends(b);
    for (const auto& t : model::mask_backends_tables(br)) ctx.out << t.render() << "\n";
    results["backends"] = model::backends_json(br);
    results["backends_status"] = model::backends_status_json(br);
    if (!br.supported) {
      ctx.evidence.diagnose(core::Severity::kWarning, "mask_backends_not_supported", br.reason);
    }
  }
  ctx.evidence.results() = results;
  return ok ? core::Outcome::kOk : core::Outcome::kNo;
}

}  // namespace

void register_mask(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<MaskOptions>();
  CLI::App* cmd = app.add_subcommand(
      "mask",
      "Attention-mask band per layer, which layers keep the is_causal fast path, the engine's "
      "masks as tensors, and which SDPA backends accept each layer");
  cmd->add_option("model", o->model, "Embedded model name or a Gemma-4 config.json")
      ->capture_default_str();
  cmd->add_option("--width", o->width, "Padded per-sequence width (tokens)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "Sequences per micro-batch")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--lengths", o->lengths,
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
  cmd->add_flag("--materialise", o->materialise,
                "Build the engine's masks as tensors (libtorch) and verify the band from them");
  cmd->add_option("--device", o->device, "Device of the materialised check: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_flag("--backends", o->backends,
                "CUDA builds: try each SDPA backend pinned alone per layer shape and mask case");
  cmd->add_option("--dtype", o->dtype, "Backend trials' dtype: bf16 or fp16")
      ->check(CLI::IsMember({"bf16", "fp16"}))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Backend trials: untimed runs before timing")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Backend trials: timed runs (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--padded-length", o->padded_length,
                  "Backend trials: real length of the padded row in the padded mask case "
                  "(default width / 2)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 22));
  // The positional is an embedded name or a config.json: a path only when one exists.
  set.add(
      cmd, [o](RunContext& ctx) { return run(*o, ctx); }, Needs::kCore, {{"model"}, {}, {}});
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
