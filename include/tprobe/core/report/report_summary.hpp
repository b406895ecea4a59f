// What `tprobe report` prints and records beside the two files it writes: the summary table of
// the sections drawn, and one warning per note. docs/report.md.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/report.hpp"

namespace tprobe::core {

// One row per section (file, probe, outcome, figure/table/note counts), the report's notes and
// where the Markdown summary went.
Table report_summary_table(const Report& report, const std::string& html,
                           const std::string& markdown);
// One warning per note: "stale_evidence" for evidence older than --since, else "input_skipped".
std::vector<Diagnostic> report_diagnostics(const Report& report);

}  // namespace tprobe::core
