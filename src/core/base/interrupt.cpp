// Signal handling for interrupted runs (see interrupt.hpp): an atomic flag, and a fixed table
// of temporary paths a second signal unlinks before _exit, using only async-signal-safe calls.
#include "tprobe/core/base/interrupt.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace tprobe::core {

namespace {

constexpr int kSlots = 16;
constexpr std::size_t kPathMax = 4096;

volatile sig_atomic_t g_signal = 0;
static_assert(sizeof(sig_atomic_t) == sizeof(int), "interrupt_flag() hands out the flag as an int");
// Where interrupt_requested() reads: this copy's flag, or the binary's (share_interrupt_flag).
std::atomic<volatile int*> g_read{reinterpret_cast<volatile int*>(&g_signal)};
std::atomic<bool> g_slot_used[kSlots];
char g_slot_path[kSlots][kPathMax];
std::mutex g_slot_mutex;  // registration only; the handler never locks

extern "C" void on_interrupt(int sig) {
  if (g_signal != 0) {
    // Second signal: the user means it. Leave no temporary behind, then go.
    for (int i = 0; i < kSlots; ++i) {
      if (g_slot_used[i].load()) ::unlink(g_slot_path[i]);
    }
    ::_exit(128 + sig);
  }
  g_signal = sig;
}

}  // namespace

Interrupted::Interrupted()
    : Error(std::string("interrupted by ") + (interrupt_signal() == SIGTERM ? "SIGTERM" : "SIGINT"),
            static_cast<ExitCode>(interrupted_exit_code())) {}

Interrupted::Interrupted(const std::string& where)
    : Error(std::string("interrupted by ") + (interrupt_signal() == SIGTERM ? "SIGTERM" : "SIGINT") +
                " in " + where,
            static_cast<ExitCode>(interrupted_exit_code())) {}

int interrupted_exit_code() {
  return 128 + (interrupt_signal() != 0 ? interrupt_signal() : SIGINT);
}

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // system calls carry on; the flag is seen at the next poll point
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

bool interrupt_requested() { return *g_read.load(std::memory_order_relaxed) != 0; }
int interrupt_signal() { return *g_read.load(std::memory_order_relaxed); }

volatile int* interrupt_flag() { return reinterpret_cast<volatile int*>(&g_signal); }

void share_interrupt_flag(volatile int* flag) {
  g_read.store(flag ? flag : interrupt_flag(), std::memory_order_relaxed);
}

namespace {
std::atomic<RegisterTemporaryFn> g_register{nullptr};
std::atomic<UnregisterTemporaryFn> g_unregister{nullptr};
}  // namespace

void share_temporaries(RegisterTemporaryFn add, UnregisterTemporaryFn remove) {
  g_register.store(add);
  g_unregister.store(remove);
}

int register_temporary(const std::string& path) {
  if (path.size() >= kPathMax) return -1;
  if (RegisterTemporaryFn f = g_register.load()) return f(path.c_str());
  return register_temporary_here(path.c_str());
}

void unregister_temporary(int slot) {
  if (UnregisterTemporaryFn f = g_unregister.load()) return f(slot);
  unregister_temporary_here(slot);
}

int temporaries_held_here() {
  int n = 0;
  for (int i = 0; i < kSlots; ++i) n += g_slot_used[i].load() ? 1 : 0;
  return n;
}

int register_temporary_here(const char* path_c) {
  const std::string path = path_c;
  if (path.size() >= kPathMax) return -1;
  std::lock_guard<std::mutex> lock(g_slot_mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (!g_slot_used[i].load()) {
      std::memcpy(g_slot_path[i], path.c_str(), path.size() + 1);
      g_slot_used[i].store(true);
      return i;
    }
  }
  return -1;
}

void unregister_temporary_here(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  std::lock_guard<std::mutex> lock(g_slot_mutex);
  g_slot_used[slot].store(false);
}

void reset_interrupt_for_testing() { *g_read.load() = 0; }

}  // namespace tprobe::core
