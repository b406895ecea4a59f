// End-to-end: the manual page and the shell completions `tprobe --generate man|bash|zsh` prints
// (src/app/cli_docs.hpp) against what `tprobe --help` and `tprobe <subcommand> --help` list, read
// independently from CLI11's own help text: every subcommand and every option of each is in the
// page and is offered by the completions, with each option's choices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

// One option line of a --help text: its names ("-h", "--help"; a positional's name) and the
// choices CLI11 prints after its type ("TEXT:{bf16,fp32}").
struct HelpOption {
  std::vector<std::string> names;
  std::vector<std::string> choices;
  bool positional = false;
};

struct HelpCommand {
  std::string name;
  std::vector<HelpOption> options;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

// The entries of a help section ("Options:", "Subcommands:", "Positionals:"): the lines indented
// by exactly two blanks (a description that does not fit is on the next line, indented further).
std::vector<std::string> section_entries(const std::string& help, const std::string& heading) {
  std::vector<std::string> out;
  bool in = false;
  for (const std::string& line : split(help, '\n')) {
    if (!line.empty() && line[0] != ' ') {
      in = line == heading;
      continue;
    }
    if (in && line.size() > 2 && line[0] == ' ' && line[1] == ' ' && line[2] != ' ') {
      out.push_back(line.substr(2));
    }
  }
  return out;
}

std::vector<HelpOption> options_in(const std::string& help, const std::string& heading,
                                   bool positional) {
  std::vector<HelpOption> out;
  for (const std::string& entry : section_entries(help, heading)) {
    HelpOption o;
    o.positional = positional;
    const std::string first = entry.substr(0, entry.find(' '));
    o.names = split(first, ',');
    const size_t open = entry.find(":{");
    if (open != std::string::npos) {
      const size_t close = entry.find('}', open);
      o.choices = split(entry.substr(open + 2, close - open - 2), ',');
    }
    out.push_back(o);
  }
  return out;
}

std::vector<HelpCommand> help_commands() {
  RunResult top = run_tprobe({"--help"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  std::vector<HelpCommand> out;
  for (const std::string& entry : section_entries(top.out, "Subcommands:")) {
    HelpCommand c;
    c.name = entry.substr(0, entry.find(' '));
    RunResult sub = run_tprobe({c.name, "--help"});
    EXPECT_EQ(sub.exit_code, 0) << c.name << ": " << sub.err;
    c.options = options_in(sub.out, "Options:", false);
    for (HelpOption& p : options_in(sub.out, "Positionals:", true)) c.options.push_back(p);
    out.push_back(c);
  }
  return out;
}

// The page's text with roff's font changes and escaped minus signs taken out.
std::string plain_roff(const std::string& page) {
  std::string out;
  for (size_t i = 0; i < page.size(); ++i) {
    if (page.compare(i, 2, "\\-") == 0) {
      out += '-';
      ++i;
    } else if (page.compare(i, 2, "\\f") == 0 && i + 2 < page.size()) {
      i += 2;
    } else {
      out += page[i];
    }
  }
  return out;
}

// Whether `word` occurs in `text` as a whole word (not inside a longer option name).
bool has_word(const std::string& text, const std::string& word) {
  auto part = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool left = at == 0 || !part(text[at - 1]);
    const bool right = at + word.size() >= text.size() || !part(text[at + word.size()]);
    if (left && right) return true;
  }
  return false;
}

// What the page misses of `commands`: "<subcommand>" for a subcommand without its section,
// "<subcommand> <option>" for an option its section does not name.
std::vector<std::string> missing_from_page(const std::string& page,
                                           const std::vector<HelpCommand>& commands) {
  const std::string text = plain_roff(page);
  std::vector<std::string> missing;
  for (const HelpCommand& c : commands) {
    const std::string heading = ".SS \"tprobe " + c.name + "\"";
    const size_t at = text.find(heading);
    if (at == std::string::npos) {
      missing.push_back(c.name);
      continue;
    }
    const size_t end = text.find("\n.S", at + heading.size());
    const std::string section = text.substr(at, end == std::string::npos ? end : end - at);
    for (const HelpOption& o : c.options) {
      for (const std::string& n : o.names) {
        if (!has_word(section, n)) missing.push_back(c.name + " " + n);
      }
      for (const std::string& v : o.choices) {
        if (!has_word(section, v)) missing.push_back(c.name + " " + o.names.back() + " " + v);
      }
    }
  }
  return missing;
}

std::string generated(const std::string& kind) {
  RunResult r = run_tprobe({"--generate", kind});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return r.out;
}

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The output of a shell command (standard error included) and its exit status.
std::pair<std::string, int> shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {"popen failed", -1};
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {out, status};
}

bool have(const std::string& program) {
  return shell("command -v " + program + " >/dev/null").second == 0;
}

class CliDocs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { commands_ = new std::vector<HelpCommand>(help_commands()); }
  static void TearDownTestSuite() {
    delete commands_;
    commands_ = nullptr;
  }
  static const std::vector<HelpCommand>& commands() { return *commands_; }

