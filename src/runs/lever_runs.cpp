#include "tprobe/runs/lever_runs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/units.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/cost/epoch.hpp"
#include "tprobe/core/data/epoch_batches.hpp"
#include "tprobe/core/step/attention_path.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/runs/profile_costs.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {

using engine::Access;
using engine::ExtraPoints;
using engine::PointOutcome;
using engine::PointResult;
using engine::ProfileReport;
using engine::ProfileRequest;
using engine::StepPoint;
using engine::StepReport;
using engine::StepSpec;

ProfileRequest lever_request(const ProfileRequest& shared, const core::StepConfig& config,
                             bool padded_only) {
  ProfileRequest r = shared;
  StepSpec& s = r.spec;
  s.config = config;
  r.trace = false;
  r.replay_trace.clear();
  r.raw_trace_path.clear();
  std::vector<StepPoint> points;
  for (StepPoint p : shared.spec.points) {
    if (padded_only && !p.padded()) continue;
    if (p.batch != config.batch) {
      // Another batch size: a padded point's per-row lengths no longer fit, so it is left out.
      if (p.padded()) continue;
      p.batch = config.batch;
    }
    points.push_back(p);
  }
  s.points = points;
  return r;
}

namespace {

const char* outcome_name(PointOutcome o) {
  switch (o) {
    case PointOutcome::kOk: return "ok";
    case PointOutcome::kOom: return "oom";
    case PointOutcome::kError: return "error";
  }
  return "error";
}

core::LeverRow base_row(const core::LeverConfig& c, const StepPoint& p) {
  core::LeverRow row;
  row.lever = c.lever;
  row.setting = c.setting;
  row.config = c.config;
  row.batch = p.batch;
  row.width = p.width;
  row.lengths = p.lengths;
  row.tokens = p.real_tokens();
  return row;
}

struct Measured {
  std::vector<core::LeverRow> rows;
  std::optional<ProfileReport> report;
  bool interrupted = false;  // the sweep stopped at a signal: rows holds what was measured
  std::optional<core::LeverEdge> edge;  // with a memory edge asked for
};

core::EdgeProbe edge_probe(const PointResult& r) {
  core::EdgeProbe p;
  p.batch = r.point.batch;
  p.outcome = outcome_name(r.outcome);
  p.message = r.message;
  if (r.memory_measured) {
    p.peak_allocated_bytes = r.peak_allocated_bytes;
    p.peak_reserved_bytes = r.peak_reserved_bytes;
  }
  return p;
}

// Where the edge is searched (core::edge_start): the point, and where it ran out of memory in the
// sweep, that uncapped OOM as the search's first failed probe (`seed`).
struct EdgeStart {
  StepPoint point;
  std::optional<core::EdgeProbe> seed;
};

std::optional<EdgeStart> edge_start(const StepReport& sweep) {
  std::vector<core::EdgeCandidate> candidates;
  for (const PointResult& p : sweep.points) {
    candidates.push_back({p.point.width, p.point.padded(), edge_probe(p)});
  }
  const auto i = core::edge_start(candidates);
  if (!i) return std::nullopt;
  EdgeStart start{sweep.points[*i].point, std::nullopt};
  if (candidates[*i].probe.outcome != "ok") {
    start.seed = candidates[*i].probe;
    start.seed->uncapped = true;
  }
  return start;
}

// The probes so far: the seed (an uncapped OOM of the sweep), then each round's capped step.
std::vector<core::EdgeProbe> edge_probes(const EdgeStart& start, const StepReport& sweep) {
  std::vector<core::EdgeProbe> done;
  if (start.seed) done.push_back(*start.seed);
  for (const auto& g : sweep.extra) {
    for (const PointResult& r : g) done.push_back(edge_probe(r));
  }
  return done;
}

// One probe per round under the cap, until core::next_edge_batch knows the edge.
void ask_for_edge(ProfileRequest& req, double cap_bytes) {
  req.spec.extra_points = [cap_bytes](const StepReport& sweep) {
    std::vector<ExtraPoints> groups;
    const auto start = edge_start(sweep);
    if (!start) return groups;
    const auto next = core::next_edge_batch(start->point.batch, edge_probes(*start, sweep));
    if (!next) return groups;
    ExtraPoints g;
    g.memory_cap_bytes = static_cast<int64_t>(cap_bytes);
    StepPoint p = start->point;
    p.batch = *next;
    g.points.push_back(p);
    groups.push_back(std::move(g));
    return groups;
  };
}

core::LeverEdge edge_of(const core::LeverConfig& c, const ProfileReport& rep) {
  core::LeverEdge e;
  e.lever = c.lever;
  e.setting = c.setting;
  const auto start = edge_start(rep.steps);
  if (!start) {
    e.message = "no unpadded point of this configuration ran or ran out of memory, so there is "
                "no edge to search";
    return e;
  }
  e.width = start->point.width;
  e.start_batch = start->point.batch;
  e.probes = edge_probes(*start, rep.steps);
  core::summarise_edge(e);
  if (e.outcome == "not measured" && rep.steps.interrupted) e.message = "interrupted";
  return e;
}

Measured measure(const LeversRequest& in, const core::LeverConfig& c, const ProfileRequest& req,
                 bool rethrow) {
  Measured m;
  auto fail_all = [&](const std::string& outcome, const std::string& message) {
    for (const StepPoint& p : req.spec.points) {
      core::LeverRow row = base_row(c, p);
      row.outcome = outcome;
      row.message = message;
      m.rows.push_back(row);
      if (in.on_row) in.on_row(m.rows.back());
    }
  };
  if (req.spec.points.empty()) return m;
  try {
    m.report = in.engine().run_profile(req, {});
  } catch (const core::Interrupted&) {
    m.interrupted = true;
    return m;
  } catch (const UsageError& e) {
    if (rethrow) throw;
    fail_all("refused", e.what());
    return m;
  } catch (const Error& e) {
    if (rethrow) throw;
    fail_all("error", e.what());
    return m;
  }
  derive_profile_costs(*m.report, req);  // the MFUs of the rows
  const ProfileReport& rep = *m.report;
  for (std::size_t i = 0; i < rep.steps.points.size(); ++i) {
    const PointResult& pr = rep.steps.points[i];
    core::LeverRow row = base_row(c, pr.point);
    row.outcome = outcome_name(pr.outcome);
    row.message = pr.message;
    if (pr.outcome == PointOutcome::kOk) row.timing = core::make_timing(pr.step_s);
    if (pr.memory_measured) {
      row.peak_allocated_bytes = pr.peak_allocated_bytes;
      row.peak_reserved_bytes = pr.peak_reserved_bytes;
    }
    if (i < rep.costs.size()) row.performed_mfu = rep.costs[i].performed_mfu;
    m.rows.push_back(row);
    if (in.on_row) in.on_row(m.rows.back());
  }
  m.interrupted = rep.steps.interrupted;
  if (in.edge_card_gib > 0 && !c.padded_only) m.edge = edge_of(c, rep);
  return m;
}

bool wanted(const LeversRequest& in, const std::string& lever) {
  return in.only.empty() || std::find(in.only.begin(), in.only.end(), lever) != in.only.end();
}

}  // namespace

