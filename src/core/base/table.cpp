// Plain-text table rendering and the human number formats.
#include "tprobe/core/base/table.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

// Display width in terminal columns: counts UTF-8 code points, not bytes (for "±", "²", "…").
std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void pad(std::string& out, const std::string& cell, std::size_t width, Align align) {
  std::size_t w = display_width(cell);
  std::string fill(width > w ? width - w : 0, ' ');
  if (align == Align::kRight) {
    out += fill;
    out += cell;
  } else {
    out += cell;
    out += fill;
  }
}

}  // namespace

Table::Table(std::string title) : title_(std::move(title)) {}

Table& Table::column(std::string header, Align align) {
  columns_.push_back({std::move(header), align});
  return *this;
}

Table& Table::row(std::vector<std::string> cells) {
  if (cells.size() > columns_.size()) {
    fail("table '{}': a row has {} cells but the table has {} columns", title_, cells.size(),
         columns_.size());
  }
  if (cells.empty()) cells.emplace_back();
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
  return *this;
}

Table& Table::separator() {
  rows_.emplace_back();
  return *this;
}

Table& Table::note(std::string text) {
  notes_.push_back(std::move(text));
  return *this;
}

std::string Table::render() const {
  std::vector<std::size_t> width(columns_.size(), 0);
  for (std::size_t c = 0; c < columns_.size(); ++c) width[c] = display_width(columns_[c].header);
  for (const auto& r : rows_) {
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], display_width(r[c]));
  }
  std::size_t total = 0;
  for (auto w : width) total += w;
  if (!width.empty()) total += 2 * (width.size() - 1);

  std::string out;
  if (!title_.empty()) out += title_ + "\n";
  auto rule = [&] { out += std::string(total, '-') + "\n"; };
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string text;
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      if (c > 0) text += "  ";
      // Headers follow their column's alignment so numbers and their headings line up.
      pad(text, cells[c], width[c], columns_[c].align);
    }
    (void)header;
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  if (!columns_.empty()) {
    std::vector<std::string> headers;
    for (const auto& col : columns_) headers.push_back(col.header);
    line(headers, true);
    rule();
    for (const auto& r : rows_) {
      if (r.empty()) {
        rule();
      } else {
        line(r, false);
      }
    }
  }
  for (const auto& n : notes_) out += n + "\n";
  return out;
}

std::string format_count(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -static_cast<uint64_t>(value)
                                                : static_cast<uint64_t>(value));
  std::string out;
  int since = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (since == 3) {
      out.push_back(',');
      since = 0;
    }
    out.push_back(*it);
    ++since;
  }
  if (value < 0) out.push_back('-');
  std::reverse(out.begin(), out.end());
  return out;
}

std::string format_bytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = bytes;
  int unit = 0;
  while (std::fabs(v) >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", v);
  return fmt::format("{:.2f} {}", v, kUnits[unit]);
}

std::string format_ns(int64_t ns) { return format_seconds(static_cast<double>(ns) * 1e-9); }

std::string format_g4(double value) { return fmt::format("{:.4g}", value); }

std::string format_seconds(double seconds) {
  double a = std::fabs(seconds);
  if (a == 0.0) return "0 s";
  if (a < 1e-6) return fmt::format("{:.1f} ns", seconds * 1e9);
  if (a < 1e-3) return fmt::format("{:.1f} µs", seconds * 1e6);
  if (a < 1.0) return fmt::format("{:.1f} ms", seconds * 1e3);
  if (a < 600.0) return fmt::format("{:.3f} s", seconds);
  if (a < 36000.0) return fmt::format("{:.1f} min", seconds / 60.0);
  // Past a million hours, three digits and an exponent: never a 300-digit number.
  if (a < 3.6e9) return fmt::format("{:.2f} h", seconds / 3600.0);
  return fmt::format("{:.3g} h", seconds / 3600.0);
}

std::string format_percent(double ratio, int digits) {
  if (std::fabs(ratio) >= 1e4) return fmt::format("{:.3g} %", ratio * 100.0);
  return fmt::format("{:.{}f} %", ratio * 100.0, digits);
}

std::string format_sci(double value, int digits) { return fmt::format("{:.{}e}", value, digits); }

}  // namespace tprobe::core
