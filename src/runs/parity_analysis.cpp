#include "tprobe/runs/parity_analysis.hpp"

#include <fmt/format.h>

#include <utility>

#include "tprobe/core/base/error.hpp"
#include "tprobe/runs/parity_report.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {

using engine::BackwardParity;
using engine::Access;
using engine::ParityOptions;
using engine::ParityResult;

void validate(const ParityOptions& o) {
  if (o.ce_chunk <= 0) fail_usage("--ce-chunk {}: must be positive", o.ce_chunk);
  if (o.backward && o.adapter_dir.empty()) fail_usage("--backward needs --adapter DIR");
  if (o.backward && !o.dump_hidden_path.empty())
    fail_usage("--dump-hidden is a forward diagnostic; it does not combine with --backward");
  if (!o.backward && (o.gradient_checkpointing || !o.input_grads))
    fail_usage("--checkpointing on and --no-input-grads need --backward");
}

ParityReport judge_parity(const ParityOptions& options, ParityResult result) {
  ParityReport rep;
  rep.options = options;
  rep.result = std::move(result);
  const ParityResult& r = rep.result;
  auto diag = [&](core::Severity s, const char* code, std::string message) {
    rep.diagnostics.push_back({s, code, std::move(message)});
  };
  if (r.backward) {
    const BackwardParity& b = *r.backward;
    if (!b.zero_one_side.empty()) {
      diag(core::Severity::kError, "lora_gradient_zero_on_one_side",
           fmt::format("{} LoRA gradient(s) zero on one side only (the inert-adapter signature), "
                       "first {}",
                       b.zero_one_side.size(), b.zero_one_side.front()));
    }
    if (!b.zero_both.empty()) {
      diag(core::Severity::kWarning, "lora_gradient_zero_on_both_sides",
           fmt::format("{} LoRA gradient(s) are zero in tprobe and in the reference alike: those "
                       "adapters learn nothing{}",
                       b.zero_both.size(),
                       b.loss_requires_grad ? ""
                                            : " (the loss does not require grad: no path reaches "
                                              "them)"));
    }
    if (!b.within_tolerance) {
      diag(core::Severity::kError, "parity_outside_tolerance",
           fmt::format("LoRA gradients: global relative L2 {:.3e} (tolerance {:.3e}), worst "
                       "module {} {:.3e}, rule {}",
                       b.global_rel_l2, b.verdict.tolerance, b.worst_module,
                       b.worst_module_rel_l2, b.verdict.rule));
      rep.outcome = core::Outcome::kNo;
    }
    return rep;
  }
  if (!r.within_tolerance) {
    diag(core::Severity::kError, "parity_outside_tolerance",
         fmt::format("relative L2 error {:.3e} exceeds {:.3e} for {} ({})", r.rel_l2_error,
                     r.tolerance_rel_l2, options.dtype, r.verdict_rule));
    rep.outcome = core::Outcome::kNo;
  }
  return rep;
}

ParityReport analyze_parity(Access engine, const ParityOptions& options) {
  validate(options);  // before libtorch is loaded
  return judge_parity(options, engine().run_parity(options));
}

core::Json to_json(const ParityReport& report) { return to_json(report.result, report.options); }

ParityReport parity_report_from_json(const core::Json& results, const std::string& where) {
  ParityEvidence e = parity_evidence_from_json(results, where);
  return judge_parity(e.options, std::move(e.result));
}

std::vector<core::Table> parity_tables(const ParityReport& report) {
  std::vector<core::Table> tables{parity_table(report.result, report.options)};
  if (report.result.backward) tables.push_back(parity_module_table(*report.result.backward));
  return tables;
}

}  // namespace tprobe::runs
