// What a probe's report section is built with: the evidence file it draws from, and a builder
// that records facts, figures, tables and notes, each naming the field it came from. Every probe
// keeps its section function beside its own views (e.g. data/padding_report.cpp); build_report
// takes the list of them (probes/ holds it: the probe registry) and calls each on its evidence.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/report/report.hpp"

namespace tprobe::core {

// ---- JSON access that never throws (dotted paths: "a.b.c") ----

const Json* find_path(const Json& j, const std::string& dotted);
// A finite number, else nullopt.
std::optional<double> number_at(const Json& j, const std::string& dotted);
// A string as is, null or absent as "", anything else as its JSON text.
std::string string_at(const Json& j, const std::string& dotted);
const Json* array_at(const Json& j, const std::string& dotted);

// A scalar cell for tables of unknown shape.
std::string cell(const Json& v);
// A ratio as a percentage, "-" when absent.
std::string pct(std::optional<double> ratio);
// The time field of a row of unknown shape: a preferred key, else the first "*_s" or "*_ns";
// `key` gets the field's name. Seconds.
std::optional<double> row_seconds(const Json& row, std::string* key);
// The label of such a row (short_name, name, kernel, ...); `key` gets the field's name.
std::string row_label(const Json& row, std::string* key);

// A field as a section records it: relative to the evidence's `results` (the builder writes
// "results." before it), unless made by outside_results().
struct FieldPath {
  FieldPath(const char* p) : path(p) {}  // NOLINT: implicit, so plain strings read as relative
  FieldPath(std::string p) : path(std::move(p)) {}  // NOLINT
  std::string path;
  bool in_results = true;
};
// A field of the whole evidence document: "environment.device.memory_bytes".
FieldPath outside_results(std::string path);

class SectionBuilder {
 public:
  SectionBuilder(const EvidenceInput& in, ReportSection& section, const Json& results);

  const Json& results() const { return results_; }
  const Json& document() const { return in_.doc; }
  const std::string& source() const { return in_.name; }  // the evidence file's name
  ReportSection& section() { return sec_; }

  // Typed reads at a field (relative to results unless outside_results()).
  const Json* find(const FieldPath& field) const;
  std::optional<double> number_at(const FieldPath& field) const;
  std::string string_at(const FieldPath& field) const;
  const Json* array_at(const FieldPath& field) const;

  // The field as the page names it: "results.<path>" or the path outside results.
  static std::string field_name(const FieldPath& field);

  void fact(std::string label, std::string value, const FieldPath& field, bool alarm = false);
  // One fact drawn from several fields, named "results.a, results.b".
  void fact(std::string label, std::string value, const std::vector<FieldPath>& fields,
            bool alarm = false);
  // A fact whose value links to `href` (a path relative to the evidence file's folder).
  void link_fact(std::string label, std::string value, std::string href, const FieldPath& field);
  void note(std::string text);
  // "<field> absent or not of the documented type: <what> not drawn".
  void absent(const FieldPath& field, const std::string& what);
  // A figure "fig-<probe>-<id>" from this file.
  void figure(const std::string& id, std::string title, std::string svg,
              const std::vector<FieldPath>& fields, std::string caption);
  // A table from this file (its fields named with field_name()).
  void table(ReportTable t);
  // A table of every scalar key of an array of objects (the first `max_rows` rows).
  ReportTable generic_table(const std::string& id, const std::string& title, const Json& rows,
                            const FieldPath& field, std::size_t max_rows = 60) const;

 private:
  const EvidenceInput& in_;
  ReportSection& sec_;
  const Json& results_;
};

using SectionFn = void (*)(SectionBuilder&);

// One probe the report draws, in the order of the page.
struct ReportProbe {
  std::string name;   // the probe ("scaling-fit"), as in schema.name "tprobe.<name>"
  std::string title;  // the section's heading
  SectionFn build = nullptr;
};

// Sections in the order of `probes`, unknown probes last with a generic section (status,
// diagnostics, a note). Never throws on evidence content: absent or ill-typed fields become
// notes. `since`: the start (UTC ISO 8601, as invocation.started_at) of the run the evidence
// belongs to; evidence started before it is flagged stale, in its section and in the notes.
Report build_report(const std::vector<EvidenceInput>& inputs,
                    const std::vector<ReportProbe>& probes, const std::string& since = "");

// The environment block's section (env's evidence; any probe's environment has the same shape).
void environment_section(SectionBuilder& c);

}  // namespace tprobe::core
