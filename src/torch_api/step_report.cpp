// JSON, line and table views of a StepReport: no libtorch here, so they compile fast.
#include "tprobe/torch_api/step_report.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace tprobe::model {

bool StepPoint::padded() const {
  for (int64_t l : lengths) {
    if (l < width) return true;
  }
  return false;
}

int64_t StepPoint::real_tokens() const {
  if (lengths.empty()) return batch * width;
  int64_t n = 0;
  for (int64_t l : lengths) n += l;
  return n;
}

const char* to_string(PointOutcome outcome) {
  switch (outcome) {
    case PointOutcome::kOk:
      return "ok";
    case PointOutcome::kOom:
      return "oom";
    case PointOutcome::kError:
      return "error";
  }
  return "?";
}

SampleStats sample_stats(const std::vector<double>& samples) {
  SampleStats s;
  if (samples.empty()) return s;
  std::vector<double> v = samples;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  s.spread_ratio = s.median > 0 ? (s.max - s.min) / s.median : 0.0;
  return s;
}

namespace {

core::Json series(const std::vector<double>& samples) {
  core::Json out = core::Json::array();
  for (double x : samples) out.push_back(x);
  return out;
}

core::Json stats_json(const std::vector<double>& samples) {
  if (samples.empty()) return nullptr;
  SampleStats s = sample_stats(samples);
  return {
      {"median_s", s.median}, {"min_s", s.min}, {"max_s", s.max}, {"spread_ratio", s.spread_ratio}};
}

}  // namespace

core::Json point_to_json(const PointResult& r) {
  core::Json p;
  p["batch"] = r.point.batch;
  p["width"] = r.point.width;
  p["lengths"] = r.point.lengths.empty() ? core::Json(nullptr) : core::Json(r.point.lengths);
  p["padded"] = r.point.padded();
  p["real_tokens"] = r.point.real_tokens();
  p["padded_tokens"] = r.point.batch * r.point.width;
  p["outcome"] = to_string(r.outcome);
  p["message"] = r.message.empty() ? core::Json(nullptr) : core::Json(r.message);
  p["oom_tried_bytes"] = r.oom_tried_bytes ? core::Json(*r.oom_tried_bytes) : core::Json(nullptr);
  p["samples_s"] = series(r.step_s);
  p["forward_samples_s"] = series(r.forward_s);
  p["loss_samples_s"] = series(r.loss_s);
  p["backward_samples_s"] = series(r.backward_s);
  p["step"] = stats_json(r.step_s);
  p["forward"] = stats_json(r.forward_s);
  p["loss"] = stats_json(r.loss_s);
  p["backward"] = stats_json(r.backward_s);
  p["peak_allocated_bytes"] =
      r.memory_measured ? core::Json(r.peak_allocated_bytes) : core::Json(nullptr);
  p["peak_reserved_bytes"] =
      r.memory_measured ? core::Json(r.peak_reserved_bytes) : core::Json(nullptr);
  p["loss_value"] = r.outcome == PointOutcome::kOk ? core::Json(r.loss_value) : core::Json(nullptr);
  p["loss_targets"] = r.loss_targets;
  p["inert_adapters"] = r.inert_adapters;
  p["attn_sliding"] = r.attn_sliding;
  p["attn_full"] = r.attn_full;
  p["moe_dispatch"] = r.moe;
  p["traced"] = r.traced;
  p["traced_step_s"] = r.traced ? core::Json(r.traced_step_s) : core::Json(nullptr);
  p["trace_priming_step_s"] =
      r.trace_priming_step_s > 0 ? core::Json(r.trace_priming_step_s) : core::Json(nullptr);
  if (r.traced && !r.step_s.empty()) {
    const double med = sample_stats(r.step_s).median;
    p["trace_overhead_ratio"] = med > 0 ? r.traced_step_s / med - 1.0 : 0.0;
  } else {
    p["trace_overhead_ratio"] = nullptr;
  }
  p["trace_message"] = r.trace_message.empty() ? core::Json(nullptr) : core::Json(r.trace_message);
  return p;
}

