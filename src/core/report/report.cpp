// The report: evidence collection, provenance, and the page's sections in the order of the probes
// it is given; each probe's section builder lives beside that probe's views (section.hpp).
#include "tprobe/core/report/report.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

namespace {

using detail::ends_with;
using detail::starts_with;

std::string base_name(const std::string& p) {
  std::size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

std::vector<std::string> list_evidence_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    if (is_directory(p)) {
      DIR* d = ::opendir(p.c_str());
      if (!d) fail("{}: cannot list the directory", p);
      std::vector<std::string> names;
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.size() > 5 && ends_with(n, ".json")) names.push_back(n);
      }
      ::closedir(d);
      std::sort(names.begin(), names.end());
      for (const auto& n : names) files.push_back((p.back() == '/' ? p : p + "/") + n);
    } else {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0) fail("{}: no such evidence file or directory", p);
      files.push_back(p);
    }
  }
  return files;
}

std::vector<EvidenceInput> collect_evidence(const std::vector<std::string>& paths) {
  const std::vector<std::string> files = list_evidence_files(paths);
  std::vector<EvidenceInput> out;
  for (const auto& f : files) {
    EvidenceInput in;
    in.path = f;
    in.name = base_name(f);
    try {
      in.doc = detail::parse_json_strict(read_input_file(f, "evidence file"), f);
    } catch (const Interrupted&) {
      throw;
    } catch (const Error& e) {
      in.error = e.what();
      in.doc = nullptr;
    }
    out.push_back(std::move(in));
  }
  return out;
}

