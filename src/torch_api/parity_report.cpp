// JSON and table views of a parity result: no libtorch here, so they compile fast.
#include "tprobe/torch_api/parity_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::model {

namespace {

// A relative error for a cell: inf (a zero reference) spelled out.
std::string sci(double v) { return std::isinf(v) ? "inf" : core::format_sci(v); }
std::string sci(const std::optional<double>& v) { return v ? sci(*v) : std::string(); }

std::string rule_text(const std::string& rule) {
  if (rule == "relative_to_hf_bf16")
    return fmt::format("relative_to_hf_bf16 (at most {:g}× HF's own bf16 error)",
                       kBf16RelativeFactor);
  if (rule == "fixed_bf16_fallback")
    return "fixed_bf16_fallback (the reference has no HF bf16 run to judge against)";
  return rule;
}

std::string padding_text(const ParityResult& r) {
  return fmt::format("right-padded batch (attention_mask): real tokens per row {}",
                     fmt::join(r.row_lengths, ", "));
}

core::Json backward_json(const BackwardParity& b) {
  core::Json j;
  j["gradient_checkpointing"] = b.gradient_checkpointing;
  j["input_grads"] = b.input_grads;
  j["reference_prefix"] = b.reference_prefix;
  j["loss"] = b.loss;
  j["reference_loss"] = b.reference_loss;
  j["loss_abs_diff"] = b.loss_abs_diff;
  j["baseline_loss_abs_diff"] = core::json_or_null(b.baseline_loss_abs_diff);
  j["loss_requires_grad"] = b.loss_requires_grad;
  j["lora_tensors"] = static_cast<int64_t>(b.tensors.size());
  j["global_rel_l2"] = b.global_rel_l2;
  j["worst_module"] = b.worst_module;
  j["worst_module_rel_l2"] = b.worst_module_rel_l2;
  j["worst_tensor"] = b.worst_tensor;
  j["worst_tensor_rel_l2"] = b.worst_tensor_rel_l2;
  j["baseline_suffix"] =
      b.baseline_suffix.empty() ? core::Json(nullptr) : core::Json(b.baseline_suffix);
  j["baseline_global_rel_l2"] = core::json_or_null(b.baseline_global_rel_l2);
  j["baseline_worst_module_rel_l2"] = core::json_or_null(b.baseline_worst_module_rel_l2);
  j["verdict_rule"] = b.verdict.rule;
  j["tolerance_global_rel_l2"] = b.verdict.tolerance;
  j["tolerance_worst_module_rel_l2"] = core::json_or_null(b.worst_module_tolerance);
  j["tolerance_tensor_rel_l2"] = core::json_or_null(b.worst_tensor_tolerance);
  j["zero_one_side"] = b.zero_one_side;
  j["zero_both_sides"] = b.zero_both;
  j["within_tolerance"] = b.within_tolerance;
  j["forward_backward_s"] = b.forward_backward_s;
  core::Json modules = core::Json::array();
  for (const GradModuleError& m : b.modules) {
    modules.push_back({{"module", m.module},
                       {"lora_a_rel_l2", m.a_rel_l2},
                       {"lora_b_rel_l2", m.b_rel_l2},
                       {"baseline_lora_a_rel_l2", core::json_or_null(m.a_baseline)},
                       {"baseline_lora_b_rel_l2", core::json_or_null(m.b_baseline)}});
  }
  j["modules"] = modules;
  core::Json tensors = core::Json::array();
  for (const GradTensorError& t : b.tensors) {
    tensors.push_back({{"name", t.name},
                       {"in_tprobe", t.in_tprobe},
                       {"reference_norm", t.reference_norm},
                       {"tprobe_norm", t.tprobe_norm},
                       {"rel_l2_error", t.rel_l2_error},
                       {"baseline_rel_l2", core::json_or_null(t.baseline_rel_l2)},
                       {"zero_tprobe", t.zero_tprobe},
                       {"zero_reference", t.zero_reference}});
  }
  j["tensors"] = tensors;
  return j;
}

}  // namespace

