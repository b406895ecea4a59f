// Two kernel tables side by side: per category and per family, sorted by what moved most.
#include "tprobe/core/trace/compare/kernel_diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/trace/record/activity_name.hpp"
#include "trace/stats/detail/distinct_labels.hpp"

namespace tprobe::core {
namespace {

void sort_by_motion(std::vector<DiffRow>& rows) {
  std::sort(rows.begin(), rows.end(), [](const DiffRow& x, const DiffRow& y) {
    const int64_t dx = std::llabs(x.delta_ns()), dy = std::llabs(y.delta_ns());
    return dx != dy ? dx > dy : x.key < y.key;
  });
}

std::string signed_ms(int64_t ns) {
  const std::string body = format_seconds(std::abs(double(ns)) * 1e-9);
  return ns > 0 ? "+" + body : ns < 0 ? "−" + body : body;
}

std::string ratio_change(int64_t a, int64_t b) {
  if (a == 0 && b == 0) return "";
  if (a == 0) return "new";
  if (b == 0) return "gone";
  return fmt::format("{:.2f}×", double(b) / double(a));
}

Json row_json(const DiffRow& r) {
  return Json{{"key", r.key},
              {"category", r.category},
              {"a_ns", r.a_ns},
              {"b_ns", r.b_ns},
              {"delta_ns", r.delta_ns()},
              {"a_count", r.a_count},
              {"b_count", r.b_count},
              {"a_share_ratio", r.a_share_ratio},
              {"b_share_ratio", r.b_share_ratio}};
}

// Start and end are not in a diff's totals.
Json diff_totals_json(const BusyTotals& t) {
  return evidence::to_json(static_cast<const BusyFigures&>(t));
}

}  // namespace

KernelDiff diff_kernel_tables(const KernelTable& a, const std::string& a_label,
                              const KernelTable& b, const std::string& b_label) {
  KernelDiff d;
  d.a_label = a_label;
  d.b_label = b_label;
  d.a_totals = a.totals;
  d.b_totals = b.totals;
  std::map<std::string, DiffRow> cats;
  for (KernelCategory c : all_kernel_categories()) cats[to_string(c)].key = to_string(c);
  auto add_cats = [&](const KernelTable& t, bool is_b) {
    for (const CategoryRow& c : t.categories) {
      DiffRow& r = cats[to_string(c.category)];
      (is_b ? r.b_ns : r.a_ns) += c.total_ns;
      (is_b ? r.b_count : r.a_count) += c.count;
      (is_b ? r.b_share_ratio : r.a_share_ratio) += c.share_ratio;
    }
  };
  add_cats(a, false);
  add_cats(b, true);
  for (auto& [k, r] : cats) {
    r.category = k;
    if (r.a_count || r.b_count) d.categories.push_back(r);
  }
  std::map<std::string, DiffRow> fams;
  auto add_fams = [&](const KernelTable& t, bool is_b) {
    for (const KernelRow& k : t.kernels) {
      // Kernels by family; memcpy/memset by the name every source agrees on, so a Kineto
      // "Memcpy DtoD (Device -> Device)" and a CUPTI "Memcpy DtoD" are one row.
      const std::string key =
          k.kind == ActivityKind::kKernel ? k.family : normalized_activity_name(k.kind, k.name);
      DiffRow& r = fams[key];
      r.key = key;
      if (r.category.empty()) r.category = to_string(k.category);
      (is_b ? r.b_ns : r.a_ns) += k.total_ns;
      (is_b ? r.b_count : r.a_count) += k.count;
      (is_b ? r.b_share_ratio : r.a_share_ratio) += k.share_ratio;
    }
  };
  add_fams(a, false);
  add_fams(b, true);
  for (auto& [k, r] : fams) d.families.push_back(r);
  sort_by_motion(d.categories);
  sort_by_motion(d.families);
  return d;
}

Json to_json(const KernelDiff& d) {
  Json cats = Json::array(), fams = Json::array();
  for (const DiffRow& r : d.categories) cats.push_back(row_json(r));
  for (const DiffRow& r : d.families) fams.push_back(row_json(r));
  return Json{{"a", {{"label", d.a_label}, {"totals", diff_totals_json(d.a_totals)}}},
              {"b", {{"label", d.b_label}, {"totals", diff_totals_json(d.b_totals)}}},
              {"delta_sum_ns", d.b_totals.sum_ns - d.a_totals.sum_ns},
              {"delta_union_busy_ns", d.b_totals.union_busy_ns - d.a_totals.union_busy_ns},
              {"delta_span_ns", d.b_totals.span_ns - d.a_totals.span_ns},
              {"categories", cats},
              {"families", fams}};
}

KernelDiff kernel_diff_from_json(const Json& j, const std::string& where) {
  namespace jr = json_read;
  if (!j.is_object()) fail("{} must be an object", where);
  KernelDiff d;
  auto side = [&](const char* key, std::string& label, BusyTotals& t) {
    const std::string w = where + "." + key;
    const Json& o = jr::object(j, key, where);
    label = jr::string(o, "label", w);
    static_cast<BusyFigures&>(t) =
        evidence::from_json<BusyFigures>(jr::object(o, "totals", w), w + ".totals");
  };
  side("a", d.a_label, d.a_totals);
  side("b", d.b_label, d.b_totals);
  auto rows = [&](const char* key, std::vector<DiffRow>& out) {
    const Json& a = jr::array(j, key, where);
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string w = jr::at(where, key, i);
      DiffRow r;
      r.key = jr::string(a[i], "key", w);
      r.category = jr::string(a[i], "category", w);
      r.a_ns = jr::integer(a[i], "a_ns", w, 0);
      r.b_ns = jr::integer(a[i], "b_ns", w, 0);
      r.a_count = jr::integer(a[i], "a_count", w, 0);
      r.b_count = jr::integer(a[i], "b_count", w, 0);
      r.a_share_ratio = jr::number(a[i], "a_share_ratio", w);
      r.b_share_ratio = jr::number(a[i], "b_share_ratio", w);
      out.push_back(std::move(r));
    }
  };
  rows("categories", d.categories);
  rows("families", d.families);
  return d;
}

