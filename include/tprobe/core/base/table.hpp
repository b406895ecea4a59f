// The one table renderer every probe prints through, plus the number formats of the human view.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tprobe::core {

enum class Align { kLeft, kRight };

// Columns are declared once; rows are lists of already formatted cells. Rendering pads each
// column to its widest cell. A row shorter than the header is padded with empty cells; a longer
// one is an error (it would silently lose data).
class Table {
 public:
  explicit Table(std::string title = {});

  Table& column(std::string header, Align align = Align::kRight);
  Table& row(std::vector<std::string> cells);
  Table& separator();
  Table& note(std::string text);

  std::size_t rows() const { return rows_.size(); }
  std::string render() const;

 private:
  struct Column {
    std::string header;
    Align align;
  };
  std::string title_;
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;  // an empty row is a separator
  std::vector<std::string> notes_;
};

// Human formats. Evidence files store base units; only the view uses these.
std::string format_count(int64_t value);                 // 57733156 -> "57,733,156"
std::string format_bytes(double bytes);                  // 1024^3 * 48.07 -> "48.07 GiB"
std::string format_seconds(double seconds);              // 0.0123 -> "12.3 ms"
std::string format_ns(int64_t ns);                       // 12300000 -> "12.3 ms"
std::string format_percent(double ratio, int digits = 1);  // 0.299 -> "29.9 %"
std::string format_sci(double value, int digits = 4);    // 6.8715e-4 -> "6.8715e-04"
std::string format_g4(double value);                     // 0.000123456 -> "0.0001235"

}  // namespace tprobe::core
