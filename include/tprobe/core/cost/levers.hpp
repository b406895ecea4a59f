// `tprobe levers`: which knobs of a LoRA step move its time and memory, each measured against a
// baseline that reproduces a default Hugging Face + PEFT run of the same shapes. This file holds
// the torch-free half: the catalogue of levers (what each moves, how a user pulls it in their own
// stack), the configurations to measure, the comparison of a lever's repeats with the baseline's
// (with the run-to-run spread of both), the best combination, and the views (docs/levers.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/cost/epoch.hpp"
#include "tprobe/core/evidence/cost_points.hpp"
#include "tprobe/core/step/knobs.hpp"

namespace tprobe::core {

// A lever: a knob of the registry that has one (core/step/knobs.hpp: its name, what it moves, how a
// Hugging Face + PEFT user pulls it), or packing, which comes with the attention path that packs.
struct LeverInfo {
  std::optional<Knob> knob;  // none: packing
  const char* name = "";     // "attention", "norm", ..., "packing"
  const char* moves = "";    // what it changes in the step
  // How a user pulls the same lever in a Hugging Face + PEFT harness, or "none" said plainly.
  const char* in_hf_stack = "";
};
// The registry's levers in its order, then packing.
const std::vector<LeverInfo>& lever_catalogue();
extern const char* const kPackingLever;  // "packing"

// One configuration to measure.
struct LeverConfig {
  std::string lever;    // "baseline", a LeverInfo name, or "best"
  std::string setting;  // config_difference against the baseline ("" for the baseline)
  StepConfig config;
  bool padded_only = false;  // packing: measured at the padded point only
};

// What the levers are measured on and the baseline they move from.
struct LeverPlanInput {
  StepConfig baseline;
  std::string device = "cuda";  // cuda | cpu
  bool padded_point = false;    // a padded point is measured (packing applies only then)
  // The path that packs a padded batch on this device (flash-window on CUDA, blockwise on the
  // CPU); none when none does.
  std::optional<AttentionPath> packing_path;
};
// The baseline first, then each lever's alternatives alone, in catalogue order: every value of
// the lever's knob the registry offers as a lever on this device (a value the engine cannot run
// here is still measured: the engine refuses it, a row with its reason), the batch halved (when
// even) and doubled, and packing where a padded point is measured.
std::vector<LeverConfig> lever_configs(const LeverPlanInput& in);

// A point's repeats, as measured.
struct Timing {
  std::vector<double> samples_s;
  double median_s = 0, min_s = 0, max_s = 0;
};
Timing make_timing(std::vector<double> samples_s);

// A lever's time against the baseline's at one point. `scale` multiplies the lever's times before
// comparing (the batch lever compares the same tokens: baseline batch / lever batch).
struct LeverDelta {
  double delta_s = 0;  // scaled lever median − baseline median
  double ratio = 0;    // baseline median / scaled lever median (> 1: faster)
  // The two [min, max] ranges overlap: the lever cannot be told from the run-to-run spread.
  bool inside_noise = false;
  bool spread_measured = false;  // both sides have at least two repeats
  std::string verdict;           // "faster", "slower", "inside the noise", "no spread measured"
};
LeverDelta compare(const Timing& baseline, const Timing& lever, double scale = 1.0);

// One measured configuration at one point.
struct LeverRow {
  std::string lever, setting;
  StepConfig config;
  int64_t batch = 0, width = 0;
  std::vector<int64_t> lengths;  // empty: every row full
  int64_t tokens = 0;            // real tokens of the micro-batch
  std::string outcome = "ok";    // ok | oom | refused | error | interrupted
  std::string message;           // why, when not ok
  Timing timing;
  std::optional<int64_t> peak_allocated_bytes, peak_reserved_bytes;
  std::optional<double> performed_mfu;
  std::optional<LeverDelta> delta;  // against the baseline's row at the same point
};

// What a configuration does to the memory edge (`levers --gpu-memory G --reserve R`): the largest
// batch at its widest width that runs under an allocator cap of G − R, found by measuring, never
// predicted. One probe is one step under the cap: EdgeProbe (core/evidence/cost_points.hpp).
// A point of a configuration's sweep, as the edge search sees it.
struct EdgeCandidate {
  int64_t width = 0;
  bool padded = false;
  EdgeProbe probe;  // its batch and outcome
};
// Where the edge is searched: the index of the sweep's widest unpadded point that ran; where none
// ran, of its widest unpadded point that ran out of memory (uncapped: the search's first failed
// probe, and the search walks down from it); none where neither exists.
std::optional<size_t> edge_start(const std::vector<EdgeCandidate>& sweep);
// The next batch to measure, or none when the edge is known: upward from `start` while each fits
// (at most start + max_up), downward from start while each fails (down to 1).
std::optional<int64_t> next_edge_batch(int64_t start, const std::vector<EdgeProbe>& done,
                                       int64_t max_up = 3);

struct LeverEdge {
  std::string lever, setting;
  int64_t width = 0, start_batch = 0;
  std::vector<EdgeProbe> probes;  // in the order measured
  int64_t largest_batch = 0;      // 0: no batch measured to fit
  // measured: the batch past largest_batch failed under the cap; at least: the search stopped
  // at start + max_up with every probe fitting; none fits: batch 1 failed; not measured: why in
  // message (the CPU has no allocator to cap, the configuration failed, a signal).
  std::string outcome = "not measured";
  std::string message;
};
// Fills largest_batch and outcome from the probes (start_batch and max_up as searched).
void summarise_edge(LeverEdge& edge, int64_t max_up = 3);
// Whether a lever's largest batch is measured to rise or drop against the baseline's: "rises" or
// "drops", or none where the two do not order (both lower bounds, or a lower bound that does
// not pass the other's value, or either not measured).
std::optional<std::string> edge_change(const LeverEdge& baseline, const LeverEdge& lever);

struct LeversReport {
  std::string baseline_name;  // what the baseline reproduces
  StepConfig baseline;
  std::string device, model;
  std::vector<LeverRow> rows;  // baseline rows first, then each lever's, then the best's
  // The levers that were faster beyond the noise at every point they ran (and never OOM or
  // refused), combined; empty when none helped.
  std::optional<StepConfig> best;
  std::string best_setting;
  std::vector<std::string> best_from;  // the levers it combines
  bool best_considered = false;        // false: the run stopped before the levers were compared
  // With --dataset: the epoch predicted per configuration and measured on sampled micro-batches
  // (core/cost/epoch.hpp); absent otherwise.
  std::optional<EpochReport> epoch;
  // With --gpu-memory: each configuration's memory edge; absent otherwise.
  std::optional<double> edge_card_gib, edge_reserve_gib;
  int64_t edge_cap_bytes = 0;  // the allocator cap every probe ran under: card less reserve
  std::vector<LeverEdge> edges;
  std::vector<Diagnostic> diagnostics;
  Outcome outcome = Outcome::kOk;
};

// Fills every row's delta against the baseline row of the same point (batch lever: per token).
void compare_rows(LeversReport& report);
// The best combination of the levers measured so far (no batch lever: it changes the recipe,
// reported on its own; packing comes with the attention path that packs).
std::optional<StepConfig> best_combination(const LeversReport& report,
                                           std::vector<std::string>* from);

Json to_json(const LeversReport& report);
// The reverse of to_json (a levers evidence file's `results`; `where` names it, "l.json
// results"): what to_json derives (the lever catalogue, each delta's per_token, why there is no
// best) is recomputed from the rest; diagnostics and outcome are the evidence's own, not read.
LeversReport levers_report_from_json(const Json& results, const std::string& where);
std::vector<Table> levers_tables(const LeversReport& report);
// The memory-edge table (with --gpu-memory; empty otherwise), also one of levers_tables'.
std::vector<Table> edge_tables(const LeversReport& report);

class SectionBuilder;
// The report's section of levers evidence: the baseline, the best combination, one bar chart
// per point of each lever's median step (its min–max and verdict beside it) and the rows.
void levers_report_section(SectionBuilder& c);

}  // namespace tprobe::core
