// The report's two views: one self-contained HTML page (inline CSS and SVG, no scripts, no
// network) and a Markdown summary.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "tprobe/core/report/report.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::core {

namespace {

std::string esc(const std::string& s) { return xml_escape(s); }

// Markdown text from an evidence file: HTML markup (a renderer passes it through), link brackets,
// backticks and line breaks (a heading or list of its own) are neutralised; `table` also escapes
// the cell separator.
std::string md(const std::string& s, bool table = false) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '[' || c == ']' || c == '`' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '|' && table) {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// Inside a code span nothing is markup; only a backtick (it would end the span), a line break
// and, in a table, the cell separator need care.
std::string md_code(const std::string& s, bool table = false) {
  std::string out;
  for (char c : s) {
    if (c == '`') {
      out += '\'';
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else if (c == '|' && table) {
      out += "\\|";
    } else {
      out += c;
    }
  }
  return out;
}

const char* kCss = R"(
body{font-family:sans-serif;margin:0;color:#222;background:#fff;line-height:1.4}
header{background:#1f3b57;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;font-size:13px;color:#d6e2ee}
main{padding:8px 24px 40px;max-width:1280px}
nav{font-size:13px;margin:12px 0}
nav a{margin-right:12px}
section{border-top:2px solid #1f3b57;margin-top:28px;padding-top:6px}
h2{font-size:19px;margin:6px 0}
h2 .outcome{font-size:13px;padding:2px 8px;border-radius:10px;margin-left:8px;vertical-align:middle}
.ok{background:#d8f0dc;color:#14532d}.no{background:#f9d6d5;color:#7f1d1d}
.src{font-size:12px;color:#555}
code{background:#f1f1f1;padding:0 3px;border-radius:3px;font-size:12px}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0 14px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eef2f6}
tr.alarm td{background:#fde8e8}
table.facts td:first-child{font-weight:bold;white-space:nowrap}
table.facts td.field{color:#666;font-size:11.5px}
.note{background:#fff7db;border-left:4px solid #e0b400;padding:4px 10px;margin:6px 0;font-size:13px}
.diag{padding:3px 10px;margin:4px 0;font-size:13px;border-left:4px solid #999}
.diag.error{border-color:#c00000;background:#fdeeee}.diag.warning{border-color:#e69f00;background:#fff4e0}
figure{margin:10px 0 18px;display:inline-block;vertical-align:top;max-width:100%}
figure svg{max-width:100%;height:auto;border:1px solid #ddd;background:#fff}
figcaption{font-size:12px;color:#444;max-width:640px}
.prov td{font-size:11.5px}
)";

// A fact's link, when it is a path: no scheme before the first '/' (evidence is an input, and
// "javascript:" must not become a link).
bool linkable(const std::string& href) {
  if (href.empty()) return false;
  const std::size_t colon = href.find(':');
  return colon == std::string::npos || href.find('/') < colon;
}

std::string facts_html(const ReportSection& s) {
  if (s.facts.empty()) return "";
  std::string h = "<table class=\"facts\">\n";
  for (const auto& f : s.facts) {
    const std::string value = linkable(f.href)
                                  ? fmt::format("<a href=\"{}\">{}</a>", esc(f.href), esc(f.value))
                                  : esc(f.value);
    h += fmt::format("<tr{}><td>{}</td><td>{}</td><td class=\"field\"><code>{}</code></td></tr>\n",
                     f.alarm ? " class=\"alarm\"" : "", esc(f.label), value, esc(f.field));
  }
  return h + "</table>\n";
}

std::string table_html(const ReportTable& t) {
  std::string h =
      fmt::format("<h3 id=\"{}\" style=\"font-size:14px\">{}</h3>\n<table class=\"data\">\n<tr>",
                  esc(t.id), esc(t.title));
  for (const auto& c : t.header) h += "<th>" + esc(c) + "</th>";
  h += "</tr>\n";
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const bool alarm = i < t.highlight.size() && t.highlight[i];
    h += alarm ? "<tr class=\"alarm\">" : "<tr>";
    for (const auto& c : t.rows[i]) h += "<td>" + esc(c) + "</td>";
    h += "</tr>\n";
  }
  h += "</table>\n";
  std::string fields;
  for (const auto& f : t.fields)
    fields += (fields.empty() ? "" : ", ") + std::string("<code>") + esc(f) + "</code>";
  h += fmt::format("<p class=\"src\">Source: <code>{}</code> {}</p>\n", esc(t.source), fields);
  return h;
}

}  // namespace

std::string render_html(const Report& r) {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>tprobe report</title>\n<style>" +
      std::string(kCss) + "</style>\n</head>\n<body>\n";
  h += fmt::format(
      "<header><h1>tprobe report</h1><p>{} evidence files · drawn by tprobe {} ({}) at {} · every "
      "figure "
      "names the file and field it came from</p></header>\n<main>\n",
      r.provenance.size(), esc(r.tool_version), esc(r.git_sha), esc(r.generated_at));
  h += "<nav>";
  for (const auto& s : r.sections)
    h += fmt::format("<a href=\"#{}\">{}</a>", esc(s.id), esc(s.probe));
  h += "<a href=\"#provenance\">provenance</a></nav>\n";
  for (const auto& n : r.notes) h += "<div class=\"note\">" + esc(n) + "</div>\n";
  for (const auto& s : r.sections) {
    h += fmt::format(
        "<section id=\"{}\" data-probe=\"{}\">\n<h2>{}<span class=\"outcome {}\">{}</span></h2>\n",
        esc(s.id), esc(s.probe), esc(s.title), s.outcome == "ok" ? "ok" : "no",
        s.outcome == "ok"   ? "ok"
        : s.outcome == "no" ? "evidence says no (exit 3)"
                            : esc(s.outcome));
    h += fmt::format("<p class=\"src\">Evidence file: <code>{}</code></p>\n", esc(s.source));
    for (const auto& n : s.notes) h += "<div class=\"note\">" + esc(n) + "</div>\n";
    for (const auto& d : s.diagnostics) {
      if (d.severity == Severity::kInfo) continue;
      h += fmt::format("<div class=\"diag {}\"><b>{}</b> <code>{}</code> {}</div>\n",
                       to_string(d.severity), to_string(d.severity), esc(d.code), esc(d.message));
    }
    h += facts_html(s);
    for (const auto& f : s.figures) {
      std::string fields;
      for (const auto& x : f.fields)
        fields += (fields.empty() ? "" : ", ") + std::string("<code>") + esc(x) + "</code>";
      h += fmt::format(
          "<figure id=\"{}\">\n{}\n<figcaption>{} <br><span class=\"src\">Source: <code>{}</code> "
          "{}</span>"
          "</figcaption>\n</figure>\n",
          esc(f.id), f.svg, esc(f.caption), esc(f.source), fields);
    }
    for (const auto& t : s.tables) h += table_html(t);
    h += "</section>\n";
  }
  h += "<section id=\"provenance\"><h2>Provenance</h2>\n<table "
       "class=\"prov\">\n<tr><th>file</th><th>schema</th>"
       "<th>tool</th><th>started (UTC)</th><th>device</th><th>torch</th><th>attention requested / "
       "resolved</th>"
       "<th>outcome</th><th>command</th></tr>\n";
  for (const auto& p : r.provenance) {
    h += fmt::format(
        "<tr><td><code>{}</code></td><td>{}</td><td>{} "
        "{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}{}</td>"
        "<td>{}</td><td><code>{}</code></td></tr>\n",
        esc(p.file), esc(p.schema), esc(p.tool_version), esc(p.git_sha), esc(p.started_at),
        esc(p.device), esc(p.torch), esc(p.attn_requested),
        p.attn_requested.empty() && p.attn_resolved.empty() ? "-" : " / ", esc(p.attn_resolved),
        esc(p.outcome), esc(p.argv));
  }
  h += "</table></section>\n</main>\n</body>\n</html>\n";
  return h;
}

std::string render_markdown(const Report& r) {
  std::string m = fmt::format(
      "# tprobe report\n\n{} evidence files, drawn by tprobe {} ({}) at {}. Figures are in the "
      "HTML report; every number below names its evidence field.\n\n",
      r.provenance.size(), md(r.tool_version), md(r.git_sha), md(r.generated_at));
  for (const auto& n : r.notes) m += "> note: " + md(n) + "\n\n";
  for (const auto& s : r.sections) {
    m += fmt::format("## {} — `{}` ({})\n\n", md(s.title), md_code(s.source),
                     s.outcome == "no" ? "**evidence says no**" : md(s.outcome));
    for (const auto& n : s.notes) m += "> note: " + md(n) + "\n>\n";
    if (!s.notes.empty()) m += "\n";
    for (const auto& d : s.diagnostics) {
      if (d.severity != Severity::kInfo)
        m += fmt::format("- **{}** `{}`: {}\n", to_string(d.severity), md_code(d.code),
                         md(d.message));
    }
    for (const auto& f : s.facts) {
      const std::string value =
          linkable(f.href) && f.href.find_first_of("() \n") == std::string::npos
              ? fmt::format("[{}]({})", md(f.value), f.href)
              : md(f.value);
      m += fmt::format("- {}{}{}: {} (`{}`)\n", f.alarm ? "**" : "", md(f.label),
                       f.alarm ? "**" : "", value, md_code(f.field));
    }
    for (const auto& f : s.figures) {
      std::vector<std::string> fields;
      for (const auto& x : f.fields) fields.push_back(md(x));
      m += fmt::format("- figure *{}* (`{}`: {})\n", md(f.title), md_code(f.source),
                       fmt::join(fields, ", "));
    }
    m += "\n";
  }
  m += "## Provenance\n\n| file | schema | tool | device | torch | attention requested / resolved "
       "| outcome |\n|---|---|---|---|---|---|---|\n";
  for (const auto& p : r.provenance) {
    m += fmt::format("| `{}` | {} | {} {} | {} | {} | {} / {} | {} |\n", md_code(p.file, true),
                     md(p.schema, true), md(p.tool_version, true), md(p.git_sha, true),
                     md(p.device, true), md(p.torch, true),
                     p.attn_requested.empty() ? "-" : md(p.attn_requested, true),
                     p.attn_resolved.empty() ? "-" : md(p.attn_resolved, true), md(p.outcome, true));
  }
  return m;
}

}  // namespace tprobe::core
