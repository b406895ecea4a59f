// `tprobe profile`'s analysis as one call: the options turned into the engine's request (and
// refused before anything is allocated when they make no sense), the sweep through the torch
// module, and a diagnostic per point that ran out of memory or failed. docs/profile.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/cost/edge_search.hpp"
#include "tprobe/core/cost/memory_fit.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/engine/profile_request.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {

struct ProfileOptions {
  std::string checkpoint;
  std::string model;  // empty: gemma4-26b-a4b on cuda, gemma4-tiny on cpu
  bool random_init = false;
  std::vector<std::string> targets = core::linear_module_names();  // {"none"}: no LoRA
  int64_t rank = 64;
  double alpha = 128;
  // The step's knobs, as the probe's options set them through the knob registry (defaults: the
  // HF + PEFT baseline; attn and moe left to the engine).
  core::StepConfig config;
  int64_t ce_chunk = 4096;
  std::string dtype = "bf16";
  std::string device = "cuda";
  std::vector<int64_t> widths;  // empty: by device
  std::vector<int64_t> lengths;
  double pad_fraction = 0;
  bool pad_fraction_given = false;  // then it must be in (0, 1)
  int64_t warmup = 1;
  int64_t repeats = 3;
  double peak_tflops = 0;  // 0: measure
  std::string trace = "on";
  std::string raw_trace;  // the path the evidence names
  std::string replay_trace;
  std::string memory = "on";  // one more step per point under the allocator's event hook
  std::string raw_memory;     // the path the evidence names
  // `--trace-out`: the table point's traced step as a Chrome / Kineto JSON trace (gzip for .gz),
  // the path the evidence names; `json_path` is --json's (the link is relative to its folder).
  std::string trace_out;
  std::string json_path;
  uint64_t seed = 1;
  int64_t table_width = 0;
  // What fits (docs/profile.md, "What fits"): after the sweep, the memory model fitted on its
  // points, and for each card size (GiB) less its reserve (GiB: one for all, or one per card) the
  // predicted edges measured under an allocator cap of that budget.
  std::vector<double> gpu_memory_gib;
  std::vector<double> reserve_gib;
  int64_t edge_step = 1024;  // the width edge's step (tokens)
  // The peak the model fits and the budget is held against: reserved (what an allocator cap
  // binds: allocated plus the cache's fragmentation) or allocated.
  std::string fit_peak = "reserved";
  // The edges found by running them (docs/profile.md, "The edge, searched"): on, each budget's
  // width edge and batch edge are searched under its cap from the model's prediction, each probe
  // core::kEdgeSearchSteps consecutive steps; off, the predicted edge and the step past it are
  // run once, one step each (the check before issue 44).
  std::string edge_search = "on";
  // The user's tokens (docs/profile.md, "The operator's tokens"): a JSONL dataset with
  // input_ids; each point's micro-batch is the sampler's first at the point's batch and width.
  std::string dataset;
  std::string dataset_format = "auto";
  std::string sampler = "filled";  // filled | sequential | shuffled | bucket:N | order:FILE | packed
  uint64_t sampler_seed = 0;
  // The reserve read off the device (what other processes hold now), instead of --reserve; with
  // no --gpu-memory the card is the device's total.
  bool reserve_from_device = false;
};

// What the device held when --reserve-from-device read it (engine::DeviceMemory), in bytes.
struct DeviceMemoryReading {
  double total_bytes = 0, free_bytes = 0, own_reserved_bytes = 0;
  double others_bytes = 0;  // total − free − own_reserved: the reserve
  std::string source;       // "cudaMemGetInfo on cuda:0 (<name>)"
};

// One card size's edges: the largest width at the run's batch and the largest batch at its
// widest width, each predicted and then measured with the step past it.
struct MemoryBudget {
  double gpu_memory_bytes = 0, reserve_bytes = 0;
  // Where each figure came from: "--gpu-memory" or "the device's total (<source>)"; "--reserve",
  // "none" or "--reserve-from-device: what other processes hold (<source>)".
  std::string gpu_memory_source = "--gpu-memory", reserve_source = "none";
  std::optional<DeviceMemoryReading> device;  // with --reserve-from-device
  // The edges searched under the budget's cap (edge_search on): width, then batch.
  std::vector<core::EdgeSearchResult> searches;
  std::vector<core::MemoryEdge> predicted;      // width edge, batch edge
  std::vector<core::MemoryEdgeCheck> checks;    // one per measured edge
  std::vector<std::string> problems;            // an edge not measured, and why
  int64_t marginal_width = 0;
  double marginal_sequence_bytes = 0;  // one more sequence at marginal_width
};
struct MemoryFitReport {
  bool requested = false;
  bool edge_search = true;  // the edges searched (on), or the predicted edges checked once (off)
  core::MemoryFit fit;  // peak allocated against batch and width
  std::vector<MemoryBudget> budgets;
};

