// Readers of what the scaling fit consumes: measured steps (--point, CSV, profile evidence) and
// micro-batch width distributions (padding or bucket evidence). Each throws tprobe::Error naming
// the file and line (or JSON path) at fault.
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

// profile evidence: results.points[] of {batch, width, outcome, samples_s[]}; only outcome "ok"
// points are used. `skipped` receives one line per point that was not ("width 32768: oom").
std::vector<FitPoint> read_points_profile(const std::string& path,
                                          std::vector<std::string>* skipped);

// "W:S" as given to --point.
FitPoint parse_point(std::string_view text, const std::string& origin);

}  // namespace tprobe::core
