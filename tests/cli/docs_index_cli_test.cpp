// The docs index against the probe registry: `tprobe --help` lists the registered subcommands
// (probes/CMakeLists.txt, TPROBE_PROBES), and the README's "Subcommands" section and docs/ must
// list exactly those, so a probe added without its docs (or docs left for a removed one) fails.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

const std::string kSource = TPROBE_SOURCE_DIR;

// The subcommand names of `tprobe --help` (CLI11: a "Subcommands:" line, then one indented line
// per subcommand, its name first).
std::set<std::string> help_subcommands() {
  RunResult r = run_tprobe({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> names;
  std::istringstream in(r.out);
  bool inside = false;
  const std::regex entry("^  ([a-z][a-z0-9-]*)( |$).*");
  for (std::string line; std::getline(in, line);) {
    if (line == "Subcommands:" || line == "SUBCOMMANDS:") {
      inside = true;
      continue;
    }
    if (!inside) continue;
    std::smatch m;
    if (std::regex_match(line, m, entry)) {
      names.insert(m[1]);
    } else if (!line.empty() && line[0] != ' ') {
      break;  // the next section
    }
  }
  return names;
}

// Every `tprobe <name>` in the headings of the README's "## Subcommands" section.
std::set<std::string> readme_subcommands() {
  std::istringstream in(read_text(kSource + "/README.md"));
  std::set<std::string> names;
  bool inside = false;
  const std::regex name("`tprobe ([a-z][a-z0-9-]*)`");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) inside = line == "## Subcommands";
    if (!inside || line.rfind("### ", 0) != 0) continue;
    for (std::sregex_iterator it(line.begin(), line.end(), name), end; it != end; ++it) {
      names.insert((*it)[1]);
    }
  }
  return names;
}

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : " ") + x;
  return out;
}

TEST(DocsIndex, ReadmeAndDocsListEveryRegisteredProbe) {
  const std::set<std::string> help = help_subcommands();
  // The registry holds 13 probes today; far fewer means the --help parse broke, not the docs.
  ASSERT_GE(help.size(), 10u) << joined(help);
  const std::set<std::string> readme = readme_subcommands();
  EXPECT_EQ(joined(readme), joined(help))
      << "README.md's \"## Subcommands\" headings (left) must name exactly the registered probes";
  for (const auto& probe : help) {
    EXPECT_TRUE(file_exists(kSource + "/docs/" + probe + ".md"))
        << "docs/" << probe << ".md is missing: every probe has its page";
  }
}

}  // namespace
}  // namespace tprobe::testing
