// The manual page and the bash / zsh completions, walked from the CLI::App: nothing here names a
// subcommand or an option.
#include "cli_docs.hpp"

#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"

namespace tprobe::app {
namespace {

// One option as --help shows it.
struct OptionDoc {
  std::vector<std::string> names;  // "-h", "--help"; a positional's name alone
  bool positional = false;
  bool flag = false;                 // takes no value
  bool repeatable = false;           // a list: several values, or a comma list
  bool comma_list = false;           // its values are one comma-separated word
  std::string type;                  // TEXT, INT, UINT, FLOAT ... ("" for a flag)
  std::string help;
  std::string default_value;
  std::vector<std::string> choices;  // from a CLI::IsMember check
  bool grammar = false;  // a validator describes its values ("computed|balanced|zipf:S"): no path
  std::vector<std::string> needs;    // options it is given only with
  std::vector<std::string> excludes; // options it is not given with
};

struct CommandDoc {
  std::string name;
  std::string description;
  std::vector<OptionDoc> options;  // options, then positionals, in registration order
};

// The choices of a CLI::IsMember check, read from the option's type name: CLI11 appends each
// check's description, and IsMember's is "{a,b,c}".
std::vector<std::string> choices_of(const std::string& type_name) {
  std::vector<std::string> out;
  const size_t open = type_name.find(":{");
  if (open == std::string::npos) return out;
  const size_t close = type_name.find('}', open);
  if (close == std::string::npos) return out;
  std::string_view body(type_name);
  body = body.substr(open + 2, close - open - 2);
  while (!body.empty()) {
    const size_t comma = body.find(',');
    out.emplace_back(body.substr(0, comma));
    if (comma == std::string_view::npos) break;
    body.remove_prefix(comma + 1);
  }
  return out;
}

OptionDoc option_doc(const CLI::Option& opt) {
  OptionDoc d;
  for (const std::string& s : opt.get_snames()) d.names.push_back("-" + s);
  for (const std::string& l : opt.get_lnames()) d.names.push_back("--" + l);
  if (d.names.empty()) {
    d.positional = true;
    d.names.push_back(opt.get_name(true));
  }
  d.flag = opt.get_expected_max() == 0 || opt.get_type_size() == 0;  // add_flag: expected(0)
  d.comma_list = opt.get_delimiter() == ',';
  d.repeatable = d.comma_list || opt.get_expected_max() > 1;
  const std::string type_name = opt.get_type_name();
  if (!d.flag) d.type = type_name.substr(0, type_name.find(':'));
  d.help = opt.get_description();
  d.default_value = opt.get_default_str();
  d.choices = choices_of(type_name);
  // CLI11's path checks describe themselves as one word (FILE, DIR); a grammar has alternatives.
  d.grammar = d.choices.empty() && type_name.find(':') != std::string::npos &&
              type_name.find('|') != std::string::npos;
  // The options it needs or excludes, as --help says them (sorted: CLI11 keeps them in a set).
  std::set<std::string> needs, excludes;
  for (const CLI::Option* o : opt.get_needs()) needs.insert(o->get_name());
  for (const CLI::Option* o : opt.get_excludes()) excludes.insert(o->get_name(true));
  d.needs.assign(needs.begin(), needs.end());
  d.excludes.assign(excludes.begin(), excludes.end());
  return d;
}

// The options --help lists: a hidden one (group "": an old spelling, --generate) is left out.
std::vector<OptionDoc> options_of(const CLI::App& app) {
  std::vector<OptionDoc> named, positionals;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue;
    OptionDoc d = option_doc(*opt);
    (d.positional ? positionals : named).push_back(std::move(d));
  }
  named.insert(named.end(), positionals.begin(), positionals.end());
  return named;
}

std::vector<CommandDoc> commands_of(const CLI::App& app) {
  std::vector<CommandDoc> out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_group().empty()) continue;  // a hidden subcommand
    out.push_back({sub->get_name(), sub->get_description(), options_of(*sub)});
  }
  return out;
}

// Whether a value is completed with file names: a positional, or a text option with no choices
// and no validator's grammar (tprobe's text options without either are paths, or comma lists of
// names).
bool completes_files(const OptionDoc& o) {
  return !o.flag && o.choices.empty() && !o.grammar && o.type == "TEXT";
}

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text;
}

// --- roff -----------------------------------------------------------------------------------

