// Views of a profile run (no libtorch): its evidence JSON, its tables and the report's section
// for profile evidence. The run's types are the engine's (engine/profile_request.hpp).
#pragma once

#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/engine/profile_request.hpp"

namespace tprobe::runs {

core::Json to_json(const engine::ProfileReport& report,
                   const engine::ProfileRequest& request);
std::vector<core::Table> profile_tables(const engine::ProfileReport& report);

// What profile's results record of a run, read back by the code that writes them: the report
// (the steps as step_report_from_json reads them; per point its costs and its kernel trace — the
// phase × part rows and the per-layer times, the attribution counts, the attention deltas, the
// kernel table —; the peak, the FLOP path, the scaling fit and the share check with their notes,
// the trace status, the kernel-table point, the resolved knobs) and what the results record of
// the request (the requested knobs, LoRA, dtype, device, seed, warm-up and repeats, the side
// outputs' paths, the memory step, the points). The fields written twice or derived — the
// provenance's per-knob words and the resolved attention, the baseline, a trace's shares, the
// embedded kernel table — are checked against what the read fields make of them, by writing them
// again: a difference is an error naming its JSON path. So to_json(report, request) of what is
// read is `results` without its memory_fit, for every document to_json wrote. The devices and the
// diagnostics are not in the results, so not read. Throws tprobe::Error naming `where` and the
// field.
struct ProfileEvidence {
  engine::ProfileReport report;
  engine::ProfileRequest request;
};
ProfileEvidence profile_evidence_from_json(const core::Json& results, const std::string& where);

// Time and memory per width, the phase × part attribution of the traced step, and the kernel
// table the profile embeds (core/report/section.hpp).
void profile_report_section(core::SectionBuilder& c);

}  // namespace tprobe::runs