std::vector<Table> kernel_diff_tables(const KernelDiff& d, int top) {
  std::vector<Table> out;
  Table t(fmt::format("A = {}\nB = {}", d.a_label, d.b_label));
  t.column("measure", Align::kLeft).column("A").column("B").column("B − A").column("B / A");
  auto line = [&](const char* what, int64_t a, int64_t b) {
    t.row({what, format_seconds(double(a) * 1e-9), format_seconds(double(b) * 1e-9),
           signed_ms(b - a), ratio_change(a, b)});
  };
  line("sum of kernel time", d.a_totals.sum_ns, d.b_totals.sum_ns);
  line("union busy time", d.a_totals.union_busy_ns, d.b_totals.union_busy_ns);
  line("wall span", d.a_totals.span_ns, d.b_totals.span_ns);
  t.row({"device rows", format_count(d.a_totals.events), format_count(d.b_totals.events),
         fmt::format("{:+}", d.b_totals.events - d.a_totals.events), ""});
  out.push_back(t);
  auto rows_table = [&](const std::string& title, const std::vector<DiffRow>& rows, bool family) {
    Table x(title);
    x.column(family ? "kernel family" : "category", Align::kLeft);
    if (family) x.column("category", Align::kLeft);
    x.column("A")
        .column("B")
        .column("B − A")
        .column("B / A")
        .column("calls A→B")
        .column("share A→B");
    const std::size_t shown =
        top > 0 ? std::min(rows.size(), static_cast<std::size_t>(top)) : rows.size();
    std::vector<std::string> labels, whole;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < shown; ++i) {
      labels.push_back(family ? short_kernel_name(rows[i].key, 60) : rows[i].key);
      whole.push_back(rows[i].key);
      index.push_back(i);
    }
    detail::make_distinct(labels, whole, index, family ? "diff.families" : "diff.categories");
    for (std::size_t i = 0; i < shown; ++i) {
      const DiffRow& r = rows[i];
      std::vector<std::string> cells{labels[i]};
      if (family) cells.push_back(r.category);
      cells.insert(
          cells.end(),
          {format_seconds(double(r.a_ns) * 1e-9), format_seconds(double(r.b_ns) * 1e-9),
           signed_ms(r.delta_ns()), ratio_change(r.a_ns, r.b_ns),
           fmt::format("{}→{}", format_count(r.a_count), format_count(r.b_count)),
           fmt::format("{}→{}", format_percent(r.a_share_ratio), format_percent(r.b_share_ratio))});
      x.row(cells);
    }
    if (shown < rows.size()) {
      int64_t a_rest = 0, b_rest = 0;
      for (std::size_t i = shown; i < rows.size(); ++i) {
        a_rest += rows[i].a_ns;
        b_rest += rows[i].b_ns;
      }
      x.note(fmt::format("left out: {} more row(s) ({} in A, {} in B), all in the evidence",
                         rows.size() - shown, format_seconds(double(a_rest) * 1e-9),
                         format_seconds(double(b_rest) * 1e-9)));
    }
    out.push_back(x);
  };
  rows_table("By category, largest change first", d.categories, false);
  rows_table("By kernel family, largest change first", d.families, true);
  return out;
}

}  // namespace tprobe::core
