// The cost probes' measured points, each field declared once (core/evidence/fields.hpp):
// memory_fit's points (profile's results.memory_fit), edge_search's probes (profile's
// results.memory_edge_search), the levers' edge probes and a lever row's figures (levers'
// results.memory_edge and rows[]). core/cost fills them and writes and reads them through the
// tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"

namespace tprobe::core {

// The largest shapes the memory model accepts: b·w² stays below 2^60, and the exact collinearity
// test's cross products below 2^99 (beyond them a number is a typo, not a training setup).
inline constexpr int64_t kMaxMemoryFitBatch = int64_t{1} << 16;
inline constexpr int64_t kMaxMemoryFitWidth = int64_t{1} << 22;

// One measured step. An OOM point has no peak to fit: its peaks may be 0 (unknown) or what the
// allocator had reached when it failed; it is kept for the checks, never fitted.
struct MemoryFitPoint {
  int64_t batch = 0;
  int64_t width = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  bool oom = false;
};

// One probe of a measured memory edge (cost/edge_search.hpp).
struct EdgeSearchProbe {
  int64_t batch = 0, width = 0;
  std::string outcome = "fits";  // fits | oom | error
  int64_t steps = 0;             // steps asked of it (any OOM among them fails it)
  std::optional<int64_t> peak_allocated_bytes, peak_reserved_bytes;
  double wall_s = 0;  // the probe's steps, until the one that failed
  std::string message;
};

// One step of a configuration's batch under the levers' allocator cap (cost/levers.hpp).
struct EdgeProbe {
  int64_t batch = 0;
  std::string outcome;  // ok | oom | error
  std::optional<int64_t> peak_allocated_bytes, peak_reserved_bytes;
  std::string message;
  // The sweep's own point, run on the whole card without a cap: an OOM there is an OOM under any
  // cap, so it is the search's first failed probe (then the search walks down from it).
  bool uncapped = false;
};

// A lever row's measurements, after its point and outcome: the repeats, their spread (null where
// the row did not run), the allocator's peaks and the MFU (null where not measured).
struct LeverFigures {
  std::vector<double> samples_s;
  std::optional<double> median_s, min_s, max_s;
  std::optional<int64_t> peak_allocated_bytes, peak_reserved_bytes;
  std::optional<double> performed_mfu_ratio;
};

constexpr auto evidence_fields(const MemoryFitPoint*) {
  using evidence::field;
  using P = MemoryFitPoint;
  return std::make_tuple(
      field("batch", &P::batch, "", "rows of the micro-batch").at_least(1).at_most(kMaxMemoryFitBatch),
      field("width", &P::width, "tokens", "the row width").at_least(1).at_most(kMaxMemoryFitWidth),
      field("peak_allocated_bytes", &P::peak_allocated_bytes, "B", "the allocator's peak").at_least(0),
      field("peak_reserved_bytes", &P::peak_reserved_bytes, "B", "its reserved peak").at_least(0),
      field("oom", &P::oom, "", "ran out of memory (kept for the checks, never fitted)"));
}

constexpr auto evidence_fields(const EdgeSearchProbe*) {
  using evidence::field;
  using P = EdgeSearchProbe;
  return std::make_tuple(
      field("batch", &P::batch, "", "rows of the probe's micro-batch").at_least(1),
      field("width", &P::width, "tokens", "its width").at_least(1),
      field("outcome", &P::outcome, "", "fits, oom or error"),
      field("steps", &P::steps, "", "steps asked of it").at_least(0).at_most(1000),
      field("peak_allocated_bytes", &P::peak_allocated_bytes, "B", "the allocator's peak").at_least(0),
      field("peak_reserved_bytes", &P::peak_reserved_bytes, "B", "its reserved peak").at_least(0),
      field("wall_s", &P::wall_s, "s", "the probe's steps, until the one that failed"),
      field("message", &P::message, "", "why, when not fits"));
}

constexpr auto evidence_fields(const EdgeProbe*) {
  using evidence::field;
  using P = EdgeProbe;
  return std::make_tuple(
      field("batch", &P::batch, "", "rows of the probe's micro-batch").at_least(0),
      field("outcome", &P::outcome, "", "ok, oom or error"),
      field("peak_allocated_bytes", &P::peak_allocated_bytes, "B", "the allocator's peak").at_least(0),
      field("peak_reserved_bytes", &P::peak_reserved_bytes, "B", "its reserved peak").at_least(0),
      field("message", &P::message, "", "why, when not ok"),
      field("uncapped", &P::uncapped, "", "the sweep's own point, run without a cap"));
}

constexpr auto evidence_fields(const LeverFigures*) {
  using evidence::field;
  using F = LeverFigures;
  return std::make_tuple(
      field("samples_s", &F::samples_s, "s", "the timed repeats"),
      field("median_s", &F::median_s, "s", "their median, where the row ran"),
      field("min_s", &F::min_s, "s", "their fastest"),
      field("max_s", &F::max_s, "s", "their slowest"),
      field("peak_allocated_bytes", &F::peak_allocated_bytes, "B", "the allocator's peak").at_least(0),
      field("peak_reserved_bytes", &F::peak_reserved_bytes, "B", "its reserved peak").at_least(0),
      field("performed_mfu_ratio", &F::performed_mfu_ratio, "", "the step's model FLOPs utilisation"));
}

}  // namespace tprobe::core