  // What bash's completion offers for the words `words`, the cursor on the last one.
  std::set<std::string> complete(const std::string& script, const std::vector<std::string>& words) {
    std::string line = "source " + shell_quoted(script) + " && COMP_WORDS=(";
    for (const std::string& w : words) line += shell_quoted(w) + " ";
    line += "); COMP_CWORD=" + std::to_string(words.size() - 1) +
            "; _tprobe; printf '%s\\n' \"${COMPREPLY[@]}\"";
    auto [out, status] = shell("bash --norc --noprofile -c " + shell_quoted(line));
    EXPECT_EQ(status, 0) << out;
    std::set<std::string> got;
    for (const std::string& w : split(out, '\n')) {
      if (!w.empty()) got.insert(w);
    }
    return got;
  }

 private:
  static std::vector<HelpCommand>* commands_;
};

std::vector<HelpCommand>* CliDocs::commands_ = nullptr;

TEST_F(CliDocs, HelpListsTheSubcommandsAndTheirOptions) {
  // The reading of --help these tests rest on finds what is there (a control of the parser).
  ASSERT_GE(commands().size(), 10u);
  bool found_choices = false, found_positional = false;
  for (const HelpCommand& c : commands()) {
    EXPECT_GE(c.options.size(), 2u) << c.name;  // --help and --json at least
    for (const HelpOption& o : c.options) {
      found_choices = found_choices || !o.choices.empty();
      found_positional = found_positional || o.positional;
    }
  }
  EXPECT_TRUE(found_choices);
  EXPECT_TRUE(found_positional);
}

TEST_F(CliDocs, ManPageNamesEverySubcommandAndEachOfItsOptions) {
  const std::string page = generated("man");
  ASSERT_EQ(page.rfind(".\\\"", 0), 0u) << page.substr(0, 200);
  EXPECT_NE(page.find("\n.TH TPROBE 1 "), std::string::npos);
  const std::vector<std::string> missing = missing_from_page(page, commands());
  EXPECT_TRUE(missing.empty()) << ::testing::PrintToString(missing);
  const std::string text = plain_roff(page);
  for (const char* top : {"--help", "--version"}) EXPECT_TRUE(has_word(text, top)) << top;
  // The hidden generator has no entry, as --help does not list it (the page's comment names it).
  EXPECT_EQ(page.find("\\fB\\-\\-generate"), std::string::npos);
  EXPECT_EQ(run_tprobe({"--help"}).out.find("--generate"), std::string::npos);
}

TEST_F(CliDocs, APageMissingAnOptionOrASubcommandIsCaught) {
  // Negative control of the check above: the page with one option's entry taken out of the last
  // subcommand's section, and with a subcommand's heading renamed, is each reported.
  const std::string page = generated("man");
  const HelpCommand& last = commands().back();
  std::string name;  // its last option with a single name (--json)
  for (const HelpOption& o : last.options) {
    if (!o.positional && o.names.size() == 1) name = o.names.front();
  }
  ASSERT_FALSE(name.empty());
  const size_t section = page.find(".SS \"tprobe " + last.name + "\"");
  ASSERT_NE(section, std::string::npos);
  std::string escaped;
  for (char c : name) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
  const size_t entry = page.find(".TP\n\\fB" + escaped, section);
  ASSERT_NE(entry, std::string::npos) << name;
  const size_t next = page.find("\n.", page.find('\n', page.find('\n', entry) + 1));
  std::string cut = page.substr(0, entry) + page.substr(next + 1);
  const std::vector<std::string> missing = missing_from_page(cut, commands());
  EXPECT_NE(std::find(missing.begin(), missing.end(), last.name + " " + name), missing.end())
      << ::testing::PrintToString(missing);

  std::string renamed = page;
  const std::string first = ".SS \"tprobe " + commands().front().name + "\"";
  renamed.replace(renamed.find(first), first.size(), ".SS \"tprobe something-else\"");
  const std::vector<std::string> gone = missing_from_page(renamed, commands());
  EXPECT_NE(std::find(gone.begin(), gone.end(), commands().front().name), gone.end());
}

TEST_F(CliDocs, ManPageRendersWithoutWarnings) {
  if (!have("groff")) GTEST_SKIP() << "groff is not installed: the page was not rendered";
  const std::string dir = make_temp_dir();
  write_text(dir + "/tprobe.1", generated("man"));
  // groff's default warnings (-ww would add "cannot adjust line" for the long lists of values).
  auto [out, status] = shell("groff -man -Tutf8 -z " + shell_quoted(dir + "/tprobe.1"));
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "") << "groff's warnings";
  // Plain text: no bold or underline (grotty -c -b -o -u).
  auto [text, st] = shell("groff -man -Tutf8 -P-c -P-b -P-o -P-u " + shell_quoted(dir + "/tprobe.1"));
  EXPECT_EQ(st, 0);
  EXPECT_NE(text.find("SUBCOMMANDS"), std::string::npos);
  EXPECT_NE(text.find("EXIT STATUS"), std::string::npos);
}

