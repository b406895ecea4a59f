// `tprobe levers`' measurement: the baseline and each lever alone, then the best combination, each
// one `run_profile` sweep of the same points through the module's function table (so every row is
// measured the way `profile` measures: warm-up, repeats, CUDA events, the allocator's peaks).
// Torch-free; the comparison and the views are core's (core/cost/levers.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tprobe/core/cost/levers.hpp"
#include "tprobe/engine/profile_request.hpp"
#include "tprobe/runs/profile_analysis.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {

struct LeversRequest {
  engine::Access engine = nullptr;  // what every sweep runs on (required)
  // The points, repeats, model, LoRA targets and dtype every row shares; its knobs are replaced by
  // each configuration's. trace is off for every row (no CUPTI step: the rows stay comparable).
  engine::ProfileRequest shared;
  core::StepConfig baseline;  // moe left open: resolved by the engine (grouped_mm or loop)
  std::string baseline_name;
  std::vector<std::string> only;  // lever names to measure (empty: all)
  std::function<void(const core::LeverRow&)> on_row;  // as each row is measured
  // The memory edge (--gpu-memory, --reserve): cap_bytes 0 for none. Each configuration's largest
  // batch at its widest unpadded width, measured step by step under an allocator cap of it
  // (core::next_edge_batch), after its sweep, on the model it built.
  double edge_card_gib = 0, edge_reserve_gib = 0;
};

// Every configuration's failure is a row (refused: the engine's reason, e.g. a path the device or
// libtorch lacks; oom; error); an interrupt stops between configurations. Throws only for what
// makes the baseline impossible to build (its error, as run_profile throws it).
core::LeversReport run_levers(const LeversRequest& request);

// The profile request of one configuration: `shared` with `config` as its knobs (and its batch as
// the points').
engine::ProfileRequest lever_request(const engine::ProfileRequest& shared,
                                        const core::StepConfig& config, bool padded_only);

// The epoch (docs/levers.md, "The epoch"): with a dataset, every configuration's epoch is
// predicted from its measured step curve, and the configurations in `measure` are measured on
// micro-batches drawn uniformly from the epoch.
struct EpochOptions {
  std::string dataset;  // "": no epoch; else core::load_dataset's spec (a file, synthetic[:N])
  std::string format = "auto";
  std::string sampler = "sequential";  // sequential | shuffled | bucket:N | order:FILE | packed
  int64_t accumulation = 8;            // micro-batches per optimizer step
  int64_t samples = 0;                 // sampled micro-batches per measured configuration; 0: planned
  int64_t max_seq_len = 0;             // 0: the widest --widths
  uint64_t seed = 0;                   // the sampler's (shuffled, bucket) and the draw's
  std::vector<std::string> measure = {"baseline", "packing"};  // lever names, "best"; {"none"}
};

// `tprobe levers`' options: the shapes and the measurement (profile's options; its knobs are the
// baseline's and each lever's, never the user's) and which levers to measure.
struct LeversOptions {
  ProfileOptions step;              // widths empty: 2048,16384 on cuda, 32,64 on cpu
  std::vector<std::string> levers;  // lever names (empty: all)
  double gpu_memory_gib = 0;        // the memory edge's card (0: none)
  double reserve_gib = 0;           // kept free on it (CUDA context, co-tenants)
  EpochOptions epoch;
};

// The sampled micro-batches' points, as the harness runs them: a padded micro-batch is its rows at
// the width with their real lengths (HF's padding masks on a padded path, the real tokens packed
// on a path that packs); a packed one is its records as packed segments — on a path that packs,
// a padded point whose rows are the records (the engine packs their real tokens into one sequence
// with positions reset and attention inside each record: the flattening collator's layout).
engine::StepPoint epoch_point(const core::EpochMicroBatch& shape);

// The whole probe: the request (profile's validation and size limits), the baseline and every
// lever, the best combination; a diagnostic per lever that failed or was refused. With
// options.epoch.dataset: the epoch's micro-batches are built first (a bad dataset or order file
// fails before any step), then, after the levers, each configuration's epoch is predicted and
// the configurations of options.epoch.measure are measured on sampled micro-batches (`on_line`:
// one line per sampled micro-batch).
core::LeversReport analyze_levers(engine::Access engine, const LeversOptions& options,
                                  const std::function<bool()>& should_stop,
                                  const std::function<void(const core::LeverRow&)>& on_row,
                                  const std::function<void(const std::string&)>& on_line = {});

}  // namespace tprobe::runs
