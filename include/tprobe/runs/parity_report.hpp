// Views over a parity result (no libtorch): the evidence results and the stdout tables.
#pragma once

#include <string>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/engine/parity_request.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::runs {

core::Json to_json(const engine::ParityResult& result, const engine::ParityOptions& options);

// What parity evidence holds: the result, and of the options the three to_json writes (mode ->
// backward, dtype, adapter -> adapter_dir; with backward also the gradient_checkpointing and
// input_grads the backward block records). The other options keep their defaults.
struct ParityEvidence {
  engine::ParityResult result;
  engine::ParityOptions options;
};
// Reads the `results` object to_json wrote, every field checked; logits_compared is whether
// positions_compared is not null, the error block's copies of the top-level max_abs_error,
// rel_l2_error and argmax_agreement_ratio are set from them (run_parity writes both alike), and
// what it does not write (the gradients' diff norms) keeps its default. A measured error, norm or
// loss written as null (JSON has no NaN or inf: a model that blew up, or a relative error against
// a zero reference) reads back as NaN. Throws tprobe::Error naming `where` ("p.json results") and
// the field.
ParityEvidence parity_evidence_from_json(const core::Json& results, const std::string& where);
// The summary: logits errors, or with --backward the loss and the LoRA gradients' errors.
core::Table parity_table(const engine::ParityResult& result,
                         const engine::ParityOptions& options);
// Backward: each LoRA module's lora_A and lora_B relative L2 (and HF bf16's beside them).
core::Table parity_module_table(const engine::BackwardParity& backward);

// The report's section for parity evidence (figures, facts, tables; core/report/section.hpp).
void parity_report_section(core::SectionBuilder& c);

}  // namespace tprobe::runs