// The engine's request for `options`: the model, LoRA and step settings, and the points (every
// width, then the padded points of lengths and pad_fraction). Throws UsageError for a checkpoint
// with random init, sizes past what a training setup uses, lengths that are not one per row or
// exceed the widest width, a pad fraction outside (0, 1) and a table width that is not a width.
engine::ProfileRequest profile_request(const ProfileOptions& options);

// What the probe's caller watches while the sweep runs.
struct ProfileHooks {
  std::function<bool()> should_stop;                 // a signal: stop at the next point
  std::function<void(const engine::StepPoint&)> on_start;    // as each point starts
  std::function<void(const engine::PointResult&)> on_point;  // as each point ends
  std::function<void(const std::string&)> on_progress;  // one line per edge-search probe
};

// What `--trace-out` wrote (results.trace_out): the file, its size and what it holds.
struct TraceOutFile {
  std::string path;  // as given
  std::string link;  // relative to the evidence file's folder (absolute when it cannot be)
  bool gzip = false;
  int64_t bytes = 0, events = 0, device_rows = 0, host_launches = 0, attribution_slices = 0,
          memory_samples = 0;
  int64_t batch = 0, width = 0;  // the point whose traced step it is (results.kernel_table_point)
  std::string memory_note;       // why there are no memory counters, or only allocated ("": both)
};

struct ProfileAnalysis {
  engine::ProfileRequest request;  // raw_trace_path: the path the evidence names
  // Its diagnostics include one per point out of memory or in error.
  engine::ProfileReport report;
  MemoryFitReport memory_fit;
  std::optional<TraceOutFile> trace_out;  // set by trace_out_bytes()
  core::Outcome outcome = core::Outcome::kOk;  // a measurement is never a "no"
};

// profile_request(), then the sweep; the raw trace (when asked for) is written to
// `raw_trace_to` (the output guard's staged name of options.raw_trace), the first point's memory
// history to `raw_memory_to` (options.raw_memory's staged name).
ProfileAnalysis analyze_profile(engine::Access engine, const ProfileOptions& options,
                                const std::string& raw_trace_to, const ProfileHooks& hooks,
                                const std::string& raw_memory_to = "");

// The bytes `--trace-out` writes (options.trace_out): the table point's records as attributed,
// its memory step's timeline as counters (core/trace/trace_export.hpp); records what was written
// in analysis.trace_out. Throws tprobe::Error when no unpadded point has a traced step to write.
std::string trace_out_bytes(ProfileAnalysis& analysis, const ProfileOptions& options);

// "sliding: X; full: Y" of the first point that ran; "" when none did.
std::string resolved_attention(const ProfileAnalysis& analysis);
// "INTERRUPTED: N of M points measured before the signal\n", or "" when the sweep finished.
std::string interrupted_note(const ProfileAnalysis& analysis);

core::Json to_json(const ProfileAnalysis& analysis);
core::Json to_json(const DeviceMemoryReading& reading);
// Its reader: others_bytes checked against the other figures. Throws tprobe::Error naming `where`.
DeviceMemoryReading device_memory_reading_from_json(const core::Json& j, const std::string& where);
// The probe's results back: the request and the report as profile_evidence_from_json reads them,
// and the memory fit (null: not asked for; its fit, each budget's predicted edges, their checks
// and problems, the budget and the model's spelling checked against the other fields). So
// to_json(profile_analysis_from_json(r)) is r for every document to_json wrote; the outcome of a
// measurement is kOk. Throws tprobe::Error naming `where` ("p.json results") and the field.
ProfileAnalysis profile_analysis_from_json(const core::Json& results, const std::string& where);
std::vector<core::Table> profile_tables(const ProfileAnalysis& analysis);

}  // namespace tprobe::runs
