// tprobe's entry point: build the CLI, register probes, parse, dispatch, map errors to exit codes.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include "cli_docs.hpp"
#include "probes/probe.hpp"
#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"

namespace {

// Every error is one line on stderr, "tprobe <subcommand>: error: <message>" ("tprobe: error:"
// before a subcommand is known).
void print_error(const std::string& who, const std::string& message) {
  std::cerr << who << ": error: " << tprobe::probes::message_line(message) << "\n";
  std::cerr.flush();
}

// A file descriptor 0, 1 or 2 closed at start would be taken by the next file tprobe opens (an
// evidence file would then receive the tables). Each one closed is opened on /dev/null; returns
// whether standard output was closed.
bool reserve_standard_descriptors() {
  bool stdout_closed = false;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == STDOUT_FILENO) stdout_closed = true;
    // The lowest free descriptor: `fd` itself, since the ones below it are open by now.
    const int got = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (got != fd && got >= 0) ::close(got);
  }
  return stdout_closed;
}

// Standard output flushed; an error (a full disk, /dev/full, a closed pipe's EPIPE) turns the
// exit code into 1 with a line on stderr.
int checked_exit(const std::string& who, int code) {
  std::cout.flush();
  if (std::cout) return code;
  const int err = errno;
  print_error(who, std::string("cannot write to standard output: ") +
                       (err != 0 ? std::strerror(err) : "write failed"));
  return static_cast<int>(tprobe::ExitCode::kError);
}

}  // namespace

int main(int argc, char** argv) {
  // First: a SIGINT/SIGTERM while libtorch loads or the environment is collected is then seen by
  // the driver (outcome "interrupted") instead of killing the process with nothing written.
  tprobe::core::install_interrupt_handlers();
  const bool stdout_closed = reserve_standard_descriptors();
  CLI::App app{"tprobe: where a LoRA MoE training step's time and memory go"};
  // No libtorch version here: the binary loads libtorch only for the probes that need it
  // (`tprobe env` reports it).
  app.set_version_flag("--version",
                       std::string("tprobe ") + TPROBE_VERSION + " (git " + TPROBE_GIT_SHA + ")");
  app.require_subcommand(1);
  tprobe::probes::ProbeSet probes;
  tprobe::probes::register_all(app, probes);
  // Hidden (group ""): `tprobe --generate man|bash|zsh` prints the manual page or a completion
  // made from the subcommands registered above (cli_docs.hpp); the build runs it for the install.
  // Its callback runs before CLI11 asks for a subcommand, as --version's does; another kind is a
  // usage error (generate_doc throws before anything is printed).
  app.add_option_function<std::string>(
         "--generate",
         [&app](const std::string& kind) {
           std::cout << tprobe::app::generate_doc(app, kind, std::string("tprobe ") +
                                                                  TPROBE_VERSION);
           throw CLI::Success();
         },
         "Print the manual page or a shell completion")
      ->group("");
  // The subcommand is the first word (tprobe itself has only --help and --version).
  std::string who = "tprobe";
  if (argc > 1 && argv[1][0] != '-') {
    // CLI11 answers an unknown first word with "A subcommand is required": name it, and the
    // subcommands there are.
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      print_error(who, std::string("unknown subcommand '") + argv[1] + "'; the subcommands are " +
                           known + " (run 'tprobe --help')");
      return static_cast<int>(tprobe::ExitCode::kUsage);
    }
    who += std::string(" ") + argv[1];
  }
  if (stdout_closed) {
    print_error(who, "standard output is closed: nothing can be printed (redirect it to a file "
                     "or /dev/null instead)");
    return static_cast<int>(tprobe::ExitCode::kError);
  }
  try {
    app.parse(argc, argv);
    const std::vector<std::string> args(argv, argv + argc);
    const int code = checked_exit(who, probes.run_parsed(args, std::cout));
    if (tprobe::probes::torch_module_loaded()) {
      // libtorch was loaded: its thread pools and static destructors make process teardown slow
      // and, under LeakSanitizer, crash the at-exit leak check. The evidence is written and
      // synced; flush what was printed and leave without running them.
      std::cerr.flush();
      std::_Exit(code);
    }
    return code;
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0 in CLI11: their text is printed. Every
    // real parse error is a usage error, exit 2, whatever code CLI11 gives it, on one line with
    // the --help hint (not CLI11's second line).
    if (e.get_exit_code() == 0) return checked_exit(who, app.exit(e));
    print_error(who, std::string(e.what()) + " (run '" + who + " --help')");
    return static_cast<int>(tprobe::ExitCode::kUsage);
  } catch (const tprobe::Error& e) {
    print_error(who, e.what());
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    // Out of memory outside every reader's own check: said without allocating anything more.
    std::fputs(who.c_str(), stderr);
    std::fputs(": error: out of memory\n", stderr);
    return static_cast<int>(tprobe::ExitCode::kError);
  } catch (const std::exception& e) {
    print_error(who, std::string("internal error: ") + e.what());
    return static_cast<int>(tprobe::ExitCode::kError);
  }
}
