// The manual page and the shell completions, made from the CLI's own definitions: every visible
// subcommand of the CLI::App, its options (names, value type, help, default, the choices of a
// CLI::IsMember check). `tprobe --generate man|bash|zsh` prints them; the build runs it for the
// install and the Debian package (cmake/tprobe_generate_docs.cmake), so they cannot drift from
// `tprobe <subcommand> --help`.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tprobe::app {

// What --generate takes: "man", "bash", "zsh".
const std::vector<std::string>& doc_kinds();

// The roff manual page tprobe(1) (`version` goes in its footer).
std::string man_page(const CLI::App& app, const std::string& version);
// A bash completion script defining `_tprobe` and `complete -F _tprobe tprobe`: the subcommands
// after `tprobe`, a subcommand's options after `-`, an option's choices (the part after the last
// comma for a comma list), file names for a path value or a positional.
std::string bash_completion(const CLI::App& app);
// A zsh completion function (`#compdef tprobe`, for share/zsh/vendor-completions/_tprobe).
std::string zsh_completion(const CLI::App& app);

// One of doc_kinds() for `app`.
std::string generate_doc(const CLI::App& app, const std::string& kind, const std::string& version);

}  // namespace tprobe::app