StepPoint epoch_point(const core::EpochMicroBatch& s) {
  StepPoint p;
  p.lengths = s.packed ? s.samples : s.rows;
  if (p.lengths.empty()) fail("an empty micro-batch");
  // A one-token record has no next token to predict: the engine needs two per row, so it runs as
  // two (docs/levers.md, "Measured").
  for (int64_t& l : p.lengths) l = std::max<int64_t>(l, 2);
  p.width = std::max<int64_t>(
      2, s.packed ? *std::max_element(p.lengths.begin(), p.lengths.end()) : s.width);
  p.batch = static_cast<int64_t>(p.lengths.size());
  if (std::all_of(p.lengths.begin(), p.lengths.end(), [&](int64_t l) { return l == p.width; })) {
    p.lengths.clear();  // every row full: no padding, HF's maskless fast path
  }
  return p;
}

namespace {

struct EpochInput {
  core::EpochReport report;
  std::vector<core::EpochMicroBatch> shapes;
  bool packed = false;
  int64_t widest_measured = 0;
};

constexpr int64_t kPilot = 8;
constexpr int64_t kSampleCap = 64;

// The dataset, the sampler and the epoch's micro-batches: read before any step runs, so a broken
// order file costs no GPU time.
EpochInput prepare_epoch(const EpochOptions& o, const ProfileOptions& step) {
  if (o.accumulation < 1) fail_usage("--accum {}: must be >= 1", o.accumulation);
  if (o.samples < 0) fail_usage("--epoch-samples {}: must be >= 0 (0: planned)", o.samples);
  const std::vector<std::string> known = [] {
    std::vector<std::string> k = {"baseline", "best", "none"};
    for (const core::LeverInfo& i : core::lever_catalogue()) {
      if (i.knob != core::Knob::kBatch) k.push_back(i.name);
    }
    return k;
  }();
  for (const std::string& m : o.measure) {
    if (std::find(known.begin(), known.end(), m) == known.end()) {
      fail_usage("--epoch-measure '{}': expected some of {}", m, fmt::join(known, ", "));
    }
  }
  EpochInput in;
  in.widest_measured = *std::max_element(step.widths.begin(), step.widths.end());
  const core::LengthDataset ds = core::load_dataset(o.dataset, core::parse_length_format(o.format));
  core::EpochBatchOptions bo;
  bo.sampler = core::parse_epoch_sampler(o.sampler, "--sampler");
  bo.micro_batch = step.config.batch;
  bo.max_seq_len = o.max_seq_len > 0 ? o.max_seq_len : in.widest_measured;
  bo.seed = o.seed;
  const core::EpochBatches b = core::epoch_batches(ds, bo);
  in.packed = bo.sampler.kind == core::EpochSamplerKind::kPacked;
  core::EpochReport& r = in.report;
  r.dataset = ds.name;
  r.records = b.records;
  r.truncated_records = b.truncated_records;
  r.sampler = b.sampler;
  r.rule = b.rule;
  r.micro_batch = bo.micro_batch;
  r.max_seq_len = bo.max_seq_len;
  r.accumulation = o.accumulation;
  r.seed = o.seed;
  r.micro_batches = static_cast<int64_t>(b.micro_batches.size());
  r.real_tokens = b.real_tokens;
  r.padded_tokens = b.padded_tokens;
  r.requested_samples = o.samples;
  r.pilot = kPilot;
  r.cap = o.samples > 0 ? o.samples : kSampleCap;
  int64_t engine_head_positions = 0;  // what the engine's loss head computes for a packed layout
  for (const core::EpochMicroBatch& mb : b.micro_batches) {
    in.shapes.push_back(mb);
    if (!mb.packed && std::all_of(mb.rows.begin(), mb.rows.end(),
                                  [&](int64_t l) { return l == mb.width; })) {
      ++r.zero_pad_micro_batches;
    }
    const StepPoint p = epoch_point(in.shapes.back());
    engine_head_positions += p.batch * p.width;
  }
  if (in.packed) {
    r.loss_head_note = fmt::format(
        "loss head: the engine runs a packed micro-batch as its records side by side, so its "
        "logits cover records x longest record: {} positions over the epoch for {} real tokens "
        "(a flattening collator's head covers the real tokens only); the layers compute the real "
        "tokens only.",
        core::format_count(engine_head_positions), core::format_count(r.real_tokens));
  } else {
    r.loss_head_note = fmt::format(
        "loss head: logits are computed at every position, padded ones included (their labels "
        "are ignored), as in Hugging Face: {} padded positions over the epoch, 2 x hidden x vocab "
        "FLOPs each forward and twice that backward, on every path (the packing path skips the "
        "padding in the layers, not in the head).",
        core::format_count(r.padded_tokens - r.real_tokens));
  }
  if (bo.max_seq_len > in.widest_measured) {
    r.rule += fmt::format("; micro-batches wider than the widest measured width ({}) are "
                          "extrapolated by the curve",
                          in.widest_measured);
  }
  return in;
}

core::ModelConfig model_config_of(const StepSpec& s) {
  return core::model_config_of(s.model, s.checkpoint_dir);
}

// Runs the sampled micro-batches of `draw` on one configuration, one step each after the
// request's warm-up, stopping at the planned sample size.
void measure_epoch(Access engine, core::EpochConfigRow& row, const EpochInput& in,
                   const std::vector<int64_t>& draw, ProfileRequest req,
                   const std::function<bool()>& user_stop,
                   const std::function<void(const std::string&)>& on_line) {
  const core::EpochReport& er = in.report;
  const auto population = static_cast<int64_t>(in.shapes.size());
  req.spec.points.clear();
  for (int64_t i : draw) req.spec.points.push_back(epoch_point(in.shapes[static_cast<size_t>(i)]));
  req.spec.repeats = 1;
  req.trace = false;
  int64_t target = std::min<int64_t>(er.cap, population);
  const bool planned = er.requested_samples == 0;
  row.pilot = planned ? std::min(er.pilot, target) : 0;
  row.planned = target;
  int64_t done = 0;
  bool failed = false;
  req.spec.should_stop = [&] { return (user_stop && user_stop()) || done >= target; };
  auto on_point = [&](const PointResult& p) {
    const int64_t index = draw[static_cast<size_t>(done)];
    ++done;
    row.sample.push_back(index);
    row.sample_outcomes.push_back(to_string(p.outcome));
    const bool ok = p.outcome == PointOutcome::kOk && !p.step_s.empty();
    if (ok) {
      row.sample_measured_s.push_back(p.step_s.front());
      if (row.prediction) {
        row.sample_predicted_s.push_back(row.prediction->per_micro_batch_s[static_cast<size_t>(index)]);
      }
    } else {
      failed = true;
    }
    if (on_line) {
      on_line(fmt::format("epoch {:<13} micro-batch {} ({}x{}{}): {}", row.lever, index,
                          p.point.batch, p.point.width, p.point.padded() ? " padded" : "",
                          ok ? core::format_seconds(p.step_s.front())
                             : std::string(to_string(p.outcome)) + ": " + p.message));
    }
    if (planned && done == row.pilot && row.sample_measured_s.size() >= 2) {
      const double cv = core::pilot_spread(row.sample_measured_s, row.sample_predicted_s);
      row.pilot_cv = cv;
      target = core::planned_samples(cv, static_cast<int64_t>(row.sample_measured_s.size()),
                                     er.target, target, population);
      row.planned = target;
    }
  };
  try {
    engine().run_profile(req, on_point);
  } catch (const core::Interrupted&) {
    row.measure_note = "interrupted";
  } catch (const Error& e) {
    row.measure_note = std::string("could not run: ") + e.what();
    return;
  }
  row.measured = true;
  if (user_stop && user_stop()) {
    row.measure_note = fmt::format("interrupted after {} sampled micro-batches", done);
  }
  if (failed) {
    row.measure_note = fmt::format(
        "{} of {} sampled micro-batches did not run (outcomes listed): no estimate of the epoch",
        done - static_cast<int64_t>(row.sample_measured_s.size()), done);
    return;
  }
  if (row.sample_measured_s.empty()) return;
  row.estimate = core::estimate_epoch(
      row.sample_measured_s, row.sample_predicted_s, population,
      row.prediction ? std::optional<double>(row.prediction->seconds) : std::nullopt);
  if (row.prediction && row.estimate->half_s()) {
    row.agree = std::abs(row.prediction->seconds - row.estimate->estimate_s()) <=
                *row.estimate->half_s();
  }
  if (!row.estimate->half_s()) {
    row.measure_note = "one sampled micro-batch: no interval";
  } else if (planned && *row.estimate->half_s() > er.target * row.estimate->estimate_s()) {
    row.measure_note = fmt::format(
        "the interval is {} of the estimate, wider than the {} target: the sample was capped at {}",
        core::format_percent(*row.estimate->half_s() / row.estimate->estimate_s()),
        core::format_percent(er.target, 0), er.cap);
  }
}

bool wanted_epoch(const std::vector<std::string>& measure, const std::vector<std::string>& levers) {
  for (const std::string& l : levers) {
    if (std::find(measure.begin(), measure.end(), l) != measure.end()) return true;
  }
  return false;
}

// Every measured configuration's epoch: one row per distinct set of knobs (the packing lever and
// the attention lever are one configuration where they run the same path), its curve from the
// unpadded points of every row with those knobs.
core::EpochReport run_epoch(EpochInput& in, const core::LeversReport& rep, const LeversRequest& req,
                            const EpochOptions& o,
                            const std::function<void(const std::string&)>& on_line,
                            std::vector<core::Diagnostic>& diags) {
  core::EpochReport out = in.report;
  const std::string& device = rep.device;
  const StepSpec& spec = req.shared.spec;
  std::optional<core::ModelConfig> config;
  std::string config_error;
  try {
    config = model_config_of(spec);
  } catch (const Error& e) {
    config_error = e.what();
  }
  std::vector<core::StepConfig> seen;
  std::vector<std::vector<std::string>> names;
  std::vector<const core::LeverRow*> first;
  for (const core::LeverRow& r : rep.rows) {
    if (r.lever == "batch") continue;
    auto it = std::find(seen.begin(), seen.end(), r.config);
    if (it == seen.end()) {
      seen.push_back(r.config);
      names.push_back({r.lever});
      first.push_back(&r);
    } else {
      auto& n = names[static_cast<size_t>(it - seen.begin())];
      if (std::find(n.begin(), n.end(), r.lever) == n.end()) n.push_back(r.lever);
    }
  }
  const std::vector<int64_t> draw = core::draw_without_replacement(
      out.micro_batches, std::min<int64_t>(out.cap, out.micro_batches), o.seed);
  const auto stop = req.shared.spec.should_stop;
  for (std::size_t k = 0; k < seen.size(); ++k) {
    const core::StepConfig& knobs = seen[k];
    const core::AttentionPath attn = knobs.attn.value_or(core::AttentionPath::kEager);
    core::EpochConfigRow row;
    row.lever = fmt::format("{}", fmt::join(names[k], ", "));
    row.setting = first[k]->setting;
    row.attn = core::to_string(attn);
    row.packs = core::path_packs_on(attn, device);
    std::vector<core::CurvePoint> pts;
    std::string failure;
    for (const core::LeverRow& r : rep.rows) {
      if (r.config != knobs) continue;
      if (r.outcome != "ok") {
        if (failure.empty()) failure = r.outcome + (r.message.empty() ? "" : ": " + r.message);
        continue;
      }
      if (!r.lengths.empty() || r.timing.samples_s.empty()) continue;
      pts.push_back({r.batch, r.width, r.timing.median_s});
    }
    if (in.packed && !row.packs) {
      row.status = "not applicable";
      row.note = "the packed layout needs a path that keeps attention inside each record without "
                 "attending the whole row (one that packs padding); this path does not";
    } else if (pts.empty()) {
      row.status = "not run";
      row.note = failure.empty() ? "no unpadded point ran" : failure;
    } else {
      row.curve = core::fit_step_curve(pts);
      if (!row.curve.determined) {
        row.status = "underdetermined";
        row.note = row.curve.refusal;
      } else {
        row.status = "predicted";
        row.prediction = core::predict_epoch(row.curve, in.shapes, row.packs, o.accumulation);
        if (config) {
          row.flops = core::epoch_flops(*config, in.shapes, attn, spec.lora_targets,
                                        spec.lora_rank,
                                        knobs.checkpointing != core::Checkpointing::kOff);
        } else {
          row.note = "FLOPs not counted: " + config_error;
        }
      }
    }
    const bool want = wanted_epoch(o.measure, names[k]);
    if (want && (row.status == "predicted" || row.status == "underdetermined") &&
        !(stop && stop())) {
      measure_epoch(req.engine, row, in, draw, lever_request(req.shared, knobs, false), stop,
                    on_line);
    } else if (want) {
      row.measure_note = row.status == "predicted" || row.status == "underdetermined"
                             ? "not measured: interrupted"
                             : "not measured: " + row.status;
    }
    if (row.agree && !*row.agree) {
      diags.push_back({core::Severity::kWarning, "epoch_disagrees",
                       fmt::format("epoch of {}: predicted {:.4g} s, measured {:.4g} s ± {:.3g} s "
                                   "on {} sampled micro-batches: the curve misses what the sample "
                                   "measured (a finding, docs/levers.md \"The epoch\")",
                                   row.lever, row.prediction->seconds, row.estimate->estimate_s(),
                                   *row.estimate->half_s(), row.estimate->n)});
    }
    if (row.status == "underdetermined") {
      diags.push_back({core::Severity::kInfo, "epoch_underdetermined",
                       fmt::format("epoch of {}: {}", row.lever, row.note)});
    }
    out.configs.push_back(std::move(row));
  }
  for (const std::string& m : o.measure) {
    if (m == "none") continue;
    bool found = false;
    for (const auto& n : names) found = found || std::find(n.begin(), n.end(), m) != n.end();
    if (!found) {
      diags.push_back({core::Severity::kInfo, "epoch_not_measured",
                       fmt::format("--epoch-measure {}: no such configuration ran{}", m,
                                   m == "packing" ? " (the packing lever needs a padded point: "
                                                    "--pad-fraction or --lengths)"
                                                  : "")});
    }
  }
  return out;
}

}  // namespace

