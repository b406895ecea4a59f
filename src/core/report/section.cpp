// The section builder and the JSON reads every probe's section uses (section.hpp), and the
// environment block's section.
#include "tprobe/core/report/section.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "base/string_util.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {

using detail::ends_with;

namespace {
// A generic table shows at most this many columns (a hand-made file can have any number of keys).
constexpr std::size_t kMaxGenericColumns = 64;
}  // namespace

const Json* find_path(const Json& j, const std::string& dotted) {
  const Json* cur = &j;
  std::size_t start = 0;
  while (start <= dotted.size()) {
    std::size_t dot = dotted.find('.', start);
    std::string key =
        dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

std::optional<double> number_at(const Json& j, const std::string& dotted) {
  const Json* v = find_path(j, dotted);
  if (!v || !v->is_number()) return std::nullopt;
  double d = v->get<double>();
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

std::string string_at(const Json& j, const std::string& dotted) {
  const Json* v = find_path(j, dotted);
  if (!v) return "";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_null()) return "";
  return v->dump();
}

const Json* array_at(const Json& j, const std::string& dotted) {
  const Json* v = find_path(j, dotted);
  return v && v->is_array() ? v : nullptr;
}

// A scalar cell for tables of unknown shape.
std::string cell(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer()) return format_count(v.get<int64_t>());
  if (v.is_number()) return axis_number(v.get<double>());
  if (v.is_null()) return "-";
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string pct(std::optional<double> ratio) { return ratio ? format_percent(*ratio) : "-"; }

// The time field of a row of unknown shape: a preferred key, else the first "*_s" or "*_ns".
std::optional<double> row_seconds(const Json& row, std::string* key) {
  static const char* kPreferred[] = {
      "device_time_s",  "time_s",  "total_s",  "self_device_time_s", "duration_s", "sum_s",
      "device_time_ns", "time_ns", "total_ns", "duration_ns",        "sum_ns"};
  if (!row.is_object()) return std::nullopt;
  auto take = [&](const std::string& k) -> std::optional<double> {
    auto it = row.find(k);
    if (it == row.end() || !it->is_number()) return std::nullopt;
    *key = k;
    double v = it->get<double>();
    return ends_with(k, "_ns") ? v * 1e-9 : v;
  };
  for (const char* k : kPreferred) {
    if (auto v = take(k)) return v;
  }
  for (const auto& [k, v] : row.items()) {
    if (ends_with(k, "_s") || ends_with(k, "_ns")) {
      if (auto t = take(k)) return t;
    }
  }
  return std::nullopt;
}

std::string row_label(const Json& row, std::string* key) {
  static const char* kKeys[] = {"short_name", "name",       "kernel", "category",
                                "phase",      "layer_type", "label",  "component"};
  if (!row.is_object()) return "";
  for (const char* k : kKeys) {
    auto it = row.find(k);
    if (it != row.end() && it->is_string()) {
      *key = k;
      return it->get<std::string>();
    }
  }
  return "";
}

FieldPath outside_results(std::string path) {
  FieldPath f(std::move(path));
  f.in_results = false;
  return f;
}

SectionBuilder::SectionBuilder(const EvidenceInput& in, ReportSection& section, const Json& results)
    : in_(in), sec_(section), results_(results) {}

std::string SectionBuilder::field_name(const FieldPath& field) {
  // The one place a section's field gets its "results." prefix.
  return field.in_results ? "results." + field.path : field.path;
}

const Json* SectionBuilder::find(const FieldPath& field) const {
  return find_path(field.in_results ? results_ : in_.doc, field.path);
}

std::optional<double> SectionBuilder::number_at(const FieldPath& field) const {
  return core::number_at(field.in_results ? results_ : in_.doc, field.path);
}

std::string SectionBuilder::string_at(const FieldPath& field) const {
  return core::string_at(field.in_results ? results_ : in_.doc, field.path);
}

const Json* SectionBuilder::array_at(const FieldPath& field) const {
  return core::array_at(field.in_results ? results_ : in_.doc, field.path);
}

void SectionBuilder::fact(std::string label, std::string value, const FieldPath& field,
                          bool alarm) {
  sec_.facts.push_back({std::move(label), std::move(value), field_name(field), alarm, ""});
}

void SectionBuilder::fact(std::string label, std::string value,
                          const std::vector<FieldPath>& fields, bool alarm) {
  std::string names;
  for (const auto& f : fields) names += (names.empty() ? "" : ", ") + field_name(f);
  sec_.facts.push_back({std::move(label), std::move(value), std::move(names), alarm, ""});
}

void SectionBuilder::link_fact(std::string label, std::string value, std::string href,
                               const FieldPath& field) {
  sec_.facts.push_back({std::move(label), std::move(value), field_name(field), false,
                        std::move(href)});
}

void SectionBuilder::note(std::string text) { sec_.notes.push_back(std::move(text)); }

void SectionBuilder::absent(const FieldPath& field, const std::string& what) {
  sec_.notes.push_back(fmt::format("{} absent or not of the documented type: {} not drawn",
                                   field_name(field), what));
}

void SectionBuilder::figure(const std::string& id, std::string title, std::string svg,
                            const std::vector<FieldPath>& fields, std::string caption) {
  std::vector<std::string> names;
  for (const auto& f : fields) names.push_back(field_name(f));
  sec_.figures.push_back({"fig-" + sec_.probe + "-" + id, std::move(title), std::move(svg),
                          in_.name, std::move(names), std::move(caption)});
}

void SectionBuilder::table(ReportTable t) {
  t.source = in_.name;
  sec_.tables.push_back(std::move(t));
}
ReportTable SectionBuilder::generic_table(const std::string& id, const std::string& title,
                                          const Json& rows, const FieldPath& field,
                                          std::size_t max_rows) const {
  ReportTable t;
  t.id = id;
  t.title = title;
  t.source = source();
  t.fields = {field_name(field) + "[]"};
  // The columns: every scalar key in first-seen order, found through a set (a linear search of
  // the list was quadratic in a hand-made file's distinct keys), at most kMaxGenericColumns.
  std::vector<std::string> keys;
  std::set<std::string, std::less<>> seen;
  std::size_t distinct = 0;
  for (const auto& r : rows) {
    if (!r.is_object()) continue;
    for (const auto& [k, v] : r.items()) {
      if (v.is_structured() || !seen.insert(k).second) continue;
      ++distinct;
      if (keys.size() < kMaxGenericColumns) keys.push_back(k);
    }
  }
  t.header = keys;
  for (const auto& r : rows) {
    if (t.rows.size() >= max_rows) break;
    std::vector<std::string> cells;
    for (const auto& k : keys) cells.push_back(r.is_object() && r.contains(k) ? cell(r[k]) : "");
    t.rows.push_back(std::move(cells));
  }
  if (rows.size() > max_rows) t.title += fmt::format(" (first {} of {})", max_rows, rows.size());
  if (distinct > keys.size()) {
    t.title += fmt::format(" (first {} of {} columns)", keys.size(), distinct);
  }
  return t;
}

void environment_section(SectionBuilder& c) {
  static const Json kEmpty = Json::object();
  const Json* block = find_path(c.document(), "environment");
  const Json& e = block && block->is_object() ? *block : kEmpty;
  c.fact("torch",
         string_at(e, "torch.version") +
             (find_path(e, "torch.cuda_build") && *find_path(e, "torch.cuda_build") == true
                  ? " (CUDA build)"
                  : " (CPU build)"),
         outside_results("environment.torch"));
  const bool cuda = find_path(e, "cuda.usable") && *find_path(e, "cuda.usable") == true;
  c.fact("CUDA",
         cuda ? "usable, runtime " + string_at(e, "cuda.runtime_version")
              : "not usable: " + string_at(e, "cuda.unusable_reason"),
         outside_results("environment.cuda"));
  std::string dev = string_at(e, "device.name");
  if (!dev.empty()) {
    c.fact("device",
           fmt::format("{} (sm {}), {}", dev, string_at(e, "device.compute_capability"),
                       format_bytes(number_at(e, "device.memory_bytes").value_or(0))),
           outside_results("environment.device"));
  }
  const bool cupti = find_path(e, "cupti.usable") && *find_path(e, "cupti.usable") == true;
  c.fact("CUPTI",
         cupti ? "usable, version " + string_at(e, "cupti.version")
               : "not usable: " + string_at(e, "cupti.unavailable_reason"),
         outside_results("environment.cupti"));
  if (const Json* b = array_at(e, "sdpa_backends")) {
    c.table(c.generic_table("tab-env-sdpa", "SDPA backends of the linked libtorch", *b,
                            outside_results("environment.sdpa_backends")));
  }
}

}  // namespace tprobe::core
