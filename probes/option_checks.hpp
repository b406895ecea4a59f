// Validators for numeric options: a positive, finite number (CLI11's PositiveNumber lets NaN and
// infinity through and prints its range as a 300-digit bound).
#pragma once

#include <CLI/CLI.hpp>
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

}  // namespace tprobe::probes
