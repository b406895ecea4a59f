// JSON and table views of a LoraGateReport.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/adapter/lora_gate.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

Json to_json(const LoraGateReport& report);
// Reads the `results` object to_json wrote; the state counts, `passed` and the outcome are
// recomputed, what it does not write (the config's patterns and flags, other tensors' files and
// element counts, diagnostics) keeps its default. Throws tprobe::Error naming `where` ("g.json
// results") and the field.
LoraGateReport lora_gate_report_from_json(const Json& results, const std::string& where);
// Summary, per target, then every module (problems first).
std::vector<Table> lora_gate_tables(const LoraGateReport& report);

// The report's section for lora-gate evidence (figures, facts, tables; core/report/section.hpp).
void lora_gate_report_section(SectionBuilder& c);

}  // namespace tprobe::core
