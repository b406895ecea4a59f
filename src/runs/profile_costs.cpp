#include "tprobe/runs/profile_costs.hpp"

#include <fmt/format.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tprobe/core/base/median.hpp"
#include "tprobe/core/cost/flops.hpp"
#include "tprobe/core/cost/scaling_fit.hpp"
#include "tprobe/core/cost/step_shares.hpp"

namespace tprobe::runs {

using engine::PointCost;
using engine::PointOutcome;
using engine::ProfileReport;
using engine::ProfileRequest;

namespace {

// The fit's quadratic share against the w² parts' share of the step at each traced unpadded
// width (core/cost/step_shares.hpp): one series per layer kind × part over every phase.
void check_shares(ProfileReport& rep) {
  if (!rep.fit || !rep.fit->fit || !rep.fit->fit->determined) {
    rep.share_check_note = "no scaling fit to compare with";
    return;
  }
  core::ShareCheckInput in;
  in.model = rep.fit->fit->model;
  std::map<std::string, std::vector<double>> series;
  std::vector<size_t> used;
  for (size_t i = 0; i < rep.steps.points.size(); ++i) {
    const auto& p = rep.steps.points[i];
    if (i >= rep.traces.size()) break;
    const auto& t = rep.traces[i];
    if (p.point.padded() || p.outcome != PointOutcome::kOk || p.step_s.empty() || !t.captured ||
        t.breakdown.kernels == 0)
      continue;
    used.push_back(i);
  }
  for (size_t i : used) {
    for (const auto& r : rep.traces[i].breakdown.rows) series[r.layer_kind + "/" + r.part];
  }
  for (size_t i : used) {
    const auto& p = rep.steps.points[i];
    in.widths.push_back(static_cast<double>(p.point.width));
    in.repeats.push_back(1);  // the fit is over per-width medians (scaling-fit's default)
    in.step_s.push_back(core::median(p.step_s));
    std::map<std::string, double> sums;
    for (const auto& r : rep.traces[i].breakdown.rows)
      sums[r.layer_kind + "/" + r.part] += static_cast<double>(r.kernel_ns) * 1e-9;
    for (auto& [name, values] : series) values.push_back(sums[name]);
  }
  for (auto& [name, values] : series) {
    const auto slash = name.find('/');
    core::PartSeries s;
    s.name = name;
    s.quadratic = core::grows_quadratically(name.substr(slash + 1), name.substr(0, slash),
                                            rep.sliding_dense);
    s.seconds = std::move(values);
    in.parts.push_back(std::move(s));
  }
  rep.share_check = core::check_quadratic_shares(in);
  if (!rep.share_check->determined) rep.share_check_note = rep.share_check->refusal;
}

}  // namespace

void derive_profile_costs(ProfileReport& rep, const ProfileRequest& request) {
  // The point whose kernel table is results.kernel_table: --table-width's, else the widest.
  for (size_t i = 0; i < rep.steps.points.size(); ++i) {
    const auto& p = rep.steps.points[i];
    if (p.point.padded() || i >= rep.traces.size() || !rep.traces[i].table) continue;
    const bool wanted =
        request.table_width > 0
            ? p.point.width == request.table_width
            : (!rep.table_point || p.point.width > rep.steps.points[*rep.table_point].point.width);
    if (wanted) rep.table_point = i;
  }

  const core::StepConfig& knobs = rep.config;
  if (!knobs.attn) {
    rep.fit_note = "no FLOPs and no scaling fit: the engine resolved no attention path";
    rep.share_check_note = "no scaling fit to compare with";
    return;
  }
  // FLOPs per point.
  rep.flops_path = *knobs.attn;
  for (const auto& p : rep.steps.points) {
    core::FlopsRequest fr;
    fr.batch = p.point.batch;
    fr.width = p.point.width;
    fr.lengths = p.point.lengths;
    fr.path = rep.flops_path;
    fr.lora_targets = request.spec.lora_targets;
    fr.lora_rank = request.spec.lora_rank;
    fr.gradient_checkpointing = knobs.checkpointing != core::Checkpointing::kOff;
    core::FlopsReport f = core::count_flops(rep.steps.config, fr);
    PointCost c;
    c.intended_flops = core::total(f.intended_total);
    c.performed_flops = core::total(f.performed_total);
    if (rep.peak_tflops && p.outcome == PointOutcome::kOk && !p.step_s.empty()) {
      const double t = core::median(p.step_s);
      c.intended_mfu = core::mfu(c.intended_flops, t, *rep.peak_tflops);
      c.performed_mfu = core::mfu(c.performed_flops, t, *rep.peak_tflops);
    }
    rep.costs.push_back(c);
  }

  // Scaling fit over the unpadded points, as scaling-fit would read them from the evidence.
  core::ScalingFitInput in;
  std::set<int64_t> widths;
  for (const auto& p : rep.steps.points) {
    if (p.point.padded()) continue;
    if (p.outcome != PointOutcome::kOk) {
      in.skipped.push_back(fmt::format("width {}: {}", p.point.width, to_string(p.outcome)));
      continue;
    }
    widths.insert(p.point.width);
    for (size_t i = 0; i < p.step_s.size(); ++i) {
      in.points.push_back({static_cast<double>(p.point.width), p.step_s[i], p.point.batch,
                           fmt::format("{}x{} repeat {}", p.point.batch, p.point.width, i + 1)});
    }
  }
  std::set<int64_t> batches;
  for (const auto& fp : in.points) batches.insert(fp.batch);
  if (widths.size() >= 3 && batches.size() == 1) {
    // AB, as the post-mortem fitted; the fixed term C is tested beside it (fixed_term), which
    // needs four or more distinct widths.
    in.model = "AB";
    in.at_widths.assign(widths.begin(), widths.end());
    rep.fit = core::analyze_scaling(in);
    rep.sliding_dense = core::sliding_layers_dense(*knobs.attn);
    check_shares(rep);
  } else if (batches.size() > 1) {
    rep.fit_note = "no scaling fit: the points are at different batches";
  } else {
    rep.fit_note = fmt::format(
        "no scaling fit: {} distinct measured width(s); the fit needs 3 or more", widths.size());
  }
}

}  // namespace tprobe::runs
