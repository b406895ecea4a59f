// JSON and table views of a LoraGateReport.
#pragma once

#include <vector>

#include "tprobe/core/adapter/lora_gate.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

Json to_json(const LoraGateReport& report);
// Summary, per target, then every module (problems first).
std::vector<Table> lora_gate_tables(const LoraGateReport& report);

// The report's section for lora-gate evidence (figures, facts, tables; core/report/section.hpp).
void lora_gate_report_section(SectionBuilder& c);

}  // namespace tprobe::core