core::LeversReport run_levers(const LeversRequest& in) {
  if (!in.engine) fail("run_levers: no engine to run the sweeps on");
  core::LeversReport out;
  out.baseline_name = in.baseline_name;
  out.baseline = in.baseline;
  out.device = in.shared.spec.device;
  out.model = in.shared.spec.checkpoint_dir.empty() ? in.shared.spec.model
                                                    : in.shared.spec.checkpoint_dir;
  ProfileRequest shared = in.shared;

  // The baseline first: its failure to build is the run's error; its resolved MoE dispatch is the
  // baseline every lever moves from.
  core::LeverConfig base{"baseline", "", in.baseline, false};
  const bool edge = in.edge_card_gib > 0 && shared.spec.device == "cuda";
  if (in.edge_card_gib > 0) {
    out.edge_card_gib = in.edge_card_gib;
    out.edge_reserve_gib = in.edge_reserve_gib;
  }
  const double cap = (in.edge_card_gib - in.edge_reserve_gib) * core::kGiB;
  out.edge_cap_bytes = static_cast<int64_t>(cap);
  auto with_edge = [&](ProfileRequest r, const core::LeverConfig& c) {
    if (edge && !c.padded_only) ask_for_edge(r, cap);
    return r;
  };
  auto keep_edge = [&](const Measured& m, const core::LeverConfig& c) {
    if (in.edge_card_gib <= 0 || c.padded_only) return;
    core::LeverEdge e;
    if (m.edge) {
      e = *m.edge;
    } else {
      e.lever = c.lever;
      e.setting = c.setting;
      e.message = "the configuration did not run";
    }
    if (!edge) e.message = "not measured on the CPU: there is no caching allocator to cap";
    out.edges.push_back(std::move(e));
  };
  // The defaults left open (sdpa where the linked libtorch has it, else eager; transformers'
  // experts where grouped_mm runs, else the loop) are resolved by the engine, and the levers move
  // from what it ran.
  ProfileRequest breq = with_edge(lever_request(shared, in.baseline, false), base);
  Measured b = measure(in, base, breq, true);
  keep_edge(b, base);
  if (b.report) {
    const ProfileReport& rep = *b.report;
    out.baseline = rep.config;
    if (rep.peak_tflops) shared.peak_tflops = rep.peak_tflops;
    for (const core::Diagnostic& d : rep.diagnostics) out.diagnostics.push_back(d);
  }
  for (core::LeverRow& r : b.rows) r.config = out.baseline;
  out.rows = b.rows;
  auto stopped = [&](const Measured& m) {
    if (!m.interrupted) return false;
    out.outcome = core::Outcome::kInterrupted;
    out.diagnostics.push_back({core::Severity::kWarning, "levers_interrupted",
                               "interrupted: the rows measured before the signal are kept"});
    return true;
  };
  if (stopped(b)) {
    core::compare_rows(out);
    return out;
  }

  core::LeverPlanInput plan;
  plan.baseline = out.baseline;
  plan.device = shared.spec.device;
  plan.padded_point = std::any_of(shared.spec.points.begin(), shared.spec.points.end(),
                                  [](const StepPoint& p) { return p.padded(); });
  plan.packing_path = core::packing_path(plan.device);
  for (const core::LeverConfig& c : core::lever_configs(plan)) {
    if (c.lever == "baseline" || !wanted(in, c.lever)) continue;
    Measured m = measure(in, c, with_edge(lever_request(shared, c.config, c.padded_only), c), false);
    keep_edge(m, c);
    out.rows.insert(out.rows.end(), m.rows.begin(), m.rows.end());
    if (stopped(m)) {
      core::compare_rows(out);
      return out;
    }
  }
  core::compare_rows(out);

  out.best = core::best_combination(out, &out.best_from);
  out.best_considered = true;
  if (out.best) {
    out.best_setting = core::config_difference(*out.best, out.baseline);
    const core::LeverConfig c{"best", out.best_setting, *out.best, false};
    Measured m = measure(in, c, with_edge(lever_request(shared, c.config, false), c), false);
    keep_edge(m, c);
    out.rows.insert(out.rows.end(), m.rows.begin(), m.rows.end());
    stopped(m);
    core::compare_rows(out);
  }
  return out;
}

