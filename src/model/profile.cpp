// `tprobe profile`'s computation: the sweep through the step runner with a kernel source attached,
// then FLOPs, MFUs, the scaling fit and the per-point trace summaries (docs/profile.md).
#include "tprobe/model/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/trace/kernel_category.hpp"
#include "tprobe/cupti/kernel_source.hpp"
#include "tprobe/model/runtime_info.hpp"

namespace tprobe::model {

// The engine and the FLOP counter share one enum (core/gemma4/attention_path.hpp).
core::AttentionPath flops_path(AttnImpl impl) { return impl; }

namespace {

PointTrace summarize(cupti::TraceCapture capture,
                     const std::vector<core::DeviceProperties>& devices) {
  PointTrace t;
  t.captured = !capture.refused;
  t.records = static_cast<int64_t>(capture.records.size());
  t.dropped_records = capture.dropped_records;
  t.untagged_records = capture.untagged_records;
  t.problems = capture.problems;
  int64_t first = INT64_MAX, last = INT64_MIN, sum = 0;
  for (const auto& r : capture.records) {
    first = std::min(first, r.start_ns);
    last = std::max(last, r.end_ns);
    if (r.kind == core::ActivityKind::kKernel) {
      ++t.kernels;
      sum += r.duration_ns();
    }
  }
  t.kernel_sum_s = static_cast<double>(sum) * 1e-9;
  t.span_s = t.records > 0 ? static_cast<double>(last - first) * 1e-9 : 0.0;
  t.phase_rows = cupti::to_json(cupti::phase_rows(capture.records));
  // Only the autograd engine's own launches should lack a phase tag. When most records do, the
  // tags did not attach (as when CUPTI produced no external-correlation records) and the phase
  // table would put everything under backward/other: say so instead of showing it as a finding.
  if (t.records > 0 && 2 * t.untagged_records > t.records) {
    t.problems.push_back(fmt::format(
        "{} of {} records carry no phase tag (the step tags did not attach to their launches): the "
        "phase table counts them as backward/other and does not split the step",
        t.untagged_records, t.records));
  }
  if (!capture.records.empty()) {
    try {
      t.table = core::build_kernel_table(capture.records, devices);
      for (const auto& c : t.table->categories) {
        if (c.category == core::KernelCategory::kAttention) t.attention_share = c.share_ratio;
      }
    } catch (const std::exception& e) {
      t.problems.push_back(std::string("kernel table: ") + e.what());
    }
  }
  return t;
}

}  // namespace

ProfileReport run_profile(const ProfileRequest& request,
                          const std::function<void(const PointResult&)>& on_point) {
  ProfileReport rep;
  StepSpec spec = request.spec;
  if (request.attn_default) {
    std::string why;
    spec.attn = attn_available(AttnImpl::kSdpa, &why) ? AttnImpl::kSdpa : AttnImpl::kEager;
    if (spec.attn == AttnImpl::kEager) {
      rep.diagnostics.push_back(
          {core::Severity::kInfo, "attn_default_eager",
           "no attention path given and sdpa is unavailable (" + why + "): eager"});
    }
  }
  rep.attn = spec.attn;
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
  bool raw_written = false;
  rep.steps = run_steps(spec, [&](const PointResult& p) {
    PointTrace t;
    if (source && p.traced) {
      if (!raw_written && !request.raw_trace_path.empty()) {
        core::write_file_atomic(request.raw_trace_path,
                                cupti::to_json(source->raw()).dump() + "\n");
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
      t = summarize(std::move(c), rep.devices);
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
    if (on_point) on_point(p);
  });

  for (size_t i = 0; i < rep.steps.points.size(); ++i) {
    const auto& p = rep.steps.points[i];
    if (p.point.padded() || !rep.traces[i].table) continue;
    const bool wanted =
        request.table_width > 0
            ? p.point.width == request.table_width
            : (!rep.table_point || p.point.width > rep.steps.points[*rep.table_point].point.width);
    if (wanted) rep.table_point = i;
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

  // FLOPs per point.
  rep.flops_path = flops_path(spec.attn);
  for (const auto& p : rep.steps.points) {
    core::FlopsRequest fr;
    fr.batch = p.point.batch;
    fr.width = p.point.width;
    fr.lengths = p.point.lengths;
    fr.path = rep.flops_path;
    fr.lora_targets = spec.lora_targets;
    fr.lora_rank = spec.lora_rank;
    fr.gradient_checkpointing = spec.gradient_checkpointing;
    core::FlopsReport f = core::count_flops(rep.steps.config, fr);
    PointCost c;
    c.intended_flops = core::total(f.intended_total);
    c.performed_flops = core::total(f.performed_total);
    if (rep.peak_tflops && p.outcome == PointOutcome::kOk && !p.step_s.empty()) {
      const double t = sample_stats(p.step_s).median;
      c.intended_mfu = core::mfu(c.intended_flops, t, *rep.peak_tflops);
      c.performed_mfu = core::mfu(c.performed_flops, t, *rep.peak_tflops);
    }
    rep.costs.push_back(c);
  }

  // Scaling fit over the unpadded points, as scaling-fit would read them from the evidence.
  core::ScalingFitInput in;
  std::set<int64_t> widths;
  for (const auto& p : rep.steps.points) {
    if (p.point.padded()) continue;
    if (p.outcome != PointOutcome::kOk) {
      in.skipped.push_back(fmt::format("width {}: {}", p.point.width, to_string(p.outcome)));
      continue;
    }
    widths.insert(p.point.width);
    for (size_t i = 0; i < p.step_s.size(); ++i) {
      in.points.push_back({static_cast<double>(p.point.width), p.step_s[i], p.point.batch,
                           fmt::format("{}x{} repeat {}", p.point.batch, p.point.width, i + 1)});
    }
  }
  std::set<int64_t> batches;
  for (const auto& fp : in.points) batches.insert(fp.batch);
  if (widths.size() >= 3 && batches.size() == 1) {
    in.model = "AB";
    in.at_widths.assign(widths.begin(), widths.end());
    rep.fit = core::analyze_scaling(in);
  } else if (batches.size() > 1) {
    rep.fit_note = "no scaling fit: the points are at different batches";
  } else {
    rep.fit_note = fmt::format(
        "no scaling fit: {} distinct measured width(s); the fit needs 3 or more", widths.size());
  }
  return rep;
}

}  // namespace tprobe::model