core::Json to_json(const ParityResult& r, const ParityOptions& o) {
  core::Json res;
  res["mode"] = o.backward ? "backward" : "forward";
  res["batch"] = r.batch;
  res["seq"] = r.seq;
  res["vocab"] = r.vocab;
  res["text_prefix"] = r.text_prefix;
  res["tensors_loaded"] = r.tensors_loaded;
  res["dtype"] = o.dtype;
  res["adapter"] = o.adapter_dir.empty() ? core::Json(nullptr) : core::Json(o.adapter_dir);
  res["attn_sliding"] = r.attn_sliding;
  res["attn_full"] = r.attn_full;
  res["moe_dispatch"] = r.moe;
  const core::Json none(nullptr);
  const bool f = r.logits_compared;
  res["row_lengths"] = r.row_lengths.empty() ? none : core::Json(r.row_lengths);
  res["positions_compared"] = f ? core::Json(r.positions_compared) : none;
  res["max_abs_error"] = f ? core::Json(r.max_abs_error) : none;
  res["rel_l2_error"] = f ? core::Json(r.rel_l2_error) : none;
  res["argmax_agreement_ratio"] = f ? core::Json(r.argmax_agreement_ratio) : none;
  res["position_rel_l2_median"] = f ? core::Json(r.error.position_rel_l2_median) : none;
  res["position_rel_l2_p99"] = f ? core::Json(r.error.position_rel_l2_p99) : none;
  if (r.baseline) {
    res["baseline"] = {{"key", r.baseline_key},
                       {"max_abs_error", r.baseline->max_abs_error},
                       {"rel_l2_error", r.baseline->rel_l2_error},
                       {"position_rel_l2_median", r.baseline->position_rel_l2_median},
                       {"position_rel_l2_p99", r.baseline->position_rel_l2_p99},
                       {"argmax_agreement_ratio", r.baseline->argmax_agreement_ratio}};
  } else {
    res["baseline"] = nullptr;
  }
  res["loss"] = r.loss;
  res["reference_loss"] = core::json_or_null(r.reference_loss);
  res["loss_abs_diff"] = core::json_or_null(r.loss_abs_diff);
  res["verdict_rule"] = r.verdict_rule;
  res["tolerance_rel_l2"] = r.tolerance_rel_l2;
  res["within_tolerance"] = r.within_tolerance;
  res["forward_s"] = f ? core::Json(r.forward_s) : none;
  res["loss_forward_s"] = f ? core::Json(r.loss_forward_s) : none;
  res["backward"] = r.backward ? backward_json(*r.backward) : none;
  return res;
}

