// Renders mask geometry: evidence JSON (every layer, every band, every assertion) and the tables.
#include "tprobe/core/mask/mask_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"

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

namespace {

const std::vector<std::string> kMaskNames = {"none", "explicit"};

// A plan as the layers' paths write it (plan_json): the band parameters are the bands'.
LayerMaskPlan plan_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  LayerMaskPlan p;
  p.explicit_mask = choice(j, "mask", where, kMaskNames) == 1;
  p.fast_path = boolean(j, "fast_path", where);
  p.call = string(j, "call", where);
  p.reason = string(j, "reason", where);
  return p;
}

// A field written beside the one it repeats (a layer's mask under `rules`, a band's plan as its
// first layer's): a file where they disagree is damaged.
template <typename T>
void check_same(const T& read, const T& expected, const char* key, const std::string& where,
                const std::string& source) {
  if (!(read == expected)) fail("{}: field '{}' disagrees with {}", where, key, source);
}

KeyInterval interval_from_json(const Json& j, const char* prefix, const std::string& where,
                               int64_t width) {
  using namespace json_read;
  const std::string first = fmt::format("{}_first", prefix);
  const std::string last = fmt::format("{}_last", prefix);
  const std::string count = fmt::format("{}_count", prefix);
  KeyInterval k;
  k.first = integer(j, first.c_str(), where, 0, width - 1);
  k.last = integer(j, last.c_str(), where, -1, width - 1);
  // The count is written for readers; it is the interval's.
  const int64_t n = integer(j, count.c_str(), where, 0, width);
  if (n != k.count()) {
    fail("{}: field '{}' is {}, but [{}, {}] holds {} keys", where, count, n, k.first, k.last,
         k.count());
  }
  return k;
}

std::optional<BandViolation> violation_from_json(const Json& band, const char* key,
                                                 const std::string& where, const MaskShape& s) {
  using namespace json_read;
  if (field(band, key, where).is_null()) return std::nullopt;
  const Json& j = object(band, key, where);
  const std::string w = where + " " + key;
  static const std::vector<std::string> kinds = {"future_key", "outside_window", "padded_key",
                                                 "missing_key"};
  BandViolation v;
  v.batch_row = integer(j, "batch_row", w, 0, static_cast<int64_t>(s.lengths.size()) - 1);
  v.row = integer(j, "row", w, 0, s.width - 1);
  v.kind = kinds[choice(j, "kind", w, kinds)];
  v.got = interval_from_json(j, "got", w, s.width);
  v.expected = interval_from_json(j, "expected", w, s.width);
  return v;
}

// A first-row field is there exactly when its count is positive.
void check_first(bool present, int64_t count, const char* first_key, const char* count_key,
                 const std::string& where) {
  if (present != (count > 0)) {
    fail("{}: field '{}' is {} but '{}' is {}", where, first_key, present ? "set" : "null",
         count_key, count);
  }
}

}  // namespace

