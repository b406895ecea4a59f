// Renders mask geometry: evidence JSON (every layer, every band, every assertion) and the tables.
#include "tprobe/core/mask/mask_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {
namespace {

Json optional_json(const std::optional<int64_t>& v) { return v ? Json(*v) : Json(nullptr); }

std::string key_name(MaskRules r) {
  std::string s = to_string(r);
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

Json plan_json(const LayerMaskPlan& p) {
  return Json{{"mask", p.explicit_mask ? "explicit" : "none"},
              {"fast_path", p.fast_path},
              {"call", p.call},
              {"reason", p.reason}};
}

const char* mask_2d(const MaskShape& s) {
  if (!s.has_2d_mask) return "none";
  return s.padded() ? "padded" : "all_ones";
}

size_t rules_index(MaskRules r) {
  const auto all = all_mask_rules();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == r) return i;
  }
  return 0;
}

const MaskBand* find_band(const MaskReport& r, MaskRules rules, LayerType type) {
  for (const MaskBand& b : r.bands) {
    if (b.rules == rules && b.type == type) return &b;
  }
  return nullptr;
}

std::string opt(const std::optional<int64_t>& v) { return v ? format_count(*v) : "-"; }

}  // namespace

std::string format_ranges(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", v[i]) : fmt::format("{}-{}", v[i], v[j]);
    i = j + 1;
  }
  return out;
}

Json to_json(const MaskReport& r) {
  Json out;
  out["model"] = r.model;
  out["width"] = r.shape.width;
  out["batch"] = r.request.batch;
  out["lengths"] = r.shape.lengths;
  out["padded"] = r.shape.padded();
  out["attention_mask_2d"] = mask_2d(r.shape);
  out["sliding_window"] = r.sliding_window;
  out["rules"] = to_string(r.request.rules);
  const size_t sel = rules_index(r.request.rules);
  Json layers = Json::array();
  for (const MaskLayer& l : r.layers) {
    const MaskBand* b = find_band(r, r.request.rules, l.type);
    Json paths = Json::object();
    const auto all = all_mask_rules();
    for (size_t i = 0; i < all.size(); ++i) paths[key_name(all[i])] = plan_json(l.plans[i]);
    const LayerMaskPlan& p = l.plans[sel];
    layers.push_back({{"layer", l.layer},
                      {"type", to_string(l.type)},
                      {"window", l.window},
                      {"head_dim", l.head_dim},
                      {"query_heads", l.query_heads},
                      {"kv_heads", l.kv_heads},
                      {"max_allowed_per_row", b ? b->check.max_allowed_per_row : 0},
                      {"saturates_at_row", b ? optional_json(b->check.saturates_at_row) : nullptr},
                      {"mask", p.explicit_mask ? "explicit" : "none"},
                      {"fast_path", p.fast_path},
                      {"call", p.call},
                      {"paths", paths}});
  }
  out["layers"] = layers;
  Json bands = Json::array();
  for (const MaskBand& b : r.bands) {
    const BandCheck& c = b.check;
    auto violation = [](const std::optional<BandViolation>& o) -> Json {
      if (!o) return nullptr;
      const BandViolation& f = *o;
      return {{"batch_row", f.batch_row},
              {"row", f.row},
              {"kind", f.kind},
              {"got_first", f.got.first},
              {"got_last", f.got.last},
              {"got_count", f.got.count()},
              {"expected_first", f.expected.first},
              {"expected_last", f.expected.last},
              {"expected_count", f.expected.count()}};
    };
    bands.push_back({{"rules", to_string(b.rules)},
                     {"type", to_string(b.type)},
                     {"window", b.window},
                     {"first_layer", b.first_layer},
                     {"mask", b.plan.explicit_mask ? "explicit" : "none"},
                     {"fast_path", b.plan.fast_path},
                     {"causal", b.plan.causal},
                     {"keys_before", b.plan.keys_before},
                     {"masks_padded_keys", b.plan.masks_padded_keys},
                     {"computes_padded_queries", b.plan.computes_padded_queries},
                     {"unmask_empty_rows", b.plan.unmask_empty_rows},
                     {"rows_checked", c.rows_checked},
                     {"max_allowed_per_row", c.max_allowed_per_row},
                     {"saturates_at_row", optional_json(c.saturates_at_row)},
                     {"padded_query_rows", c.padded_query_rows},
                     {"fully_masked_rows", c.fully_masked_rows},
                     {"first_fully_masked_row", optional_json(c.first_fully_masked_row)},
                     {"padded_query_treatment", b.plan.padded_query_rows},
                     {"violating_rows", c.violating_rows},
                     {"first_violation", violation(c.first_violation)},
                     {"padded_rows_differing", c.padded_rows_differing},
                     {"first_padded_difference", violation(c.first_padded_difference)}});
  }
  out["bands"] = bands;
  Json asserts = Json::array();
  for (const MaskAssertion& a : r.assertions) {
    asserts.push_back({{"name", a.name},
                       {"passed", a.passed},
                       {"message", a.message},
                       {"layer", optional_json(a.layer)},
                       {"batch_row", optional_json(a.batch_row)},
                       {"row", optional_json(a.row)}});
  }
  out["assertions"] = asserts;
  out["geometry_s"] = r.geometry_s;
  return out;
}

