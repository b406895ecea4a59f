#include "tprobe/torch_api/levers.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/gemma4/attention_path.hpp"
#include "tprobe/torch_api/torch_api.hpp"

namespace tprobe::model {

ProfileRequest lever_request(const ProfileRequest& shared, const core::StepKnobs& knobs,
                             bool padded_only) {
  ProfileRequest r = shared;
  StepSpec& s = r.spec;
  s.attn = core::attention_path_from_name(knobs.attn, "attention path");
  s.fused_rms_norm = knobs.norm == "fused";
  s.lora_fp32 = knobs.lora_dtype == "fp32";
  // "auto": transformers' default experts implementation, resolved by the engine.
  r.moe_default = knobs.moe == "auto";
  if (!r.moe_default) s.moe = parse_moe(knobs.moe);
  s.gradient_checkpointing = knobs.checkpointing == "on";
  s.ce_chunked = knobs.ce == "chunked";
  r.attn_default = false;
  r.trace = false;
  r.replay_trace.clear();
  r.raw_trace_path.clear();
  std::vector<StepPoint> points;
  for (StepPoint p : shared.spec.points) {
    if (padded_only && !p.padded()) continue;
    if (p.batch != knobs.batch) {
      // Another batch size: a padded point's per-row lengths no longer fit, so it is left out.
      if (p.padded()) continue;
      p.batch = knobs.batch;
    }
    points.push_back(p);
  }
  s.points = points;
  return r;
}

namespace {

const char* outcome_name(PointOutcome o) {
  switch (o) {
    case PointOutcome::kOk: return "ok";
    case PointOutcome::kOom: return "oom";
    case PointOutcome::kError: return "error";
  }
  return "error";
}

// The path that runs a padded batch as its real tokens on `device`: the first registry entry that
// packs there.
std::string packing_path(const std::string& device) {
  for (const core::AttentionPathInfo& i : core::attention_registry()) {
    if (!i.engine || !i.packs_padding) continue;
    if (i.cuda_only && device != "cuda") continue;
    if (i.packs_padding_cuda_only && device != "cuda") continue;
    return i.name;
  }
  return "";
}

core::LeverRow base_row(const core::LeverConfig& c, const StepPoint& p) {
  core::LeverRow row;
  row.lever = c.lever;
  row.setting = c.setting;
  row.knobs = c.knobs;
  row.batch = p.batch;
  row.width = p.width;
  row.lengths = p.lengths;
  row.tokens = p.real_tokens();
  return row;
}

struct Measured {
  std::vector<core::LeverRow> rows;
  std::optional<ProfileReport> report;
  bool interrupted = false;  // the sweep stopped at a signal: rows holds what was measured
};

Measured measure(const LeversRequest& in, const core::LeverConfig& c, const ProfileRequest& req,
                 bool rethrow) {
  Measured m;
  auto fail_all = [&](const std::string& outcome, const std::string& message) {
    for (const StepPoint& p : req.spec.points) {
      core::LeverRow row = base_row(c, p);
      row.outcome = outcome;
      row.message = message;
      m.rows.push_back(row);
      if (in.on_row) in.on_row(m.rows.back());
    }
  };
  if (req.spec.points.empty()) return m;
  try {
    m.report = torch_api().run_profile(req, {});
  } catch (const core::Interrupted&) {
    m.interrupted = true;
    return m;
  } catch (const UsageError& e) {
    if (rethrow) throw;
    fail_all("refused", e.what());
    return m;
  } catch (const Error& e) {
    if (rethrow) throw;
    fail_all("error", e.what());
    return m;
  }
  const ProfileReport& rep = *m.report;
  for (std::size_t i = 0; i < rep.steps.points.size(); ++i) {
    const PointResult& pr = rep.steps.points[i];
    core::LeverRow row = base_row(c, pr.point);
    row.outcome = outcome_name(pr.outcome);
    row.message = pr.message;
    if (pr.outcome == PointOutcome::kOk) row.timing = core::make_timing(pr.step_s);
    if (pr.memory_measured) {
      row.peak_allocated_bytes = pr.peak_allocated_bytes;
      row.peak_reserved_bytes = pr.peak_reserved_bytes;
    }
    if (i < rep.costs.size()) row.performed_mfu = rep.costs[i].performed_mfu;
    m.rows.push_back(row);
    if (in.on_row) in.on_row(m.rows.back());
  }
  m.interrupted = rep.steps.interrupted;
  return m;
}

bool wanted(const LeversRequest& in, const std::string& lever) {
  return in.only.empty() || std::find(in.only.begin(), in.only.end(), lever) != in.only.end();
}

}  // namespace

core::LeversReport run_levers(const LeversRequest& in) {
  core::LeversReport out;
  out.baseline_name = in.baseline_name;
  out.baseline = in.baseline;
  out.device = in.shared.spec.device;
  out.model = in.shared.spec.checkpoint_dir.empty() ? in.shared.spec.model
                                                    : in.shared.spec.checkpoint_dir;
  ProfileRequest shared = in.shared;

  // The baseline first: its failure to build is the run's error; its resolved MoE dispatch is the
  // baseline every lever moves from.
  core::LeverConfig base{"baseline", "", in.baseline, false};
  ProfileRequest breq = lever_request(shared, in.baseline, false);
  // The baseline's sdpa where the linked libtorch has it, else eager (the engine says so).
  breq.attn_default = in.baseline.attn == "sdpa";
  Measured b = measure(in, base, breq, true);
  if (b.report) {
    const ProfileReport& rep = *b.report;
    out.baseline.attn = core::to_string(rep.attn);
    for (const PointResult& p : rep.steps.points) {
      if (!p.moe.empty()) {
        out.baseline.moe = p.moe;
        break;
      }
    }
    if (rep.peak_tflops) shared.peak_tflops = rep.peak_tflops;
    for (const core::Diagnostic& d : rep.diagnostics) out.diagnostics.push_back(d);
  }
  for (core::LeverRow& r : b.rows) r.knobs = out.baseline;
  out.rows = b.rows;
  auto stopped = [&](const Measured& m) {
    if (!m.interrupted) return false;
    out.outcome = core::Outcome::kInterrupted;
    out.diagnostics.push_back({core::Severity::kWarning, "levers_interrupted",
                               "interrupted: the rows measured before the signal are kept"});
    return true;
  };
  if (stopped(b)) {
    core::compare_rows(out);
    return out;
  }

  core::LeverPlanInput plan;
  plan.baseline = out.baseline;
  plan.device = shared.spec.device;
  plan.padded_point = std::any_of(shared.spec.points.begin(), shared.spec.points.end(),
                                  [](const StepPoint& p) { return p.padded(); });
  plan.packing_path = packing_path(plan.device);
  for (const core::LeverConfig& c : core::lever_configs(plan)) {
    if (c.lever == "baseline" || !wanted(in, c.lever)) continue;
    Measured m = measure(in, c, lever_request(shared, c.knobs, c.padded_only), false);
    out.rows.insert(out.rows.end(), m.rows.begin(), m.rows.end());
    if (stopped(m)) {
      core::compare_rows(out);
      return out;
    }
  }
  core::compare_rows(out);

  out.best = core::best_combination(out, &out.best_from);
  out.best_considered = true;
  if (out.best) {
    out.best_setting = core::knob_options(*out.best, out.baseline);
    const core::LeverConfig c{"best", out.best_setting, *out.best, false};
    Measured m = measure(in, c, lever_request(shared, c.knobs, false), false);
    out.rows.insert(out.rows.end(), m.rows.begin(), m.rows.end());
    stopped(m);
    core::compare_rows(out);
  }
  return out;
}

core::LeversReport analyse_levers(const LeversOptions& options,
                                  const std::function<bool()>& should_stop,
                                  const std::function<void(const core::LeverRow&)>& on_row) {
  for (const std::string& l : options.levers) {
    const auto& cat = core::lever_catalogue();
    if (std::none_of(cat.begin(), cat.end(), [&](const core::LeverInfo& i) { return l == i.name; })) {
      std::vector<std::string> names;
      for (const core::LeverInfo& i : cat) names.push_back(i.name);
      fail_usage("lever '{}': expected one of {}", l, fmt::join(names, ", "));
    }
  }
  ProfileOptions step = options.step;
  if (step.widths.empty()) {
    step.widths = step.device == "cuda" ? std::vector<int64_t>{2048, 16384}
                                        : std::vector<int64_t>{32, 64};
  }
  step.trace = "off";
  LeversRequest req;
  req.shared = profile_request(step);
  req.shared.spec.should_stop = should_stop;
  req.baseline = core::hf_peft_baseline(step.batch);
  req.baseline_name = core::hf_peft_baseline_name();
  req.only = options.levers;
  req.on_row = on_row;
  core::LeversReport rep = run_levers(req);
  for (const core::LeverRow& r : rep.rows) {
    if (r.outcome == "ok") continue;
    rep.diagnostics.push_back(
        {r.outcome == "error" ? core::Severity::kWarning : core::Severity::kInfo,
         "lever_" + r.outcome,
         fmt::format("{} {} at {}x{}: {}", r.lever, r.setting.empty() ? "(baseline)" : r.setting,
                     r.batch, r.width, r.message.empty() ? r.outcome : r.message)});
  }
  return rep;
}

}  // namespace tprobe::model
