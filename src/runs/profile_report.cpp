// JSON and table views of a profile run (no libtorch).
// Size: profile's writer, reader, tables and report section; the kernel trace's fields move to
// core/evidence next (issue 47), and with them trace_json and trace_from_json.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/units.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/evidence/fields.hpp"
#include "tprobe/core/evidence/kernel_trace.hpp"
#include "tprobe/core/evidence/operator_inputs.hpp"
#include "tprobe/core/evidence/step_memory.hpp"
#include "tprobe/core/base/median.hpp"
#include "tprobe/core/cost/levers.hpp"
#include "tprobe/core/cost/scaling_fit_report.hpp"
#include "tprobe/core/report/svg_chart.hpp"
#include "tprobe/core/trace/stats/kernel_table_report.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"
#include "tprobe/core/trace/attribute/trace_parts.hpp"
#include "tprobe/core/cost/step_shares.hpp"
#include "tprobe/runs/profile_analysis.hpp"
#include "tprobe/runs/profile_report.hpp"
#include "tprobe/runs/step_report.hpp"
#include "tprobe/engine/profile_request.hpp"

namespace tprobe::runs {

using engine::AttentionDelta;
using engine::PointCost;
using engine::PointOutcome;
using engine::PointResult;
using engine::PointTrace;
using engine::ProfileReport;
using engine::ProfileRequest;
using engine::StepPoint;
using engine::StepReport;
using engine::StepSpec;

namespace {

core::Json trace_json(const PointTrace& t, bool supported) {
  if (!supported) return nullptr;
  core::Json j;
  j["captured"] = t.captured;
  j["records"] = t.records;
  j["kernels"] = t.kernels;
  j["dropped_records"] = t.dropped_records;
  j["attribution"] = {{"untagged_records", t.counts.untagged},
                      {"untagged_no_context_records", t.counts.untagged_no_context},
                      {"untagged_unlinked_node_records", t.counts.untagged_unlinked},
                      {"linked_records", t.counts.linked}};
  j["kernel_sum_s"] = t.kernel_sum_s;
  j["span_s"] = t.span_s;
  const core::Json b = core::to_json(t.breakdown);
  j["untagged_kernel_s"] = b["untagged_kernel_s"];
  j["untagged_kernel_share_ratio"] = b["untagged_kernel_share_ratio"];
  j.update(core::evidence::to_json(core::phase_part_cells(t.breakdown)));  // the cells, by part and layer
  j["attention_share_ratio"] = core::json_or_null(t.attention_share);
  j["attention_core_share_ratio"] = core::json_or_null(t.attention_core_share);
  j["attention_deltas"] = core::Json::array();
  for (const auto& d : t.attention_deltas) {
    j["attention_deltas"].push_back({{"kernel", d.kernel},
                                     {"side", d.in_core ? "attention_core, not named attention"
                                                        : "named attention, outside attention_core"},
                                     {"kernels", d.kernels},
                                     {"kernel_s", static_cast<double>(d.kernel_ns) * 1e-9}});
  }
  j[core::kKernelTableKey] = t.table ? core::to_json(*t.table) : core::Json(nullptr);
  j["problems"] = t.problems;
  return j;
}

std::string point_name(const PointResult& p) {
  return fmt::format("{}x{}{}", p.point.batch, p.point.width, p.point.padded() ? " padded" : "");
}

int64_t phase_ns(const core::StepBreakdown& b, const std::string& phase) {
  int64_t ns = 0;
  for (const auto& r : b.rows) {
    if (r.phase == phase) ns += r.kernel_ns;
  }
  return ns;
}

std::string share_of(int64_t ns, int64_t of) {
  return of > 0 ? core::format_percent(static_cast<double>(ns) / static_cast<double>(of))
                : std::string("-");
}

// The phase × part matrix of one traced point (core's, shared with `kernels`): rows (layer kind,
// part), columns the phases, each cell the kernel time, the last column its share of the step's
// device span.
core::Table phase_part_matrix(const PointResult& p, const PointTrace& t) {
  core::Table m = core::phase_part_matrix(
      t.breakdown,
      fmt::format("where the step's device time went, {} (traced step; kernel time and share of "
                  "the step's device span {})",
                  point_name(p), core::format_seconds(t.span_s)),
      {"forward", "loss", "recompute", "backward", "untagged"}, t.breakdown.span_ns);
  m.note("backward rows: each kernel of autograd's backward takes the part and layer of the "
         "forward (or recompute) operation it differentiates, through autograd's sequence numbers "
         "(docs/profile.md, \"Attribution\"); recompute: the checkpointed layers' forward run "
         "again inside the backward; untagged: launched outside every scope and node, or in a "
         "backward node whose forward op was not recorded");
  m.note("kernel times add up over streams; the share of span can pass 100 % where kernels "
         "overlap, and falls short of it by the device's idle time");
  return m;
}

const PointResult* first_ok(const StepReport& r) {
  for (const auto& p : r.points) {
    if (p.outcome == PointOutcome::kOk) return &p;
  }
  return nullptr;
}

}  // namespace

core::Json to_json(const ProfileReport& rep, const ProfileRequest& req) {
  core::Json out = to_json(rep.steps);  // points[] (scaling-fit's input) and padded_points[]
  out["points"] = core::Json::array();
  out["padded_points"] = core::Json::array();
  for (size_t i = 0; i < rep.steps.points.size(); ++i) {
    const PointResult& p = rep.steps.points[i];
    core::Json j = point_to_json(p);
    j["intended_flops"] = rep.costs[i].intended_flops;
    j["performed_flops"] = rep.costs[i].performed_flops;
    j["intended_mfu_ratio"] = core::json_or_null(rep.costs[i].intended_mfu);
    j["performed_mfu_ratio"] = core::json_or_null(rep.costs[i].performed_mfu);
    j["kernel_trace"] = trace_json(rep.traces[i], rep.kernel_table_supported);
    out[p.point.padded() ? "padded_points" : "points"].push_back(std::move(j));
  }
  out["peak"] = {{"tflops", core::json_or_null(rep.peak_tflops)}, {"source", rep.peak_source}};
  out["flops_attention_path"] = core::to_string(rep.flops_path);
  out["scaling_fit"] = rep.fit ? core::to_json(*rep.fit) : core::Json(nullptr);
  out["scaling_fit_note"] = rep.fit_note.empty() ? core::Json(nullptr) : core::Json(rep.fit_note);
  out["sliding_attention_dense"] = rep.sliding_dense;
  out["share_check"] = rep.share_check ? core::to_json(*rep.share_check) : core::Json(nullptr);
  out["share_check_note"] =
      rep.share_check_note.empty() ? core::Json(nullptr) : core::Json(rep.share_check_note);
  // results.kernel_table: the kernels table of one traced point (--table-width, default the
  // widest), in the shape `tprobe kernels` writes (docs/kernels.md), so kernels can re-read it.
  if (rep.table_point) {
    const PointResult& tp = rep.steps.points[*rep.table_point];
    out[core::kKernelTableKey] = core::to_json(*rep.traces[*rep.table_point].table);
    out["kernel_table_point"] = {{"batch", tp.point.batch}, {"width", tp.point.width}};
  } else {
    out[core::kKernelTableKey] = nullptr;
    out["kernel_table_point"] = nullptr;
  }
  out["kernel_trace_status"] = {
      {"supported", rep.kernel_table_supported},
      {"reason",
       rep.kernel_table_reason.empty() ? core::Json(nullptr) : core::Json(rep.kernel_table_reason)},
      {"source", rep.trace_source.empty() ? core::Json(nullptr) : core::Json(rep.trace_source)},
      {"raw_trace_path",
       req.raw_trace_path.empty() ? core::Json(nullptr) : core::Json(req.raw_trace_path)}};
  out["memory_status"] = {
      {"memory_step", req.spec.record_memory},
      {"raw_memory_path",
       req.raw_memory_path.empty() ? core::Json(nullptr) : core::Json(req.raw_memory_path)}};
  const StepSpec& s = req.spec;
  const PointResult* ok = first_ok(rep.steps);
  core::Json prov;
  const core::StepConfig& asked = s.config;
  const core::StepConfig& ran = rep.config;  // the defaults left open resolved
  prov["config_requested"] = core::to_json(asked);
  prov["config"] = core::to_json(ran);
  prov["attn_requested"] = asked.attn ? core::Json(to_string(*asked.attn)) : core::Json(nullptr);
  prov["attn_path"] = ran.attn ? core::Json(to_string(*ran.attn)) : core::Json(nullptr);
  prov["attn_resolved"] = {{"sliding_attention", ok ? core::Json(ok->attn_sliding) : nullptr},
                           {"full_attention", ok ? core::Json(ok->attn_full) : nullptr}};
  const std::string moe_ran =
      ok && !ok->moe.empty() ? ok->moe : ran.moe ? std::string(to_string(*ran.moe)) : "";
  prov["moe_requested"] = asked.moe ? core::Json(to_string(*asked.moe)) : core::Json(nullptr);
  prov["moe_dispatch"] = moe_ran;
  const bool checkpointed = asked.checkpointing != core::Checkpointing::kOff;
  prov["gradient_checkpointing"] = checkpointed;
  prov["checkpointing_requested"] = to_string(asked.checkpointing);
  prov["checkpointing_resolved"] =
      checkpointed ? "reentrant (per-layer recompute in the checkpoint's backward)" : "off";
  prov["input_requires_grad"] = s.input_requires_grad;
  prov["ce_mode"] = to_string(asked.ce);
  prov["attention_mask"] = to_string(asked.attention_mask);
  prov["ce_chunk"] =
      asked.ce != core::CeForm::kNaive ? core::Json(s.ce_chunk) : core::Json(nullptr);
  prov["rms_norm"] = to_string(asked.norm);
  prov["lora"] = {{"targets", s.lora_targets},
                  {"rank", s.lora_rank},
                  {"alpha", s.lora_alpha},
                  {"dtype", to_string(asked.lora_dtype)}};
  prov["dtype"] = s.dtype;
  prov["seed"] = s.seed;
  prov["warmup"] = s.warmup;
  prov["repeats"] = s.repeats;
  prov["config_digest"] = rep.steps.config_digest;
  out["provenance"] = std::move(prov);
  // The faithful baseline (core/step/knobs.hpp): which of this run's knobs differ from what a
  // default transformers + PEFT run of the same shapes computes — sdpa as HF names it, and the
  // default experts implementation as it resolved here (transformers' grouped_mm where it runs).
  core::StepConfig ran_here = ran;
  ran_here.batch = s.points.empty() ? 0 : s.points.front().batch;
  core::StepConfig base = core::hf_peft_baseline(ran_here.batch);
  base.attn = core::AttentionPath::kSdpa;
  base.moe = !asked.moe ? ran.moe
                        : std::optional<core::MoeDispatch>(s.device == "cuda"
                                                               ? core::MoeDispatch::kHfGroupedMm
                                                               : core::MoeDispatch::kLoop);
  const std::string differs = core::config_difference(ran_here, base);
  out["baseline"] = {{"reproduces", core::hf_peft_baseline_name()},
                     {"knobs", core::to_json(base)},
                     {"ran", core::to_json(ran_here)},
                     {"at_baseline", differs.empty()},
                     {"differs", differs}};
  return out;
}

namespace {

namespace jr = core::json_read;

int64_t ns_of(double seconds) { return std::llround(seconds * 1e9); }

PointTrace trace_from_json(const core::Json& j, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object or null", where);
  PointTrace t;
  t.captured = jr::boolean(j, "captured", where);
  t.records = jr::integer(j, "records", where, 0);
  t.kernels = jr::integer(j, "kernels", where, 0);
  t.dropped_records = jr::integer(j, "dropped_records", where, 0);
  const std::string aw = where + ".attribution";
  const core::Json& a = jr::object(j, "attribution", where);
  t.counts.records = t.records;
  t.counts.untagged = jr::integer(a, "untagged_records", aw, 0, t.records);
  t.counts.untagged_no_context = jr::integer(a, "untagged_no_context_records", aw, 0, t.records);
  t.counts.untagged_unlinked = jr::integer(a, "untagged_unlinked_node_records", aw, 0, t.records);
  t.counts.linked = jr::integer(a, "linked_records", aw, 0, t.records);
  t.kernel_sum_s = jr::number(j, "kernel_sum_s", where);
  t.span_s = jr::number(j, "span_s", where);
  if (t.kernel_sum_s < 0 || t.span_s < 0) fail("{}: a negative kernel_sum_s or span_s", where);
  // The phase × part cells, typed (core/evidence's PartCells), are the step breakdown's rows and
  // layers; the copies' total is not written, so it is their rows' sum (as break_down makes it).
  // Null cells read as none here and are refused by the rewrite check below.
  core::PartCells cells = core::evidence::from_json<core::PartCells>(j, where);
  core::StepBreakdown& b = t.breakdown;
  b.rows = std::move(cells.by_phase_part).value_or(std::vector<core::PartRow>{});
  b.layers = std::move(cells.by_layer).value_or(std::vector<core::LayerRow>{});
  b.kernels = t.kernels;
  b.kernel_ns = ns_of(t.kernel_sum_s);
  b.span_ns = ns_of(t.span_s);
  const double untagged_s = jr::number(j, "untagged_kernel_s", where);
  if (untagged_s < 0) fail("{}: a negative untagged_kernel_s", where);
  b.untagged_kernel_ns = ns_of(untagged_s);
  for (const core::PartRow& r : b.rows) b.memcpy_memset_ns += r.memcpy_memset_ns;
  t.attention_share = jr::nullable_number(j, "attention_share_ratio", where);
  t.attention_core_share = jr::nullable_number(j, "attention_core_share_ratio", where);
  const core::Json& deltas = jr::array(j, "attention_deltas", where);
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    const std::string dw = jr::at(where, "attention_deltas", i);
    AttentionDelta d;
    d.kernel = jr::string(deltas[i], "kernel", dw);
    d.in_core = jr::choice(deltas[i], "side", dw,
                           {"attention_core, not named attention",
                            "named attention, outside attention_core"}) == 0;
    d.kernels = jr::integer(deltas[i], "kernels", dw, 0);
    const double s = jr::number(deltas[i], "kernel_s", dw);
    if (s < 0) fail("{}.kernel_s: negative", dw);
    d.kernel_ns = ns_of(s);
    t.attention_deltas.push_back(std::move(d));
  }
  const core::Json& table = jr::field(j, core::kKernelTableKey, where);
  if (!table.is_null())
    t.table = core::kernel_table_from_json(table, where + ".kernel_table");
  t.problems = jr::strings(j, "problems", where);
  jr::check_rewritten(j, trace_json(t, true), where);
  return t;
}

std::optional<std::string> note_from_json(const core::Json& j, const char* key,
                                          const std::string& where) {
  const std::optional<std::string> v = jr::nullable_string(j, key, where);
  if (v && v->empty()) fail("{}.{}: empty (written null when there is none)", where, key);
  return v;
}

}  // namespace

