// JSON and table views of a parity result: no libtorch here, so they compile fast.
#include "tprobe/runs/parity_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::runs {

using engine::BackwardParity;
using engine::GradModuleError;
using engine::GradTensorError;
using engine::LogitsError;
using engine::ParityOptions;
using engine::ParityResult;
using engine::kBf16RelativeFactor;

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

// ---- reading the results back ----

namespace {

namespace jr = core::json_read;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The spellings of ParityOptions::dtype and of VerdictRule::rule (parity_request.hpp).
const std::vector<std::string> kDtypes = {"fp32", "bf16"};
const std::vector<std::string> kVerdictRules = {"fixed_fp32", "relative_to_hf_bf16",
                                                "fixed_bf16_fallback"};

// A measured error, norm or loss: NaN when a side blew up, inf for a relative error against a
// zero reference. JSON has neither and the file holds null, read as NaN (which one it was is
// lost); a document still in memory holds the double itself.
double measured(const core::Json& obj, const char* key, const std::string& where) {
  const core::Json& v = jr::field(obj, key, where);
  if (v.is_null()) return kNaN;
  if (v.is_number_float() && !std::isfinite(v.get<double>())) return v.get<double>();
  return jr::number(obj, key, where);
}

// The same, written with json_or_null: null is none (in a file, a non-finite value is too).
std::optional<double> nullable_measured(const core::Json& obj, const char* key,
                                        const std::string& where) {
  if (jr::field(obj, key, where).is_null()) return std::nullopt;
  return measured(obj, key, where);
}

double seconds(const core::Json& obj, const char* key, const std::string& where) {
  const double s = jr::number(obj, key, where);
  if (s < 0) fail("{}: field '{}' must be a duration in seconds >= 0, got {}", where, key, s);
  return s;
}

double ratio(const core::Json& obj, const char* key, const std::string& where) {
  const double r = jr::number(obj, key, where);
  if (r < 0 || r > 1) fail("{}: field '{}' must be a ratio in 0..1, got {}", where, key, r);
  return r;
}

LogitsError logits_error_from_json(const core::Json& j, const std::string& where) {
  LogitsError e;
  e.max_abs_error = measured(j, "max_abs_error", where);
  e.rel_l2_error = measured(j, "rel_l2_error", where);
  e.position_rel_l2_median = measured(j, "position_rel_l2_median", where);
  e.position_rel_l2_p99 = measured(j, "position_rel_l2_p99", where);
  e.argmax_agreement_ratio = ratio(j, "argmax_agreement_ratio", where);
  return e;
}

BackwardParity backward_from_json(const core::Json& j, const std::string& where) {
  BackwardParity b;
  b.gradient_checkpointing = jr::boolean(j, "gradient_checkpointing", where);
  b.input_grads = jr::boolean(j, "input_grads", where);
  b.reference_prefix = jr::string(j, "reference_prefix", where);
  b.loss = measured(j, "loss", where);
  // The reference's losses are refused unless finite (read_scalar), so their difference is too.
  b.reference_loss = jr::number(j, "reference_loss", where);
  b.loss_abs_diff = measured(j, "loss_abs_diff", where);
  b.baseline_loss_abs_diff = jr::nullable_number(j, "baseline_loss_abs_diff", where);
  b.loss_requires_grad = jr::boolean(j, "loss_requires_grad", where);
  const int64_t lora_tensors = jr::integer(j, "lora_tensors", where, 0);
  b.global_rel_l2 = measured(j, "global_rel_l2", where);
  b.worst_module = jr::string(j, "worst_module", where);
  b.worst_module_rel_l2 = measured(j, "worst_module_rel_l2", where);
  b.worst_tensor = jr::string(j, "worst_tensor", where);
  b.worst_tensor_rel_l2 = measured(j, "worst_tensor_rel_l2", where);
  b.baseline_suffix = jr::nullable_string(j, "baseline_suffix", where).value_or("");
  b.baseline_global_rel_l2 = nullable_measured(j, "baseline_global_rel_l2", where);
  b.baseline_worst_module_rel_l2 = nullable_measured(j, "baseline_worst_module_rel_l2", where);
  b.verdict.rule = kVerdictRules[jr::choice(j, "verdict_rule", where, kVerdictRules)];
  b.verdict.tolerance = jr::number(j, "tolerance_global_rel_l2", where);
  // Twice HF's worst module, which may be inf (HF's gradient against a zero reference).
  b.worst_module_tolerance = nullable_measured(j, "tolerance_worst_module_rel_l2", where);
  b.worst_tensor_tolerance = jr::nullable_number(j, "tolerance_tensor_rel_l2", where);
  b.zero_one_side = jr::strings(j, "zero_one_side", where);
  b.zero_both = jr::strings(j, "zero_both_sides", where);
  b.within_tolerance = jr::boolean(j, "within_tolerance", where);
  b.forward_backward_s = seconds(j, "forward_backward_s", where);
  const core::Json& modules = jr::array(j, "modules", where);
  for (std::size_t i = 0; i < modules.size(); ++i) {
    const core::Json& m = modules[i];
    const std::string mw = jr::at(where, "modules", i);
    GradModuleError e;
    e.module = jr::string(m, "module", mw);
    e.a_rel_l2 = measured(m, "lora_a_rel_l2", mw);
    e.b_rel_l2 = measured(m, "lora_b_rel_l2", mw);
    e.a_baseline = nullable_measured(m, "baseline_lora_a_rel_l2", mw);
    e.b_baseline = nullable_measured(m, "baseline_lora_b_rel_l2", mw);
    b.modules.push_back(std::move(e));
  }
  const core::Json& tensors = jr::array(j, "tensors", where);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const core::Json& t = tensors[i];
    const std::string tw = jr::at(where, "tensors", i);
    GradTensorError e;
    e.name = jr::string(t, "name", tw);
    e.in_tprobe = jr::boolean(t, "in_tprobe", tw);
    // Reference gradients are not checked finite as the reference logits are.
    e.reference_norm = measured(t, "reference_norm", tw);
    e.tprobe_norm = measured(t, "tprobe_norm", tw);
    e.rel_l2_error = measured(t, "rel_l2_error", tw);
    e.baseline_rel_l2 = nullable_measured(t, "baseline_rel_l2", tw);
    e.zero_tprobe = jr::boolean(t, "zero_tprobe", tw);
    e.zero_reference = jr::boolean(t, "zero_reference", tw);
    b.tensors.push_back(std::move(e));
  }
  // lora_tensors is the count, written for readers; it must agree with the list.
  if (static_cast<std::size_t>(lora_tensors) != b.tensors.size()) {
    fail("{}: field 'lora_tensors' is {}, but 'tensors' holds {}", where, lora_tensors,
         b.tensors.size());
  }
  return b;
}

}  // namespace

