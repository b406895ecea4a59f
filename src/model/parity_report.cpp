// JSON and table views of a parity result: no libtorch here, so they compile fast.
#include <fmt/format.h>

#include "tprobe/model/parity_report.hpp"

namespace tprobe::model {

core::Json to_json(const ParityResult& r, const ParityOptions& o) {
  core::Json res;
  res["batch"] = r.batch;
  res["seq"] = r.seq;
  res["vocab"] = r.vocab;
  res["text_prefix"] = r.text_prefix;
  res["tensors_loaded"] = r.tensors_loaded;
  res["dtype"] = o.dtype;
  res["attn_sliding"] = r.attn_sliding;
  res["attn_full"] = r.attn_full;
  res["moe_dispatch"] = r.moe;
  res["max_abs_error"] = r.max_abs_error;
  res["rel_l2_error"] = r.rel_l2_error;
  res["argmax_agreement_ratio"] = r.argmax_agreement_ratio;
  res["position_rel_l2_median"] = r.error.position_rel_l2_median;
  res["position_rel_l2_p99"] = r.error.position_rel_l2_p99;
  if (r.baseline) {
    res["baseline"] = {{"key", o.baseline_key},
                       {"max_abs_error", r.baseline->max_abs_error},
                       {"rel_l2_error", r.baseline->rel_l2_error},
                       {"position_rel_l2_median", r.baseline->position_rel_l2_median},
                       {"position_rel_l2_p99", r.baseline->position_rel_l2_p99},
                       {"argmax_agreement_ratio", r.baseline->argmax_agreement_ratio}};
  } else {
    res["baseline"] = nullptr;
  }
  res["loss"] = r.loss;
  res["reference_loss"] = r.reference_loss ? core::Json(*r.reference_loss) : core::Json(nullptr);
  res["loss_abs_diff"] = r.loss_abs_diff ? core::Json(*r.loss_abs_diff) : core::Json(nullptr);
  res["tolerance_rel_l2"] = r.tolerance_rel_l2;
  res["within_tolerance"] = r.within_tolerance;
  res["forward_s"] = r.forward_s;

  return res;
}

core::Table parity_table(const ParityResult& r, const ParityOptions& o) {
  core::Table t(fmt::format("parity: {} vs {} ({}, {}×{}, vocab {})", o.checkpoint_dir, o.reference_path,
                            o.dtype, r.batch, r.seq, r.vocab));
  const std::string base_head = r.baseline ? o.baseline_key : "";
  t.column("quantity", core::Align::kLeft).column("tprobe").column("tolerance").column(base_head);
  auto b = [&](double LogitsError::*field) {
    return r.baseline ? core::format_sci((*r.baseline).*field) : std::string();
  };
  t.row({"attention (sliding)", r.attn_sliding, "", ""});
  t.row({"attention (full)", r.attn_full, "", ""});
  t.row({"moe dispatch", r.moe, "", ""});
  t.row({"max |Δ logit|", core::format_sci(r.max_abs_error), "",
         b(&LogitsError::max_abs_error)});
  t.row({"relative L2 error", core::format_sci(r.rel_l2_error),
         core::format_sci(r.tolerance_rel_l2), b(&LogitsError::rel_l2_error)});
  t.row({"per-position rel. L2, median", core::format_sci(r.error.position_rel_l2_median), "",
         b(&LogitsError::position_rel_l2_median)});
  t.row({"per-position rel. L2, p99", core::format_sci(r.error.position_rel_l2_p99), "",
         b(&LogitsError::position_rel_l2_p99)});
  t.row({"argmax agreement", core::format_percent(r.argmax_agreement_ratio, 2), "",
         r.baseline ? core::format_percent(r.baseline->argmax_agreement_ratio, 2) : ""});
  t.row({"loss (tprobe, chunked CE)", fmt::format("{:.8f}", r.loss), "", ""});
  if (r.reference_loss) {
    t.row({"loss (reference)", fmt::format("{:.8f}", *r.reference_loss), "", ""});
    t.row({"|Δ loss|", core::format_sci(*r.loss_abs_diff), "", ""});
  }
  t.note(r.within_tolerance ? "within tolerance" : "OUTSIDE tolerance");
  return t;
}

}  // namespace tprobe::model
