// `tprobe profile`'s computation: the step sweep (step_runner), one CUPTI-traced step per point,
// FLOPs and MFUs, the scaling fit, and the phase / part table. Torch-free types: the engine fills
// the sweep's fields (steps, traces, peak), runs' derive_profile_costs the rest.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/cost/flops.hpp"
#include "tprobe/core/cost/step_shares.hpp"
#include "tprobe/core/cost/scaling_fit_report.hpp"
#include "tprobe/core/trace/stats/kernel_table.hpp"
#include "tprobe/engine/step_spec.hpp"

namespace tprobe::engine {

// What the device holds now (`profile --reserve-from-device`): cudaMemGetInfo's total and free on
// device 0, and what of the used part is this process's caching allocator's (read at the same
// time). Others = total − free − own_reserved (this process's CUDA context included: a training
// process beside the co-tenant has one too).
struct DeviceMemory {
  std::string unavailable;  // why there is no reading (no CUDA build, no device); "" when read
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int64_t own_reserved_bytes = 0;
  std::string source;  // "cudaMemGetInfo on cuda:0 (<device name>)"
};

struct ProfileRequest {
  StepSpec spec;                      // spec.tracer is set by run_profile
  bool trace = true;                  // one traced step per point, where a source is usable
  std::string replay_trace;           // a raw trace file to replay instead of CUPTI (tests)
  std::string raw_trace_path;         // write what the source recorded (all points) here
  std::string raw_memory_path;        // write the first point's memory history here
  std::optional<double> peak_tflops;  // given: no GEMM measurement
  int64_t table_width = 0;  // whose kernel table is results.kernel_table (0: the widest point)
  // Keep each unpadded point's attributed records in PointTrace::kept_records (`--trace-out` writes
  // the table point's; never in the evidence).
  bool keep_records = false;
};

// A kernel on one side only of "attention core (parts)" vs "attention (kernel-name category)".
struct AttentionDelta {
  std::string kernel;  // short name
  bool in_core = false;  // true: tagged attention_core, not named attention; false: the reverse
  int64_t kernels = 0;
  int64_t kernel_ns = 0;
};

struct PointTrace {
  bool captured = false;
  int64_t records = 0, kernels = 0;
  int64_t dropped_records = 0;
  core::AttributionCounts counts;
  core::StepBreakdown breakdown;  // phase × layer kind × part, per layer
  double kernel_sum_s = 0;  // Σ kernel durations
  double span_s = 0;        // first start to last end (device wall of the traced step)
  std::optional<core::KernelTable> table;  // the kernels table over the traced step's records
  std::optional<double> attention_share;   // attention-category kernels / Σ kernel time
  std::optional<double> attention_core_share;  // attention_core parts / Σ kernel time
  std::vector<AttentionDelta> attention_deltas;  // what separates the two, largest first
  std::vector<std::string> problems;
  // The traced step's records as attributed (phase, part, layer; launch times where the source
  // recorded them), with ProfileRequest::keep_records on unpadded points; not in the evidence.
  std::vector<core::KernelRecord> kept_records;
};

struct PointCost {
  double intended_flops = 0, performed_flops = 0;
  std::optional<double> intended_mfu, performed_mfu;  // with a peak and a measured step
};

struct ProfileReport {
  StepReport steps;
  // What the sweep ran: the request's knobs with the defaults it left open resolved by the engine.
  core::StepConfig config;
  std::vector<PointCost> costs;      // one per steps.points entry
  std::vector<PointTrace> traces;    // one per steps.points entry
  std::optional<double> peak_tflops;
  std::string peak_source;  // "measured: bf16 GEMM 8192^3 ×20", "--peak-tflops", or why none
  core::AttentionPath flops_path = core::AttentionPath::kSdpa;
  std::optional<core::ScalingFitReport> fit;  // with >= 3 distinct unpadded widths
  std::string fit_note;                       // why there is none
  // The fit's quadratic share against the parts that grow with w² on this path (the attention
  // core of full layers; of sliding layers too where the path computes them dense).
  bool sliding_dense = false;
  std::optional<core::ShareCheck> share_check;
  std::string share_check_note;  // why there is none
  bool kernel_table_supported = false;
  std::string kernel_table_reason;  // why not (CPU, no CUPTI, refused, --trace off)
  std::string trace_source;         // what recorded
  std::vector<core::DeviceProperties> devices;
  // Index into steps.points of the unpadded traced point whose table is results.kernel_table.
  std::optional<size_t> table_point;
  std::vector<core::Diagnostic> diagnostics;
};


}  // namespace tprobe::engine
