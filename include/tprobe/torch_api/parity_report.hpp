// Views over a parity result (no libtorch): the evidence results and the stdout tables.
#pragma once

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/torch_api/parity.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::model {

core::Json to_json(const ParityResult& result, const ParityOptions& options);
// The summary: logits errors, or with --backward the loss and the LoRA gradients' errors.
core::Table parity_table(const ParityResult& result, const ParityOptions& options);
// Backward: each LoRA module's lora_A and lora_B relative L2 (and HF bf16's beside them).
core::Table parity_module_table(const BackwardParity& backward);

// The report's section for parity evidence (figures, facts, tables; core/report/section.hpp).
void parity_report_section(core::SectionBuilder& c);

}  // namespace tprobe::model
