// JSON and table views of a profile run (no libtorch).
#include <fmt/format.h>

#include "tprobe/core/cost/scaling_fit_report.hpp"
#include "tprobe/core/trace/kernel_table_report.hpp"
#include "tprobe/model/profile.hpp"

namespace tprobe::model {

namespace {

core::Json opt(const std::optional<double>& v) { return v ? core::Json(*v) : core::Json(nullptr); }

core::Json trace_json(const PointTrace& t, bool supported) {
  if (!supported) return nullptr;
  core::Json j;
  j["captured"] = t.captured;
  j["records"] = t.records;
  j["kernels"] = t.kernels;
  j["dropped_records"] = t.dropped_records;
  j["untagged_records"] = t.untagged_records;
  j["kernel_sum_s"] = t.kernel_sum_s;
  j["span_s"] = t.span_s;
  j["by_phase_part"] = t.phase_rows.is_null() ? core::Json::array() : t.phase_rows;
  j["attention_share_ratio"] = opt(t.attention_share);
  j["kernel_table"] = t.table ? core::to_json(*t.table) : core::Json(nullptr);
  j["problems"] = t.problems;
  return j;
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
    j["intended_mfu_ratio"] = opt(rep.costs[i].intended_mfu);
    j["performed_mfu_ratio"] = opt(rep.costs[i].performed_mfu);
    j["kernel_trace"] = trace_json(rep.traces[i], rep.kernel_table_supported);
    out[p.point.padded() ? "padded_points" : "points"].push_back(std::move(j));
  }
  out["peak"] = {{"tflops", opt(rep.peak_tflops)}, {"source", rep.peak_source}};
  out["flops_attention_path"] = core::to_string(rep.flops_path);
  out["scaling_fit"] = rep.fit ? core::to_json(*rep.fit) : core::Json(nullptr);
  out["scaling_fit_note"] = rep.fit_note.empty() ? core::Json(nullptr) : core::Json(rep.fit_note);
  // results.kernel_table: the kernels table of one traced point (--table-width, default the
  // widest), in the shape `tprobe kernels` writes (docs/kernels.md), so kernels can re-read it.
  if (rep.table_point) {
    const PointResult& tp = rep.steps.points[*rep.table_point];
    out["kernel_table"] = core::to_json(*rep.traces[*rep.table_point].table);
    out["kernel_table_point"] = {{"batch", tp.point.batch}, {"width", tp.point.width}};
  } else {
    out["kernel_table"] = nullptr;
    out["kernel_table_point"] = nullptr;
  }
  out["kernel_trace_status"] = {
      {"supported", rep.kernel_table_supported},
      {"reason",
       rep.kernel_table_reason.empty() ? core::Json(nullptr) : core::Json(rep.kernel_table_reason)},
      {"source", rep.trace_source.empty() ? core::Json(nullptr) : core::Json(rep.trace_source)},
      {"raw_trace_path",
       req.raw_trace_path.empty() ? core::Json(nullptr) : core::Json(req.raw_trace_path)}};
  const StepSpec& s = req.spec;
  const PointResult* ok = first_ok(rep.steps);
  core::Json prov;
  prov["attn_requested"] = req.attn_default ? core::Json(nullptr) : core::Json(to_string(s.attn));
  prov["attn_path"] = to_string(rep.attn);
  prov["attn_resolved"] = {{"sliding_attention", ok ? core::Json(ok->attn_sliding) : nullptr},
                           {"full_attention", ok ? core::Json(ok->attn_full) : nullptr}};
  prov["moe_dispatch"] = to_string(s.moe);
  prov["gradient_checkpointing"] = s.gradient_checkpointing;
  prov["input_requires_grad"] = s.input_requires_grad;
  prov["ce_mode"] = s.ce_chunked ? "chunked" : "naive";
  prov["ce_chunk"] = s.ce_chunked ? core::Json(s.ce_chunk) : core::Json(nullptr);
  prov["rms_norm"] = s.fused_rms_norm ? "fused" : "hf";
  prov["lora"] = {{"targets", s.lora_targets},
                  {"rank", s.lora_rank},
                  {"alpha", s.lora_alpha},
                  {"dtype", s.lora_fp32 ? "fp32" : "model"}};
  prov["dtype"] = s.dtype;
  prov["seed"] = s.seed;
  prov["warmup"] = s.warmup;
  prov["repeats"] = s.repeats;
  prov["config_digest"] = rep.steps.config_digest;
  out["provenance"] = std::move(prov);
  return out;
}

std::vector<core::Table> profile_tables(const ProfileReport& rep) {
  std::vector<core::Table> out;
  out.push_back(timing_table(rep.steps));

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

  if (rep.kernel_table_supported) {
    core::Table ph("device time by phase and part (the traced step of each point; kernels only)");
    ph.column("point", core::Align::kLeft).column("phase", core::Align::kLeft);
    ph.column("part", core::Align::kLeft).column("kernels").column("kernel time").column("share");
    for (size_t i = 0; i < rep.steps.points.size(); ++i) {
      const auto& p = rep.steps.points[i];
      const auto& t = rep.traces[i];
      const std::string name =
          fmt::format("{}x{}{}", p.point.batch, p.point.width, p.point.padded() ? " padded" : "");
      if (!t.phase_rows.is_array() || t.phase_rows.empty()) {
        ph.row({name, "-", "no records"});
        continue;
      }
      for (const auto& r : t.phase_rows) {
        ph.row({name, r["phase"].get<std::string>(), r["part"].get<std::string>(),
                core::format_count(r["kernels"].get<int64_t>()),
                core::format_seconds(r["kernel_s"].get<double>()),
                core::format_percent(r["kernel_share_ratio"].get<double>())});
      }
      ph.separator();
    }
    ph.note(
        "backward of a layer is tagged by its layer type as a whole (sliding_attention / "
        "full_attention rows include its MLP and experts gradients); untagged launches of the "
        "autograd engine count as backward/other");
    out.push_back(std::move(ph));
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
    // domain item 2's two independent methods side by side
    core::Table two("quadratic share (scaling fit) vs attention share (kernel table)");
    two.column("batch").column("width").column("fit: B*w^2 / t(w)").column("table: attention");
    for (size_t i = 0; i < rep.steps.points.size(); ++i) {
      const auto& p = rep.steps.points[i];
      if (p.point.padded() || p.outcome != PointOutcome::kOk || !rep.fit->fit) continue;
      const double q = rep.fit->fit->at(static_cast<double>(p.point.width)).quadratic_share;
      const auto& a = rep.traces[i].attention_share;
      two.row({std::to_string(p.point.batch), core::format_count(p.point.width),
               core::format_percent(q), a ? core::format_percent(*a) : std::string("-")});
    }
    out.push_back(std::move(two));
  } else {
    core::Table none("scaling fit");
    none.column("status", core::Align::kLeft);
    none.row({rep.fit_note});
    out.push_back(std::move(none));
  }
  return out;
}

}  // namespace tprobe::model
