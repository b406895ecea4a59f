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
  // "interrupted by SIGTERM in WHERE": a step stopped at an op boundary names the op.
  explicit Interrupted(const std::string& where);
};

// Throws Interrupted if a signal arrived: long loops call it every few thousand iterations.
inline void throw_if_interrupted() {
  if (interrupt_requested()) throw Interrupted();
}

// Async-signal-safe registry of temporary files being written (AtomicFile registers its own),
// unlinked when a second signal ends the process. At most 16 at a time are tracked.
int register_temporary(const std::string& path);
void unregister_temporary(int slot);

// Each copy of tprobe_core has its own flag: the binary links one, and so does the torch module
// it dlopens. The binary's handlers set the binary's; the module reads it through
// share_interrupt_flag(), which the module loader calls with the binary's interrupt_flag() —
// without it, a step in the module would never see a signal.
volatile int* interrupt_flag();
void share_interrupt_flag(volatile int* flag);

// The temporary-file registry alike: the module's AtomicFiles must land in the binary's table,
// which the binary's handler unlinks on a second signal. share_temporaries() makes this copy's
// register_temporary()/unregister_temporary() forward to the given ones (the binary's
// register_temporary_here/unregister_temporary_here); null pointers take this copy's own back.
using RegisterTemporaryFn = int (*)(const char* path);
using UnregisterTemporaryFn = void (*)(int slot);
int register_temporary_here(const char* path);
void unregister_temporary_here(int slot);
void share_temporaries(RegisterTemporaryFn add, UnregisterTemporaryFn remove);
// The paths this copy's own table holds now (tests).
int temporaries_held_here();

// For tests: clears the flag.
void reset_interrupt_for_testing();

}  // namespace tprobe::core
