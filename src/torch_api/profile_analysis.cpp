#include "tprobe/torch_api/profile_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/attention_path.hpp"
#include "tprobe/torch_api/torch_api.hpp"

namespace tprobe::model {

ProfileRequest profile_request(const ProfileOptions& o) {
  ProfileRequest req;
  StepSpec& s = req.spec;
  if (!o.checkpoint.empty() && o.random_init)
    fail_usage("--checkpoint and --random-init exclude each other");
  s.checkpoint_dir = o.checkpoint;
  // The 26B shapes need a GPU's memory: on the CPU the default is the tiny model.
  s.model = !o.model.empty() ? o.model : o.device == "cuda" ? "gemma4-26b-a4b" : "gemma4-tiny";
  s.seed = o.seed;
  s.lora_targets = o.targets.size() == 1 && o.targets[0] == "none" ? std::vector<std::string>{}
                                                                   : o.targets;
  s.lora_rank = o.rank;
  s.lora_alpha = o.alpha;
  s.lora_fp32 = o.lora_dtype == "fp32";
  const auto ck = parse_checkpointing(o.checkpointing);
  if (!ck) fail_usage("--checkpointing '{}': expected reentrant, non-reentrant or off", o.checkpointing);
  s.checkpointing = *ck;
  const auto ce = parse_ce_form(o.ce);
  if (!ce) fail_usage("--ce '{}': expected chunk-checkpoint, chunked or naive", o.ce);
  s.ce = *ce;
  s.ce_chunk = o.ce_chunk;
  s.fused_rms_norm = o.norm == "fused";
  req.attn_default = o.attn.empty();
  if (!o.attn.empty()) s.attn = core::attention_path_from_name(o.attn, "--attn");
  req.moe_default = o.moe.empty();
  if (!o.moe.empty()) s.moe = parse_moe(o.moe);
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
  s.record_memory = o.memory == "on";
  if (!o.raw_memory.empty() && !s.record_memory)
    fail_usage("--raw-memory needs --memory on (the memory step records what it writes)");
  s.keep_raw_memory = !o.raw_memory.empty();
  req.raw_memory_path = o.raw_memory;
  req.raw_trace_path = o.raw_trace;
  req.replay_trace = o.replay_trace;
  if (o.peak_tflops > 0) req.peak_tflops = o.peak_tflops;
  if (o.table_width > 0 && std::find(widths.begin(), widths.end(), o.table_width) == widths.end()) {
    fail_usage("--table-width {} is none of this run's widths ({})", o.table_width,
               fmt::join(widths, ", "));
  }
  req.table_width = o.table_width;
  return req;
}

ProfileAnalysis analyse_profile(const ProfileOptions& options, const std::string& raw_trace_to,
                                const ProfileHooks& hooks, const std::string& raw_memory_to) {
  ProfileAnalysis a;
  a.request = profile_request(options);
  ProfileRequest run = a.request;
  run.raw_trace_path = raw_trace_to;
  run.raw_memory_path = raw_memory_to.empty() ? a.request.raw_memory_path : raw_memory_to;
  run.spec.should_stop = hooks.should_stop;
  run.spec.on_start = hooks.on_start;
  a.report = torch_api().run_profile(run, hooks.on_point);
  for (const auto& p : a.report.steps.points) {
    if (p.outcome == PointOutcome::kOom) {
      a.report.diagnostics.push_back(
          {core::Severity::kWarning, "point_oom",
           fmt::format("{}x{}: out of memory (recorded as the point's outcome)", p.point.batch,
                       p.point.width)});
    } else if (p.outcome == PointOutcome::kError) {
      a.report.diagnostics.push_back(
          {core::Severity::kError, "point_error",
           fmt::format("{}x{}: {}", p.point.batch, p.point.width, p.message)});
    }
  }
  return a;
}

std::string resolved_attention(const ProfileAnalysis& a) {
  for (const auto& p : a.report.steps.points) {
    if (p.outcome == PointOutcome::kOk)
      return fmt::format("sliding: {}; full: {}", p.attn_sliding, p.attn_full);
  }
  return "";
}

std::string interrupted_note(const ProfileAnalysis& a) {
  if (!a.report.steps.interrupted) return "";
  return fmt::format("INTERRUPTED: {} of {} points measured before the signal\n",
                     a.report.steps.points.size(), a.request.spec.points.size());
}

core::Json to_json(const ProfileAnalysis& a) { return to_json(a.report, a.request); }

std::vector<core::Table> profile_tables(const ProfileAnalysis& a) {
  return profile_tables(a.report);
}

}  // namespace tprobe::model
