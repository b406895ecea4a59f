// The part-level diff of two runs (part_diff.hpp): each side's phase x part rows, from a trace's
// own attribution or from `kernels` / `profile` evidence, set side by side per step.
#include "tprobe/core/trace/compare/part_diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"

namespace tprobe::core {
namespace {

void check_vocab(const std::string& v, const char* key, const std::string& where) {
  const std::string k = key;
  std::optional<LayerType> type;
  const bool ok = v == "untagged" || (k == "phase" && parse_step_phase(v)) ||
                  (k == "part" && parse_step_part(v)) ||
                  (k == "layer_kind" && parse_layer_kind(v, type));
  if (!ok) fail("{}: '{}' = \"{}\" is not in tprobe's vocabulary", where, key, detail::printable(v));
}

}  // namespace

std::vector<PartRow> part_rows_from_json(const PartCells& cells, const std::string& where) {
  std::vector<PartRow> rows = cells.by_phase_part.value_or(std::vector<PartRow>{});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string w = fmt::format("{}[{}]", where, i);
    check_vocab(rows[i].phase, "phase", w);
    check_vocab(rows[i].layer_kind, "layer_kind", w);
    check_vocab(rows[i].part, "part", w);
  }
  return rows;
}

PartSide part_side_from_evidence(const Json& results, const std::string& probe,
                                 const std::string& where) {
  PartSide s;
  s.label = where;
  if (!results.is_object()) fail("{}: results must be an object", where);
  if (probe == "profile") {
    auto pts = results.find("points");
    if (pts == results.end() || !pts->is_array()) {
      s.why_not = "its results hold no points[]";
      return s;
    }
    // The point of the evidence's kernel table (the widest traced point by default), else the
    // last point with a phase × part breakdown.
    int64_t want_b = -1, want_w = -1;
    auto kp = results.find("kernel_table_point");
    if (kp != results.end() && kp->is_object() && kp->contains("batch") && kp->contains("width") &&
        (*kp)["batch"].is_number_integer() && (*kp)["width"].is_number_integer()) {
      want_b = (*kp)["batch"].get<int64_t>();
      want_w = (*kp)["width"].get<int64_t>();
    }
    const Json* chosen = nullptr;
    std::string chosen_name;
    for (std::size_t i = 0; i < pts->size(); ++i) {
      const Json& p = (*pts)[i];
      if (!p.is_object()) fail("{}: results.points[{}] is not an object", where, i);
      auto kt = p.find("kernel_trace");
      if (kt == p.end() || !kt->is_object() ||
          !evidence::from_json<PartCells>(*kt, where + ": results.points[].kernel_trace").by_phase_part)
        continue;
      const bool has_bw = p.contains("batch") && p["batch"].is_number_integer() &&
                          p.contains("width") && p["width"].is_number_integer();
      const std::string name =
          has_bw ? fmt::format("{}x{}", p["batch"].get<int64_t>(), p["width"].get<int64_t>())
                 : fmt::format("points[{}]", i);
      const bool wanted = has_bw && p["batch"].get<int64_t>() == want_b &&
                          p["width"].get<int64_t>() == want_w;
      if (chosen == nullptr || wanted || want_b < 0) {
        chosen = &p;
        chosen_name = name;
        if (wanted) break;
      }
    }
    if (chosen == nullptr) {
      s.why_not = "no point of its results carries kernel_trace.by_phase_part (profile ran "
                  "without a kernel trace)";
      return s;
    }
    const std::string w = where + ": results.points[" + chosen_name + "].kernel_trace";
    s.rows = part_rows_from_json(evidence::from_json<PartCells>((*chosen)["kernel_trace"], w), w);
    s.origin = "profile evidence, point " + chosen_name;
  } else {
    const PartCells cells = evidence::from_json<PartCells>(results, where + ": results");
    if (!cells.by_phase_part) {
      s.why_not = "its results hold no by_phase_part (a trace without module events)";
      return s;
    }
    s.rows = part_rows_from_json(cells, where + ": results");
    s.origin = probe + " evidence";
    // The steps the rows sum over (a per-step diff divides by it): absent is one step; anything
    // else than a count is refused, never read as one step.
    auto st = results.find("parts_steps");
    if (st != results.end()) {
      if (!st->is_number_integer() || st->get<int64_t>() < 1 ||
          st->get<int64_t>() > (int64_t{1} << 30)) {
        fail("{}: results.parts_steps is {}: not a step count (an integer 1..1073741824)", where,
             detail::printable(st->dump(), 40));
      }
      s.steps = st->get<int64_t>();
    }
  }
  for (const PartRow& r : s.rows) s.kernel_ns += r.kernel_ns;
  s.available = true;
  return s;
}

