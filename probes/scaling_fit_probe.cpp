// `tprobe scaling-fit`: fit step time against per-sequence width and say how much is quadratic.
#include "probes/scaling_fit_probe.hpp"

#include "probes/option_checks.hpp"
#include "probes/probe.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/cost/scaling_fit_report.hpp"
#include "tprobe/core/data/bucket_report.hpp"
#include "tprobe/runs/step_report.hpp"

namespace tprobe::probes {

std::vector<core::FitPoint> read_profile_points_evidence(const std::string& path,
                                                         std::vector<std::string>* skipped) {
  const core::Json doc = core::read_evidence_file(path, "profile");
  const std::vector<engine::PointResult> points = runs::profile_points_from_json(
      core::json_read::object(doc, "results", "'" + path + "'"), "'" + path + "': results");
  std::vector<core::FitPoint> out;
  // The reader returns results.points[] first, in file order, then the padded points, which a
  // fit over widths never takes (a padded row's cost is not its width's).
  for (size_t i = 0; i < points.size() && !points[i].point.padded(); ++i) {
    const engine::PointResult& p = points[i];
    const std::string where = fmt::format("results.points[{}]", i);
    if (p.outcome != engine::PointOutcome::kOk) {
      if (skipped) {
        skipped->push_back(fmt::format("{} {} (batch {}, width {}): {}{}", path, where,
                                       p.point.batch, p.point.width, to_string(p.outcome),
                                       p.message.empty() ? "" : ": " + p.message));
      }
      continue;
    }
    if (p.step_s.empty()) fail("'{}': {}.samples_s is empty for an ok point", path, where);
    for (size_t k = 0; k < p.step_s.size(); ++k) {
      if (!core::plausible_step_seconds(p.step_s[k])) {
        fail("'{}': {}.samples_s[{}] is not a step time in [{:g}, {:g}] s", path, where, k,
             core::kMinStepSeconds, core::kMaxStepSeconds);
      }
      core::FitPoint fp;
      fp.width = static_cast<double>(p.point.width);
      fp.seconds = p.step_s[k];
      fp.batch = p.point.batch;
      fp.origin = fmt::format("{} {}.samples_s[{}]", path, where, k);
      out.push_back(std::move(fp));
    }
  }
  return out;
}

namespace {

struct ScalingFitOptions {
  std::vector<std::string> points;
  std::vector<std::string> csv;
  std::vector<std::string> profiles;
  int64_t batch = 0;  // 0: not given
  std::string form = "AB";
  std::string samples = "median";
  std::vector<int64_t> at;
  std::string widths_from;
  double alpha = 0.05;
};

core::Outcome run(const ScalingFitOptions& o, RunContext& ctx) {
  if (o.points.empty() && o.csv.empty() && o.profiles.empty()) {
    fail_usage(
        "scaling-fit needs points: give --point WIDTH:SECONDS, --csv PATH or --profile PATH");
  }
  core::ScalingFitInput in;
  for (size_t i = 0; i < o.points.size(); ++i) {
    in.points.push_back(core::parse_point(o.points[i], fmt::format("--point {}", o.points[i])));
  }
  for (const auto& path : o.csv) {
    for (auto& p : core::read_points_csv(path)) in.points.push_back(std::move(p));
  }
  for (const auto& path : o.profiles) {
    for (auto& p : read_profile_points_evidence(path, &in.skipped)) {
      in.points.push_back(std::move(p));
    }
  }
  if (o.batch > 0) in.batch = o.batch;
  in.batch_option = "--batch";
  in.model = o.form;
  in.samples = o.samples == "raw" ? core::SampleMode::kRaw : core::SampleMode::kMedian;
  in.at_widths = o.at;
  in.alpha = o.alpha;
  if (!o.widths_from.empty()) in.widths = core::read_width_distribution(o.widths_from);

  core::ScalingFitReport report = core::analyze_scaling(std::move(in));
  for (const auto& table : core::scaling_fit_tables(report)) ctx.out << table.render() << "\n";
  ctx.evidence.results() = core::to_json(report);
  add_diagnostics(ctx.evidence, report.diagnostics);
  return report.outcome;
}

}  // namespace

void register_scaling_fit(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<ScalingFitOptions>();
  CLI::App* cmd = app.add_subcommand(
      "scaling-fit",
      "Fit step time t(w) = C + A·w + B·w² over per-sequence width; quadratic share");
  cmd->add_option("--point", o->points, "A measured step: WIDTH:SECONDS (repeat; e.g. 2048:1.776)");
  cmd->add_option("--csv", o->csv, "CSV of width,seconds[,batch] rows (header optional; repeat)");
  cmd->add_option("--profile", o->profiles,
                  "profile evidence file: every ok point and repeat of results.points[] (repeat)");
  cmd->add_option("--batch", o->batch, "Fit the points at this batch (others are dropped)")
      ->check(positive_number());
  cmd->add_option("--form", o->form,
                  "Fit form: A, AB, AC, ABC, or auto (F-test backward elimination)")
      ->check(CLI::IsMember({"A", "AB", "AC", "ABC", "auto"}))
      ->capture_default_str();
  cmd->add_option("--samples", o->samples,
                  "median: one point per width (median of its repeats); raw: every repeat")
      ->check(CLI::IsMember({"median", "raw"}))
      ->capture_default_str();
  cmd->add_option("--at", o->at, "Also predict at these widths (comma list or repeat)")
      ->delimiter(',')
      ->check(positive_number());
  cmd->add_option(
         "--widths-from", o->widths_from,
         "padding or bucket evidence: weight the quadratic share over its micro-batch widths")
      ->check(CLI::ExistingFile);
  cmd->add_option("--alpha", o->alpha, "Significance level of the F-tests")
      ->check(CLI::Range(1e-6, 0.5))
      ->capture_default_str();
  set.add(
      cmd, [o](RunContext& ctx) { return run(*o, ctx); }, Needs::kCore,
      {{"--csv", "--profile", "--widths-from"}, {}, {}});
}

ProbeInfo scaling_fit_probe() {
  return {"scaling-fit",
          register_scaling_fit,
          "Scaling fit: linear vs quadratic",
          core::scaling_fit_report_section,
          // The post-mortem's published points (docs/findings.md#f1), weighted by the widths the
          // padding step measured.
          {{"scaling-fit",
            {"scaling-fit", "--batch", "2", "--point", "2048:1.776", "--point", "8192:11.570",
             "--point", "16384:35.017", "--at", "4096,32768", "--widths-from",
             "{out}/padding.json"}}}};
}

}  // namespace tprobe::probes