std::vector<Table> mask_tables(const MaskReport& r) {
  std::vector<Table> tables;
  // Layers grouped by everything the table shows, so 30 layers fit in a few lines.
  Table t(fmt::format("mask geometry: {}, width {}, batch {}, 2-D mask {}", r.model,
                      format_count(r.shape.width), r.request.batch, mask_2d(r.shape)));
  t.column("layers", Align::kLeft)
      .column("type", Align::kLeft)
      .column("window")
      .column("head_dim")
      .column("heads q/kv")
      .column("max keys/row")
      .column("saturates at");
  const auto all = all_mask_rules();
  for (MaskRules rs : all) t.column(to_string(rs), Align::kLeft);
  std::map<std::string, std::vector<int64_t>> groups;
  std::map<std::string, std::vector<std::string>> cells;
  std::vector<std::string> order;
  for (const MaskLayer& l : r.layers) {
    const MaskBand* b = find_band(r, r.request.rules, l.type);
    std::vector<std::string> row = {to_string(l.type),
                                    l.window ? format_count(l.window) : "-",
                                    fmt::format("{}", l.head_dim),
                                    fmt::format("{}/{}", l.query_heads, l.kv_heads),
                                    b ? format_count(b->check.max_allowed_per_row) : "-",
                                    b ? opt(b->check.saturates_at_row) : "-"};
    for (const LayerMaskPlan& p : l.plans)
      row.push_back(p.explicit_mask ? "explicit" : "none (fast)");
    std::string key = fmt::format("{}", fmt::join(row, "|"));
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(l.layer);
    cells[key] = row;
  }
  for (const std::string& key : order) {
    std::vector<std::string> row = {format_ranges(groups[key])};
    row.insert(row.end(), cells[key].begin(), cells[key].end());
    t.row(row);
  }
  t.note(
      fmt::format("max keys/row and saturates at: under {}; columns at the right: does the "
                  "layer get a 4-D mask or keep the maskless fast path",
                  to_string(r.request.rules)));
  tables.push_back(t);

  Table c(fmt::format("band check, closed form per row ({} ms)",
                      fmt::format("{:.1f}", r.geometry_s * 1e3)));
  c.column("rules", Align::kLeft)
      .column("type", Align::kLeft)
      .column("call", Align::kLeft)
      .column("rows")
      .column("wrong rows")
      .column("first wrong", Align::kLeft)
      .column("padded q rows")
      .column("fully masked")
      .column("first fully masked")
      .column("padded rows differing");
  for (const MaskBand& b : r.bands) {
    std::string first = "-";
    if (b.check.first_violation) {
      const BandViolation& v = *b.check.first_violation;
      first = fmt::format("b{} row {}: {}", v.batch_row, v.row, v.kind);
    }
    c.row({to_string(b.rules), to_string(b.type), b.plan.call, format_count(b.check.rows_checked),
           format_count(b.check.violating_rows), first, format_count(b.check.padded_query_rows),
           format_count(b.check.fully_masked_rows), opt(b.check.first_fully_masked_row),
           b.check.first_padded_difference
               ? fmt::format(
                     "{} (first b{} row {}: {})", format_count(b.check.padded_rows_differing),
                     b.check.first_padded_difference->batch_row,
                     b.check.first_padded_difference->row, b.check.first_padded_difference->kind)
               : "0"});
  }
  c.note(
      "wrong rows: real query rows whose keys differ from the reference band (an assertion "
      "fails); padded rows differing: padded query rows (outputs unused) treated otherwise");
  if (r.shape.padded()) {
    for (const MaskBand& b : r.bands) {
      c.note(fmt::format("{} {}: padded query rows: {}", to_string(b.rules), to_string(b.type),
                         b.plan.padded_query_rows));
    }
  }
  tables.push_back(c);

  Table a("assertions");
  a.column("assertion", Align::kLeft)
      .column("result", Align::kLeft)
      .column("message", Align::kLeft);
  for (const MaskAssertion& x : r.assertions) {
    a.row({x.name, x.passed ? "pass" : "FAIL", x.message});
  }
  tables.push_back(a);
  return tables;
}

// ---- the report's section (tprobe/core/report/section.hpp) ----

void mask_report_section(SectionBuilder& c) {
  const Json& r = c.results();
  if (const Json* layers = array_at(r, "layers")) {
    ReportTable t = c.generic_table("tab-mask-layers", "Mask per layer", *layers, "layers");
    for (const auto& l : *layers) {
      const Json* fp = l.is_object() ? find_path(l, "fast_path") : nullptr;
      t.highlight.push_back(fp && fp->is_boolean() && !fp->get<bool>());
    }
    t.highlight.resize(t.rows.size());
    c.table(std::move(t));
    int64_t explicit_masks = 0;
    for (const auto& l : *layers) explicit_masks += string_at(l, "mask") == "explicit";
    c.fact("layers with an explicit mask", fmt::format("{} of {}", explicit_masks, layers->size()),
           "layers[].mask", explicit_masks > 0);
  } else {
    c.absent("layers", "the mask table");
  }
  if (const Json* be = array_at(r, "backends")) {
    c.table(c.generic_table("tab-mask-backends", "SDPA backends per layer shape", *be, "backends"));
  }
}
}  // namespace tprobe::core