core::Table parity_table(const ParityResult& r, const ParityOptions& o) {
  if (r.backward) {
    const BackwardParity& b = *r.backward;
    core::Table t(fmt::format("backward parity: {} vs {} ({}, {}×{}, vocab {}, adapter {})",
                              o.checkpoint_dir, o.reference_path, o.dtype, r.batch, r.seq, r.vocab,
                              o.adapter_dir));
    const std::string base_head =
        b.baseline_suffix.empty() ? "" : fmt::format("HF ({})", b.baseline_suffix);
    t.column("quantity", core::Align::kLeft).column("tprobe").column("tolerance").column(base_head);
    t.row({"attention (sliding)", r.attn_sliding, "", ""});
    t.row({"attention (full)", r.attn_full, "", ""});
    t.row({"moe dispatch", r.moe, "", ""});
    t.row({"gradient checkpointing", b.gradient_checkpointing ? "on" : "off", "", ""});
    t.row({"input grads", b.input_grads ? "on" : "off", "", ""});
    t.row({"loss (tprobe, chunked CE)", fmt::format("{:.8f}", b.loss), "", ""});
    t.row({"loss (reference)", fmt::format("{:.8f}", b.reference_loss), "", ""});
    t.row({"|Δ loss|", core::format_sci(b.loss_abs_diff),
           b.worst_tensor_tolerance ? "1e-4 × |loss|" : "", sci(b.baseline_loss_abs_diff)});
    t.row({"LoRA gradients", std::to_string(b.tensors.size()), "", ""});
    t.row({"global relative L2", sci(b.global_rel_l2), core::format_sci(b.verdict.tolerance),
           sci(b.baseline_global_rel_l2)});
    t.row({"worst module: " + b.worst_module, sci(b.worst_module_rel_l2),
           sci(b.worst_module_tolerance), sci(b.baseline_worst_module_rel_l2)});
    t.row({"worst tensor: " + b.worst_tensor, sci(b.worst_tensor_rel_l2),
           sci(b.worst_tensor_tolerance), ""});
    t.row({"zero on one side only", std::to_string(b.zero_one_side.size()), "0", ""});
    t.row({"zero on both sides", std::to_string(b.zero_both.size()), "", ""});
    if (!r.row_lengths.empty()) t.note(padding_text(r));
    t.note("verdict rule: " + rule_text(b.verdict.rule));
    for (size_t i = 0; i < b.zero_one_side.size() && i < 8; ++i)
      t.note("zero on one side: " + b.zero_one_side[i]);
    if (b.zero_one_side.size() > 8)
      t.note(fmt::format("... and {} more (evidence: backward.zero_one_side)",
                         b.zero_one_side.size() - 8));
    if (!b.zero_both.empty() && !b.loss_requires_grad)
      t.note(
          "no gradient reaches any adapter, in tprobe as in the reference (the loss does "
          "not require grad)");
    t.note(r.within_tolerance ? "within tolerance" : "OUTSIDE tolerance");
    return t;
  }
  core::Table t(fmt::format("parity: {} vs {} ({}, {}×{}, vocab {})", o.checkpoint_dir,
                            o.reference_path, o.dtype, r.batch, r.seq, r.vocab));
  const std::string base_head = r.baseline ? r.baseline_key : "";
  t.column("quantity", core::Align::kLeft).column("tprobe").column("tolerance").column(base_head);
  auto b = [&](double LogitsError::*field) {
    return r.baseline ? core::format_sci((*r.baseline).*field) : std::string();
  };
  t.row({"attention (sliding)", r.attn_sliding, "", ""});
  t.row({"attention (full)", r.attn_full, "", ""});
  t.row({"moe dispatch", r.moe, "", ""});
  t.row({"max |Δ logit|", core::format_sci(r.max_abs_error), "", b(&LogitsError::max_abs_error)});
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
  if (!r.row_lengths.empty())
    t.note(padding_text(r) +
           fmt::format("; logits compared at the {} real positions", r.positions_compared));
  t.note("verdict rule: " + rule_text(r.verdict_rule));
  t.note(r.within_tolerance ? "within tolerance" : "OUTSIDE tolerance");
  return t;
}

core::Table parity_module_table(const BackwardParity& b) {
  core::Table t("relative L2 error of each LoRA gradient, per module");
  const bool base = !b.baseline_suffix.empty();
  t.column("module", core::Align::kLeft).column("lora_A").column("lora_B");
  if (base) t.column("HF lora_A").column("HF lora_B");
  for (const GradModuleError& m : b.modules) {
    std::vector<std::string> row{m.module, sci(m.a_rel_l2), sci(m.b_rel_l2)};
    if (base) {
      row.push_back(sci(m.a_baseline));
      row.push_back(sci(m.b_baseline));
    }
    t.row(row);
  }
  return t;
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

namespace {
using core::axis_number;
using core::find_path;
using core::Json;
using core::number_at;
using core::pct;
using core::string_at;

}  // namespace

void parity_report_section(core::SectionBuilder& c) {
  const Json& r = c.results();
  const bool ok = find_path(r, "within_tolerance") && *find_path(r, "within_tolerance") == true;
  c.fact("relative L2 error",
         axis_number(number_at(r, "rel_l2_error").value_or(NAN)) + " (tolerance " +
             axis_number(number_at(r, "tolerance_rel_l2").value_or(NAN)) +
             "): " + (ok ? "within" : "OUTSIDE"),
         {"rel_l2_error", "tolerance_rel_l2"}, !ok);
  c.fact("max abs error", axis_number(number_at(r, "max_abs_error").value_or(NAN)),
         "max_abs_error");
  c.fact("argmax agreement", pct(number_at(r, "argmax_agreement_ratio")), "argmax_agreement_ratio");
  c.fact("dtype / attention",
         string_at(r, "dtype") + " / sliding " + string_at(r, "attn_sliding") + ", full " +
             string_at(r, "attn_full"),
         {"dtype", "attn_sliding", "attn_full"});
  if (auto l = number_at(r, "loss_abs_diff"))
    c.fact("loss difference", axis_number(*l), "loss_abs_diff");
}
}  // namespace tprobe::model
