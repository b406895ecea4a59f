// tprobe's entry point: build the CLI, register probes, parse, dispatch, map errors to exit codes.
#include <cstdlib>
#include <iostream>
#include <string>

#include "probes/probe.hpp"
#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"

int main(int argc, char** argv) {
  // First: a SIGINT/SIGTERM while libtorch loads or the environment is collected is then seen by
  // the driver (outcome "interrupted") instead of killing the process with nothing written.
  tprobe::core::install_interrupt_handlers();
  CLI::App app{"tprobe: where a LoRA MoE training step's time and memory go"};
  // No libtorch version here: the binary loads libtorch only for the probes that need it
  // (`tprobe env` reports it).
  app.set_version_flag("--version",
                       std::string("tprobe ") + TPROBE_VERSION + " (git " + TPROBE_GIT_SHA + ")");
  app.require_subcommand(1);
  tprobe::probes::ProbeSet probes;
  tprobe::probes::register_all(app, probes);
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
      std::cerr << "tprobe: error: unknown subcommand '" << argv[1] << "'; the subcommands are "
                << known << " (tprobe --help)\n";
      return static_cast<int>(tprobe::ExitCode::kUsage);
    }
  }
  try {
    app.parse(argc, argv);
    const int code = probes.run_parsed(std::vector<std::string>(argv, argv + argc), std::cout);
    if (tprobe::probes::torch_module_loaded()) {
      // libtorch was loaded: its thread pools and static destructors make process teardown slow
      // and, under LeakSanitizer, crash the at-exit leak check. The evidence is written and
      // synced; flush what was printed and leave without running them.
      std::cout.flush();
      std::cerr.flush();
      std::_Exit(code);
    }
    return code;
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0 in CLI11; every real parse error is a usage
    // error, exit 2, whatever code CLI11 gives it.
    return app.exit(e) == 0 ? 0 : static_cast<int>(tprobe::ExitCode::kUsage);
  } catch (const tprobe::Error& e) {
    std::cerr << "tprobe: error: " << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "tprobe: internal error: " << e.what() << "\n";
    return static_cast<int>(tprobe::ExitCode::kError);
  }
}