PartSide part_side_from_trace(const TraceParts& parts, int64_t steps, const std::string& label) {
  PartSide s;
  s.label = label;
  s.origin = "trace";
  s.steps = std::max<int64_t>(steps, 1);
  if (!parts.has_breakdown()) {
    s.why_not = parts.attribution_off
                    ? "its phase × part attribution was turned off (--parts off)"
                    : "it holds no module events (record with with_stack=True)";
    return s;
  }
  s.rows = parts.breakdown.rows;
  for (const PartRow& r : s.rows) s.kernel_ns += r.kernel_ns;
  s.available = true;
  return s;
}

PartDiff diff_parts(const PartSide& a, const PartSide& b) {
  PartDiff d;
  d.a = a;
  d.b = b;
  if (!a.available || !b.available) {
    d.why_not = !a.available ? "A: " + a.why_not : "B: " + b.why_not;
    return d;
  }
  d.available = true;
  std::map<std::tuple<int, int, int, std::string, std::string, std::string>, PartDiffRow> rows;
  auto add = [&](const PartSide& s, bool is_b) {
    for (const PartRow& r : s.rows) {
      PartDiffRow& x = rows[{phase_rank(r.phase), layer_kind_rank(r.layer_kind), part_rank(r.part),
                             r.phase, r.layer_kind, r.part}];
      x.phase = r.phase;
      x.layer_kind = r.layer_kind;
      x.part = r.part;
      (is_b ? x.b_ns : x.a_ns) += r.kernel_ns;
    }
  };
  add(a, false);
  add(b, true);
  for (auto& [k, r] : rows) {
    r.a_share_ratio = a.kernel_ns > 0 ? double(r.a_ns) / double(a.kernel_ns) : 0;
    r.b_share_ratio = b.kernel_ns > 0 ? double(r.b_ns) / double(b.kernel_ns) : 0;
    r.a_ns /= a.steps;
    r.b_ns /= b.steps;
    d.rows.push_back(r);
  }
  return d;
}

Json to_json(const PartDiff& d) {
  auto side = [](const PartSide& s) {
    return Json{{"label", s.label},
                {"available", s.available},
                {"why_not", s.why_not.empty() ? Json(nullptr) : Json(s.why_not)},
                {"origin", s.origin},
                {"steps", s.steps},
                {"kernel_ns", s.kernel_ns}};
  };
  Json out = {{"available", d.available},
              {"why_not", d.why_not.empty() ? Json(nullptr) : Json(d.why_not)},
              {"a", side(d.a)},
              {"b", side(d.b)},
              {"rows", Json::array()}};
  for (const PartDiffRow& r : d.rows) {
    out["rows"].push_back({{"phase", r.phase},
                           {"layer_kind", r.layer_kind},
                           {"part", r.part},
                           {"a_ns_per_step", r.a_ns},
                           {"b_ns_per_step", r.b_ns},
                           {"delta_ns_per_step", r.b_ns - r.a_ns},
                           {"ratio", r.a_ns > 0 ? Json(double(r.b_ns) / double(r.a_ns))
                                                : Json(nullptr)},
                           {"a_share_ratio", r.a_share_ratio},
                           {"b_share_ratio", r.b_share_ratio}});
  }
  return out;
}

