// The memory edge found by running it (issue 44, docs/profile.md "The edge, searched"): for one
// budget, under an allocator cap of it, the largest value on one axis — the width at a fixed batch
// (a multiple of a step) or the batch at a fixed width — whose probe runs `steps` consecutive
// steps, and the step past it, which runs out of memory. A pure state machine: it says which point
// to run next and is told each outcome; the caller runs the points (the engine under the cap in
// `profile`, a fake engine in the tests). EdgeSearchRounds runs several searches in rounds, one
// probe of each per round, grouped by cap.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/evidence/cost_points.hpp"

namespace tprobe::core {

inline constexpr int64_t kEdgeSearchSteps = 3;      // consecutive steps per probe
inline constexpr int64_t kEdgeSearchMaxProbes = 24;  // per edge: 2·log2(1024 steps) + 4
inline constexpr int64_t kEdgeSearchMaxValue = int64_t{1} << 22;  // widths and batches past it are typos

struct EdgeSearchRequest {
  std::string axis = "width";  // "width": the largest width at `batch`; "batch": at `width`
  int64_t batch = 1;           // the fixed batch (axis width)
  int64_t width = 1;           // the fixed width (axis batch)
  int64_t step = 1;            // the axis's step (tokens of width; 1 sequence for batch)
  int64_t max_value = 1;       // the bound on the axis: a multiple of step
  int64_t start = 1;           // the first probe: rounded down to the step, within [step, max_value]
  // The model's edge on the axis (0: the model says nothing fits); none: no prediction (the
  // memory model was refused, and the search starts from the sweep's largest point that ran).
  std::optional<int64_t> predicted;
  double budget_bytes = 0;  // the cap the probes run under
  int64_t steps = kEdgeSearchSteps;
  int64_t max_probes = kEdgeSearchMaxProbes;
};

// A probe: EdgeSearchProbe (core/evidence/cost_points.hpp).
struct EdgeSearchResult {
  EdgeSearchRequest request;
  std::vector<EdgeSearchProbe> probes;  // in the order run
  // found: `edge` fits and `past` (edge + step) runs out of memory; nothing_fits: one step runs out
  // of memory (edge 0, past = step); at_bound: max_value fits (past 0: beyond the bound, not run);
  // probe_bound: max_probes ran first (edge and past the closest measured, 0 where none);
  // error: a probe failed other than by OOM; stopped: the run stopped first (a signal).
  std::string status = "stopped";
  int64_t edge = 0;  // the largest value measured to fit (0: none)
  int64_t past = 0;  // the smallest value measured to run out of memory (0: none)
  // (predicted − edge) / step where both are known and the edge is exact (found, nothing_fits):
  // positive, the model overshot; negative, it was conservative.
  std::optional<int64_t> error_steps;
  std::string note;  // one line: what the status means here
};

class EdgeSearch {
 public:
  // Throws UsageError for a broken request (unknown axis, step or bound not positive, the bound
  // not a multiple of the step or past kEdgeSearchMaxValue, steps or max_probes below 1).
  explicit EdgeSearch(EdgeSearchRequest request);
  // The (batch, width) to run next; none when the search is done.
  std::optional<std::pair<int64_t, int64_t>> next() const;
  // Its outcome. Throws tprobe::Error when the probe is not at next(), the search is done, or the
  // outcome is not fits, oom or error.
  void record(const EdgeSearchProbe& probe);
  void stop();  // the run ended before the search did: status stopped
  bool done() const;
  int64_t probes_run() const { return static_cast<int64_t>(result_.probes.size()); }
  const EdgeSearchResult& result() const { return result_; }

 private:
  void finish();
  int64_t k0_ = 1, kmax_ = 1;
  int64_t lo_ = 0, hi_ = 0;   // in steps: the largest that fits (0: none), the smallest that fails
  int64_t up_ = 0, down_ = 0;  // probes taken upward, downward from k0
  bool done_ = false;
  EdgeSearchResult result_;
};

// Several searches in rounds. A round is one probe of every search not done, one group per cap
// (in the order the caps were first added), each group's points smallest first.
struct EdgeRoundPoint {
  std::size_t search = 0;
  int64_t batch = 0, width = 0;
};
struct EdgeRoundGroup {
  int64_t cap_bytes = 0;
  int64_t steps = kEdgeSearchSteps;
  std::vector<EdgeRoundPoint> points;
};
class EdgeSearchRounds {
 public:
  std::size_t add(EdgeSearch search, int64_t cap_bytes);  // the search's index
  // The next round's groups; none when every search is done. Throws when the last round was not
  // recorded.
  std::vector<EdgeRoundGroup> next_round();
  bool pending() const { return !pending_.empty(); }
  // The last round's outcomes, one vector per group, in order. A missing group or a short one
  // (the run stopped) stops the searches whose probes are missing.
  void record_round(const std::vector<std::vector<EdgeSearchProbe>>& outcomes);
  void stop_all();  // the run ended: every search not done is stopped
  const std::vector<EdgeSearch>& searches() const { return searches_; }
  std::vector<EdgeSearchResult> results() const;

 private:
  std::vector<EdgeSearch> searches_;
  std::vector<int64_t> caps_;
  std::vector<EdgeRoundGroup> pending_;
};

// Runs rounds until every search is done (or max_rounds): `run` is given a group (its cap, its
// steps, its points) and returns one outcome per point, in order (fewer: the run stopped).
using EdgeGroupRunner = std::function<std::vector<EdgeSearchProbe>(const EdgeRoundGroup&)>;
void run_edge_rounds(EdgeSearchRounds& rounds, const EdgeGroupRunner& run, int max_rounds = 64);

// "width at batch 2: probe 3: 2x8192 fits, 71.78 GiB reserved, 4.20 s" — the progress line.
std::string edge_probe_line(const EdgeSearchResult& search, std::size_t probe);

Json to_json(const EdgeSearchResult& result);
// Its reader: every field checked, and the status, edge, past, error and note checked by
// replaying the probes through an EdgeSearch of the request read (each probe must be the one the
// search asked for). Throws tprobe::Error naming `where` and the field.
EdgeSearchResult edge_search_result_from_json(const Json& j, const std::string& where);

}  // namespace tprobe::core