// Text for a roff line: backslashes escaped, every byte outside ASCII as a \[uXXXX] character
// (groff reads its input as Latin-1 unless preconv runs), a leading '.' or '\'' neutralised.
std::string roff(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\e";
    } else if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else {
      // UTF-8: the sequence's length from its first byte; a broken one becomes U+FFFD.
      const int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
      uint32_t cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0fu : c & 0x1fu;
      bool ok = len > 0 && i + static_cast<size_t>(len) <= text.size();
      for (int k = 1; ok && k < len; ++k) {
        const auto cc = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
        ok = (cc & 0xc0u) == 0x80u;
        cp = (cp << 6) | (cc & 0x3fu);
      }
      if (ok) i += static_cast<size_t>(len - 1);
      out += fmt::format("\\[u{:04X}]", ok ? cp : 0xFFFDu);
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
  return out;
}

// An option name in bold with its minus signs as \-.
std::string roff_name(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

std::string man_option(const OptionDoc& o) {
  std::string head;
  for (const std::string& n : o.names) {
    if (!head.empty()) head += ", ";
    head += o.positional ? "\\fI" + roff(n) + "\\fR" : "\\fB" + roff_name(n) + "\\fR";
  }
  if (!o.positional && !o.flag) {
    head += " \\fI" + roff(o.type) + "\\fR";
    if (o.comma_list) head += "[,\\fI" + roff(o.type) + "\\fR...]";
    else if (o.repeatable) head += " ...";
  }
  std::string body = roff(o.help);
  if (!body.empty() && body.back() != '.') body += '.';
  auto add = [&body](const std::string& sentence) {
    body += (body.empty() ? "" : " ") + sentence;
  };
  auto listed = [](const std::vector<std::string>& names, bool option_names) {
    std::string list;
    for (const std::string& n : names) {
      list += (list.empty() ? "" : ", ") + (option_names ? roff_name(n) : roff(n));
    }
    return list;
  };
  if (!o.choices.empty()) add("One of: " + listed(o.choices, false) + ".");
  if (!o.needs.empty()) add("Needs: " + listed(o.needs, true) + ".");
  if (!o.excludes.empty()) add("Excludes: " + listed(o.excludes, true) + ".");
  if (!o.default_value.empty()) {
    // A list's default is one long word ("[a,b,c]"): it may break after each comma (\:).
    std::string value;
    for (char c : roff(o.default_value)) {
      value += c == ',' ? std::string(",\\:") : std::string(1, c);
    }
    add("Default: " + value + ".");
  }
  return ".TP\n" + head + "\n" + (body.empty() ? "\\&" : body) + "\n";
}

// --- shells ---------------------------------------------------------------------------------

// `text` inside single quotes for bash and zsh.
std::string single_quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "'\\''";
    else out.push_back(c);
  }
  return out + "'";
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// A zsh _arguments description ([...]): backslash, brackets and the colon escaped.
std::string zsh_description(const std::string& text) {
  std::string out;
  for (char c : one_line(text)) {
    if (c == '\\' || c == '[' || c == ']' || c == ':') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// A zsh word as a value of a (...) list or a _describe entry: the blank and the colon escaped.
std::string zsh_word(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == ' ' || c == ':' || c == '(' || c == ')') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// One _arguments spec for option `o` named `name` (a list repeats, a value completes its choices
// or files).
std::string zsh_spec(const OptionDoc& o, const std::string& name, int position) {
  std::string action;
  if (!o.choices.empty()) {
    std::vector<std::string> words;
    for (const std::string& c : o.choices) words.push_back(zsh_word(c));
    action = o.comma_list ? "_values -s , " + single_quoted(o.type) + " " + joined(words)
                          : "(" + joined(words) + ")";
  } else if (completes_files(o) || o.positional) {
    action = "_files";
  } else {
    action = " ";
  }
  if (o.positional) {
    const std::string where = o.repeatable ? "*" : std::to_string(position);
    return single_quoted(where + ":" + zsh_description(o.names.front()) + ":" + action);
  }
  std::string spec = (o.repeatable ? "*" : "") + name + "[" + zsh_description(o.help) + "]";
  if (!o.flag) spec += ":" + zsh_description(o.type) + ":" + action;
  return single_quoted(spec);
}

}  // namespace

const std::vector<std::string>& doc_kinds() {
  static const std::vector<std::string> kKinds = {"man", "bash", "zsh"};
  return kKinds;
}

std::string man_page(const CLI::App& app, const std::string& version) {
  const std::vector<CommandDoc> commands = commands_of(app);
  std::string summary = app.get_description();
  if (summary.rfind(app.get_name() + ": ", 0) == 0) summary.erase(0, app.get_name().size() + 2);
  if (summary.rfind("tprobe: ", 0) == 0) summary.erase(0, 8);
  std::ostringstream m;
  m << ".\\\" Generated by `tprobe --generate man` from tprobe's own command-line definitions;\n"
    << ".\\\" do not edit (src/app/cli_docs.cpp).\n"
    << ".TH TPROBE 1 \"\" \"" << roff(version) << "\" \"User Commands\"\n"
    << ".SH NAME\ntprobe \\- " << roff(summary) << "\n"
    << ".SH SYNOPSIS\n.B tprobe\n.I subcommand\n.RI [ options ]\n.br\n.B tprobe\n"
    << ".I subcommand\n.B \\-\\-help\n.br\n.B tprobe\n.RB [ \\-\\-help | \\-\\-version ]\n"
    << ".SH DESCRIPTION\n"
    << "Each subcommand settles one question about a LoRA fine-tuning step of a Mixture-of-Experts "
       "model with a measurement. It prints a table, and with \\fB\\-\\-json\\fR \\fIPATH\\fR "
       "writes a JSON evidence file: the tool's version and git sha, the command line and the "
       "resolved options, the environment, the raw measurements and a status with "
       "diagnostics.\n"
    << ".PP\n\\fBtprobe suite\\fR is the main job: every probe on its embedded default, each "
       "evidence file and an HTML report in one folder.\n"
    << ".SH SUBCOMMANDS\n";
  for (const CommandDoc& c : commands) {
    m << ".TP\n.B " << roff(c.name) << "\n" << roff(c.description) << "\n";
  }
  m << ".SH OPTIONS\n";
  for (const OptionDoc& o : options_of(app)) m << man_option(o);
  for (const CommandDoc& c : commands) {
    m << ".SS \"tprobe " << roff(c.name) << "\"\n" << roff(c.description) << "\n";
    for (const OptionDoc& o : c.options) m << man_option(o);
  }
  m << ".SH EXIT STATUS\n"
    << ".TP\n.B " << static_cast<int>(ExitCode::kOk) << "\nThe probe ran and its evidence says yes.\n"
    << ".TP\n.B " << static_cast<int>(ExitCode::kError)
    << "\nAn error the user can fix: a bad input file, a missing device, an I/O failure.\n"
    << ".TP\n.B " << static_cast<int>(ExitCode::kUsage) << "\nThe command line is wrong.\n"
    << ".TP\n.B " << static_cast<int>(ExitCode::kEvidenceNo)
    << "\nThe probe ran, but its evidence says no.\n"
    << ".TP\n.B 128+N\nStopped by signal N (SIGINT, SIGTERM) after writing what was measured.\n"
    << ".SH ENVIRONMENT\n.TP\n.B TPROBE_TORCH_MODULE\n"
    << "The libtorch module to load instead of \\fIlibtprobe_torch.so\\fR beside the binary.\n"
    << ".SH FILES\n.TP\n.I <bindir>/libtprobe_torch.so\n"
    << "The torch module, loaded by the probes that need libtorch.\n"
    << ".TP\n.I <bindir>/../share/tprobe/fixtures/\n"
    << "The fixtures \\fBtprobe suite\\fR reads when \\fB\\-\\-fixtures\\fR is not given.\n"
    << ".SH SEE ALSO\nThe README and the docs/ folder of tprobe's source tree; "
    << "\\fBtprobe\\fR \\fIsubcommand\\fR \\fB\\-\\-help\\fR.\n";
  return m.str();
}

std::string bash_completion(const CLI::App& app) {
  const std::vector<CommandDoc> commands = commands_of(app);
  std::vector<std::string> first;
  for (const CommandDoc& c : commands) first.push_back(c.name);
  for (const OptionDoc& o : options_of(app)) {
    first.insert(first.end(), o.names.begin(), o.names.end());
  }
  std::ostringstream b;
  b << "# bash completion for tprobe. Generated by `tprobe --generate bash` from tprobe's own\n"
       "# command-line definitions; do not edit (src/app/cli_docs.cpp).\n"
       "_tprobe() {\n"
       "  local cur=${COMP_WORDS[COMP_CWORD]} prev=\n"
       "  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
       "  COMPREPLY=()\n"
       "  if ((COMP_CWORD <= 1)); then\n"
       "    COMPREPLY=($(compgen -W "
    << single_quoted(joined(first))
    << " -- \"$cur\"))\n"
       "    return 0\n"
       "  fi\n"
       "  local opts= files=0 words= list=0\n"
       "  case ${COMP_WORDS[1]} in\n";
  for (const CommandDoc& c : commands) {
    std::vector<std::string> names;
    bool positional = false;
    for (const OptionDoc& o : c.options) {
      if (o.positional) positional = true;
      else names.insert(names.end(), o.names.begin(), o.names.end());
    }
    b << "    " << c.name << ")\n      opts=" << single_quoted(joined(names))
      << (positional ? "; files=1" : "") << "\n      case $prev in\n";
    for (const OptionDoc& o : c.options) {
      if (o.positional || o.flag) continue;
      std::string pattern;
      for (const std::string& n : o.names) pattern += (pattern.empty() ? "" : "|") + n;
      if (!o.choices.empty()) {
        b << "        " << pattern << ") words=" << single_quoted(joined(o.choices))
          << (o.comma_list ? "; list=1" : "") << " ;;\n";
      } else if (completes_files(o)) {
        b << "        " << pattern << ") words=; files=2 ;;\n";
      } else {
        b << "        " << pattern << ") return 0 ;;\n";
      }
    }
    b << "      esac ;;\n";
  }
  b << "    *) return 0 ;;\n"
       "  esac\n"
       "  if [[ -n $words ]]; then\n"
       "    local pre=\n"
       "    if ((list)) && [[ $cur == *,* ]]; then pre=${cur%,*},; cur=${cur##*,}; fi\n"
       "    COMPREPLY=($(compgen -P \"$pre\" -W \"$words\" -- \"$cur\"))\n"
       "  elif ((files == 2)) || { ((files == 1)) && [[ $cur != -* ]]; }; then\n"
       "    compopt -o filenames 2>/dev/null\n"
       "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
       "  else\n"
       "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
       "  fi\n"
       "  return 0\n"
       "}\n"
       "complete -F _tprobe tprobe\n";
  return b.str();
}

std::string zsh_completion(const CLI::App& app) {
  const std::vector<CommandDoc> commands = commands_of(app);
  std::ostringstream z;
  z << "#compdef tprobe\n"
       "# zsh completion for tprobe. Generated by `tprobe --generate zsh` from tprobe's own\n"
       "# command-line definitions; do not edit (src/app/cli_docs.cpp).\n"
       "\n"
       "_tprobe() {\n"
       "  local curcontext=\"$curcontext\" state line\n"
       "  typeset -A opt_args\n"
       "  local -a subcommands\n"
       "  subcommands=(\n";
  for (const CommandDoc& c : commands) {
    z << "    " << single_quoted(zsh_word(c.name) + ":" + one_line(c.description)) << "\n";
  }
  z << "  )\n  _arguments -C \\\n";
  for (const OptionDoc& o : options_of(app)) {
    for (const std::string& n : o.names) z << "    '(- *)'" << zsh_spec(o, n, 0) << " \\\n";
  }
  z << "    '1: :->subcommand' \\\n"
       "    '*:: :->args' && return 0\n"
       "  case $state in\n"
       "    subcommand)\n"
       "      _describe -t subcommands 'tprobe subcommand' subcommands ;;\n"
       "    args)\n"
       "      case $words[1] in\n";
  for (const CommandDoc& c : commands) {
    z << "        " << zsh_word(c.name) << ")\n          _arguments -s";
    int position = 0;
    for (const OptionDoc& o : c.options) {
      if (o.positional) {
        z << " \\\n            " << zsh_spec(o, o.names.front(), ++position);
        continue;
      }
      for (const std::string& n : o.names) z << " \\\n            " << zsh_spec(o, n, 0);
    }
    z << " ;;\n";
  }
  z << "      esac ;;\n"
       "  esac\n"
       "}\n"
       "\n"
       "_tprobe \"$@\"\n";
  return z.str();
}

std::string generate_doc(const CLI::App& app, const std::string& kind,
                         const std::string& version) {
  if (kind == "man") return man_page(app, version);
  if (kind == "bash") return bash_completion(app);
  if (kind == "zsh") return zsh_completion(app);
  throw UsageError(fmt::format("--generate {}: not one of {}", kind, fmt::join(doc_kinds(), ", ")));
}

}  // namespace tprobe::app