// Size: a field-by-field reader of mask's results, in the order to_json writes them.
MaskReport mask_report_from_json(const Json& results, const std::string& where) {
  using namespace json_read;
  if (!results.is_object()) fail("{} must be an object", where);
  MaskReport r;
  r.model = string(results, "model", where);
  MaskShape& s = r.shape;
  s.width = integer(results, "width", where, 1);
  r.request.width = s.width;
  r.request.batch = integer(results, "batch", where, 1);
  s.lengths = integers(results, "lengths", where, 1, s.width);
  if (static_cast<int64_t>(s.lengths.size()) != r.request.batch) {
    fail("{}: field 'lengths' has {} values for batch {}", where, s.lengths.size(),
         r.request.batch);
  }
  // padded and attention_mask_2d say what the lengths say; has_2d_mask is the one new fact.
  const bool padded = boolean(results, "padded", where);
  if (padded != s.padded()) {
    fail("{}: field 'padded' is {} but the lengths {} padding to width {}", where, padded,
         s.padded() ? "hold" : "hold no", s.width);
  }
  const size_t mask_2d =
      choice(results, "attention_mask_2d", where, {"none", "all_ones", "padded"});
  if ((mask_2d == 2) != padded) {
    fail("{}: field 'attention_mask_2d' is '{}' but 'padded' is {}", where,
         string(results, "attention_mask_2d", where), padded);
  }
  s.has_2d_mask = mask_2d != 0;
  // As analyze_mask: the request's lengths are given exactly when a 2-D mask is passed.
  if (s.has_2d_mask) r.request.lengths = s.lengths;
  r.sliding_window = integer(results, "sliding_window", where, 0);
  const std::vector<MaskRules> all = all_mask_rules();
  const size_t sel = choice(results, "rules", where, mask_rules_names());
  r.request.rules = all[sel];

  // Each layer's max_allowed_per_row and saturates_at_row are its band's, checked once the bands
  // are read.
  std::vector<std::pair<int64_t, std::optional<int64_t>>> layer_band;
  const Json& layers = array(results, "layers", where);
  for (size_t i = 0; i < layers.size(); ++i) {
    const Json& j = layers[i];
    const std::string w = at(where, "layers", i);
    MaskLayer l;
    l.layer = integer(j, "layer", w, 0);
    if (l.layer != static_cast<int64_t>(i)) {
      fail("{}: field 'layer' is {}: the layers are listed in order from 0", w, l.layer);
    }
    l.type = enum_value(j, "type", w, {LayerType::kSliding, LayerType::kFull});
    l.window = integer(j, "window", w, 0);
    l.head_dim = integer(j, "head_dim", w, 1);
    l.query_heads = integer(j, "query_heads", w, 1);
    l.kv_heads = integer(j, "kv_heads", w, 1);
    layer_band.emplace_back(integer(j, "max_allowed_per_row", w, 0),
                            nullable_integer(j, "saturates_at_row", w, 0, s.width - 1));
    const Json& paths = object(j, "paths", w);
    const std::string pw = w + " paths";
    for (MaskRules rules : all) {
      const std::string key = key_name(rules);
      l.plans.push_back(plan_from_json(object(paths, key.c_str(), pw), pw + "." + key));
    }
    if (paths.size() != all.size()) {
      for (const auto& item : paths.items()) {
        if (std::none_of(all.begin(), all.end(),
                         [&](MaskRules rules) { return key_name(rules) == item.key(); })) {
          fail("{}: '{}' names no attention path of this tprobe", pw, item.key());
        }
      }
    }
    const LayerMaskPlan& p = l.plans[sel];
    const std::string under = "paths." + key_name(all[sel]);
    check_same(choice(j, "mask", w, kMaskNames) == 1, p.explicit_mask, "mask", w, under);
    check_same(boolean(j, "fast_path", w), p.fast_path, "fast_path", w, under);
    check_same(string(j, "call", w), p.call, "call", w, under);
    r.layers.push_back(std::move(l));
  }

  const Json& bands = array(results, "bands", where);
  for (size_t i = 0; i < bands.size(); ++i) {
    const Json& j = bands[i];
    const std::string w = at(where, "bands", i);
    MaskBand b;
    const size_t ri = choice(j, "rules", w, mask_rules_names());
    b.rules = all[ri];
    b.type = enum_value(j, "type", w, {LayerType::kSliding, LayerType::kFull});
    b.window = integer(j, "window", w, 0);
    b.first_layer = integer(j, "first_layer", w, 0, static_cast<int64_t>(r.layers.size()) - 1);
    const MaskLayer& first = r.layers[static_cast<size_t>(b.first_layer)];
    const std::string of_first = fmt::format("layer {}", b.first_layer);
    check_same(b.type, first.type, "type", w, of_first);
    check_same(b.window, first.window, "window", w, of_first);
    LayerMaskPlan& p = b.plan;
    const LayerMaskPlan& lp = first.plans[ri];
    p.explicit_mask = choice(j, "mask", w, kMaskNames) == 1;
    check_same(p.explicit_mask, lp.explicit_mask, "mask", w, of_first);
    p.fast_path = boolean(j, "fast_path", w);
    check_same(p.fast_path, lp.fast_path, "fast_path", w, of_first);
    p.call = lp.call;  // analyze_mask's band plan is its first layer's
    p.reason = lp.reason;
    p.causal = boolean(j, "causal", w);
    p.keys_before = integer(j, "keys_before", w, -1);
    p.masks_padded_keys = boolean(j, "masks_padded_keys", w);
    p.computes_padded_queries = boolean(j, "computes_padded_queries", w);
    p.unmask_empty_rows = boolean(j, "unmask_empty_rows", w);
    p.padded_query_rows = string(j, "padded_query_treatment", w);
    BandCheck& c = b.check;
    c.rows_checked = integer(j, "rows_checked", w, 0);
    c.max_allowed_per_row = integer(j, "max_allowed_per_row", w, 0, s.width);
    c.saturates_at_row = nullable_integer(j, "saturates_at_row", w, 0, s.width - 1);
    c.padded_query_rows = integer(j, "padded_query_rows", w, 0);
    c.fully_masked_rows = integer(j, "fully_masked_rows", w, 0);
    c.first_fully_masked_row = nullable_integer(j, "first_fully_masked_row", w, 0, s.width - 1);
    check_first(c.first_fully_masked_row.has_value(), c.fully_masked_rows,
                "first_fully_masked_row", "fully_masked_rows", w);
    c.violating_rows = integer(j, "violating_rows", w, 0);
    c.first_violation = violation_from_json(j, "first_violation", w, s);
    check_first(c.first_violation.has_value(), c.violating_rows, "first_violation",
                "violating_rows", w);
    c.padded_rows_differing = integer(j, "padded_rows_differing", w, 0);
    c.first_padded_difference = violation_from_json(j, "first_padded_difference", w, s);
    check_first(c.first_padded_difference.has_value(), c.padded_rows_differing,
                "first_padded_difference", "padded_rows_differing", w);
    r.bands.push_back(std::move(b));
  }
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const MaskBand* b = find_band(r, r.request.rules, r.layers[i].type);
    const std::string w = at(where, "layers", i);
    const std::string band = fmt::format("the {} band under {}", to_string(r.layers[i].type),
                                         to_string(r.request.rules));
    check_same(layer_band[i].first, b ? b->check.max_allowed_per_row : 0, "max_allowed_per_row",
               w, band);
    check_same(layer_band[i].second, b ? b->check.saturates_at_row : std::nullopt,
               "saturates_at_row", w, band);
  }

  const Json& asserts = array(results, "assertions", where);
  for (size_t i = 0; i < asserts.size(); ++i) {
    const Json& j = asserts[i];
    const std::string w = at(where, "assertions", i);
    static const std::vector<std::string> names = {"band", "window", "fast_path"};
    MaskAssertion a;
    a.name = names[choice(j, "name", w, names)];
    a.passed = boolean(j, "passed", w);
    a.message = string(j, "message", w);
    a.layer = nullable_integer(j, "layer", w, 0, static_cast<int64_t>(r.layers.size()) - 1);
    a.batch_row = nullable_integer(j, "batch_row", w, 0, r.request.batch - 1);
    a.row = nullable_integer(j, "row", w, 0, s.width - 1);
    r.assertions.push_back(std::move(a));
  }
  r.geometry_s = number(results, "geometry_s", where);
  if (r.geometry_s < 0) fail("{}: field 'geometry_s' is negative: {}", where, r.geometry_s);
  // As analyze_mask derives them.
  r.ok = std::all_of(r.assertions.begin(), r.assertions.end(),
                     [](const MaskAssertion& a) { return a.passed; });
  for (const MaskAssertion& a : r.assertions) {
    if (!a.passed) r.diagnostics.push_back({Severity::kError, "mask_" + a.name, a.message});
  }
  r.outcome = r.ok ? Outcome::kOk : Outcome::kNo;
  return r;
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