ProfileEvidence profile_evidence_from_json(const core::Json& results, const std::string& where) {
  if (!results.is_object()) fail("{} must be an object", where);
  ProfileEvidence out;
  ProfileReport& rep = out.report;
  ProfileRequest& req = out.request;
  rep.steps = step_report_from_json(results, where);
  // Each point's costs and trace, in the order step_report_from_json read the points.
  for (const char* key : {"points", "padded_points"}) {
    const core::Json& pts = jr::array(results, key, where);
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const std::string w = jr::at(where, key, i);
      PointCost c;
      c.intended_flops = jr::number(pts[i], "intended_flops", w);
      c.performed_flops = jr::number(pts[i], "performed_flops", w);
      if (c.intended_flops < 0 || c.performed_flops < 0) fail("{}: negative FLOPs", w);
      c.intended_mfu = jr::nullable_number(pts[i], "intended_mfu_ratio", w);
      c.performed_mfu = jr::nullable_number(pts[i], "performed_mfu_ratio", w);
      rep.costs.push_back(c);
      const core::Json& kt = jr::field(pts[i], "kernel_trace", w);
      rep.traces.push_back(kt.is_null() ? PointTrace{} : trace_from_json(kt, w + ".kernel_trace"));
    }
  }
  const std::string sw = where + ".kernel_trace_status";
  const core::Json& status = jr::object(results, "kernel_trace_status", where);
  rep.kernel_table_supported = jr::boolean(status, "supported", sw);
  rep.kernel_table_reason = note_from_json(status, "reason", sw).value_or("");
  rep.trace_source = note_from_json(status, "source", sw).value_or("");
  req.raw_trace_path = note_from_json(status, "raw_trace_path", sw).value_or("");
  for (std::size_t i = 0; i < rep.traces.size(); ++i) {
    const bool written = rep.kernel_table_supported;
    const bool has = rep.traces[i].captured || rep.traces[i].records > 0 ||
                     !rep.traces[i].problems.empty() || rep.traces[i].table;
    if (!written && has) fail("{}: a point has a kernel_trace but the trace is not supported", sw);
  }
  const std::string pw = where + ".peak";
  const core::Json& peak = jr::object(results, "peak", where);
  rep.peak_tflops = jr::nullable_number(peak, "tflops", pw);
  if (rep.peak_tflops && *rep.peak_tflops <= 0) fail("{}.tflops: not positive", pw);
  rep.peak_source = jr::string(peak, "source", pw);
  const std::string path = jr::string(results, "flops_attention_path", where);
  const std::optional<core::AttentionPath> flops_path = core::parse_attention_path(path);
  if (!flops_path) fail("{}.flops_attention_path: unknown path '{}'", where, path);
  rep.flops_path = *flops_path;
  const core::Json& fit = jr::field(results, "scaling_fit", where);
  if (!fit.is_null()) rep.fit = core::scaling_fit_report_from_json(fit, where + ".scaling_fit");
  rep.fit_note = note_from_json(results, "scaling_fit_note", where).value_or("");
  rep.sliding_dense = jr::boolean(results, "sliding_attention_dense", where);
  const core::Json& share = jr::field(results, "share_check", where);
  if (!share.is_null())
    rep.share_check = core::share_check_from_json(share, where + ".share_check");
  rep.share_check_note = note_from_json(results, "share_check_note", where).value_or("");
  // The kernel-table point: an unpadded point at that shape, whose trace holds that table.
  const core::Json& tp = jr::field(results, "kernel_table_point", where);
  if (!tp.is_null()) {
    const std::string tw = where + ".kernel_table_point";
    if (!tp.is_object()) fail("{} must be an object or null", tw);
    const int64_t batch = jr::integer(tp, "batch", tw, 1);
    const int64_t width = jr::integer(tp, "width", tw, 1);
    for (std::size_t i = 0; i < rep.steps.points.size(); ++i) {
      const StepPoint& p = rep.steps.points[i].point;
      if (!p.padded() && p.batch == batch && p.width == width && rep.traces[i].table) {
        rep.table_point = i;
        break;
      }
    }
    if (!rep.table_point)
      fail("{}: no traced unpadded point {}x{} with a kernel table", tw, batch, width);
  }
  // The request as the provenance records it.
  const std::string vw = where + ".provenance";
  const core::Json& prov = jr::object(results, "provenance", where);
  StepSpec& s = req.spec;
  s.config = core::step_config_from_json(jr::object(prov, "config_requested", vw),
                                         vw + ".config_requested");
  rep.config = core::step_config_from_json(jr::object(prov, "config", vw), vw + ".config");
  s.input_requires_grad = jr::boolean(prov, "input_requires_grad", vw);
  const std::optional<int64_t> chunk = jr::nullable_integer(prov, "ce_chunk", vw, 1);
  if (chunk) s.ce_chunk = *chunk;
  const std::string lw = vw + ".lora";
  const core::Json& lora = jr::object(prov, "lora", vw);
  s.lora_targets = jr::strings(lora, "targets", lw);
  s.lora_rank = jr::integer(lora, "rank", lw, 0);
  s.lora_alpha = jr::number(lora, "alpha", lw);
  s.dtype = jr::string(prov, "dtype", vw);
  s.seed = jr::unsigned_integer(prov, "seed", vw);
  s.warmup = jr::integer(prov, "warmup", vw, 0);
  s.repeats = jr::integer(prov, "repeats", vw, 1);
  // The device the sweep ran on: "cpu" or "cuda:N" as the steps record it.
  const std::string& device = rep.steps.device_resolved;
  s.device = device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
  s.model = rep.steps.model;
  for (const PointResult& p : rep.steps.points) s.points.push_back(p.point);
  const std::string mw = where + ".memory_status";
  const core::Json& memory = jr::object(results, "memory_status", where);
  s.record_memory = jr::boolean(memory, "memory_step", mw);
  req.raw_memory_path = note_from_json(memory, "raw_memory_path", mw).value_or("");
  req.trace = rep.kernel_table_supported || !rep.kernel_table_reason.empty();
  // Written twice or derived: the provenance's per-knob words, the resolved attention, the
  // baseline and the embedded kernel table, checked by writing them again.
  const core::Json again = runs::to_json(rep, req);
  for (const char* key : {"provenance", "baseline", core::kKernelTableKey, "kernel_table_point"})
    jr::check_rewritten(jr::field(results, key, where), again[key], where + "." + key);
  return out;
}