ParityEvidence parity_evidence_from_json(const core::Json& j, const std::string& where) {
  ParityEvidence e;
  ParityResult& r = e.result;
  ParityOptions& o = e.options;
  o.backward = jr::choice(j, "mode", where, {"forward", "backward"}) == 1;
  r.batch = jr::integer(j, "batch", where, 1);
  r.seq = jr::integer(j, "seq", where, 1);
  r.vocab = jr::integer(j, "vocab", where, 1);
  r.text_prefix = jr::string(j, "text_prefix", where);
  r.tensors_loaded = jr::integer(j, "tensors_loaded", where, 0);
  o.dtype = kDtypes[jr::choice(j, "dtype", where, kDtypes)];
  o.adapter_dir = jr::nullable_string(j, "adapter", where).value_or("");
  r.attn_sliding = jr::string(j, "attn_sliding", where);
  r.attn_full = jr::string(j, "attn_full", where);
  r.moe = jr::string(j, "moe_dispatch", where);
  if (!jr::field(j, "row_lengths", where).is_null())
    r.row_lengths = jr::integers(j, "row_lengths", where, 1, r.seq);
  // The logits fields: all null when the gradients were compared instead.
  const std::optional<int64_t> positions = jr::nullable_integer(j, "positions_compared", where, 0);
  r.logits_compared = positions.has_value();
  if (r.logits_compared) {
    r.positions_compared = *positions;
    r.max_abs_error = r.error.max_abs_error = measured(j, "max_abs_error", where);
    r.rel_l2_error = r.error.rel_l2_error = measured(j, "rel_l2_error", where);
    r.argmax_agreement_ratio = r.error.argmax_agreement_ratio =
        ratio(j, "argmax_agreement_ratio", where);
    r.error.position_rel_l2_median = measured(j, "position_rel_l2_median", where);
    r.error.position_rel_l2_p99 = measured(j, "position_rel_l2_p99", where);
    r.forward_s = seconds(j, "forward_s", where);
    r.loss_forward_s = seconds(j, "loss_forward_s", where);
  } else {
    for (const char* key : {"max_abs_error", "rel_l2_error", "argmax_agreement_ratio",
                            "position_rel_l2_median", "position_rel_l2_p99", "forward_s",
                            "loss_forward_s"}) {
      if (!jr::field(j, key, where).is_null())
        fail("{}: field '{}' must be null, as 'positions_compared' is", where, key);
    }
  }
  if (!jr::field(j, "baseline", where).is_null()) {
    const core::Json& base = jr::object(j, "baseline", where);
    const std::string bw = where + " baseline";
    r.baseline_key = jr::string(base, "key", bw);
    r.baseline = logits_error_from_json(base, bw);
  }
  r.loss = measured(j, "loss", where);
  r.reference_loss = jr::nullable_number(j, "reference_loss", where);
  r.loss_abs_diff = nullable_measured(j, "loss_abs_diff", where);
  // run_parity sets it with every reference loss (the table prints it then): null is a NaN loss.
  if (r.reference_loss && !r.loss_abs_diff) r.loss_abs_diff = kNaN;
  r.verdict_rule = kVerdictRules[jr::choice(j, "verdict_rule", where, kVerdictRules)];
  r.tolerance_rel_l2 = jr::number(j, "tolerance_rel_l2", where);
  r.within_tolerance = jr::boolean(j, "within_tolerance", where);
  if (!jr::field(j, "backward", where).is_null()) {
    r.backward = backward_from_json(jr::object(j, "backward", where), where + " backward");
    // The backward block records the two options run_parity copied into it.
    o.gradient_checkpointing = r.backward->gradient_checkpointing;
    o.input_grads = r.backward->input_grads;
  }
  return e;
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
}  // namespace tprobe::runs