core::LeversReport analyze_levers(Access engine, const LeversOptions& options,
                                  const std::function<bool()>& should_stop,
                                  const std::function<void(const core::LeverRow&)>& on_row,
                                  const std::function<void(const std::string&)>& on_line) {
  for (const std::string& l : options.levers) {
    const auto& cat = core::lever_catalogue();
    if (std::none_of(cat.begin(), cat.end(), [&](const core::LeverInfo& i) { return l == i.name; })) {
      std::vector<std::string> names;
      for (const core::LeverInfo& i : cat) names.push_back(i.name);
      fail_usage("lever '{}': expected one of {}", l, fmt::join(names, ", "));
    }
  }
  if (options.gpu_memory_gib < 0 || options.reserve_gib < 0 ||
      !std::isfinite(options.gpu_memory_gib) || !std::isfinite(options.reserve_gib)) {
    fail_usage("--gpu-memory {} / --reserve {}: must be finite and not negative",
               options.gpu_memory_gib, options.reserve_gib);
  }
  if (options.reserve_gib > 0 && options.gpu_memory_gib == 0)
    fail_usage("--reserve {}: only means something with --gpu-memory", options.reserve_gib);
  if (options.gpu_memory_gib > 0 && options.reserve_gib >= options.gpu_memory_gib) {
    fail_usage("--reserve {} GiB leaves nothing of --gpu-memory {} GiB", options.reserve_gib,
               options.gpu_memory_gib);
  }
  ProfileOptions step = options.step;
  if (step.widths.empty()) step.widths = core::default_widths(step.device, core::WidthsUse::kLevers);
  step.trace = "off";
  std::optional<EpochInput> epoch;
  if (!options.epoch.dataset.empty()) epoch = prepare_epoch(options.epoch, step);
  LeversRequest req;
  req.engine = engine;
  req.shared = profile_request(step);
  req.shared.spec.should_stop = should_stop;
  req.baseline = core::hf_peft_baseline(step.config.batch);
  // The optimizer is no lever: every configuration runs the one --optimizer asks (AdamW by
  // default, as the baseline's Trainer does), and the levers compare steps that end alike.
  req.baseline.optimizer = step.config.optimizer;
  req.baseline_name = core::hf_peft_baseline_name();
  req.only = options.levers;
  req.on_row = on_row;
  req.edge_card_gib = options.gpu_memory_gib;
  req.edge_reserve_gib = options.reserve_gib;
  core::LeversReport rep = run_levers(req);
  for (const core::LeverRow& r : rep.rows) {
    if (r.outcome == "ok") continue;
    rep.diagnostics.push_back(
        {r.outcome == "error" ? core::Severity::kWarning : core::Severity::kInfo,
         "lever_" + r.outcome,
         fmt::format("{} {} at {}x{}: {}", r.lever, r.setting.empty() ? "(baseline)" : r.setting,
                     r.batch, r.width, r.message.empty() ? r.outcome : r.message)});
  }
  if (epoch && rep.outcome != core::Outcome::kInterrupted) {
    rep.epoch = run_epoch(*epoch, rep, req, options.epoch, on_line, rep.diagnostics);
    if (should_stop && should_stop()) rep.outcome = core::Outcome::kInterrupted;
  }
  return rep;
}

}  // namespace tprobe::runs
