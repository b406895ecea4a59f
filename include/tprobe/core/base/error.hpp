// The one error type of tprobe, and the exit codes every probe maps onto.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace tprobe {

// Documented in docs/evidence.md; main() is the only place that turns these into a process status.
enum class ExitCode : int {
  kOk = 0,        // the probe ran and its evidence says yes
  kError = 1,     // something the user can fix: a bad file, a missing device, an I/O failure
  kUsage = 2,     // the command line is wrong
  kEvidenceNo = 3 // the probe ran, but the evidence says no (assertion failed, fit refused, ...)
};

// Anything the user can fix. The message names the file, field, line or value at fault.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ExitCode code = ExitCode::kError)
      : std::runtime_error(message), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

// A command-line value that parses but makes no sense (e.g. --bucket smaller than --batch).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message, ExitCode::kUsage) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_usage(fmt::format_string<Args...> format, Args&&... args) {
  throw UsageError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tprobe