Report build_report(const std::vector<EvidenceInput>& inputs,
                    const std::vector<ReportProbe>& probes, const std::string& since) {
  Report rep;
  rep.generated_at = utc_timestamp_now();
  rep.tool_version = TPROBE_VERSION;
  rep.git_sha = TPROBE_GIT_SHA;
  std::vector<std::pair<int, ReportSection>> ordered;
  for (const auto& in : inputs) {
    if (!in.error.empty()) {
      rep.notes.push_back(fmt::format("{}: not read ({})", in.name, in.error));
      continue;
    }
    const std::string schema = string_at(in.doc, "schema.name");
    if (!in.doc.is_object() || !starts_with(schema, "tprobe.")) {
      rep.notes.push_back(fmt::format(
          "{}: not a tprobe evidence file (no schema.name \"tprobe.<probe>\"); skipped", in.name));
      continue;
    }
    const std::string probe = schema.substr(7);
    if (probe == "report") continue;  // a report's own evidence, from an earlier run
    ReportSection sec;
    sec.probe = probe;
    sec.id = "sec-" + probe;
    sec.source = in.name;
    sec.outcome = string_at(in.doc, "status.outcome");
    ProvenanceRow pr;
    pr.file = in.name;
    pr.probe = probe;
    pr.schema = schema + " v" + string_at(in.doc, "schema.version");
    pr.tool_version = string_at(in.doc, "tool.version");
    pr.git_sha = string_at(in.doc, "tool.git_sha");
    pr.started_at = string_at(in.doc, "invocation.started_at");
    if (const Json* argv = array_at(in.doc, "invocation.argv")) {
      std::vector<std::string> parts;
      for (const auto& a : *argv) parts.push_back(a.is_string() ? a.get<std::string>() : a.dump());
      if (!parts.empty()) parts[0] = "tprobe";
      pr.argv = fmt::format("{}", fmt::join(parts, " "));
    }
    pr.device = string_at(in.doc, "environment.device.name");
    if (pr.device.empty()) pr.device = "CPU (" + string_at(in.doc, "environment.host") + ")";
    pr.torch = string_at(in.doc, "environment.torch.version");
    pr.attn_requested = string_at(in.doc, "environment.attn_requested");
    pr.attn_resolved = string_at(in.doc, "environment.attn_resolved");
    pr.outcome = sec.outcome;
    rep.provenance.push_back(pr);

    const auto version = number_at(in.doc, "schema.version");
    const bool known_version = version && *version == kEvidenceSchemaVersion;
    if (!known_version) {
      sec.notes.push_back(fmt::format(
          "schema version {} is not the one this tprobe reads ({}): only the status is shown",
          string_at(in.doc, "schema.version"), kEvidenceSchemaVersion));
    }
    // Timestamps are fixed-width UTC ISO 8601, so text order is time order.
    if (!since.empty() && !pr.started_at.empty() && pr.started_at < since) {
      const std::string stale = fmt::format(
          "{}: stale: started {}, before the run it belongs to (started {})", in.name,
          pr.started_at, since);
      sec.notes.push_back(stale);
      rep.notes.push_back(stale);
    }
    if (pr.tool_version != TPROBE_VERSION) {
      sec.notes.push_back(fmt::format(
          "written by tprobe {} (this report: {}): fields may differ from what is drawn here",
          pr.tool_version.empty() ? "?" : pr.tool_version, TPROBE_VERSION));
    }
    if (const Json* diags = array_at(in.doc, "status.diagnostics")) {
      for (const auto& d : *diags) {
        std::string s = string_at(d, "severity");
        sec.diagnostics.push_back({s == "error"     ? Severity::kError
                                   : s == "warning" ? Severity::kWarning
                                                    : Severity::kInfo,
                                   string_at(d, "code"), string_at(d, "message")});
      }
    }
    int order = static_cast<int>(probes.size());
    const ReportProbe* known = nullptr;
    for (std::size_t i = 0; i < probes.size(); ++i) {
      if (probe == probes[i].name && probes[i].build) known = &probes[i], order = static_cast<int>(i);
    }
    sec.title = known ? known->title : "tprobe " + probe;
    const Json* results = find_path(in.doc, "results");
    static const Json kEmpty = Json::object();
    SectionBuilder builder{in, sec, results && results->is_object() ? *results : kEmpty};
    if (!results || !results->is_object()) sec.notes.push_back("no results object");
    if (known && known_version) {
      try {
        known->build(builder);
      } catch (const std::exception& e) {
        // A shape the builder did not foresee: say so and keep the page.
        sec.notes.push_back("could not draw this section: " +
                            detail::printable(detail::json_error_text(e.what()), 200));
      }
    } else if (!known) {
      sec.notes.push_back("this tprobe draws no figures for probe '" + probe +
                          "'; its status is shown");
    }
    ordered.emplace_back(order, std::move(sec));
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Every id of the page unique: two files of one probe give their sections, figures and tables
  // the same ids, which the second gets with "-2" (and so on).
  std::set<std::string> used = {"provenance"};
  auto unique = [&](std::string& id) {
    if (used.insert(id).second) return;
    for (int n = 2;; ++n) {
      std::string candidate = id + "-" + std::to_string(n);
      if (used.insert(candidate).second) {
        id = std::move(candidate);
        return;
      }
    }
  };
  for (auto& [o, sec] : ordered) {
    unique(sec.id);
    for (auto& f : sec.figures) unique(f.id);
    for (auto& t : sec.tables) unique(t.id);
    rep.sections.push_back(std::move(sec));
  }
  return rep;
}

ReportResults report_results(const Report& rep, std::string html, std::string markdown) {
  ReportResults out;
  out.generated_at = rep.generated_at;
  for (const auto& p : rep.provenance)
    out.files.push_back({p.file, p.probe, p.schema, p.tool_version, p.git_sha, p.outcome});
  for (const auto& s : rep.sections) {
    ReportResultsSection sec{s.id, s.probe, s.source, s.outcome, {}, {}, s.notes};
    for (const auto& f : s.figures) sec.figures.push_back({f.id, f.title, f.source, f.fields});
    for (const auto& t : s.tables)
      sec.tables.push_back({t.id, t.title, static_cast<int64_t>(t.rows.size()), t.fields});
    out.sections.push_back(std::move(sec));
  }
  out.notes = rep.notes;
  out.html = std::move(html);
  out.markdown = std::move(markdown);
  return out;
}

Json to_json(const ReportResults& r) {
  Json out;
  out["generated_at"] = r.generated_at;
  Json files = Json::array();
  for (const auto& p : r.files) {
    files.push_back({{"file", p.file},
                     {"probe", p.probe},
                     {"schema", p.schema},
                     {"tool_version", p.tool_version},
                     {"git_sha", p.git_sha},
                     {"outcome", p.outcome}});
  }
  out["files"] = std::move(files);
  Json sections = Json::array();
  for (const auto& s : r.sections) {
    Json figs = Json::array();
    for (const auto& f : s.figures)
      figs.push_back(
          {{"id", f.id}, {"title", f.title}, {"source", f.source}, {"fields", f.fields}});
    Json tabs = Json::array();
    for (const auto& t : s.tables)
      tabs.push_back({{"id", t.id}, {"title", t.title}, {"rows", t.rows}, {"fields", t.fields}});
    sections.push_back({{"id", s.id},
                        {"probe", s.probe},
                        {"source", s.source},
                        {"outcome", s.outcome},
                        {"figures", std::move(figs)},
                        {"tables", std::move(tabs)},
                        {"notes", s.notes}});
  }
  out["sections"] = std::move(sections);
  out["notes"] = r.notes;
  out["html"] = r.html;
  out["markdown"] = r.markdown;
  return out;
}

ReportResults report_results_from_json(const Json& j, const std::string& where) {
  namespace jr = json_read;
  if (!j.is_object()) fail("{} must be an object", where);
  ReportResults r;
  r.generated_at = jr::string(j, "generated_at", where);
  const Json& files = jr::array(j, "files", where);
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string w = jr::at(where, "files", i);
    const Json& f = files[i];
    r.files.push_back({jr::string(f, "file", w), jr::string(f, "probe", w),
                       jr::string(f, "schema", w), jr::string(f, "tool_version", w),
                       jr::string(f, "git_sha", w), jr::string(f, "outcome", w)});
  }
  const Json& sections = jr::array(j, "sections", where);
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const std::string w = jr::at(where, "sections", i);
    const Json& s = sections[i];
    ReportResultsSection sec;
    sec.id = jr::string(s, "id", w);
    sec.probe = jr::string(s, "probe", w);
    sec.source = jr::string(s, "source", w);
    sec.outcome = jr::string(s, "outcome", w);
    const Json& figs = jr::array(s, "figures", w);
    for (std::size_t k = 0; k < figs.size(); ++k) {
      const std::string fw = jr::at(w, "figures", k);
      sec.figures.push_back({jr::string(figs[k], "id", fw), jr::string(figs[k], "title", fw),
                             jr::string(figs[k], "source", fw),
                             jr::strings(figs[k], "fields", fw)});
    }
    const Json& tabs = jr::array(s, "tables", w);
    for (std::size_t k = 0; k < tabs.size(); ++k) {
      const std::string tw = jr::at(w, "tables", k);
      sec.tables.push_back({jr::string(tabs[k], "id", tw), jr::string(tabs[k], "title", tw),
                            jr::integer(tabs[k], "rows", tw, 0),
                            jr::strings(tabs[k], "fields", tw)});
    }
    sec.notes = jr::strings(s, "notes", w);
    r.sections.push_back(std::move(sec));
  }
  r.notes = jr::strings(j, "notes", where);
  r.html = jr::string(j, "html", where);
  r.markdown = jr::string(j, "markdown", where);
  return r;
}

Json to_json(const Report& rep) { return to_json(report_results(rep)); }

}  // namespace tprobe::core