// Size: the printed tables one after another.
std::vector<core::Table> profile_tables(const ProfileReport& rep) {
  std::vector<core::Table> out;
  out.push_back(timing_table(rep.steps));
  for (auto& t : field_tables(rep.steps)) out.push_back(std::move(t));
  for (auto& t : memory_tables(rep.steps)) out.push_back(std::move(t));

  core::Table cost(fmt::format(
      "FLOPs and MFU (attention counted as {}; peak {})", core::to_string(rep.flops_path),
      rep.peak_tflops ? fmt::format("{:.0f} TFLOP/s", *rep.peak_tflops) : std::string("none")));
  cost.column("batch").column("width").column("real tokens").column("intended TFLOP");
  cost.column("performed TFLOP").column("intended MFU").column("performed MFU");
  for (size_t i = 0; i < rep.steps.points.size(); ++i) {
    const auto& p = rep.steps.points[i];
    const auto& c = rep.costs[i];
    auto pct = [](const std::optional<double>& v) {
      return v ? core::format_percent(*v) : std::string("-");
    };
    cost.row({std::to_string(p.point.batch), core::format_count(p.point.width),
              core::format_count(p.point.real_tokens()),
              fmt::format("{:.1f}", c.intended_flops / 1e12),
              fmt::format("{:.1f}", c.performed_flops / 1e12), pct(c.intended_mfu),
              pct(c.performed_mfu)});
  }
  cost.note("peak: " + rep.peak_source);
  out.push_back(std::move(cost));

  // The experts' load of one point (the kernel table's, else the widest measured) per MoE layer,
  // beside the layer's experts part time where the point was traced.
  const PointResult* load_point = rep.table_point ? &rep.steps.points[*rep.table_point] : nullptr;
  for (const PointResult& p : rep.steps.points) {
    if (!rep.table_point && !p.expert_load.layers.empty()) load_point = &p;  // the last: widest
  }
  if (load_point && !load_point->expert_load.layers.empty()) {
    const PointResult& p = *load_point;
    core::Table el(fmt::format("experts' load, {} (routing {}{}): tokens per expert, per layer",
                               point_name(p), core::to_string(rep.config.routing),
                               p.point.tokens ? ", the dataset's tokens" : ", random ids"));
    el.column("layer").column("min").column("max").column("max / mean").column("cv");
    el.column("idle experts").column("experts time");
    for (const core::ExpertLoadLayer& e : p.expert_load.layers) {
      const auto [lo, hi] = std::minmax_element(e.tokens.begin(), e.tokens.end());
      el.row({std::to_string(e.layer), core::format_count(e.tokens.empty() ? 0 : *lo),
              core::format_count(e.tokens.empty() ? 0 : *hi), fmt::format("{:.2f}", e.max_over_mean),
              fmt::format("{:.2f}", e.cv), core::format_count(static_cast<int64_t>(e.zero_experts.size())),
              e.experts_kernel_s ? core::format_seconds(*e.experts_kernel_s) : std::string("-")});
    }
    el.note(fmt::format("each layer routes {} (token, choice) pairs; experts time: the layer's "
                        "experts part on the device in the traced step (forward, recompute, "
                        "backward), '-' without a trace",
                        core::format_count(p.expert_load.routed_per_layer)));
    if (p.point.tokens)
      el.note(fmt::format("tokens: {} ({} sampler), sha256 {}", p.point.tokens->dataset,
                          p.point.tokens->sampler, p.point.tokens->sha256));
    out.push_back(std::move(el));
  }

  if (rep.kernel_table_supported) {
    core::Table ph("traced steps: device time by phase, and attention two ways");
    ph.column("point", core::Align::kLeft).column("kernels").column("kernel time");
    ph.column("span").column("forward").column("loss").column("recompute").column("backward");
    ph.column("untagged").column("attention core (parts)").column("attention (kernel names)");
    for (size_t i = 0; i < rep.steps.points.size(); ++i) {
      const auto& p = rep.steps.points[i];
      const auto& t = rep.traces[i];
      if (t.breakdown.kernels == 0) {
        ph.row({point_name(p), "-", t.problems.empty() ? "no records" : t.problems.front()});
        continue;
      }
      const int64_t all = t.breakdown.kernel_ns;
      auto pct = [](const std::optional<double>& v) {
        return v ? core::format_percent(*v) : std::string("-");
      };
      ph.row({point_name(p), core::format_count(t.kernels), core::format_seconds(t.kernel_sum_s),
              core::format_seconds(t.span_s), share_of(phase_ns(t.breakdown, "forward"), all),
              share_of(phase_ns(t.breakdown, "loss"), all),
              share_of(phase_ns(t.breakdown, "recompute"), all),
              share_of(phase_ns(t.breakdown, "backward"), all),
              share_of(t.breakdown.untagged_kernel_ns, all), pct(t.attention_core_share),
              pct(t.attention_share)});
    }
    ph.note("shares of the traced step's summed kernel time; attention core: the attention "
            "math of every layer (the attention_core part, forward, recompute and backward); "
            "attention (kernel names): the kernel table's attention category");
    out.push_back(std::move(ph));
    if (rep.table_point) {
      const auto& p = rep.steps.points[*rep.table_point];
      const auto& t = rep.traces[*rep.table_point];
      out.push_back(phase_part_matrix(p, t));
      if (!t.attention_deltas.empty()) {
        core::Table d(fmt::format(
            "attention core (parts) vs attention (kernel names), {}: the kernels on one side only",
            point_name(p)));
        d.column("kernel", core::Align::kLeft).column("side", core::Align::kLeft);
        d.column("launches").column("kernel time").column("share");
        size_t shown = 0;
        for (const auto& x : t.attention_deltas) {
          if (++shown > 12) break;
          d.row({x.kernel, x.in_core ? "attention core only" : "named attention only",
                 core::format_count(x.kernels),
                 core::format_seconds(static_cast<double>(x.kernel_ns) * 1e-9),
                 share_of(x.kernel_ns, t.breakdown.kernel_ns)});
        }
        if (t.attention_deltas.size() > 12)
          d.note(fmt::format("{} more kernels in the evidence (attention_deltas)",
                             t.attention_deltas.size() - 12));
        out.push_back(std::move(d));
      }
    }
  } else {
    core::Table none("kernel table");
    none.column("status", core::Align::kLeft);
    none.row({"not available: " + rep.kernel_table_reason});
    out.push_back(std::move(none));
  }

  if (rep.table_point) {
    for (auto& t : core::kernel_table_tables(*rep.traces[*rep.table_point].table, 15))
      out.push_back(std::move(t));
  }

  if (rep.fit) {
    for (auto& t : core::scaling_fit_tables(*rep.fit)) out.push_back(std::move(t));
    // domain item 2's two independent methods side by side, like for like (shares of the step)
    if (rep.share_check && rep.share_check->determined) {
      const core::ShareCheck& sc = *rep.share_check;
      core::Table two(
          "quadratic share: the scaling fit vs the parts that grow with w² (shares of the step)");
      two.column("width").column("fit: B*w^2 / t(w)").column("w² parts / step").column("difference");
      two.column("what separates them (measured terms, points of the step)", core::Align::kLeft);
      for (const auto& row : sc.rows) {
        std::string why;
        if (std::fabs(row.difference) > sc.threshold) {
          for (const auto& term : row.terms) {
            if (std::fabs(term.share) < 0.01 || why.size() > 160) continue;
            why += fmt::format("{}{:+.1f} {}", why.empty() ? "" : "; ", 100 * term.share, term.name);
          }
        } else {
          why = fmt::format("within {:.0f} points", 100 * sc.threshold);
        }
        two.row({core::format_count(static_cast<int64_t>(row.width)),
                 core::format_percent(row.fit_quadratic_share),
                 core::format_percent(row.parts_quadratic_share),
                 fmt::format("{:+.1f} pt", 100 * row.difference), why});
      }
      std::string parts;
      for (const auto& q : sc.quadratic_parts) parts += (parts.empty() ? "" : ", ") + q;
      two.note(fmt::format(
          "w² parts on this path ({}): {}; every part, and the remainder (median step - traced "
          "kernel time), is fitted with the step's form at the same widths, so the terms add up to "
          "the difference exactly (evidence: share_check)",
          rep.config.attn ? to_string(*rep.config.attn) : "?", parts.empty() ? "none traced" : parts));
      out.push_back(std::move(two));
    } else {
      core::Table none("quadratic share: the scaling fit vs the parts that grow with w²");
      none.column("status", core::Align::kLeft);
      none.row({rep.share_check_note.empty() ? std::string("not compared") : rep.share_check_note});
      out.push_back(std::move(none));
    }
  } else {
    core::Table none("scaling fit");
    none.column("status", core::Align::kLeft);
    none.row({rep.fit_note});
    out.push_back(std::move(none));
  }
  return out;
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

namespace {

using core::array_at;
using core::axis_number;
using core::BarChart;
using core::ChartSeries;
using core::find_path;
using core::format_seconds;
using core::Json;
using core::median;
using core::number_at;
using core::render_svg;
using core::string_at;
using core::XYChart;

// Profile's attribution (docs/profile.md, "Attribution"): the traced step of one point (the
// kernel table's, else the widest) as a stacked bar per phase split by part, and one stacked bar
// per decoder layer, sliding and full layers named.
int phase_part_series(const std::string& part, const std::string& kind) {
  if (part == "attention_core") return kind == "full" ? 0 : 1;
  if (part == "attention_proj") return 2;
  if (part == "dense_mlp") return 3;
  if (part == "router") return 4;
  if (part == "experts") return 5;
  if (part == "loss_head") return 6;
  if (part == "untagged") return 8;
  return 7;  // embedding, other
}

void phase_part_figures(core::SectionBuilder& c, const ProfileReport& rep) {
  const std::vector<std::string> series = {"attention core (full layers)",
                                           "attention core (sliding layers)",
                                           "attention projections",
                                           "dense MLP",
                                           "router",
                                           "experts",
                                           "loss head",
                                           "embedding and other",
                                           "untagged"};
  if (!rep.kernel_table_supported) return;  // no point has its cells
  // The point drawn: the kernel table's, else the widest; `shown` is its place in results.points
  // (the unpadded points, in sweep order), `index` its place in steps.points and traces.
  const std::optional<int64_t> table_width =
      rep.table_point ? std::optional<int64_t>(rep.steps.points[*rep.table_point].point.width)
                      : std::nullopt;
  std::optional<size_t> index, shown;
  for (size_t i = 0, k = 0; i < rep.steps.points.size(); ++i) {
    const StepPoint& pt = rep.steps.points[i].point;
    if (pt.padded()) continue;
    if (table_width ? pt.width == *table_width
                    : (!index || pt.width > rep.steps.points[*index].point.width)) {
      index = i;
      shown = k;
    }
    ++k;
  }
  if (!index) return;
  const StepPoint& p = rep.steps.points[*index].point;
  const core::PartCells cells = core::phase_part_cells(rep.traces[*index].breakdown);
  const std::string point = fmt::format("{}x{}", p.batch, p.width);
  const std::string base = fmt::format("points[{}].kernel_trace.", *shown);

  BarChart phases;
  phases.title = "Where the traced step's device time went, " + point + ": phase by part";
  phases.series = series;
  phases.stacked = true;
  phases.value_label = "kernel time, seconds";
  for (const char* phase : {"forward", "loss", "recompute", "backward", "untagged"}) {
    std::vector<double> v(series.size(), 0.0);
    double total = 0;
    for (const core::PartRow& row : *cells.by_phase_part) {
      if (row.phase != phase) continue;
      const double t = static_cast<double>(row.kernel_ns) * 1e-9;
      v[static_cast<size_t>(phase_part_series(row.part, row.layer_kind))] += t;
      total += t;
    }
    if (total > 0) phases.items.push_back({phase, v, false, format_seconds(total)});
  }
  if (!phases.items.empty()) {
    c.figure(
        "phase-part", phases.title, render_svg(phases),
        {base + "by_phase_part[].phase", base + "by_phase_part[].part",
         base + "by_phase_part[].layer_kind", base + "by_phase_part[].kernel_s"},
        "Each backward kernel is given the part of the forward (or recompute) operation it "
        "differentiates; recompute is the checkpointed forward run again inside the backward.");
  }
  if (cells.by_layer->empty()) return;
  BarChart per_layer;
  per_layer.title = "Device time per decoder layer, " + point + ": forward, recompute and backward";
  per_layer.series = series;
  per_layer.stacked = true;
  per_layer.value_label = "kernel time, seconds";
  for (const core::LayerRow& l : *cells.by_layer) {
    std::vector<double> v(series.size(), 0.0);
    double total = 0;
    for (const auto& [phase, parts] : l.kernel_ns) {
      for (const auto& [part, ns] : parts) {
        const double t = static_cast<double>(ns) * 1e-9;
        v[static_cast<size_t>(phase_part_series(part, l.layer_kind))] += t;
        total += t;
      }
    }
    per_layer.items.push_back(
        {fmt::format("layer {} {}", l.layer, l.layer_kind), v, false, format_seconds(total)});
  }
  if (!per_layer.items.empty()) {
    c.figure("per-layer", per_layer.title, render_svg(per_layer),
             {base + "by_layer[].layer", base + "by_layer[].layer_kind",
              base + "by_layer[].kernel_s.PHASE.PART"},
             "One bar per layer; full (global) layers carry the head_dim-512 attention.");
  }
}

}  // namespace

namespace {

using core::kGiB;
using engine::ProfileReport;

// The points over widths (results.points[]: the unpadded ones, in sweep order).
std::vector<const PointResult*> unpadded_points(const StepReport& r) {
  std::vector<const PointResult*> out;
  for (const PointResult& p : r.points) {
    if (!p.point.padded()) out.push_back(&p);
  }
  return out;
}

// Step time and peak memory against width, one series per batch; the widths that did not run
// are crosses. The memory figure also draws what fits: each budget as a line, and the width
// edges measured under its cap (points where they fit, crosses where they ran out of memory).
void time_and_memory_figures(core::SectionBuilder& c, const std::vector<const PointResult*>& pts,
                             const MemoryFitReport& mf) {
  std::map<double, ChartSeries> time_by_batch, mem_by_batch;
  std::vector<double> oom;
  bool unmeasured = false;
  for (const PointResult* p : pts) {
    const double b = static_cast<double>(p->point.batch), w = static_cast<double>(p->point.width);
    if (p->outcome != PointOutcome::kOk) {
      oom.push_back(w);
      continue;
    }
    if (!p->step_s.empty()) {
      ChartSeries& s = time_by_batch[b];
      s.label = fmt::format("batch {} (median, bar: min–max)", axis_number(b));
      s.x.push_back(w);
      s.y.push_back(median(p->step_s));
      s.y_low.push_back(*std::min_element(p->step_s.begin(), p->step_s.end()));
      s.y_high.push_back(*std::max_element(p->step_s.begin(), p->step_s.end()));
    }
    unmeasured = unmeasured || !p->memory_measured;
    if (!p->memory_measured) continue;
    ChartSeries& s = mem_by_batch[b];
    s.label = fmt::format("batch {}", axis_number(b));
    s.x.push_back(w);
    s.y.push_back(static_cast<double>(p->peak_allocated_bytes) / kGiB);
  }
  XYChart t;
  t.title = "Step time against width";
  t.x_label = "width (tokens per sequence)";
  t.y_label = "step time (s)";
  t.crosses_label = "not measured (outcome ≠ ok, e.g. OOM)";
  t.crosses_x = oom;
  int color = 0;
  for (auto& [b, s] : time_by_batch) {
    s.color = color++;
    ChartSeries joined = s;
    joined.kind = ChartSeries::Kind::kLine;
    joined.label = "";
    joined.y_low.clear();
    joined.y_high.clear();
    t.series.push_back(joined);
    t.series.push_back(s);
  }
  c.figure("time", t.title, render_svg(t), {"points[].batch/width/outcome/samples_s"},
           "Every timed repeat is in the evidence; the point is the median.");
  if (mem_by_batch.empty()) {
    if (unmeasured)
      c.note("peak memory not measured (results.points[].peak_allocated_bytes is null: tprobe "
             "reads CUDA's caching allocator, and this run had none, e.g. on the CPU): memory "
             "figure not drawn");
    return;
  }
  XYChart m;
  m.title = "Peak memory against width";
  m.x_label = "width (tokens per sequence)";
  m.y_label = "peak memory (GiB)";
  m.crosses_label = "out of memory / failed";
  m.crosses_x = oom;
  color = 0;
  for (auto& [b, s] : mem_by_batch) {
    s.color = color++;
    m.series.push_back(s);
  }
  if (auto cap = number_at(c.document(), "environment.device.memory_bytes"); cap && *cap > 0)
    m.markers.push_back({false, *cap / kGiB, "device memory"});
  if (!mf.budgets.empty()) {
    ChartSeries fit_edges;
    fit_edges.label = "width edge measured under a budget's cap (fits)";
    fit_edges.color = 3;
    for (const MemoryBudget& b : mf.budgets) {
      const double budget = b.gpu_memory_bytes - b.reserve_bytes;
      m.markers.push_back({false, budget / kGiB, fmt::format("budget {:.1f} GiB", budget / kGiB)});
      for (const core::MemoryEdgeCheck& ck : b.checks) {
        if (ck.predicted.axis != "width") continue;
        for (const core::MemoryFitPoint* pt : {&ck.edge, &ck.next}) {
          if (pt->oom) {
            m.crosses_x.push_back(static_cast<double>(pt->width));
          } else {
            fit_edges.x.push_back(static_cast<double>(pt->width));
            fit_edges.y.push_back(static_cast<double>(pt->peak_allocated_bytes) / kGiB);
          }
        }
      }
    }
    if (!fit_edges.x.empty()) m.series.push_back(fit_edges);
    m.crosses_label = "out of memory / failed (sweep, or a budget's edge under its cap)";
  }
  c.figure("memory", m.title, render_svg(m), {"points[].peak_allocated_bytes"},
           "Crosses mark widths that did not fit.");
}

// The memory step of the widest unpadded point that has one (results.points[].memory): its
// timeline stacked by part with the peak marked, and the items of its peak.
void memory_step_figures(core::SectionBuilder& c, const std::vector<const PointResult*>& pts) {
  const PointResult* best = nullptr;
  size_t best_i = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (pts[i]->memory && (!best || pts[i]->point.batch * pts[i]->point.width >
                                        best->point.batch * best->point.width)) {
      best = pts[i];
      best_i = i;
    }
  }
  if (best == nullptr) {
    c.note("no memory step in this evidence (results.points[].memory is null: profile --memory "
           "off, or an older tprobe): memory timeline not drawn");
    return;
  }
  const std::string field = fmt::format("points[{}].memory", best_i);
  const core::StepMemory& m = *best->memory;
  const double peak = static_cast<double>(m.peak_allocated);
  if (m.timeline.empty()) {
    c.absent(field + ".timeline", "memory timeline");
    return;
  }
  // GiB for a GPU step, MiB for the CPU's tiny ones (a figure of 0.00 GiB says nothing).
  const bool gib = peak >= kGiB;
  const double scale = gib ? kGiB : 1024.0 * 1024;
  const char* unit = gib ? "GiB" : "MiB";
  std::vector<double> x;
  std::vector<std::vector<double>> cum(core::kMemorySlots);
  std::vector<double> reserved;
  bool have_reserved = true;
  for (const core::MemorySample& s : m.timeline) {
    x.push_back(static_cast<double>(s.t_ns) / 1e6);
    double run = 0;
    for (size_t k = 0; k < core::kMemorySlots; ++k) {
      run += static_cast<double>(s.by_slot[k]);
      cum[k].push_back(run / scale);
    }
    if (s.reserved >= 0) {
      reserved.push_back(static_cast<double>(s.reserved) / scale);
    } else {
      have_reserved = false;
    }
  }
  const std::string shape = point_name(*best);
  XYChart chart;
  chart.title = "Memory over one " + shape + " step, stacked by part";
  chart.x_label = "time in the memory step (ms)";
  chart.y_label = fmt::format("allocated ({})", unit);
  chart.height = 380;
  for (size_t k = 0; k < core::kMemorySlots; ++k) {
    bool any = false;
    for (size_t i = 0; i < x.size(); ++i) {
      const double prev = k == 0 ? 0.0 : cum[k - 1][i];
      if (cum[k][i] - prev > 1e-9) any = true;
    }
    ChartSeries s;
    s.kind = ChartSeries::Kind::kLine;
    s.fill_below = true;
    s.x = x;
    s.y = cum[k];
    s.color = static_cast<int>(k);
    s.label = any ? core::memory_slot_names()[k] : "";
    chart.series.push_back(std::move(s));
  }
  if (have_reserved) {
    ChartSeries r;
    r.kind = ChartSeries::Kind::kLine;
    r.dashed = true;
    r.x = x;
    r.y = reserved;
    r.color = 9;
    r.label = "reserved (the allocator's cache)";
    chart.series.push_back(std::move(r));
  }
  chart.markers.push_back({true, static_cast<double>(m.peak_t_ns) / 1e6,
                           fmt::format("peak {:.2f} {} ({} {})", peak / scale, unit, m.peak_phase,
                                       m.peak_part)});
  c.figure("memory-timeline", chart.title, render_svg(chart),
           {field + ".timeline", field + ".peak_t_ns", field + ".peak_allocated_bytes"},
           "One more step per point under the allocator's event hook: each block carries the "
           "engine scope or autograd node that allocated it. Resident = alive since before the "
           "step (weights, adapters, inputs, workspace).");
  core::ReportTable t;
  t.id = "memory-items";
  t.title = "Where the " + shape + " peak goes";
  t.header = {"item", unit, "share of the peak", "note"};
  t.fields = {core::SectionBuilder::field_name(field + ".items")};
  for (const core::MemoryItem& it : m.items) {
    const double b = static_cast<double>(it.bytes);
    t.rows.push_back({it.label + (it.in_peak ? "" : " (beside the peak)"),
                      fmt::format("{:.2f}", b / scale),
                      it.in_peak && peak > 0 ? fmt::format("{:.1f} %", 100.0 * b / peak) : "",
                      it.note});
  }
  t.rows.push_back({"peak allocated", fmt::format("{:.2f}", peak / scale), "100 %", ""});
  c.table(std::move(t));
}

// What fits (results.memory_fit, profile --gpu-memory): each budget's predicted edges beside what
// was measured under the allocator cap.
void memory_fit_table(core::SectionBuilder& c, const MemoryFitReport& mf) {
  if (!mf.requested) return;
  core::ReportTable t;
  t.id = "memory-fit";
  t.title = "What fits: predicted edges measured under an allocator cap of each budget";
  t.header = {"budget", "edge", "predicted", "predicted peak", "measured", "step past it",
              "measured", "verdict"};
  t.fields = {core::SectionBuilder::field_name("memory_fit.budgets")};
  if (!mf.fit.ok) {
    t.rows.push_back({"-", "no fit: " + mf.fit.why_not, "", "", "", "", "", ""});
    c.table(std::move(t));
    return;
  }
  auto measured = [&](const core::MemoryFitPoint& p) -> std::string {
    if (p.oom) return "OOM";
    const int64_t b = mf.fit.reserved ? p.peak_reserved_bytes : p.peak_allocated_bytes;
    return fmt::format("{:.2f} GiB", static_cast<double>(b) / kGiB);
  };
  for (const MemoryBudget& b : mf.budgets) {
    const std::string budget = fmt::format("{:.1f} GiB", (b.gpu_memory_bytes - b.reserve_bytes) / kGiB);
    for (const core::MemoryEdgeCheck& ck : b.checks) {
      const core::MemoryEdge& e = ck.predicted;
      const bool by_width = e.axis == "width";
      t.rows.push_back(
          {budget,
           by_width ? fmt::format("largest width at batch {}", e.batch)
                    : fmt::format("largest batch at width {}", e.width),
           std::to_string(by_width ? e.width : e.batch),
           fmt::format("{:.2f} GiB", e.predicted_peak_bytes / kGiB) +
               (e.extrapolated ? " (extrapolated)" : ""),
           measured(ck.edge), std::to_string(by_width ? ck.next.width : ck.next.batch),
           measured(ck.next), ck.verdict});
      t.highlight.push_back(ck.verdict == "over");
    }
  }
  if (!t.rows.empty()) c.table(std::move(t));  // with the edge search on, none: its table follows
  c.note(fmt::format("Fitted peak: {}. {}", mf.fit.reserved ? "reserved" : "allocated",
                     mf.fit.c2_test.verdict));
}

// The edges searched by running them (results.memory_fit.budgets[].searches, issue 44): per budget
// the probes on a batch x width grid, fits and OOM apart, the measured edges and the model's
// predictions beside them; then a table of each edge.
void edge_search_figures(core::SectionBuilder& c, const MemoryFitReport& mf) {
  core::ReportTable t;
  t.id = "edge-search";
  t.title = "What fits, measured: each edge searched under its budget's allocator cap";
  t.header = {"budget", "edge", "model's prediction", "measured (fits)", "past it (OOM)",
              "model error (steps)", "probes", "status"};
  t.fields = {core::SectionBuilder::field_name("memory_fit.budgets[].searches")};
  for (size_t bi = 0; bi < mf.budgets.size(); ++bi) {
    const MemoryBudget& b = mf.budgets[bi];
    if (b.searches.empty()) continue;
    const std::string name = fmt::format("{:.1f} GiB", (b.gpu_memory_bytes - b.reserve_bytes) / kGiB);
    XYChart chart;
    chart.title = fmt::format("Edge search under a {} budget: probes by batch and width", name);
    const std::string sources =
        fmt::format("The budget: a {:.1f} GiB card ({}) less a {:.1f} GiB reserve ({}).",
                    b.gpu_memory_bytes / kGiB, b.gpu_memory_source, b.reserve_bytes / kGiB,
                    b.reserve_source);
    chart.x_label = "width (tokens per sequence)";
    chart.y_label = "batch (sequences)";
    ChartSeries fits{"probe fits", ChartSeries::Kind::kPoints, {}, {}, {}, {}, false, 2, false};
    ChartSeries oom{"probe OOM", ChartSeries::Kind::kPoints, {}, {}, {}, {}, false, 3, false};
    // A search may hold any number of probes: the grid draws the first 200 of each.
    constexpr size_t kMaxDrawn = 200;
    for (const core::EdgeSearchResult& s : b.searches) {
      const bool by_width = s.request.axis == "width";
      for (size_t i = 0; i < s.probes.size() && i < kMaxDrawn; ++i) {
        ChartSeries& into = s.probes[i].outcome == "fits" ? fits : oom;
        into.x.push_back(static_cast<double>(s.probes[i].width));
        into.y.push_back(static_cast<double>(s.probes[i].batch));
      }
      // The edge and the model's prediction as lines across the grid: a width edge is a
      // vertical line, a batch edge a horizontal one.
      const std::string at = by_width ? fmt::format(" (batch {})", s.request.batch)
                                      : fmt::format(" (width {})", s.request.width);
      const double e = static_cast<double>(s.edge);
      if (s.edge > 0) chart.markers.push_back({by_width, e, "measured edge " + axis_number(e) + at});
      const std::optional<int64_t>& pr = s.request.predicted;
      if (pr && *pr > 0) {
        const double v = static_cast<double>(*pr);
        chart.markers.push_back({by_width, v, "model " + axis_number(v) + at});
      }
      t.rows.push_back(
          {name,
           by_width ? fmt::format("largest width at batch {}", s.request.batch)
                    : fmt::format("largest batch at width {}", s.request.width),
           pr ? (*pr == 0 ? std::string("none fits") : axis_number(static_cast<double>(*pr)))
              : "no model",
           s.edge > 0 ? axis_number(e) : "-",
           s.past > 0 ? axis_number(static_cast<double>(s.past)) : "-",
           s.error_steps ? fmt::format("{:+d}", *s.error_steps) : "-",
           std::to_string(s.probes.size()), s.status});
      t.highlight.push_back(s.status != "found");
    }
    for (ChartSeries* s : {&fits, &oom}) {
      if (!s->x.empty()) chart.series.push_back(std::move(*s));
    }
    if (chart.series.empty()) continue;
    chart.width = 720;
    chart.height = 420;
    c.figure(fmt::format("edge-search-{}", bi), chart.title, render_svg(chart),
             {fmt::format("memory_fit.budgets[{}].searches[].probes[]", bi)},
             "Each probe ran its steps (results.memory_fit.budgets[].searches[].steps, 3) in a row "
             "under the budget's allocator cap; an OOM at any of them fails it. The measured "
             "edge fits and the step past it runs out of memory; the model's prediction is where "
             "the search started. " + sources);
  }
  if (!t.rows.empty()) c.table(std::move(t));
}

// The experts' load of the widest unpadded point that has one, as a layer × expert heat map.
void expert_load_figure(core::SectionBuilder& c, const std::vector<const PointResult*>& pts,
                        const core::StepConfig& config) {
  const PointResult* chosen = nullptr;
  for (const PointResult* p : pts) {
    if (!p->expert_load.layers.empty()) chosen = p;
  }
  if (chosen == nullptr) return;
  const core::ExpertLoad& load = chosen->expert_load;
  core::HeatMap map;
  map.title = fmt::format("Experts' load at {}: tokens per expert, per layer", point_name(*chosen));
  map.x_label = "expert";
  map.y_label = "layer";
  map.value_label = "(token, choice) pairs";
  double worst = 0;
  int64_t worst_layer = 0;
  for (const core::ExpertLoadLayer& e : load.layers) {
    map.row_labels.push_back(std::to_string(e.layer));
    map.values.emplace_back(e.tokens.begin(), e.tokens.end());
    if (e.max_over_mean > worst) {
      worst = e.max_over_mean;
      worst_layer = e.layer;
    }
  }
  c.figure("expert-load", map.title, render_svg(map),
           {"points[].expert_load[].tokens", "points[].expert_load[].max_over_mean"},
           fmt::format("Each layer routes {} pairs; the busiest expert holds {:.2f}x the mean "
                       "(layer {}). Routing: {}.",
                       load.routed_per_layer, worst, worst_layer, core::to_string(config.routing)));
}

// Every scalar field of the sweep and of its points, straight from the field tables
// (core/evidence/profile_point.hpp): a field added there is a row here.
void field_report_tables(core::SectionBuilder& c, const StepReport& r) {
  core::ReportTable sweep;
  sweep.id = "sweep-fields";
  sweep.title = "The sweep, field by field";
  sweep.header = {"field", "value", "unit", "what it is"};
  sweep.fields = {core::SectionBuilder::field_name("model ... interrupted_at")};
  const core::StepFigures& f = r;
  for (const core::evidence::FieldCells& row : core::evidence::field_cells<core::StepFigures>({&f}))
    sweep.rows.push_back({row.doc.path, row.cells.front(), row.doc.unit, row.doc.doc});
  c.table(std::move(sweep));
  core::ReportTable points;
  points.id = "point-fields";
  points.title = "The points, field by field (unpadded, then padded)";
  points.header = {"field", "unit"};
  std::vector<const core::PointFigures*> figures;
  for (const PointResult& p : r.points) {
    points.header.push_back(point_name(p));
    figures.push_back(&p);
  }
  points.header.push_back("what it is");
  points.fields = {core::SectionBuilder::field_name("points[]"),
                   core::SectionBuilder::field_name("padded_points[]")};
  for (const core::evidence::FieldCells& row : core::evidence::field_cells(figures)) {
    std::vector<std::string> cells{row.doc.path, row.doc.unit};
    cells.insert(cells.end(), row.cells.begin(), row.cells.end());
    cells.push_back(row.doc.doc);
    points.rows.push_back(std::move(cells));
  }
  if (!figures.empty()) c.table(std::move(points));
}

}  // namespace

