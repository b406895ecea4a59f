// SIGINT / SIGTERM during a run: the first signal asks the run to stop at its next poll point,
// so the driver can write the evidence gathered so far (outcome "interrupted"); a second one
// removes the temporary files of unfinished atomic writes and exits at once.
#pragma once

#include <string>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

// Exit status of an interrupted run: the shell's 128 + signal number (130 SIGINT, 143 SIGTERM).
int interrupted_exit_code();

// Installs the handlers (idempotent). The driver calls it before running a probe.
void install_interrupt_handlers();

// True once SIGINT or SIGTERM arrived (async-signal-safe flag).
bool interrupt_requested();
// The signal that arrived (0 if none).
int interrupt_signal();

// Thrown by poll points in code that cannot return partial results.
class Interrupted : public Error {
 public:
  Interrupted();
};

// Throws Interrupted if a signal arrived: long loops call it every few thousand iterations.
inline void throw_if_interrupted() {
  if (interrupt_requested()) throw Interrupted();
}

// Async-signal-safe registry of temporary files being written (AtomicFile registers its own),
// unlinked when a second signal ends the process. At most 16 at a time are tracked.
int register_temporary(const std::string& path);
void unregister_temporary(int slot);

// For tests: clears the flag.
void reset_interrupt_for_testing();

}  // namespace tprobe::core
