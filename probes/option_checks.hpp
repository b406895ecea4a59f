// Validators for option values: a positive, finite number (CLI11's PositiveNumber lets NaN and
// infinity through and prints its range as a 300-digit bound), an integer within its type
// (CLI11's own conversion reads "-1" into an unsigned as 2^64-1, clamps 9223372036854775808 to
// INT64_MAX and reads "010" as octal), and a path that is not empty.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace tprobe::probes {

inline const CLI::Validator& positive_number() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double d = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
        if (!std::isfinite(d)) return "'" + text + "' is not a finite number";
        if (!(d > 0)) return "'" + text + "' is not positive";
        return "";
      },
      "POSITIVE");
  return v;
}

// At most `max` (after positive_number()): a bound past which the value is no measurement, named
// in the message (`what`: "a step longer than 11.6 days is no measured step time"), so that no
// result downstream is a 300-digit number. No description: --help is unchanged.
inline CLI::Validator at_most(double max, std::string what) {
  return CLI::Validator(
      [max, what](std::string& text) -> std::string {
        const double d = std::strtod(text.c_str(), nullptr);
        if (d > max) return fmt::format("'{}' is above {:g}: {}", text, max, what);
        return "";
      },
      "");
}

// The bounds of the measured step's figures: a step time up to 10^6 s (11.6 days), a peak up to
// 10^6 TFLOP/s (an exaFLOP/s on one device). flops and profile / levers share them.
inline CLI::Validator max_step_time() {
  return at_most(1e6, "a step longer than 11.6 days is no measured step time");
}
inline CLI::Validator max_peak_tflops() {
  return at_most(1e6, "a peak above an exaFLOP/s is no device's");
}

// The text of an integer option, checked before CLI11 converts it: decimal digits after an
// optional sign ('-' only where the type is signed), no leading zero, no fraction or exponent,
// within the 64-bit range of the option's signedness (a narrower type's range is CLI11's
// conversion's, and a CLI::Range beside it). ProbeSet attaches it to every integer option
// (check_integer_options), so no registration can forget it. No description: --help is unchanged.
inline std::string integer_text_error(const std::string& text, bool is_signed) {
  const std::string shown = "'" + text + "'";
  std::size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) i = 1;
  if (i == text.size()) return shown + " is not an integer";
  for (std::size_t k = i; k < text.size(); ++k) {
    if (text[k] < '0' || text[k] > '9') return shown + " is not an integer (decimal digits only)";
  }
  if (text[i] == '0' && text.size() > i + 1) {
    return shown + " has a leading zero (not an integer as written)";
  }
  if (negative && !is_signed) {
    return text == "-0" ? "" : shown + " is negative: this option takes 0 or more";
  }
  // Against the limit as text: 20 digits at most, compared digit by digit.
  const std::string digits = text.substr(i);
  const std::string limit = !is_signed  ? "18446744073709551615"
                            : negative  ? "9223372036854775808"
                                        : "9223372036854775807";
  if (digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit)) {
    return shown + " is past the " + (negative ? "smallest" : "largest") +
           " value this option takes (" + (negative ? "-" : "") + limit + ")";
  }
  return "";
}

inline const CLI::Validator& checked_integer(bool is_signed) {
  static const CLI::Validator signed_v(
      [](std::string& text) { return integer_text_error(text, true); }, "");
  static const CLI::Validator unsigned_v(
      [](std::string& text) { return integer_text_error(text, false); }, "");
  return is_signed ? signed_v : unsigned_v;
}

// A path option's value: never empty (an empty --html or --replay-trace would otherwise mean "not
// given"). ProbeSet attaches it to every input and output option a probe declares.
inline const CLI::Validator& non_empty_path() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        return text.empty() ? "the path is empty; give a path" : "";
      },
      "");
  return v;
}

}  // namespace tprobe::probes
