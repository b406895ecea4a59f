// The report: evidence files turned into sections of figures (inline SVG), tables and facts, each
// naming the file and fields it came from, rendered as one self-contained HTML page and Markdown.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"

namespace tprobe::core {

// One input file: parsed, or why not.
struct EvidenceInput {
  std::string path;
  std::string name;   // file name as shown on the page
  Json doc;           // null when unreadable
  std::string error;  // why it could not be read ("" when read)
};

struct ReportFigure {
  std::string id;  // stable, for tests and links: "fig-scaling-fit-time"
  std::string title;
  std::string svg;
  std::string source;               // evidence file name
  std::vector<std::string> fields;  // JSON paths the figure drew
  std::string caption;              // how to read it
};

struct ReportTable {
  std::string id;
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> highlight;  // one per row (may be empty)
  std::string source;
  std::vector<std::string> fields;
};

struct ReportFact {
  std::string label, value, field;  // field: the JSON path of the value
  bool alarm = false;               // rendered highlighted
  // A link the value opens (a file beside the evidence, relative to its folder); "" none. Only a
  // path is linked: a value with a scheme ("javascript:", "http:") is shown as text.
  std::string href;
};

struct ReportSection {
  std::string id;     // "sec-<probe>"
  std::string probe;  // "scaling-fit"
  std::string title;
  std::string source;   // file name
  std::string outcome;  // status.outcome
  std::vector<ReportFact> facts;
  std::vector<std::string> notes;  // schema/tool-version notes, absent fields, unknown shapes
  std::vector<Diagnostic> diagnostics;
  std::vector<ReportFigure> figures;
  std::vector<ReportTable> tables;
};

struct ProvenanceRow {
  std::string file, probe, schema, tool_version, git_sha, started_at, argv, device, torch,
      attn_requested, attn_resolved, outcome;
};

struct Report {
  std::string generated_at;
  std::string tool_version, git_sha;  // of the tprobe that drew the report
  std::vector<ProvenanceRow> provenance;
  std::vector<ReportSection> sections;
  std::vector<std::string> notes;  // files that could not be read, and similar
};

// Files and directories (every *.json directly inside, sorted); a file that cannot be parsed is
// kept with its error, never thrown. Throws tprobe::Error only for a path that does not exist.
std::vector<EvidenceInput> collect_evidence(const std::vector<std::string>& paths);
// The files collect_evidence reads, in its order, without reading them.
std::vector<std::string> list_evidence_files(const std::vector<std::string>& paths);

// build_report (the sections, each probe's from its own builder) is in section.hpp.

std::string render_html(const Report& report);
std::string render_markdown(const Report& report);
// The report probe's own results: files read, sections with their figure and table ids and the
// fields each drew, notes, and the two pages written.
struct ReportResultsFile {
  std::string file, probe, schema, tool_version, git_sha, outcome;
};
struct ReportResultsFigure {
  std::string id, title, source;
  std::vector<std::string> fields;
};
struct ReportResultsTable {
  std::string id, title;
  int64_t rows = 0;  // how many rows it has (the rows themselves are in the pages)
  std::vector<std::string> fields;
};
struct ReportResultsSection {
  std::string id, probe, source, outcome;
  std::vector<ReportResultsFigure> figures;
  std::vector<ReportResultsTable> tables;
  std::vector<std::string> notes;
};
struct ReportResults {
  std::string generated_at;
  std::vector<ReportResultsFile> files;
  std::vector<ReportResultsSection> sections;
  std::vector<std::string> notes;
  std::string html, markdown;  // the pages written ("" when none)
};
ReportResults report_results(const Report& report, std::string html = "",
                             std::string markdown = "");
Json to_json(const ReportResults& results);
// The reverse of to_json; `where` names the object ("r.json results").
ReportResults report_results_from_json(const Json& results, const std::string& where);
// to_json(report_results(report)): no page written.
Json to_json(const Report& report);

}  // namespace tprobe::core