PartDiff part_diff_from_json(const Json& j, const std::string& where) {
  namespace jr = json_read;
  if (!j.is_object()) fail("{} must be an object", where);
  auto side = [&](const char* key) {
    const std::string w = where + "." + key;
    const Json& o = jr::object(j, key, where);
    PartSide s;
    s.label = jr::string(o, "label", w);
    s.available = jr::boolean(o, "available", w);
    s.why_not = jr::nullable_string(o, "why_not", w).value_or("");
    s.origin = jr::string(o, "origin", w);
    s.steps = jr::integer(o, "steps", w, 1, int64_t{1} << 30);
    s.kernel_ns = jr::integer(o, "kernel_ns", w, 0);
    return s;
  };
  PartDiff d;
  d.available = jr::boolean(j, "available", where);
  d.why_not = jr::nullable_string(j, "why_not", where).value_or("");
  d.a = side("a");
  d.b = side("b");
  const Json& rows = jr::array(j, "rows", where);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string w = jr::at(where, "rows", i);
    PartDiffRow r;
    r.phase = jr::string(rows[i], "phase", w);
    r.layer_kind = jr::string(rows[i], "layer_kind", w);
    r.part = jr::string(rows[i], "part", w);
    r.a_ns = jr::integer(rows[i], "a_ns_per_step", w, 0);
    r.b_ns = jr::integer(rows[i], "b_ns_per_step", w, 0);
    r.a_share_ratio = jr::number(rows[i], "a_share_ratio", w);
    r.b_share_ratio = jr::number(rows[i], "b_share_ratio", w);
    // The delta is written beside its parts: a file whose delta disagrees was edited.
    if (jr::integer(rows[i], "delta_ns_per_step", w) != r.b_ns - r.a_ns)
      fail("{}: delta_ns_per_step is not b_ns_per_step - a_ns_per_step", w);
    d.rows.push_back(std::move(r));
  }
  return d;
}

std::vector<Table> part_diff_tables(const PartDiff& d) {
  std::vector<Table> out;
  if (!d.available) {
    Table t("Parts compared");
    t.column(fmt::format("no phase × part comparison: {}", d.why_not), Align::kLeft);
    out.push_back(t);
    return out;
  }
  Table t(fmt::format("Parts compared, per step: A = {} ({}, {} step(s)), B = {} ({}, {} step(s))",
                      d.a.label, d.a.origin, d.a.steps, d.b.label, d.b.origin, d.b.steps));
  t.column("phase", Align::kLeft)
      .column("layers", Align::kLeft)
      .column("part", Align::kLeft)
      .column("A")
      .column("B")
      .column("B − A")
      .column("B / A")
      .column("A share")
      .column("B share");
  std::string last_phase;
  int64_t ta = 0, tb = 0;
  for (const PartDiffRow& r : d.rows) {
    if (!last_phase.empty() && r.phase != last_phase) t.separator();
    last_phase = r.phase;
    ta += r.a_ns;
    tb += r.b_ns;
    const int64_t delta = r.b_ns - r.a_ns;
    t.row({r.phase, r.layer_kind, r.part, format_ns(r.a_ns), format_ns(r.b_ns),
           (delta > 0 ? "+" : delta < 0 ? "−" : "") + format_ns(std::llabs(delta)),
           r.a_ns > 0 && r.b_ns > 0 ? fmt::format("{:.2f}×", double(r.b_ns) / double(r.a_ns))
           : r.a_ns > 0            ? "gone"
           : r.b_ns > 0            ? "new"
                                   : "",
           format_percent(r.a_share_ratio), format_percent(r.b_share_ratio)});
  }
  t.separator();
  t.row({"all", "", "", format_ns(ta), format_ns(tb),
         (tb - ta > 0 ? "+" : tb - ta < 0 ? "−" : "") + format_ns(std::llabs(tb - ta)),
         ta > 0 ? fmt::format("{:.2f}×", double(tb) / double(ta)) : "", "100.0 %", "100.0 %"});
  t.note("kernel time only (memcpy/memset left out), divided by the profiler steps each side "
         "covers; shares are of each side's own kernel total");
  out.push_back(t);
  return out;
}

}  // namespace tprobe::core