// The section reads the results through profile's own reader (profile_analysis_from_json), so
// every figure draws typed fields; results it refuses (another tprobe's, or broken) are a note
// naming the field, and nothing of them is drawn.
void profile_report_section(core::SectionBuilder& c) {
  ProfileAnalysis a;
  try {
    a = profile_analysis_from_json(c.results(), "results");
  } catch (const std::exception& e) {
    c.note(std::string("profile figures not drawn: ") + e.what());
    return;
  }
  const StepReport& steps = a.report.steps;
  const std::vector<const PointResult*> pts = unpadded_points(steps);
  int64_t failed = 0;
  for (const PointResult& p : steps.points) failed += p.outcome != PointOutcome::kOk;
  c.fact("points",
         fmt::format("{} measured, {} failed (OOM or refused)",
                     static_cast<int64_t>(steps.points.size()) - failed, failed),
         "points[].outcome", failed > 0);
  if (a.trace_out) {
    // --trace-out's file, linked relative to the evidence's folder (docs/profile.md).
    const TraceOutFile& t = *a.trace_out;
    c.link_fact("trace for a viewer",
                fmt::format("{} ({} events: {} device rows, {} launches, {} memory samples; "
                            "batch {} x width {})",
                            t.path, t.events, t.device_rows, t.host_launches, t.memory_samples,
                            t.batch, t.width),
                t.link, "trace_out.link");
  }
  time_and_memory_figures(c, pts, a.memory_fit);
  memory_step_figures(c, pts);
  memory_fit_table(c, a.memory_fit);
  edge_search_figures(c, a.memory_fit);
  expert_load_figure(c, pts, a.report.config);
  phase_part_figures(c, a.report);
  if (a.report.table_point)
    kernel_table_figures(c, c.results().at(core::kKernelTableKey), "kernel_table.");
  field_report_tables(c, steps);
}
}  // namespace tprobe::runs
