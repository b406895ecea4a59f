// Renders the materialised mask check and the SDPA backend trials: evidence JSON and tables.
#include "tprobe/runs/mask_check_report.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"

namespace tprobe::runs {

using engine::MaskBackendRow;
using engine::MaskBackendsResult;
using engine::MaskCheckResult;
using engine::MaskCheckRow;
using engine::MaskTensorCheck;
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

MaskCheckResult mask_check_result_from_json(const core::Json& j, const std::string& where) {
  using namespace core::json_read;
  if (!j.is_object()) fail("{} must be an object", where);
  MaskCheckResult r;
  r.device = string(j, "device", where);
  r.torch_version = string(j, "torch_version", where);
  r.ok = boolean(j, "ok", where);
  r.wall_s = number(j, "wall_s", where);
  const core::Json& rows = array(j, "rows", where);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const core::Json& row = rows[i];
    const std::string w = at(where, "rows", i);
    MaskCheckRow m;
    m.type = string(row, "type", w);
    m.window = integer(row, "window", w, 0);
    m.builder = string(row, "builder", w);
    MaskTensorCheck& c = m.check;
    c.shape = integers(row, "shape", w, 0);
    const bool ok = boolean(row, "ok", w);
    c.rows_checked = integer(row, "rows_checked", w, 0);
    c.violating_rows = integer(row, "violating_rows", w, 0);
    // ok is written for readers: it is "no violating row".
    if (ok != c.ok()) {
      fail("{}: field 'ok' is {} but 'violating_rows' is {}", w, ok, c.violating_rows);
    }
    c.max_allowed_per_row = integer(row, "max_allowed_per_row", w, 0);
    c.saturates_at_row = nullable_integer(row, "saturates_at_row", w, 0);
    c.fully_masked_rows = integer(row, "fully_masked_rows", w, 0);
    c.first_bad_batch_row = nullable_integer(row, "first_bad_batch_row", w, 0);
    c.first_bad_row = nullable_integer(row, "first_bad_row", w, 0);
    c.kinds = strings(row, "violation_kinds", w);
    c.detail = string(row, "detail", w);
    m.build_s = number(row, "build_s", w);
    m.check_s = number(row, "check_s", w);
    r.rows.push_back(std::move(m));
  }
  return r;
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
        {{"layer_type", core::to_string(b.layer_type)},
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

MaskBackendsResult mask_backends_result_from_json(const core::Json& results,
                                                  const std::string& where) {
  using namespace core::json_read;
  MaskBackendsResult r;
  const core::Json& status = object(results, "backends_status", where);
  const std::string sw = where + " backends_status";
  r.supported = boolean(status, "supported", sw);
  r.reason = string(status, "reason", sw);
  r.device = string(status, "device", sw);
  r.torch_version = string(status, "torch_version", sw);
  r.dtype = string(status, "dtype", sw);
  const core::Json& rows = array(results, "backends", where);
  // The vocabularies of run_mask_backends (src/model/mask_backends.cpp).
  static const std::vector<std::string> kvs = {"repeated", "gqa"};
  static const std::vector<std::string> cases = {"none_is_causal", "explicit_band",
                                                 "explicit_causal_padded"};
  static const std::vector<std::string> outcomes = {"accepted", "refused", "error",
                                                    "not_applicable"};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const core::Json& row = rows[i];
    const std::string w = at(where, "backends", i);
    MaskBackendRow b;
    b.layer_type = enum_value(row, "layer_type", w, {core::LayerType::kSliding, core::LayerType::kFull});
    b.query_heads = integer(row, "query_heads", w, 1);
    b.kv_heads = integer(row, "kv_heads", w, 1);
    b.head_dim = integer(row, "head_dim", w, 1);
    b.window = integer(row, "window", w, 0);
    b.kv = kvs[choice(row, "kv", w, kvs)];
    b.mask_case = cases[choice(row, "mask_case", w, cases)];
    b.backend = string(row, "backend", w);
    b.outcome = outcomes[choice(row, "outcome", w, outcomes)];
    b.message = string(row, "message", w);
    b.warnings = strings(row, "warnings", w);
    b.resolved = string(row, "resolved", w);
    b.kernels = strings(row, "kernels", w);
    b.kernels_note = string(row, "kernels_note", w);
    b.fwd_s = numbers(row, "fwd_s", w);
    b.fwd_bwd_s = numbers(row, "fwd_bwd_s", w);
    b.fwd_median_s = nullable_number(row, "fwd_median_s", w);
    b.fwd_bwd_median_s = nullable_number(row, "fwd_bwd_median_s", w);
    b.output_finite = nullable_boolean(row, "output_finite", w);
    r.rows.push_back(std::move(b));
  }
  return r;
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
    const std::string group = core::to_string(b.layer_type) + b.kv + b.mask_case;
    if (!last.empty() && group != last) t.separator();
    last = group;
    std::string why =
        b.outcome == "accepted" ? fmt::format("{}", fmt::join(b.kernels, " | ")) : b.message;
    if (b.outcome != "accepted" && !b.warnings.empty()) {
      why = fmt::format("{}", fmt::join(b.warnings, " / "));
    }
    if (why.size() > 140) why = why.substr(0, 137) + "...";
    t.row({core::to_string(b.layer_type), fmt::format("{}/{}/{}", b.query_heads, b.kv_heads, b.head_dim), b.kv,
           b.mask_case, b.backend, b.outcome, cell(b.fwd_median_s), cell(b.fwd_bwd_median_s),
           b.output_finite ? (*b.output_finite ? "yes" : "NO") : "-", why});
  }
  t.note(
      "median of the timed repeats after warm-up; the full refusal text and every sample are "
      "in the evidence (results.backends[])");
  out.push_back(t);
  return out;
}

}  // namespace tprobe::runs
