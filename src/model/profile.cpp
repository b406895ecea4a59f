// `tprobe profile`'s computation in the engine: the sweep through the step runner with a kernel
// source attached, the per-point trace summaries and the GEMM peak (docs/profile.md). What the
// measurements give without the engine (FLOPs, MFUs, the scaling fit) is runs' profile_costs.
#include "tprobe/engine/profile_request.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"
#include "tprobe/cupti/kernel_source.hpp"
#include "tprobe/model/torch_compat.hpp"
#include "tprobe/model/engine.hpp"

namespace tprobe::model {

// The engine works in engine's request and result types.
using namespace engine;

namespace {

PointTrace summarize(cupti::TraceCapture capture,
                     const std::vector<core::DeviceProperties>& devices, bool keep_records) {
  PointTrace t;
  t.captured = !capture.refused;
  t.records = static_cast<int64_t>(capture.records.size());
  t.dropped_records = capture.dropped_records;
  t.counts = capture.counts;
  t.problems = capture.problems;
  t.breakdown = core::break_down(capture.records);
  t.kernels = t.breakdown.kernels;
  t.kernel_sum_s = static_cast<double>(t.breakdown.kernel_ns) * 1e-9;
  t.span_s = static_cast<double>(t.breakdown.span_ns) * 1e-9;
  // Only the autograd engine's own glue should lack a tag. When most records do, the tags did
  // not attach to their launches and the phase table does not split the step: say so.
  if (t.records > 0 && 2 * t.counts.untagged > t.records) {
    t.problems.push_back(fmt::format(
        "{} of {} records carry no tag ({} launched outside every scope, {} inside backward nodes "
        "with no recorded forward op): the phase table does not split this step",
        t.counts.untagged, t.records, t.counts.untagged_no_context, t.counts.untagged_unlinked));
  }
  // Attention two ways: by part (the attention_core scopes, every path) and by kernel name (the
  // attention category), and the kernels that separate them.
  if (t.breakdown.kernel_ns > 0) {
    std::map<std::pair<std::string, bool>, AttentionDelta> deltas;
    int64_t core_ns = 0, named_ns = 0;
    for (const auto& r : capture.records) {
      if (r.kind != core::ActivityKind::kKernel) continue;
      const bool in_core = r.part == "attention_core";
      const bool named =
          core::categorize(r.kind, r.name) == core::KernelCategory::kAttention;
      if (in_core) core_ns += r.duration_ns();
      if (named) named_ns += r.duration_ns();
      if (in_core == named) continue;
      AttentionDelta& d = deltas[{core::short_kernel_name(r.name, 60), in_core}];
      d.kernel = core::short_kernel_name(r.name, 60);
      d.in_core = in_core;
      d.kernels += 1;
      d.kernel_ns += r.duration_ns();
    }
    const auto total = static_cast<double>(t.breakdown.kernel_ns);
    t.attention_core_share = static_cast<double>(core_ns) / total;
    t.attention_share = static_cast<double>(named_ns) / total;
    for (auto& [key, d] : deltas) t.attention_deltas.push_back(std::move(d));
    std::sort(t.attention_deltas.begin(), t.attention_deltas.end(),
              [](const AttentionDelta& a, const AttentionDelta& b) {
                return a.kernel_ns != b.kernel_ns ? a.kernel_ns > b.kernel_ns : a.kernel < b.kernel;
              });
  }
  if (!capture.records.empty()) {
    try {
      t.table = core::build_kernel_table(capture.records, devices);
    } catch (const std::exception& e) {
      t.problems.push_back(std::string("kernel table: ") + e.what());
    }
  }
  if (keep_records) t.kept_records = std::move(capture.records);
  return t;
}

}  // namespace

ProfileReport run_profile(const ProfileRequest& request,
                          const std::function<void(const PointResult&)>& on_point) {
  ProfileReport rep;
  StepSpec spec = request.spec;
  // The defaults left open (attention path, experts) resolved against this engine, each choice
  // that is not the usual one said in a diagnostic.
  spec.config = core::resolve_defaults(spec.config, engine_facts(spec.device, spec.dtype),
                                       &rep.diagnostics);
  rep.config = spec.config;
  const core::StepConfig& knobs = spec.config;
  std::unique_ptr<cupti::KernelSource> source;
  if (!request.trace) {
    rep.kernel_table_reason = "tracing was turned off";
  } else if (!request.replay_trace.empty()) {
    source = cupti::make_replay_source(request.replay_trace);
  } else if (spec.device == "cuda") {
    source = cupti::make_cupti_source();
  } else {
    rep.kernel_table_reason =
        "not supported on the CPU: CUPTI records GPU activity only (timings and memory are "
        "measured all the same)";
  }
  if (source) {
    std::string why;
    if (source->usable(&why)) {
      spec.tracer = source.get();
      rep.trace_source = source->name();
      rep.kernel_table_supported = true;
    } else {
      rep.kernel_table_reason = "CUPTI is not usable: " + why;
      source.reset();
    }
  }

  if (source) {
    core::Environment env;
    describe_torch(env);
    if (env.cuda_usable) {
      core::DeviceProperties d;
      d.id = 0;
      d.name = env.device_name;
      int major = 0, minor = 0;
      if (std::sscanf(env.compute_capability.c_str(), "%d.%d", &major, &minor) == 2) {
        d.compute_major = major;
        d.compute_minor = minor;
      }
      d.total_memory_bytes = env.device_memory_bytes;
      d.multiprocessors = env.multiprocessors;
      rep.devices.push_back(d);
    }
  }
  bool raw_written = false, raw_memory_written = false;
  rep.steps = run_steps(spec, [&](const PointResult& p) {
    if (p.extra) {  // a budget's edge (StepReport::extra): no trace, no FLOPs row
      if (on_point) on_point(p);
      return;
    }
    PointTrace t;
    if (source && p.traced) {
      if (!raw_written && !request.raw_trace_path.empty()) {
        core::write_file_atomic(request.raw_trace_path,
                                core::to_json(source->raw()).dump() + "\n");
        raw_written = true;
      }
      cupti::TraceCapture c = source->take();
      if (c.refused && rep.kernel_table_supported) {
        rep.kernel_table_supported = false;
        rep.kernel_table_reason = "CUPTI refused the subscription: " + c.refusal;
        rep.diagnostics.push_back({core::Severity::kError, "cupti_refused",
                                   "kernel table missing: " + c.refusal +
                                       "; step timings are still measured (untraced steps)"});
      }
      t = summarize(std::move(c), rep.devices, request.keep_records && !p.point.padded());
      if (t.dropped_records > 0) {
        rep.diagnostics.push_back(
            {core::Severity::kWarning, "cupti_dropped_records",
             fmt::format("{}x{}: CUPTI dropped {} records (buffers full): the kernel table of this "
                         "point is incomplete",
                         p.point.batch, p.point.width, t.dropped_records)});
      }
    } else if (source && !p.trace_message.empty()) {
      source->take();
      t.problems.push_back("traced step failed: " + p.trace_message);
    }
    rep.traces.push_back(std::move(t));
    if (p.raw_memory && !request.raw_memory_path.empty()) {
      core::write_file_atomic(request.raw_memory_path, core::to_json(*p.raw_memory).dump() + "\n");
      raw_memory_written = true;
    }
    if (!p.memory_message.empty()) {
      rep.diagnostics.push_back({core::Severity::kWarning, "memory_step_failed",
                                 fmt::format("{}x{}: the memory step failed: {}", p.point.batch,
                                             p.point.width, p.memory_message)});
    } else if (p.memory && p.memory->total_mismatches > 0) {
      rep.diagnostics.push_back(
          {core::Severity::kWarning, "memory_replay_mismatch",
           fmt::format("{}x{}: the replayed total differs from the allocator's at {} of {} events",
                       p.point.batch, p.point.width, p.memory->total_mismatches,
                       p.memory->events)});
    }
    if (on_point) on_point(p);
  });
  // A raw trace or memory history asked for and not written is a failed run, not a run that
  // leaves the file out silently (an interrupted run writes no side output anyway).
  const bool stopped = spec.should_stop && spec.should_stop();
  if (!stopped && !request.raw_trace_path.empty() && !raw_written) {
    fail("--raw-trace: no step was traced ({}), so there is no raw trace to write",
         !rep.kernel_table_reason.empty() ? rep.kernel_table_reason
                                          : "every traced step failed");
  }
  if (!stopped && !request.raw_memory_path.empty() && !raw_memory_written) {
    fail("--raw-memory: no memory step succeeded, so there is no allocator history to write");
  }
  if (knobs.checkpointing == core::Checkpointing::kNonReentrant) {
    rep.diagnostics.push_back(
        {core::Severity::kWarning, "checkpointing_resolved",
         "--checkpointing non-reentrant ran as the engine's per-layer recompute inside the "
         "checkpoint's backward (reentrant's mechanism): libtorch's C++ API has no saved-tensor "
         "hooks; docs/profile.md, \"Memory\", gives Hugging Face's measured peaks of both"});
  }

  // Peak for the MFUs.
  if (request.peak_tflops) {
    rep.peak_tflops = *request.peak_tflops;
    rep.peak_source = "given";
  } else if (spec.device == "cuda") {
    try {
      rep.peak_tflops = measure_gemm_tflops(8192, 20);
      rep.peak_source = "measured: one bf16 GEMM 8192x8192x8192, 20 repeats, CUDA events";
    } catch (const std::exception& e) {
      rep.peak_source = std::string("not measured: ") + e.what();
    }
  } else {
    rep.peak_source = "none: no GEMM peak is measured on the CPU; give a peak for MFUs";
  }

  return rep;
}

}  // namespace tprobe::model