TEST_F(CliDocs, BashCompletionOffersTheSubcommandsAndEachOnesOptionsAndChoices) {
  if (!have("bash")) GTEST_SKIP() << "bash is not installed";
  const std::string script = make_temp_dir() + "/tprobe";
  write_text(script, generated("bash"));

  // The first word: every subcommand, and tprobe's own options.
  std::set<std::string> all = {"-h", "--help", "--version"};
  for (const HelpCommand& c : commands()) all.insert(c.name);
  EXPECT_EQ(complete(script, {"tprobe", ""}), all);
  // A prefix: the subcommands that start with it, nothing else.
  std::set<std::string> pa;
  for (const HelpCommand& c : commands()) {
    if (c.name.rfind("pa", 0) == 0) pa.insert(c.name);
  }
  ASSERT_FALSE(pa.empty());
  EXPECT_EQ(complete(script, {"tprobe", "pa"}), pa);

  int choice_options = 0;
  for (const HelpCommand& c : commands()) {
    // After `-`: exactly the options its --help lists.
    std::set<std::string> named;
    for (const HelpOption& o : c.options) {
      if (!o.positional) named.insert(o.names.begin(), o.names.end());
    }
    EXPECT_EQ(complete(script, {"tprobe", c.name, "-"}), named) << c.name;
    // After an option with choices: the choices.
    for (const HelpOption& o : c.options) {
      if (o.positional || o.choices.empty()) continue;
      ++choice_options;
      const std::set<std::string> choices(o.choices.begin(), o.choices.end());
      EXPECT_EQ(complete(script, {"tprobe", c.name, o.names.back(), ""}), choices)
          << c.name << " " << o.names.back();
    }
  }
  EXPECT_GT(choice_options, 5);
  // A comma list completes the word after its last comma, keeping what came before.
  const std::set<std::string> after = complete(script, {"tprobe", "profile", "--targets", "q_proj,k"});
  EXPECT_EQ(after, (std::set<std::string>{"q_proj,k_proj"}));
  // A value with a grammar (profile's --routing: computed|balanced|zipf:S) is not a path: no
  // file names; a path option still completes them (negative control).
  const std::string dir = make_temp_dir();
  write_text(dir + "/a-file.txt", "x");
  const std::string prefix = dir + "/a-";
  EXPECT_TRUE(complete(script, {"tprobe", "profile", "--routing", prefix}).empty());
  EXPECT_EQ(complete(script, {"tprobe", "profile", "--dataset", prefix}),
            (std::set<std::string>{dir + "/a-file.txt"}));
  // An unknown subcommand offers nothing.
  EXPECT_TRUE(complete(script, {"tprobe", "no-such-probe", "-"}).empty());
}

TEST_F(CliDocs, ZshCompletionNamesEverySubcommandAndEachOfItsOptions) {
  const std::string text = generated("zsh");
  ASSERT_EQ(text.rfind("#compdef tprobe\n", 0), 0u) << text.substr(0, 100);
  for (const HelpCommand& c : commands()) {
    const size_t arm = text.find("\n        " + c.name + ")\n");
    ASSERT_NE(arm, std::string::npos) << c.name;
    const size_t end = text.find(";;", arm);
    const std::string body = text.substr(arm, end - arm);
    for (const HelpOption& o : c.options) {
      if (o.positional) continue;
      for (const std::string& n : o.names) {
        // A list repeats: '*--name[...]'.
        EXPECT_TRUE(body.find("'" + n + "[") != std::string::npos ||
                    body.find("'*" + n + "[") != std::string::npos)
            << c.name << " " << n;
      }
      for (const std::string& v : o.choices) {
        EXPECT_TRUE(has_word(body, v)) << c.name << " " << o.names.back() << " " << v;
      }
    }
  }
}

TEST_F(CliDocs, ZshCompletionParses) {
  if (!have("zsh")) GTEST_SKIP() << "zsh is not installed: the script's syntax was not checked";
  const std::string file = make_temp_dir() + "/_tprobe";
  write_text(file, generated("zsh"));
  auto [out, status] = shell("zsh -n " + shell_quoted(file));
  EXPECT_EQ(status, 0) << out;
}

TEST_F(CliDocs, GenerateRefusesAnUnknownKind) {
  RunResult bad = run_tprobe({"--generate", "html"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--generate"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_EQ(bad.out, "");
  for (const char* kind : {"man", "bash", "zsh"}) {
    RunResult ok = run_tprobe({"--generate", kind});
    EXPECT_EQ(ok.exit_code, 0) << kind << ": " << ok.err;
    EXPECT_FALSE(ok.out.empty()) << kind;
  }
}

}  // namespace
}  // namespace tprobe::testing
