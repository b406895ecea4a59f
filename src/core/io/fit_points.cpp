// Readers of measured step times (--point text, CSV) for the scaling fit; profile evidence's
// points are read by profile's reader (probes/scaling_fit_probe.hpp), the width distribution by
// data/bucket_report's.
#include "tprobe/core/io/fit_points.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"

namespace tprobe::core {
namespace {

std::string trimmed(std::string_view s) { return std::string(detail::trim(s)); }

// Strict numeric parsing: the whole field, finite.
std::optional<double> parse_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A positive integer no larger than 2^31 (a width or batch, not a count of everything).
std::optional<int64_t> parse_positive_int(const std::string& s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  for (char ch : s) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
  }
  int64_t v = std::stoll(s);
  if (v < 1 || v > (int64_t{1} << 31)) return std::nullopt;
  return v;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = line.find(sep, start);
    out.push_back(trimmed(std::string_view(line).substr(start, pos - start)));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

}  // namespace

bool plausible_step_seconds(double v) {
  return std::isfinite(v) && v >= kMinStepSeconds && v <= kMaxStepSeconds;
}

int64_t WidthDistribution::micro_batches() const {
  int64_t n = 0;
  for (const auto& w : widths) n += w.count;
  return n;
}

FitPoint parse_point(std::string_view text, const std::string& origin) {
  std::string s(text);
  size_t colon = s.find(':');
  if (colon == std::string::npos) {
    fail_usage("{}: '{}' is not WIDTH:SECONDS (e.g. 2048:1.776)", origin, detail::printable(s));
  }
  auto w = parse_positive_int(trimmed(s.substr(0, colon)));
  auto t = parse_double(trimmed(s.substr(colon + 1)));
  if (!w) {
    fail_usage("{}: width '{}' is not a positive integer", origin,
               detail::printable(s.substr(0, colon)));
  }
  if (!t || !plausible_step_seconds(*t)) {
    fail_usage("{}: seconds '{}' is not a step time in [{:g}, {:g}] s", origin,
               detail::printable(s.substr(colon + 1)), kMinStepSeconds, kMaxStepSeconds);
  }
  FitPoint p;
  p.width = static_cast<double>(*w);
  p.seconds = *t;
  p.origin = origin;
  return p;
}

std::vector<FitPoint> read_points_csv(const std::string& path) {
  std::istringstream in(read_input_file(path, "points file", kMaxSmallInputBytes));
  std::vector<FitPoint> out;
  std::string line;
  int64_t lineno = 0;
  size_t columns = 0;  // fixed by the header or the first data row
  bool seen_row = false;
  constexpr size_t kMaxLine = 4096;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.size() > kMaxLine) fail("{}:{}: line longer than {} bytes", path, lineno, kMaxLine);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string t = trimmed(line);
    if (t.empty() || t[0] == '#') continue;
    std::vector<std::string> f = split(t, ',');
    if (!seen_row && !parse_double(f[0])) {
      // A header: it must name the columns this reader understands, in order.
      bool ok = (f.size() == 2 || f.size() == 3) && f[0] == "width" && f[1] == "seconds" &&
                (f.size() == 2 || f[2] == "batch");
      if (!ok) {
        fail("{}:{}: header '{}' is not 'width,seconds' or 'width,seconds,batch'", path, lineno,
             detail::printable(t));
      }
      columns = f.size();
      seen_row = true;
      continue;
    }
    seen_row = true;
    if (f.size() != 2 && f.size() != 3) {
      fail("{}:{}: expected width,seconds[,batch] (2 or 3 fields), got {}", path, lineno, f.size());
    }
    if (columns != 0 && f.size() != columns) {
      fail("{}:{}: {} fields where earlier rows have {}", path, lineno, f.size(), columns);
    }
    columns = f.size();
    FitPoint p;
    auto w = parse_positive_int(f[0]);
    if (!w) {
      fail("{}:{}: width '{}' is not a positive integer", path, lineno, detail::printable(f[0]));
    }
    auto s = parse_double(f[1]);
    if (!s || !plausible_step_seconds(*s)) {
      fail("{}:{}: seconds '{}' is not a step time in [{:g}, {:g}] s", path, lineno,
           detail::printable(f[1]), kMinStepSeconds, kMaxStepSeconds);
    }
    p.width = static_cast<double>(*w);
    p.seconds = *s;
    if (f.size() == 3) {
      auto b = parse_positive_int(f[2]);
      if (!b) {
        fail("{}:{}: batch '{}' is not a positive integer", path, lineno,
             detail::printable(f[2]));
      }
      p.batch = *b;
    }
    p.origin = fmt::format("{}:{}", path, lineno);
    out.push_back(std::move(p));
  }
  if (in.bad()) fail("error reading points file '{}'", path);
  if (out.empty()) fail("points file '{}' has no data rows", path);
  return out;
}

}  // namespace tprobe::core
