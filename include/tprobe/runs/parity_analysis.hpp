// `tprobe parity`'s analysis as one call: the options checked before libtorch is loaded, the
// engine's comparison (engine::run_parity through the torch module), and the verdict — the
// diagnostics and the outcome — judged from its result. docs/parity.md.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/engine/parity_request.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {

struct ParityReport {
  engine::ParityOptions options;
  engine::ParityResult result;
  std::vector<core::Diagnostic> diagnostics;
  core::Outcome outcome = core::Outcome::kOk;  // kNo: outside tolerance
};

// Throws UsageError for a non-positive CE chunk, backward without an adapter, a hidden-state dump
// with backward, and checkpointing or no input grads without backward.
void validate(const engine::ParityOptions& options);

// The verdict over an engine result: a one-sided zero LoRA gradient is an error, a zero on both
// sides a warning, a comparison outside its tolerance an error and outcome kNo.
ParityReport judge_parity(const engine::ParityOptions& options, engine::ParityResult result);

// validate(), the torch module's run_parity, judge_parity().
ParityReport analyze_parity(engine::Access engine,
                            const engine::ParityOptions& options);

core::Json to_json(const ParityReport& report);
// Reads the `results` to_json wrote (parity_evidence_from_json, parity_report.hpp) and judges the
// result again: the diagnostics and the outcome are judge_parity's. Throws tprobe::Error naming
// `where` ("p.json results") and the field.
ParityReport parity_report_from_json(const core::Json& results, const std::string& where);
// The summary table, and with backward the per-module table.
std::vector<core::Table> parity_tables(const ParityReport& report);

}  // namespace tprobe::runs
