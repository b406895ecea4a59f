#include "tprobe/core/report/report_summary.hpp"

namespace tprobe::core {

Table report_summary_table(const Report& report, const std::string& html,
                           const std::string& markdown) {
  Table t("report: " + html);
  t.column("file", Align::kLeft)
      .column("probe", Align::kLeft)
      .column("outcome", Align::kLeft)
      .column("figures")
      .column("tables")
      .column("notes");
  for (const auto& s : report.sections) {
    t.row({s.source, s.probe, s.outcome, std::to_string(s.figures.size()),
           std::to_string(s.tables.size()), std::to_string(s.notes.size())});
  }
  for (const auto& n : report.notes) t.note(n);
  t.note("markdown summary: " + markdown);
  return t;
}

std::vector<Diagnostic> report_diagnostics(const Report& report) {
  std::vector<Diagnostic> out;
  for (const auto& n : report.notes) {
    const bool stale = n.find(": stale: ") != std::string::npos;
    out.push_back({Severity::kWarning, stale ? "stale_evidence" : "input_skipped", n});
  }
  return out;
}

}  // namespace tprobe::core
