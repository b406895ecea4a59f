// Readers of what the scaling fit consumes: measured steps (--point, CSV; profile evidence's are
// read by profile's own reader) and micro-batch width distributions (padding or bucket evidence).
// Each throws tprobe::Error naming the file and line (or JSON path) at fault.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tprobe::core {

// One measured step. `batch` is 0 when the input did not say.
struct FitPoint {
  double width = 0;    // per-sequence width w, tokens
  double seconds = 0;  // step time
  int64_t batch = 0;
  std::string
      origin;  // where it came from, for messages: "--point 2", "a.csv:3", "p.json points[1]"
};

// A micro-batch width distribution from a padding or bucket evidence file.
struct WidthCount {
  int64_t width = 0;
  int64_t count = 0;
};

struct WidthDistribution {
  std::string path;
  std::string probe;                   // "padding" or "bucket"
  std::string key;                     // the results key it came from
  std::vector<WidthCount> widths;      // ascending, counts > 0
  std::optional<int64_t> micro_batch;  // rows per micro-batch (--batch) when recorded
  int64_t micro_batches() const;
};

// Its reader, read_width_distribution, reads padding and bucket evidence through their typed
// readers: it is core/data's (data/bucket_report.hpp), which io may not include.

// Readers. Each throws tprobe::Error naming the file and line (or JSON path) at fault.
// CSV: header optional; columns width,seconds[,batch]; '#' comments and blank lines skipped.
std::vector<FitPoint> read_points_csv(const std::string& path);

// profile evidence's points are read by profile's own reader (engine's
// profile_points_from_json, which io may not include): the scaling-fit probe turns them into
// FitPoints (probes/scaling_fit_probe.hpp, read_profile_points_evidence).

// A measured step time tprobe fits: below a nanosecond or above eleven days per step it is a unit
// mistake or a corrupt file, and near the double limit the sums of squares overflow.
inline constexpr double kMinStepSeconds = 1e-9;
inline constexpr double kMaxStepSeconds = 1e6;
bool plausible_step_seconds(double seconds);

// "W:S" as given to --point.
FitPoint parse_point(std::string_view text, const std::string& origin);

}  // namespace tprobe::core
