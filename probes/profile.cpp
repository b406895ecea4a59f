// `tprobe profile`: the measured LoRA step — time, memory, FLOPs/MFU, scaling fit and the CUPTI
// phase table of tprobe's own step, per point of batch × widths (docs/profile.md).
#include "tprobe/core/gemma4/attention_path.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/torch_api/profile.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "probes/option_checks.hpp"
#include "probes/probe.hpp"
#include "tprobe/torch_api/profile_report.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/cost/flops.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/torch_api/torch_api.hpp"

namespace tprobe::probes {
namespace {

struct ProfileOptions {
  std::string checkpoint;
  std::string model;  // empty: gemma4-26b-a4b on cuda, gemma4-tiny on cpu
  bool random_init = false;
  std::vector<std::string> targets = core::linear_module_names();
  int64_t rank = 64;
  double alpha = 128;
  std::string lora_dtype = "model";
  std::string norm = "hf";
  std::string checkpointing = "on";
  std::string ce = "chunked";
  int64_t ce_chunk = 4096;
  std::string attn;  // empty: sdpa where libtorch has it, else eager
  std::string moe = "loop";
  std::string dtype = "bf16";
  std::string device = "cuda";
  int64_t batch = 2;
  std::vector<int64_t> widths;  // empty: by device
  std::vector<int64_t> lengths;
  double pad_fraction = 0;
  bool pad_fraction_given = false;  // --pad-fraction was given: then it must be in (0, 1)
  int64_t warmup = 1;
  int64_t repeats = 3;
  double peak_tflops = 0;  // 0: measure
  std::string trace = "on";
  std::string raw_trace;
  std::string replay_trace;
  uint64_t seed = 1;
  int64_t table_width = 0;
};

core::Outcome run(const ProfileOptions& o, RunContext& ctx) {
  model::ProfileRequest req;
  model::StepSpec& s = req.spec;
  if (!o.checkpoint.empty() && o.random_init)
    fail_usage("--checkpoint and --random-init exclude each other");
  s.checkpoint_dir = o.checkpoint;
  // The 26B shapes need a GPU's memory: on the CPU the default is the tiny model.
  s.model = !o.model.empty() ? o.model : o.device == "cuda" ? "gemma4-26b-a4b" : "gemma4-tiny";
  s.seed = o.seed;
  s.lora_targets = lora_targets(o.targets);
  s.lora_rank = o.rank;
  s.lora_alpha = o.alpha;
  s.lora_fp32 = o.lora_dtype == "fp32";
  s.gradient_checkpointing = o.checkpointing == "on";
  s.ce_chunked = o.ce == "chunked";
  s.ce_chunk = o.ce_chunk;
  s.fused_rms_norm = o.norm == "fused";
  req.attn_default = o.attn.empty();
  if (!o.attn.empty()) s.attn = core::attention_path_from_name(o.attn, "--attn");
  s.moe = model::parse_moe(o.moe);
  s.dtype = o.dtype;
  s.device = o.device;
  s.warmup = o.warmup;
  s.repeats = o.repeats;
  std::vector<int64_t> widths = o.widths;
  if (widths.empty()) {
    // Four widths, so that the fit's fixed term (is the step launch-bound?) can be tested.
    widths = o.device == "cuda" ? std::vector<int64_t>{2048, 4096, 8192, 16384}
                                : std::vector<int64_t>{32, 64, 128, 256};
  }
  // Sizes past these are typos, not training setups: refused before anything is allocated.
  constexpr int64_t kMaxBatch = 65536, kMaxWidth = int64_t{1} << 22, kMaxTokens = int64_t{1} << 32;
  if (o.batch > kMaxBatch) fail_usage("--batch {}: above {}", o.batch, kMaxBatch);
  for (int64_t l : o.lengths) {
    if (l > kMaxWidth) fail_usage("--lengths {}: above {} tokens", l, kMaxWidth);
  }
  for (int64_t w : widths) {
    if (w > kMaxWidth) fail_usage("--widths {}: above {} tokens", w, kMaxWidth);
    if (o.batch * w > kMaxTokens) {
      fail_usage("--batch {} x --widths {}: {} tokens per step is above {}", o.batch, w,
                 o.batch * w, kMaxTokens);
    }
  }
  for (int64_t w : widths) s.points.push_back({o.batch, w, {}});
  const int64_t widest = *std::max_element(widths.begin(), widths.end());
  if (!o.lengths.empty()) {
    if (static_cast<int64_t>(o.lengths.size()) != o.batch)
      fail_usage("--lengths has {} values for --batch {}: one real length per row",
                 o.lengths.size(), o.batch);
    const int64_t w = *std::max_element(o.lengths.begin(), o.lengths.end());
    // The padded point is padded to the widest width: a longer row would add a width of its own.
    if (w > widest) {
      fail_usage("--lengths value {} is above the widest --widths ({}): the padded point is "
                 "right-padded to the widest width",
                 w, widest);
    }
    s.points.push_back({o.batch, widest, o.lengths});
  }
  if (o.pad_fraction_given) {
    if (!(o.pad_fraction > 0 && o.pad_fraction < 1))
      fail_usage("--pad-fraction {}: must be in (0, 1)", o.pad_fraction);
    std::vector<int64_t> lengths(static_cast<size_t>(o.batch), widest);
    lengths.back() = std::max<int64_t>(
        2,
        static_cast<int64_t>(std::llround(static_cast<double>(widest) * (1.0 - o.pad_fraction))));
    s.points.push_back({o.batch, widest, lengths});
  }
  req.trace = o.trace == "on";
  req.raw_trace_path = o.raw_trace.empty() ? "" : ctx.files.staged(o.raw_trace);
  req.replay_trace = o.replay_trace;
  if (o.peak_tflops > 0) req.peak_tflops = o.peak_tflops;
  if (o.table_width > 0 && std::find(widths.begin(), widths.end(), o.table_width) == widths.end()) {
    fail_usage("--table-width {} is none of this run's widths ({})", o.table_width,
               fmt::join(widths, ", "));
  }
  req.table_width = o.table_width;

  const bool tty = ctx.out.rdbuf() == std::cout.rdbuf() && isatty(STDOUT_FILENO);
  req.spec.should_stop = [] { return core::interrupt_requested(); };
  if (tty) {
    // The live indicator: what is being measured now, replaced by the point's line when done.
    req.spec.on_start = [&](const model::StepPoint& p) {
      ctx.out << fmt::format("measuring {}x{}{} ...", p.batch, p.width, p.padded() ? " (padded)" : "")
              << std::flush;
    };
  }
  model::ProfileReport rep = model::torch_api().run_profile(req, [&](const model::PointResult& p) {
    if (tty) ctx.out << "\r\033[K";
    ctx.out << model::point_line(p) << std::endl;
  });

  ctx.environment.attn_requested = o.attn.empty() ? "default" : o.attn;
  if (const auto& pts = rep.steps.points; !pts.empty()) {
    for (const auto& p : pts) {
      if (p.outcome != model::PointOutcome::kOk) continue;
      ctx.environment.attn_resolved =
          fmt::format("sliding: {}; full: {}", p.attn_sliding, p.attn_full);
      break;
    }
  }
  for (const auto& d : rep.diagnostics) ctx.evidence.diagnose(d.severity, d.code, d.message);
  for (const auto& p : rep.steps.points) {
    if (p.outcome == model::PointOutcome::kOom) {
      ctx.evidence.diagnose(core::Severity::kWarning, "point_oom",
                            fmt::format("{}x{}: out of memory (recorded as the point's outcome)",
                                        p.point.batch, p.point.width));
    } else if (p.outcome == model::PointOutcome::kError) {
      ctx.evidence.diagnose(core::Severity::kError, "point_error",
                            fmt::format("{}x{}: {}", p.point.batch, p.point.width, p.message));
    }
  }
  if (rep.steps.interrupted) {
    ctx.out << fmt::format("INTERRUPTED: {} of {} points measured before the signal\n",
                           rep.steps.points.size(), req.spec.points.size());
  }
  req.raw_trace_path = o.raw_trace;  // the evidence names the file, not its staged name
  ctx.evidence.results() = model::to_json(rep, req);
  ctx.out << "\n";
  for (const auto& t : model::profile_tables(rep)) ctx.out << t.render() << "\n";
  return core::Outcome::kOk;
}

}  // namespace

void register_profile(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<ProfileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Measure the LoRA fwd+bwd step per batch x width: time, memory, FLOPs/MFU, scaling fit, "
      "CUPTI phase table");
  cmd->add_option("--checkpoint", o->checkpoint,
                  "Checkpoint directory (config.json + safetensors)");
  cmd->add_option("--model", o->model,
                  "Embedded model shapes, random weights (without --checkpoint); default "
                  "gemma4-26b-a4b on cuda, gemma4-tiny on cpu")
      ->check(CLI::IsMember(core::embedded_model_names()));
  cmd->add_flag("--random-init", o->random_init,
                "Random weights in --model's shapes (the default without --checkpoint)");
  add_lora_options(cmd, o->targets, o->rank);
  cmd->add_option("--lora-dtype", o->lora_dtype,
                  "LoRA factors in the model dtype, or fp32 as PEFT keeps them by default "
                  "(autocast_adapter_dtype) under a bf16 model")
      ->check(CLI::IsMember({"model", "fp32"}))
      ->capture_default_str();
  cmd->add_option("--alpha", o->alpha, "LoRA alpha")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--norm", o->norm,
                  "RMSNorm: hf (transformers' formula op by op, bit-identical to HF) or fused "
                  "(libtorch's at::rms_norm: one kernel each way on CUDA, libtorch >= 2.9)")
      ->check(CLI::IsMember({"hf", "fused"}))
      ->capture_default_str();
  cmd->add_option("--checkpointing", o->checkpointing,
                  "Per-layer gradient checkpointing (input grads on)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--ce", o->ce, "Cross-entropy: chunked or naive")
      ->check(CLI::IsMember({"chunked", "naive"}))
      ->capture_default_str();
  cmd->add_option("--ce-chunk", o->ce_chunk, "Tokens per CE chunk")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--attn", o->attn,
                  core::attention_help(core::AttentionUse::kEngine) +
                      " Default: sdpa where the linked libtorch has it, else eager.")
      ->check(CLI::IsMember(core::attention_names(core::AttentionUse::kEngine)));
  cmd->add_option("--moe", o->moe, "Expert dispatch: loop or grouped_mm (CUDA, libtorch >= 2.8)")
      ->check(CLI::IsMember({"loop", "grouped_mm"}))
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Compute dtype")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  cmd->add_option("--device", o->device, "cuda or cpu")
      ->check(CLI::IsMember({"cuda", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "Rows per step")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--widths", o->widths,
                  "Per-row widths in tokens (default 2048,4096,8192,16384 on cuda, 32,64,128,256 on cpu)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cmd->add_option("--lengths", o->lengths,
                  "An extra padded point: real tokens per row (comma list, one per row), "
                  "right-padded to the widest width")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  CLI::Option* pad_fraction = cmd->add_option("--pad-fraction", o->pad_fraction,
                  "An extra padded point at the widest width with the last row padded by this "
                  "fraction (0.5 is the standard penalty test)");
  cmd->add_option("--warmup", o->warmup, "Untimed steps per point")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Timed steps per point")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option(
         "--peak-tflops", o->peak_tflops,
         "Peak TFLOP/s for the MFUs (default: measured with one large bf16 GEMM on the GPU)")
      ->check(positive_number());
  cmd->add_option("--trace", o->trace, "One extra CUPTI-traced step per point (never a timed one)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--raw-trace", o->raw_trace,
                  "Write the first traced step's records, before attribution, to this file "
                  "(tprobe.raw_trace JSON; replayable)");
  cmd->add_option("--replay-trace", o->replay_trace,
                  "Attribute a recorded raw trace instead of running CUPTI (tests, CPU)");
  cmd->add_option("--table-width", o->table_width,
                  "Whose kernel table is results.kernel_table and printed (default: the widest)")
      ->check(positive_number());
  cmd->add_option("--seed", o->seed, "Seed of the random weights and inputs")
      ->capture_default_str();
  set.add(
      cmd,
      [o, pad_fraction](RunContext& ctx) {
        o->pad_fraction_given = pad_fraction->count() > 0;
        return run(*o, ctx);
      },
      Needs::kTorch,
      {{"--checkpoint", "--replay-trace"}, {"--raw-trace"}, {}});
}

ProbeInfo profile_probe() {
  return {"profile",
          register_profile,
          "Profile: time and memory per width",
          model::profile_report_section,
          // The measured LoRA step on the CPU (tiny shapes, random weights): times, memory, FLOPs
          // and the scaling fit over four widths (the fixed term testable), plus the standard
          // padded point; no kernel table on the CPU (said so in the evidence).
          {{"profile",
            {"profile", "--device", "cpu", "--model", "gemma4-tiny", "--dtype", "fp32", "--widths",
             "32,64,128,256", "--pad-fraction", "0.5", "--rank", "8", "--alpha", "16",
             "--ce-chunk", "256"}}}};
}

}  // namespace tprobe::probes