core::Json to_json(const StepReport& r) {
  core::Json out;
  out["model"] = r.model;
  out["source"] = r.source;
  out["config_digest"] = r.config_digest;
  out["device"] = r.device_resolved;
  out["dtype"] = r.dtype;
  out["clock"] = r.clock;
  out["init_s"] = r.init_s;
  out["base_parameters"] = r.base_parameters;
  out["lora_modules"] = r.lora_modules;
  out["lora_parameters"] = r.lora_parameters;
  out["weights_allocated_bytes"] = r.weights_allocated_bytes;
  out["interrupted"] = r.interrupted;  // a signal stopped the sweep: later points are missing
  out["points"] = core::Json::array();
  out["padded_points"] = core::Json::array();
  for (const auto& p : r.points) {
    out[p.point.padded() ? "padded_points" : "points"].push_back(point_to_json(p));
  }
  return out;
}

std::string point_line(const PointResult& r) {
  std::string shape = fmt::format("{}x{}", r.point.batch, r.point.width);
  if (r.point.padded()) shape += fmt::format(" (lengths {})", fmt::join(r.point.lengths, ","));
  if (r.outcome != PointOutcome::kOk) {
    std::string tried = r.oom_tried_bytes
                            ? " (tried to allocate " + core::format_bytes(*r.oom_tried_bytes) + ")"
                            : "";
    std::string msg = r.message.substr(0, 160);
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    return fmt::format("{} {}{}: {}", shape, to_string(r.outcome), tried, msg);
  }
  SampleStats s = sample_stats(r.step_s);
  std::string line = fmt::format(
      "{} ok: step {} (min {}, spread {}), fwd {}, loss {}, bwd {}, {}", shape,
      core::format_seconds(s.median), core::format_seconds(s.min),
      core::format_percent(s.spread_ratio), core::format_seconds(sample_stats(r.forward_s).median),
      core::format_seconds(sample_stats(r.loss_s).median),
      core::format_seconds(sample_stats(r.backward_s).median),
      r.memory_measured
          ? fmt::format("peak {} alloc / {} reserved",
                        core::format_bytes(static_cast<double>(r.peak_allocated_bytes)),
                        core::format_bytes(static_cast<double>(r.peak_reserved_bytes)))
          : std::string("peak memory not measured (no caching allocator on the CPU)"));
  if (r.traced && s.median > 0) {
    line += fmt::format(", traced step {} ({:+.1f} %)", core::format_seconds(r.traced_step_s),
                        100.0 * (r.traced_step_s / s.median - 1.0));
  }
  return line;
}

core::Table timing_table(const StepReport& r) {
  core::Table t(fmt::format("step times ({} on {}, {}; median of the timed repeats)", r.model,
                            r.device_resolved, r.clock));
  t.column("batch").column("width").column("real tokens").column("outcome", core::Align::kLeft);
  t.column("step").column("min").column("spread").column("forward").column("loss");
  t.column("backward").column("peak alloc").column("peak reserved");
  for (const auto& p : r.points) {
    if (p.outcome != PointOutcome::kOk) {
      t.row({std::to_string(p.point.batch), core::format_count(p.point.width),
             core::format_count(p.point.real_tokens()), to_string(p.outcome)});
      continue;
    }
    SampleStats s = sample_stats(p.step_s);
    t.row({std::to_string(p.point.batch), core::format_count(p.point.width),
           core::format_count(p.point.real_tokens()), "ok", core::format_seconds(s.median),
           core::format_seconds(s.min), core::format_percent(s.spread_ratio),
           core::format_seconds(sample_stats(p.forward_s).median),
           core::format_seconds(sample_stats(p.loss_s).median),
           core::format_seconds(sample_stats(p.backward_s).median),
           p.memory_measured ? core::format_bytes(static_cast<double>(p.peak_allocated_bytes))
                             : "-",
           p.memory_measured ? core::format_bytes(static_cast<double>(p.peak_reserved_bytes))
                             : "-"});
  }
  t.note(
      "forward = embedding + decoder layers + final norm; loss = the CE forward; backward = "
      "CE backward + layer recompute and backward");
  if (std::any_of(r.points.begin(), r.points.end(), [](const PointResult& p) {
        return p.outcome == PointOutcome::kOk && !p.memory_measured;
      })) {
    t.note("peak memory '-': not measured (CUDA's caching allocator only; none on the CPU)");
  }
  return t;
}

}  // namespace tprobe::model
