// `tprobe report`: evidence files (or directories of them) -> one self-contained HTML page with
// inline SVG figures and a Markdown summary. docs/report.md.
#include "tprobe/core/report/report.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include "probes/option_checks.hpp"
#include "probes/probe.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/report/report_summary.hpp"

namespace tprobe::probes {

namespace {

struct ReportOptions {
  std::vector<std::string> inputs;
  std::string html;
  std::string markdown;
  std::string since;
};

// The two outputs: given, or for one directory next to its evidence.
std::pair<std::string, std::string> output_paths(const ReportOptions& o) {
  const std::string dir =
      o.inputs.size() == 1 && core::is_directory(o.inputs[0]) ? o.inputs[0] + "/" : "";
  return {o.html.empty() ? dir + "report.html" : o.html,
          o.markdown.empty() ? dir + "report.md" : o.markdown};
}

// The evidence files read are the inputs (not their folder, which the report is written into).
void declare(const ReportOptions& o, core::OutputGuard& guard) {
  for (const auto& path : core::list_evidence_files(o.inputs)) guard.input_file("<inputs>", path);
  const auto [html, md] = output_paths(o);
  guard.output("--html", html);
  guard.output("--markdown", md);
}

core::Outcome run(const ReportOptions& o, RunContext& ctx) {
  const auto [html, md] = output_paths(o);
  const auto inputs = core::collect_evidence(o.inputs);
  const core::Report report = core::build_report(inputs, report_probes(), o.since);
  if (report.sections.empty()) {
    fail("no tprobe evidence files among {} ({} JSON files read)", fmt::join(o.inputs, ", "),
         inputs.size());
  }
  write_side_output(ctx, html, core::render_html(report));
  write_side_output(ctx, md, core::render_markdown(report));

  ctx.out << core::report_summary_table(report, html, md).render() << "\n";
  ctx.evidence.results() = core::to_json(core::report_results(report, html, md));
  add_diagnostics(ctx.evidence, core::report_diagnostics(report));
  return core::Outcome::kOk;
}

}  // namespace

void register_report(CLI::App& app, ProbeSet& set) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Evidence files or directories -> one self-contained HTML report (inline SVG) + Markdown");
  cmd->add_option("inputs", o->inputs, "Evidence files, or directories whose *.json files are read")
      ->required();  // a missing path is the reader's error (exit 1), like every input
  // Declared to the guard through `declare` (their defaults depend on the inputs): an empty
  // value, which would mean the default, is refused here.
  cmd->add_option("--html", o->html,
                  "HTML output (default: DIR/report.html for one directory, else report.html)")
      ->check(non_empty_path());
  cmd->add_option("--markdown", o->markdown,
                  "Markdown output (default: beside the HTML's default, report.md)")
      ->check(non_empty_path());
  cmd->add_option("--since", o->since,
                  "Start of the run the evidence belongs to (UTC ISO 8601, as "
                  "invocation.started_at): evidence started earlier is flagged stale");
  set.add(
      cmd, [o](RunContext& ctx) { return run(*o, ctx); }, Needs::kCore,
      {{}, {}, [o](core::OutputGuard& guard) { declare(*o, guard); }});
}

// The report's own evidence gets no section; the main job runs it after every step (suite.cpp).
ProbeInfo report_probe() { return {"report", register_report}; }

}  // namespace tprobe::probes
