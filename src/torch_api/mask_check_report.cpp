// Renders the materialised mask check and the SDPA backend trials: evidence JSON and tables.
#include "tprobe/torch_api/mask_check_report.hpp"

#include <fmt/format.h>

namespace tprobe::model {
namespace {

std::string cell(const std::optional<double>& s) { return s ? core::format_seconds(*s) : "-"; }

}  // namespace

core::Json to_json(const MaskCheckResult& r) {
  core::Json rows = core::Json::array();
  for (const MaskCheckRow& row : r.rows) {
    const MaskTensorCheck& c = row.check;
    rows.push_back({{"type", row.type},
                    {"window", row.window},
                    {"builder", row.builder},
                    {"shape", c.shape},
                    {"ok", c.ok()},
                    {"rows_checked", c.rows_checked},
                    {"violating_rows", c.violating_rows},
                    {"max_allowed_per_row", c.max_allowed_per_row},
                    {"saturates_at_row", core::json_or_null(c.saturates_at_row)},
                    {"fully_masked_rows", c.fully_masked_rows},
                    {"first_bad_batch_row", core::json_or_null(c.first_bad_batch_row)},
                    {"first_bad_row", core::json_or_null(c.first_bad_row)},
                    {"violation_kinds", c.kinds},
                    {"detail", c.detail},
                    {"build_s", row.build_s},
                    {"check_s", row.check_s}});
  }
  return {{"device", r.device},
          {"torch_version", r.torch_version},
          {"ok", r.ok},
          {"wall_s", r.wall_s},
          {"rows", rows}};
}

core::Table mask_check_table(const MaskCheckResult& r) {
  core::Table t(fmt::format("materialised masks ({}, libtorch {}, {})", r.device, r.torch_version,
                            core::format_seconds(r.wall_s)));
  t.column("type", core::Align::kLeft)
      .column("window")
      .column("shape", core::Align::kLeft)
      .column("rows")
      .column("wrong rows")
      .column("max keys/row")
      .column("saturates at")
      .column("fully masked")
      .column("build")
      .column("check")
      .column("result", core::Align::kLeft);
  for (const MaskCheckRow& row : r.rows) {
    const MaskTensorCheck& c = row.check;
    t.row({row.type, row.window ? core::format_count(row.window) : "-",
           fmt::format("[{}]", fmt::join(c.shape, ",")), core::format_count(c.rows_checked),
           core::format_count(c.violating_rows), core::format_count(c.max_allowed_per_row),
           c.saturates_at_row ? core::format_count(*c.saturates_at_row) : "-",
           core::format_count(c.fully_masked_rows), core::format_seconds(row.build_s),
           core::format_seconds(row.check_s), c.ok() ? "ok" : "WRONG: " + c.detail});
  }
  return t;
}

core::Json backends_json(const MaskBackendsResult& r) {
  core::Json rows = core::Json::array();
  for (const MaskBackendRow& b : r.rows) {
    rows.push_back(
        {{"layer_type", b.layer_type},
         {"query_heads", b.query_heads},
         {"kv_heads", b.kv_heads},
         {"head_dim", b.head_dim},
         {"window", b.window},
         {"kv", b.kv},
         {"mask_case", b.mask_case},
         {"backend", b.backend},
         {"outcome", b.outcome},
         {"message", b.message},
         {"warnings", b.warnings},
         {"resolved", b.resolved},
         {"kernels", b.kernels},
         {"kernels_note", b.kernels_note},
         {"fwd_s", b.fwd_s},
         {"fwd_bwd_s", b.fwd_bwd_s},
         {"fwd_median_s", core::json_or_null(b.fwd_median_s)},
         {"fwd_bwd_median_s", core::json_or_null(b.fwd_bwd_median_s)},
         {"output_finite", b.output_finite ? core::Json(*b.output_finite) : core::Json(nullptr)}});
  }
  return rows;
}

core::Json backends_status_json(const MaskBackendsResult& r) {
  return {{"supported", r.supported},
          {"reason", r.reason},
          {"device", r.device},
          {"torch_version", r.torch_version},
          {"dtype", r.dtype}};
}

std::vector<core::Table> mask_backends_tables(const MaskBackendsResult& r) {
  std::vector<core::Table> out;
  if (!r.supported) {
    core::Table t("SDPA backends");
    t.column("status", core::Align::kLeft);
    t.row({"not supported: " + r.reason});
    out.push_back(t);
    return out;
  }
  core::Table t(fmt::format("SDPA backends, each pinned alone ({}, libtorch {}, {})", r.device,
                            r.torch_version, r.dtype));
  t.column("layer", core::Align::kLeft)
      .column("q/kv/dim")
      .column("kv", core::Align::kLeft)
      .column("mask", core::Align::kLeft)
      .column("backend", core::Align::kLeft)
      .column("outcome", core::Align::kLeft)
      .column("fwd")
      .column("fwd+bwd")
      .column("finite", core::Align::kLeft)
      .column("reason / kernels", core::Align::kLeft);
  std::string last;
  for (const MaskBackendRow& b : r.rows) {
    const std::string group = b.layer_type + b.kv + b.mask_case;
    if (!last.empty() && group != last) t.separator();
    last = group;
    std::string why =
        b.outcome == "accepted" ? fmt::format("{}", fmt::join(b.kernels, " | ")) : b.message;
    if (b.outcome != "accepted" && !b.warnings.empty()) {
      why = fmt::format("{}", fmt::join(b.warnings, " / "));
    }
    if (why.size() > 140) why = why.substr(0, 137) + "...";
    t.row({b.layer_type, fmt::format("{}/{}/{}", b.query_heads, b.kv_heads, b.head_dim), b.kv,
           b.mask_case, b.backend, b.outcome, cell(b.fwd_median_s), cell(b.fwd_bwd_median_s),
           b.output_finite ? (*b.output_finite ? "yes" : "NO") : "-", why});
  }
  t.note(
      "median of the timed repeats after warm-up; the full refusal text and every sample are "
      "in the evidence (results.backends[])");
  out.push_back(t);
  return out;
}

}  // namespace tprobe::model
