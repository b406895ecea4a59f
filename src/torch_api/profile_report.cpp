// JSON and table views of a profile run (no libtorch).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tprobe/core/cost/scaling_fit_report.hpp"
#include "tprobe/core/trace/kernel_table_report.hpp"
#include "tprobe/core/trace/trace_parts.hpp"
#include "tprobe/torch_api/profile.hpp"

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
  j["attribution"] = {{"untagged_records", t.counts.untagged},
                      {"untagged_no_context_records", t.counts.untagged_no_context},
                      {"untagged_unlinked_node_records", t.counts.untagged_unlinked},
                      {"linked_records", t.counts.linked}};
  j["kernel_sum_s"] = t.kernel_sum_s;
  j["span_s"] = t.span_s;
  const core::Json b = core::to_json(t.breakdown);
  j["untagged_kernel_s"] = b["untagged_kernel_s"];
  j["untagged_kernel_share_ratio"] = b["untagged_kernel_share_ratio"];
  j["by_phase_part"] = b["rows"];
  j["by_layer"] = b["layers"];
  j["attention_share_ratio"] = opt(t.attention_share);
  j["attention_core_share_ratio"] = opt(t.attention_core_share);
  j["attention_deltas"] = core::Json::array();
  for (const auto& d : t.attention_deltas) {
    j["attention_deltas"].push_back({{"kernel", d.kernel},
                                     {"side", d.in_core ? "attention_core, not named attention"
                                                        : "named attention, outside attention_core"},
                                     {"kernels", d.kernels},
                                     {"kernel_s", static_cast<double>(d.kernel_ns) * 1e-9}});
  }
  j["kernel_table"] = t.table ? core::to_json(*t.table) : core::Json(nullptr);
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
    j["intended_mfu_ratio"] = opt(rep.costs[i].intended_mfu);
    j["performed_mfu_ratio"] = opt(rep.costs[i].performed_mfu);
    j["kernel_trace"] = trace_json(rep.traces[i], rep.kernel_table_supported);
    out[p.point.padded() ? "padded_points" : "points"].push_back(std::move(j));
  }
  out["peak"] = {{"tflops", opt(rep.peak_tflops)}, {"source", rep.peak_source}};
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
          to_string(rep.attn), parts.empty() ? "none traced" : parts));
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

}  // namespace tprobe::model
