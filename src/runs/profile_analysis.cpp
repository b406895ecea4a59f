// Size: the profile analysis (request, limits, sweep rounds, diagnostics) beside its evidence's
// writer, reader and tables, which issue 47's core/evidence is to take over.
#include "tprobe/runs/profile_analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unistd.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/units.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/data/dataset_batch.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/step/knobs.hpp"
#include "tprobe/core/trace/export/trace_export.hpp"
#include "tprobe/runs/profile_costs.hpp"
#include "tprobe/runs/profile_report.hpp"
#include "tprobe/engine/module_table.hpp"

namespace tprobe::runs {

using engine::Access;
using engine::ExtraPoints;
using engine::PointOutcome;
using engine::PointResult;
using engine::ProfileRequest;
using engine::StepReport;
using engine::StepPoint;
using engine::StepSpec;

ProfileRequest profile_request(const ProfileOptions& o) {
  ProfileRequest req;
  StepSpec& s = req.spec;
  if (!o.checkpoint.empty() && o.random_init)
    fail_usage("--checkpoint and --random-init exclude each other");
  s.checkpoint_dir = o.checkpoint;
  // The 26B shapes need a GPU's memory: on the CPU the default is the tiny model.
  s.model = !o.model.empty() ? o.model : o.device == "cuda" ? "gemma4-26b-a4b" : "gemma4-tiny";
  s.seed = o.seed;
  s.lora_targets = o.targets.size() == 1 && o.targets[0] == "none" ? std::vector<std::string>{}
                                                                   : o.targets;
  s.lora_rank = o.rank;
  s.lora_alpha = o.alpha;
  s.config = o.config;
  s.ce_chunk = o.ce_chunk;
  s.dtype = o.dtype;
  s.device = o.device;
  s.warmup = o.warmup;
  s.repeats = o.repeats;
  std::vector<int64_t> widths = o.widths;
  if (widths.empty()) widths = core::default_widths(o.device, core::WidthsUse::kProfile);
  // Sizes past these are typos, not training setups: refused before anything is allocated.
  constexpr int64_t kMaxBatch = 65536, kMaxWidth = int64_t{1} << 22, kMaxTokens = int64_t{1} << 32;
  if (o.config.batch > kMaxBatch) fail_usage("--batch {}: above {}", o.config.batch, kMaxBatch);
  for (int64_t l : o.lengths) {
    if (l > kMaxWidth) fail_usage("--lengths {}: above {} tokens", l, kMaxWidth);
  }
  for (int64_t w : widths) {
    if (w > kMaxWidth) fail_usage("--widths {}: above {} tokens", w, kMaxWidth);
    if (o.config.batch * w > kMaxTokens) {
      fail_usage("--batch {} x --widths {}: {} tokens per step is above {}", o.config.batch, w,
                 o.config.batch * w, kMaxTokens);
    }
  }
  for (int64_t w : widths) s.points.push_back({o.config.batch, w, {}});
  const int64_t widest = *std::max_element(widths.begin(), widths.end());
  if (!o.lengths.empty()) {
    if (static_cast<int64_t>(o.lengths.size()) != o.config.batch)
      fail_usage("--lengths has {} values for --batch {}: one real length per row",
                 o.lengths.size(), o.config.batch);
    const int64_t w = *std::max_element(o.lengths.begin(), o.lengths.end());
    // The padded point is padded to the widest width: a longer row would add a width of its own.
    if (w > widest) {
      fail_usage("--lengths value {} is above the widest --widths ({}): the padded point is "
                 "right-padded to the widest width",
                 w, widest);
    }
    s.points.push_back({o.config.batch, widest, o.lengths});
  }
  if (o.pad_fraction_given) {
    if (!(o.pad_fraction > 0 && o.pad_fraction < 1))
      fail_usage("--pad-fraction {}: must be in (0, 1)", o.pad_fraction);
    std::vector<int64_t> lengths(static_cast<size_t>(o.config.batch), widest);
    lengths.back() = std::max<int64_t>(
        2,
        static_cast<int64_t>(std::llround(static_cast<double>(widest) * (1.0 - o.pad_fraction))));
    // A fraction that rounds to no pad token would make a "padded" point with no padding.
    if (lengths.back() >= widest && widest <= 2) {
      fail_usage("--pad-fraction: the widest width ({} tokens) leaves no room for a pad token "
                 "(a padded row keeps 2 real tokens)",
                 widest);
    }
    if (lengths.back() >= widest) {
      fail_usage("--pad-fraction {}: pads no token of the widest width ({} tokens); give at "
                 "least {:.3g} (one pad token)",
                 o.pad_fraction, widest, 1.0 / static_cast<double>(widest));
    }
    s.points.push_back({o.config.batch, widest, lengths});
  }
  req.trace = o.trace == "on";
  // A raw trace that cannot be written is refused before any step (docs/profile.md).
  if (!o.raw_trace.empty() && !req.trace)
    fail_usage("--raw-trace needs --trace on (it is the traced step's records)");
  if (!o.raw_trace.empty() && o.device != "cuda" && o.replay_trace.empty()) {
    fail_usage("--raw-trace: no step is traced on the {} (CUPTI records GPU activity only): "
               "use --device cuda, or --replay-trace",
               o.device);
  }
  s.record_memory = o.memory == "on";
  if (!o.raw_memory.empty() && !s.record_memory)
    fail_usage("--raw-memory needs --memory on (the memory step records what it writes)");
  s.keep_raw_memory = !o.raw_memory.empty();
  req.raw_memory_path = o.raw_memory;
  req.raw_trace_path = o.raw_trace;
  if (!o.trace_out.empty() && !req.trace)
    fail_usage("--trace-out needs --trace on (it is the traced step, written for a trace viewer)");
  if (!o.trace_out.empty() && o.device != "cuda" && o.replay_trace.empty()) {
    fail_usage("--trace-out: no step is traced on the {} (CUPTI records GPU activity only): "
               "use --device cuda, or --replay-trace",
               o.device);
  }
  req.keep_records = !o.trace_out.empty();
  req.replay_trace = o.replay_trace;
  if (o.peak_tflops > 0) req.peak_tflops = o.peak_tflops;
  if (o.table_width > 0 && std::find(widths.begin(), widths.end(), o.table_width) == widths.end()) {
    fail_usage("--table-width {} is none of this run's widths ({})", o.table_width,
               fmt::join(widths, ", "));
  }
  req.table_width = o.table_width;
  return req;
}

namespace {


core::MemoryFitPoint fit_point(const PointResult& p) {
  core::MemoryFitPoint f;
  f.batch = p.point.batch;
  f.width = p.point.width;
  f.oom = p.outcome == PointOutcome::kOom;
  f.peak_allocated_bytes = f.oom ? 0 : p.peak_allocated_bytes;
  f.peak_reserved_bytes = f.oom ? 0 : p.peak_reserved_bytes;
  return f;
}

void validate_budgets(const ProfileOptions& o) {
  if (o.reserve_from_device) {
    if (!o.reserve_gib.empty())
      fail_usage("--reserve and --reserve-from-device exclude each other (one reserve per card)");
    if (o.device != "cuda")
      fail_usage("--reserve-from-device needs a CUDA device (--device {} has no device memory to "
                 "read)",
                 o.device);
  }
  if (o.gpu_memory_gib.empty()) {
    if (!o.reserve_gib.empty()) fail_usage("--reserve needs --gpu-memory (the card it is kept free on)");
    if (!o.reserve_from_device) return;
  }
  if (!o.reserve_gib.empty() && o.reserve_gib.size() != 1 &&
      o.reserve_gib.size() != o.gpu_memory_gib.size())
    fail_usage("--reserve has {} values for {} --gpu-memory values: give one, or one per card",
               o.reserve_gib.size(), o.gpu_memory_gib.size());
  for (size_t i = 0; i < o.gpu_memory_gib.size(); ++i) {
    const double g = o.gpu_memory_gib[i];
    const double r = o.reserve_gib.empty() ? 0.0 : o.reserve_gib[o.reserve_gib.size() == 1 ? 0 : i];
    if (!(std::isfinite(g) && g > 0 && g <= 1e6)) fail_usage("--gpu-memory {}: not a card size in GiB", g);
    if (!(std::isfinite(r) && r >= 0)) fail_usage("--reserve {}: must be a size in GiB >= 0", r);
    if (r >= g) fail_usage("--reserve {} GiB leaves nothing of --gpu-memory {} GiB", r, g);
  }
  if (o.fit_peak != "reserved" && o.fit_peak != "allocated")
    fail_usage("--fit-peak '{}': expected reserved or allocated", o.fit_peak);
  if (o.edge_step < 1 || o.edge_step > (int64_t{1} << 20))
    fail_usage("--edge-step {}: must be 1..{}", o.edge_step, int64_t{1} << 20);
  if (o.edge_search != "on" && o.edge_search != "off")
    fail_usage("--edge-search '{}': expected on or off", o.edge_search);
}

// Each card and its reserve, with where each figure came from: the options, or (with
// --reserve-from-device) the device read now through the engine.
std::vector<MemoryBudget> budget_cards(Access engine, const ProfileOptions& o) {
  std::vector<MemoryBudget> cards;
  std::optional<DeviceMemoryReading> dev;
  if (o.reserve_from_device) {
    const engine::Engine& api = engine();
    if (api.device_memory == nullptr) fail("--reserve-from-device: the engine cannot read the device's memory");
    const engine::DeviceMemory d = api.device_memory();
    if (!d.unavailable.empty())
      fail_usage("--reserve-from-device needs a CUDA device: {}", d.unavailable);
    DeviceMemoryReading r;
    r.total_bytes = static_cast<double>(d.total_bytes);
    r.free_bytes = static_cast<double>(d.free_bytes);
    r.own_reserved_bytes = static_cast<double>(d.own_reserved_bytes);
    r.others_bytes = std::max(0.0, r.total_bytes - r.free_bytes - r.own_reserved_bytes);
    r.source = d.source;
    if (!(r.total_bytes > 0) || r.free_bytes < 0 || r.free_bytes > r.total_bytes)
      fail("--reserve-from-device: {} read total {} B, free {} B: not a device's memory", d.source,
           d.total_bytes, d.free_bytes);
    dev = r;
  }
  std::vector<std::pair<double, std::string>> sizes;
  for (double g : o.gpu_memory_gib) sizes.emplace_back(g * core::kGiB, "--gpu-memory");
  if (sizes.empty() && dev) sizes.emplace_back(dev->total_bytes, "the device's total (" + dev->source + ")");
  for (size_t i = 0; i < sizes.size(); ++i) {
    MemoryBudget b;
    b.gpu_memory_bytes = sizes[i].first;
    b.gpu_memory_source = sizes[i].second;
    if (dev) {
      b.reserve_bytes = dev->others_bytes;
      b.reserve_source = "--reserve-from-device: what other processes hold (" + dev->source +
                         ": total - free - tprobe's own reserved)";
      b.device = dev;
      if (b.reserve_bytes >= b.gpu_memory_bytes)
        fail("--reserve-from-device: other processes hold {:.2f} GiB of the device, nothing of a "
             "{:.2f} GiB card is left",
             b.reserve_bytes / core::kGiB, b.gpu_memory_bytes / core::kGiB);
    } else if (!o.reserve_gib.empty()) {
      b.reserve_bytes = o.reserve_gib[o.reserve_gib.size() == 1 ? 0 : i] * core::kGiB;
      b.reserve_source = "--reserve";
    }
    cards.push_back(std::move(b));
  }
  return cards;
}

core::EdgeSearchProbe search_probe(const PointResult& p, int64_t steps) {
  core::EdgeSearchProbe q;
  q.batch = p.point.batch;
  q.width = p.point.width;
  q.outcome = p.outcome == PointOutcome::kOk    ? "fits"
              : p.outcome == PointOutcome::kOom ? "oom"
                                                : "error";
  q.steps = steps;
  if (p.memory_measured) {
    q.peak_allocated_bytes = p.peak_allocated_bytes;
    q.peak_reserved_bytes = p.peak_reserved_bytes;
  }
  q.wall_s = p.wall_s;
  q.message = p.message.substr(0, 300);
  return q;
}

// The searches of every budget, run in rounds through the sweep's extra groups: each round one
// probe of every search not done, one group per budget (its cap).
struct EdgeSearchState {
  core::EdgeSearchRounds rounds;
  std::vector<std::pair<size_t, size_t>> of;  // per search: its budget, its index there
  size_t round_start = 0;                     // the first group of the round out in extra
  std::vector<size_t> printed;                // per search: probes said on the progress hook
};

// The last round's outcomes: report.extra from round_start (fewer groups or points: stopped).
void record_round(EdgeSearchState& s, const std::vector<std::vector<PointResult>>& extra,
                  const std::function<void(const std::string&)>& on_progress) {
  if (!s.rounds.pending()) return;
  std::vector<std::vector<core::EdgeSearchProbe>> outcomes;
  for (size_t g = s.round_start; g < extra.size(); ++g) {
    std::vector<core::EdgeSearchProbe> group;
    for (const PointResult& p : extra[g]) group.push_back(search_probe(p, core::kEdgeSearchSteps));
    outcomes.push_back(std::move(group));
  }
  s.rounds.record_round(outcomes);
  for (size_t i = 0; i < s.rounds.searches().size(); ++i) {
    const core::EdgeSearchResult& r = s.rounds.searches()[i].result();
    for (; s.printed[i] < r.probes.size(); ++s.printed[i]) {
      if (on_progress) on_progress(core::edge_probe_line(r, s.printed[i]));
    }
  }
}

// profile --dataset: each point's batch built from the user's records (core/data/dataset_batch).
class DatasetTokens {
 public:
  DatasetTokens(const ProfileOptions& o, const StepSpec& spec) {
    if (!o.lengths.empty() || o.pad_fraction_given)
      fail_usage("--dataset makes the rows from the dataset: --lengths and --pad-fraction pad "
                 "random ones");
    lengths_ = core::load_dataset(o.dataset, core::parse_length_format(o.dataset_format));
    if (lengths_.format != "jsonl")
      fail_usage("--dataset {}: {} records have lengths, no token ids; the measured step needs a "
                 "JSONL file with input_ids",
                 o.dataset, lengths_.format);
    base_.path = o.dataset;
    base_.filled = o.sampler == core::kFilledSampler;
    if (!base_.filled) base_.sampler = core::parse_epoch_sampler(o.sampler, "--sampler");
    base_.seed = o.sampler_seed;
    const core::ModelConfig config = core::model_config_of(spec.model, spec.checkpoint_dir);
    base_.pad_id = config.pad_token_id;
    base_.vocab_size = config.vocab_size;
  }
  // The sweep's points: a dataset that cannot make one is the run's error.
  void fill(StepPoint& p) const {
    core::DatasetBatchRequest r = base_;
    r.batch = p.batch;
    r.width = p.width;
    core::DatasetBatch b = core::dataset_batch(lengths_, r);
    p.ids = std::move(b.ids);
    p.lengths = std::move(b.lengths);
    p.tokens = std::move(b.tokens);
  }
  // A point asked for later (the edge search): one the dataset cannot make fails alone.
  void fill_or_note(StepPoint& p) const {
    try {
      fill(p);
    } catch (const std::exception& e) {
      p.tokens_error = e.what();
    }
  }

 private:
  core::LengthDataset lengths_;
  core::DatasetBatchRequest base_;
};

}  // namespace

// Size: the sweep's rounds and what each point's measurement gives, over one request.
ProfileAnalysis analyze_profile(Access engine, const ProfileOptions& options,
                                const std::string& raw_trace_to, const ProfileHooks& hooks,
                                const std::string& raw_memory_to) {
  ProfileAnalysis a;
  validate_budgets(options);
  a.request = profile_request(options);
  ProfileRequest run = a.request;
  run.raw_trace_path = raw_trace_to;
  run.raw_memory_path = raw_memory_to.empty() ? a.request.raw_memory_path : raw_memory_to;
  run.spec.should_stop = hooks.should_stop;
  run.spec.on_start = hooks.on_start;
  std::shared_ptr<const DatasetTokens> data;
  if (!options.dataset.empty()) {
    data = std::make_shared<const DatasetTokens>(options, run.spec);
    for (StepPoint& p : run.spec.points) data->fill(p);
    a.request.spec.points = run.spec.points;
  }
  MemoryFitReport& mf = a.memory_fit;
  mf.requested = !options.gpu_memory_gib.empty() || options.reserve_from_device;
  mf.edge_search = options.edge_search == "on";
  EdgeSearchState search;
  bool asked = false;  // the budgets are built on the first call
  // The groups to measure next (below), each point's batch from the dataset where there is one;
  // it outlives the engine's run, which calls it.
  std::function<std::vector<ExtraPoints>(const StepReport&)> edge_groups;
  if (mf.requested) {
    const std::vector<MemoryBudget> cards = budget_cards(engine, options);
    // Once the sweep is in: fit its peaks, predict each budget's edges, and hand the edges back to
    // the engine to measure under the budget's allocator cap: searched round by round (edge search
    // on), or the predicted edge and the step past it in one round (off).
    run.spec.extra_points = [&edge_groups, data](const StepReport& sweep) {
      std::vector<ExtraPoints> groups = edge_groups(sweep);
      if (data) {
        for (ExtraPoints& g : groups) {
          for (StepPoint& p : g.points) data->fill_or_note(p);
        }
      }
      return groups;
    };
    edge_groups = [&options, &mf, &search, &asked, &hooks, cards](const StepReport& sweep) {
      std::vector<ExtraPoints> groups;
      if (asked) {
        if (!mf.edge_search) return groups;  // the predicted edges are checked in one round
        record_round(search, sweep.extra, hooks.on_progress);
      } else {
        asked = true;
        std::vector<core::MemoryFitPoint> pts;
        int64_t widest = 0, batch = 0;
        for (const auto& p : sweep.points) {
          if (p.point.padded()) continue;
          if (p.outcome == PointOutcome::kError) continue;
          if (p.outcome == PointOutcome::kOk && !p.memory_measured) continue;
          pts.push_back(fit_point(p));
          if (p.outcome == PointOutcome::kOk && p.point.width > widest) {
            widest = p.point.width;
            batch = p.point.batch;
          }
        }
        if (pts.empty()) {
          mf.fit.why_not = "no point has a measured peak (memory is measured on CUDA's caching "
                           "allocator only)";
          return groups;
        }
        mf.fit = core::fit_memory(pts, options.fit_peak == "reserved");
        // Without a fit the search still runs (from the sweep's widest point that ran); the
        // one-round check has nothing to check.
        if (!mf.fit.ok && !mf.edge_search) return groups;
        if (widest == 0) {
          mf.fit.why_not += mf.fit.why_not.empty() ? "" : "; ";
          mf.fit.why_not += "no unpadded point ran: no edge to search from";
          return groups;
        }
        for (const MemoryBudget& card : cards) {
          MemoryBudget b = card;
          const double budget = b.gpu_memory_bytes - b.reserve_bytes;
          b.marginal_width = widest;
          if (mf.fit.ok) {
            core::MemoryEdgeRequest req;
            req.gpu_memory_bytes = b.gpu_memory_bytes;
            req.reserve_bytes = b.reserve_bytes;
            req.width_step = options.edge_step;
            req.max_width = int64_t{1} << 20;
            req.max_batch = 1024;
            b.predicted.push_back(core::largest_width(mf.fit, batch, req));
            b.predicted.push_back(core::largest_batch(mf.fit, widest, req));
            b.marginal_sequence_bytes = core::marginal_sequence_bytes(mf.fit, widest);
          }
          if (!mf.edge_search) {
            ExtraPoints g;
            g.memory_cap_bytes = static_cast<int64_t>(budget);
            for (const core::MemoryEdge& e : b.predicted) {
              if (e.fits_nothing || e.capped) {
                b.problems.push_back(fmt::format("{} edge not measured: {}", e.axis, e.note));
                continue;
              }
              const bool by_width = e.axis == "width";
              g.points.push_back({e.batch, e.width, {}});
              g.points.push_back({by_width ? e.batch : e.batch + 1, by_width ? e.width + e.step : e.width, {}});
            }
            groups.push_back(std::move(g));
          } else {
            const size_t bi = mf.budgets.size();
            for (int axis = 0; axis < 2; ++axis) {
              core::EdgeSearchRequest q;
              q.budget_bytes = budget;
              if (axis == 0) {
                q.axis = "width";
                q.batch = batch;
                q.step = options.edge_step;
                const int64_t most = std::min<int64_t>(int64_t{1} << 20, (int64_t{1} << 32) / batch);
                q.max_value = std::max<int64_t>(1, most / q.step) * q.step;
                q.start = widest;
              } else {
                q.axis = "batch";
                q.width = widest;
                q.step = 1;
                q.max_value = 1024;
                q.start = batch;
              }
              if (mf.fit.ok) {
                const core::MemoryEdge& e = b.predicted[static_cast<size_t>(axis)];
                const int64_t v = axis == 0 ? e.width : e.batch;
                q.predicted = e.fits_nothing ? 0 : v;
                if (v > 0) q.start = v;
              }
              search.rounds.add(core::EdgeSearch(q), static_cast<int64_t>(budget));
              search.of.emplace_back(bi, static_cast<size_t>(axis));
              search.printed.push_back(0);
            }
          }
          mf.budgets.push_back(std::move(b));
        }
        if (!mf.edge_search) return groups;
      }
      search.round_start = sweep.extra.size();
      for (const core::EdgeRoundGroup& g : search.rounds.next_round()) {
        ExtraPoints x;
        x.memory_cap_bytes = g.cap_bytes;
        x.steps = g.steps;
        for (const core::EdgeRoundPoint& p : g.points) x.points.push_back({p.batch, p.width, {}});
        groups.push_back(std::move(x));
      }
      return groups;
    };
  }
  a.report = engine().run_profile(run, hooks.on_point);
  derive_profile_costs(a.report, run);
  // Each layer's experts part on the device beside its load, where the point was traced.
  for (size_t i = 0; i < a.report.steps.points.size() && i < a.report.traces.size(); ++i) {
    const engine::PointTrace& t = a.report.traces[i];
    if (!t.captured) continue;
    for (core::ExpertLoadLayer& e : a.report.steps.points[i].expert_load.layers) {
      for (const core::LayerRow& row : t.breakdown.layers) {
        if (row.layer != e.layer) continue;
        int64_t ns = 0;
        for (const auto& [phase, parts] : row.kernel_ns) {
          if (const auto it = parts.find(core::to_string(core::StepPart::kExperts)); it != parts.end())
            ns += it->second;
        }
        e.experts_kernel_s = static_cast<double>(ns) * 1e-9;
      }
    }
  }
  if (mf.edge_search) {
    // A round the engine measured but did not hand back (a signal, or its round limit), then
    // whatever is not done is stopped.
    record_round(search, a.report.steps.extra, hooks.on_progress);
    search.rounds.stop_all();
    for (size_t i = 0; i < search.of.size(); ++i) {
      mf.budgets[search.of[i].first].searches.push_back(search.rounds.searches()[i].result());
    }
  }
  // Pair what was measured with what was predicted (the one-round check).
  for (size_t i = 0; i < mf.budgets.size() && !mf.edge_search; ++i) {
    MemoryBudget& b = mf.budgets[i];
    const std::vector<PointResult>* got =
        i < a.report.steps.extra.size() ? &a.report.steps.extra[i] : nullptr;
    size_t k = 0;
    for (const core::MemoryEdge& e : b.predicted) {
      if (e.fits_nothing || e.capped) continue;
      if (got == nullptr || k + 1 >= got->size()) {
        b.problems.push_back(fmt::format("{} edge not measured (the run stopped first)", e.axis));
        k += 2;
        continue;
      }
      const PointResult& edge = (*got)[k];
      const PointResult& next = (*got)[k + 1];
      k += 2;
      if (edge.outcome == PointOutcome::kError || next.outcome == PointOutcome::kError) {
        b.problems.push_back(fmt::format("{} edge: a point failed: {}", e.axis,
                                         edge.outcome == PointOutcome::kError ? edge.message
                                                                              : next.message));
        continue;
      }
      b.checks.push_back(core::check_edge(e, fit_point(edge), fit_point(next),
                                          b.gpu_memory_bytes - b.reserve_bytes));
    }
  }
  for (const auto& p : a.report.steps.points) {
    if (p.outcome == PointOutcome::kOom) {
      a.report.diagnostics.push_back(
          {core::Severity::kWarning, "point_oom",
           fmt::format("{}x{}: out of memory (recorded as the point's outcome)", p.point.batch,
                       p.point.width)});
    } else if (p.outcome == PointOutcome::kError) {
      a.report.diagnostics.push_back(
          {core::Severity::kError, "point_error",
           fmt::format("{}x{}: {}", p.point.batch, p.point.width, p.message)});
    }
  }
  return a;
}

std::string resolved_attention(const ProfileAnalysis& a) {
  for (const auto& p : a.report.steps.points) {
    if (p.outcome == PointOutcome::kOk)
      return fmt::format("sliding: {}; full: {}", p.attn_sliding, p.attn_full);
  }
  return "";
}

std::string interrupted_note(const ProfileAnalysis& a) {
  if (!a.report.steps.interrupted) return "";
  return fmt::format("INTERRUPTED: {} of {} points measured before the signal{}\n",
                     a.report.steps.points.size(), a.request.spec.points.size(),
                     a.report.steps.interrupted_at.empty()
                         ? ""
                         : " (the step of " + a.report.steps.interrupted_at + ")");
}

core::Json to_json(const DeviceMemoryReading& d) {
  core::Json j;
  j["total_bytes"] = d.total_bytes;
  j["free_bytes"] = d.free_bytes;
  j["own_reserved_bytes"] = d.own_reserved_bytes;
  j["others_bytes"] = d.others_bytes;
  j["source"] = d.source;
  return j;
}

DeviceMemoryReading device_memory_reading_from_json(const core::Json& j, const std::string& where) {
  namespace jr = core::json_read;
  if (!j.is_object()) fail("{} must be an object or null", where);
  DeviceMemoryReading d;
  d.total_bytes = jr::number(j, "total_bytes", where);
  d.free_bytes = jr::number(j, "free_bytes", where);
  d.own_reserved_bytes = jr::number(j, "own_reserved_bytes", where);
  d.others_bytes = jr::number(j, "others_bytes", where);
  d.source = jr::string(j, "source", where);
  if (!(d.total_bytes > 0) || d.free_bytes < 0 || d.free_bytes > d.total_bytes ||
      d.own_reserved_bytes < 0)
    fail("{}: total {} B, free {} B, own {} B: not a device's memory", where, d.total_bytes,
         d.free_bytes, d.own_reserved_bytes);
  if (d.others_bytes != std::max(0.0, d.total_bytes - d.free_bytes - d.own_reserved_bytes))
    fail("{}.others_bytes: not total_bytes less free_bytes less own_reserved_bytes", where);
  return d;
}

// How each budget's edges were measured, said in the evidence.
constexpr const char* kAllocatorCap = "the caching allocator's memory fraction set to the budget";

namespace {

// `path` made absolute against the working directory and normalised ("." and ".." resolved as
// text): the link between two outputs named relative to one cwd.
std::vector<std::string> absolute_parts(const std::string& path) {
  std::string full = path;
  if (full.empty() || full[0] != '/') {
    char buf[4096];
    if (getcwd(buf, sizeof buf) == nullptr) return {};
    full = std::string(buf) + "/" + full;
  }
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i <= full.size()) {
    const std::size_t j = std::min(full.find('/', i), full.size());
    const std::string p = full.substr(i, j - i);
    if (p == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!p.empty() && p != ".") {
      parts.push_back(p);
    }
    i = j + 1;
  }
  return parts;
}

// `target` as a link from the folder of `from_file` ("" from_file: target as given).
std::string relative_link(const std::string& from_file, const std::string& target) {
  if (from_file.empty()) return target;
  std::vector<std::string> from = absolute_parts(from_file), to = absolute_parts(target);
  if (from.empty() || to.empty()) return target;
  from.pop_back();  // the evidence file's folder
  std::size_t common = 0;
  while (common < from.size() && common + 1 < to.size() && from[common] == to[common]) ++common;
  std::string link;
  for (std::size_t k = common; k < from.size(); ++k) link += "../";
  for (std::size_t k = common; k < to.size(); ++k) link += (k > common ? "/" : "") + to[k];
  return link;
}

}  // namespace

std::string trace_out_bytes(ProfileAnalysis& a, const ProfileOptions& o) {
  const engine::ProfileReport& rep = a.report;
  if (!rep.table_point || rep.traces[*rep.table_point].kept_records.empty()) {
    fail("--trace-out: no step was traced ({}), so there is no trace to write",
         !rep.kernel_table_reason.empty() ? rep.kernel_table_reason
                                          : "no unpadded point has a traced step with records");
  }
  const size_t i = *rep.table_point;
  const PointResult& p = rep.steps.points[i];
  core::ChromeTraceInput in;
  in.records = &rep.traces[i].kept_records;
  in.devices = rep.devices;
  if (p.memory && !p.memory->timeline.empty()) {
    in.memory = &p.memory->timeline;
  } else {
    in.memory_note = !a.request.spec.record_memory ? "no memory step (--memory off)"
                     : !p.memory_message.empty()   ? "the memory step failed: " + p.memory_message
                                                   : "the memory step recorded no samples";
  }
  in.metadata = {{"schema", "tprobe.trace_out"},
                 {"version", 1},
                 {"probe", "profile"},
                 {"model", a.request.spec.model},
                 {"point", {{"batch", p.point.batch}, {"width", p.point.width}}},
                 {"trace_source", rep.trace_source},
                 {"what", "the traced step of results.kernel_table_point: every row as recorded, "
                          "its attribution in args.tprobe_*; the memory step is a separate run "
                          "of the same step on its own clock"}};
  const bool gz = core::wants_gzip(o.trace_out);
  core::ChromeTrace t = core::chrome_trace(in, gz);
  TraceOutFile f;
  f.path = o.trace_out;
  f.link = relative_link(o.json_path, o.trace_out);
  f.gzip = gz;
  f.bytes = static_cast<int64_t>(t.bytes.size());
  f.events = t.events;
  f.device_rows = t.device_rows;
  f.host_launches = t.host_launches;
  f.attribution_slices = t.attribution_slices;
  f.memory_samples = t.memory_samples;
  f.batch = p.point.batch;
  f.width = p.point.width;
  bool reserved = false;
  if (in.memory) {
    for (const auto& m : *in.memory) reserved |= m.reserved >= 0;
  }
  f.memory_note = !in.memory ? in.memory_note
                  : reserved ? ""
                             : "the allocator reports no reserved total here: allocated only";
  a.trace_out = f;
  return std::move(t.bytes);
}

core::Json to_json(const ProfileAnalysis& a) {
  core::Json out = runs::to_json(a.report, a.request);
  if (a.trace_out) {
    const TraceOutFile& f = *a.trace_out;
    out["trace_out"] = {{"path", f.path},
                        {"link", f.link},
                        {"gzip", f.gzip},
                        {"bytes", f.bytes},
                        {"events", f.events},
                        {"device_rows", f.device_rows},
                        {"host_launches", f.host_launches},
                        {"attribution_slices", f.attribution_slices},
                        {"memory_samples", f.memory_samples},
                        {"point", {{"batch", f.batch}, {"width", f.width}}},
                        {"memory_note", f.memory_note.empty() ? core::Json(nullptr)
                                                              : core::Json(f.memory_note)}};
  } else {
    out["trace_out"] = nullptr;
  }
  const MemoryFitReport& mf = a.memory_fit;
  if (!mf.requested) {
    out["memory_fit"] = nullptr;
    return out;
  }
  core::Json j;
  j["model"] = fmt::format("peak_{} = c0 + c1*(batch*width) + c2*(batch*width^2)",
                           mf.fit.reserved ? "reserved" : "allocated");
  j["fit"] = core::to_json(mf.fit);
  j["edge_search"] = mf.edge_search ? "on" : "off";
  j["budgets"] = core::Json::array();
  for (const MemoryBudget& b : mf.budgets) {
    core::Json bj;
    bj["gpu_memory_bytes"] = b.gpu_memory_bytes;
    bj["reserve_bytes"] = b.reserve_bytes;
    bj["budget_bytes"] = b.gpu_memory_bytes - b.reserve_bytes;
    bj["allocator_cap"] = kAllocatorCap;
    bj["predicted"] = core::Json::array();
    for (const auto& e : b.predicted) bj["predicted"].push_back(core::to_json(e));
    bj["checks"] = core::Json::array();
    for (const auto& c : b.checks) bj["checks"].push_back(core::to_json(c));
    bj["problems"] = b.problems;
    bj["marginal_width"] = b.marginal_width;
    bj["marginal_sequence_bytes"] = b.marginal_sequence_bytes;
    bj["gpu_memory_source"] = b.gpu_memory_source;
    bj["reserve_source"] = b.reserve_source;
    bj["device_memory"] = b.device ? to_json(*b.device) : core::Json(nullptr);
    bj["searches"] = core::Json::array();
    for (const auto& s : b.searches) bj["searches"].push_back(core::to_json(s));
    j["budgets"].push_back(std::move(bj));
  }
  out["memory_fit"] = std::move(j);
  return out;
}

ProfileAnalysis profile_analysis_from_json(const core::Json& results, const std::string& where) {
  namespace jr = core::json_read;
  ProfileEvidence e = profile_evidence_from_json(results, where);
  ProfileAnalysis a;
  a.request = std::move(e.request);
  a.report = std::move(e.report);
  // Evidence written before --trace-out existed has no trace_out.
  if (results.contains("trace_out") && !results["trace_out"].is_null()) {
    const std::string tw = where + ".trace_out";
    const core::Json& t = jr::object(results, "trace_out", where);
    TraceOutFile f;
    f.path = jr::string(t, "path", tw);
    f.link = jr::string(t, "link", tw);
    f.gzip = jr::boolean(t, "gzip", tw);
    f.bytes = jr::integer(t, "bytes", tw, 0);
    f.events = jr::integer(t, "events", tw, 0);
    f.device_rows = jr::integer(t, "device_rows", tw, 0, f.events);
    f.host_launches = jr::integer(t, "host_launches", tw, 0, f.device_rows);
    f.attribution_slices = jr::integer(t, "attribution_slices", tw, 0, f.events);
    f.memory_samples = jr::integer(t, "memory_samples", tw, 0, f.events);
    const core::Json& pt = jr::object(t, "point", tw);
    f.batch = jr::integer(pt, "batch", tw + ".point", 1);
    f.width = jr::integer(pt, "width", tw + ".point", 1);
    f.memory_note = jr::nullable_string(t, "memory_note", tw).value_or("");
    a.trace_out = f;
  }
  const core::Json& mf = jr::field(results, "memory_fit", where);
  if (mf.is_null()) return a;
  const std::string mw = where + ".memory_fit";
  if (!mf.is_object()) fail("{} must be an object or null", mw);
  MemoryFitReport& m = a.memory_fit;
  m.requested = true;
  m.fit = core::memory_fit_from_json(jr::object(mf, "fit", mw), mw + ".fit");
  const std::string model = fmt::format("peak_{} = c0 + c1*(batch*width) + c2*(batch*width^2)",
                                        m.fit.reserved ? "reserved" : "allocated");
  if (jr::string(mf, "model", mw) != model) fail("{}.model: not '{}'", mw, model);
  m.edge_search = jr::choice(mf, "edge_search", mw, {"on", "off"}) == 0;
  const core::Json& budgets = jr::array(mf, "budgets", mw);
  for (std::size_t i = 0; i < budgets.size(); ++i) {
    const std::string bw = jr::at(mw, "budgets", i);
    const core::Json& x = budgets[i];
    MemoryBudget b;
    b.gpu_memory_bytes = jr::number(x, "gpu_memory_bytes", bw);
    b.reserve_bytes = jr::number(x, "reserve_bytes", bw);
    if (b.gpu_memory_bytes <= 0 || b.reserve_bytes < 0 || b.reserve_bytes >= b.gpu_memory_bytes)
      fail("{}: the card's bytes and its reserve leave no budget", bw);
    if (jr::number(x, "budget_bytes", bw) != b.gpu_memory_bytes - b.reserve_bytes)
      fail("{}.budget_bytes: not gpu_memory_bytes less reserve_bytes", bw);
    if (jr::string(x, "allocator_cap", bw) != kAllocatorCap)
      fail("{}.allocator_cap: not '{}'", bw, kAllocatorCap);
    const core::Json& predicted = jr::array(x, "predicted", bw);
    for (std::size_t k = 0; k < predicted.size(); ++k)
      b.predicted.push_back(core::memory_edge_from_json(predicted[k], jr::at(bw, "predicted", k)));
    const core::Json& checks = jr::array(x, "checks", bw);
    for (std::size_t k = 0; k < checks.size(); ++k)
      b.checks.push_back(core::memory_edge_check_from_json(checks[k], jr::at(bw, "checks", k)));
    b.problems = jr::strings(x, "problems", bw);
    b.marginal_width = jr::integer(x, "marginal_width", bw, 0);
    b.marginal_sequence_bytes = jr::number(x, "marginal_sequence_bytes", bw);
    b.gpu_memory_source = jr::string(x, "gpu_memory_source", bw);
    b.reserve_source = jr::string(x, "reserve_source", bw);
    const core::Json& dev = jr::field(x, "device_memory", bw);
    if (!dev.is_null()) {
      b.device = device_memory_reading_from_json(dev, bw + ".device_memory");
      if (b.reserve_bytes != b.device->others_bytes)
        fail("{}.reserve_bytes: not the device reading's others_bytes", bw);
    }
    const core::Json& searches = jr::array(x, "searches", bw);
    if (!m.edge_search && !searches.empty()) fail("{}.searches: edge_search is off", bw);
    for (std::size_t k = 0; k < searches.size(); ++k) {
      const std::string sw = jr::at(bw, "searches", k);
      b.searches.push_back(core::edge_search_result_from_json(searches[k], sw));
      if (b.searches.back().request.budget_bytes != b.gpu_memory_bytes - b.reserve_bytes)
        fail("{}.budget_bytes: not the budget's", sw);
    }
    m.budgets.push_back(std::move(b));
  }
  return a;
}

namespace {

// The searched edges: per budget, each edge's prediction, the measured edge and the step past it,
// the model's error in steps and the probes run.
core::Table edge_search_table(const MemoryFitReport& mf) {
  auto gib = [](double b) { return fmt::format("{:.2f} GiB", b / core::kGiB); };
  core::Table t(fmt::format("what fits, measured: each edge searched under its budget's allocator "
                            "cap, {} consecutive steps per probe",
                            core::kEdgeSearchSteps));
  t.column("budget", core::Align::kLeft).column("edge", core::Align::kLeft).column("predicted");
  t.column("measured (fits)").column("past it (OOM)").column("model error");
  t.column("probes").column("status", core::Align::kLeft);
  for (const MemoryBudget& b : mf.budgets) {
    const std::string card = gib(b.gpu_memory_bytes - b.reserve_bytes);
    for (const core::EdgeSearchResult& s : b.searches) {
      const core::EdgeSearchRequest& r = s.request;
      const bool by_width = r.axis == "width";
      auto value = [&](int64_t v) {
        return v == 0 ? std::string("-") : by_width ? core::format_count(v) : std::to_string(v);
      };
      t.row({card,
             by_width ? fmt::format("largest width at batch {}", r.batch)
                      : fmt::format("largest batch at width {}", core::format_count(r.width)),
             r.predicted ? (*r.predicted == 0 ? std::string("none fits") : value(*r.predicted))
                         : std::string("no model"),
             value(s.edge), value(s.past),
             s.error_steps ? fmt::format("{:+d} steps", *s.error_steps) : std::string("-"),
             std::to_string(s.probes.size()), s.status});
    }
    std::string sources = fmt::format("{}: card {} from {}; reserve {} from {}", card,
                                      gib(b.gpu_memory_bytes), b.gpu_memory_source,
                                      gib(b.reserve_bytes), b.reserve_source);
    if (b.device) {
      sources += fmt::format(" (total {}, free {}, tprobe's own reserved {})",
                             gib(b.device->total_bytes), gib(b.device->free_bytes),
                             gib(b.device->own_reserved_bytes));
    }
    t.note(sources);
    for (const core::EdgeSearchResult& s : b.searches) {
      std::vector<std::string> probes;
      for (const auto& p : s.probes) {
        probes.push_back(fmt::format("{}x{} {}", p.batch, p.width, p.outcome == "fits" ? "fits" : p.outcome == "oom" ? "OOM" : "error"));
      }
      t.note(fmt::format("{} {}: {}; probes: {}", card, s.request.axis, s.note,
                         probes.empty() ? std::string("none") : fmt::format("{}", fmt::join(probes, ", "))));
    }
  }
  if (mf.budgets.empty()) t.row({"-", "no edge searched: " + mf.fit.why_not});
  t.note("model error: the model's predicted edge less the measured one, in steps (positive: the "
         "model overshot, the predicted edge runs out of memory; negative: conservative)");
  return t;
}

}  // namespace

std::vector<core::Table> profile_tables(const ProfileAnalysis& a) {
  std::vector<core::Table> out = runs::profile_tables(a.report);
  const MemoryFitReport& mf = a.memory_fit;
  if (!mf.requested) return out;
  auto gib = [](double b) { return fmt::format("{:.2f} GiB", b / core::kGiB); };
  if (mf.edge_search) out.push_back(edge_search_table(mf));
  core::Table t(mf.edge_search
                    ? "what fits: the memory model on the sweep's peaks (its edges are where each "
                      "search above started)"
                    : "what fits: the memory model on the sweep's peaks, each edge measured under "
                      "an allocator cap of its budget");
  t.column("card", core::Align::kLeft).column("edge", core::Align::kLeft).column("predicted");
  t.column("predicted peak").column("measured peak").column("next step").column("next measured");
  t.column("verdict", core::Align::kLeft);
  if (!mf.fit.ok) {
    t.row({"-", "no fit: " + mf.fit.why_not});
    out.push_back(std::move(t));
    return out;
  }
  for (const MemoryBudget& b : mf.budgets) {
    const std::string card = fmt::format("{:g} GiB - {:g} reserve", b.gpu_memory_bytes / core::kGiB,
                                         b.reserve_bytes / core::kGiB);
    for (const core::MemoryEdge& e : mf.edge_search ? b.predicted : std::vector<core::MemoryEdge>{}) {
      const bool by_width = e.axis == "width";
      t.row({card, by_width ? fmt::format("largest width at batch {}", e.batch)
                            : fmt::format("largest batch at width {}", e.width),
             e.fits_nothing ? std::string("none fits")
             : by_width     ? core::format_count(e.width)
                            : std::to_string(e.batch),
             gib(e.predicted_peak_bytes) + (e.extrapolated ? " (extrapolated)" : ""), "searched",
             "-", "-", e.capped ? "capped: " + e.note : "searched"});
    }
    for (const core::MemoryEdgeCheck& c : b.checks) {
      const auto& e = c.predicted;
      const bool by_width = e.axis == "width";
      auto measured = [&](const core::MemoryFitPoint& p) {
        return p.oom ? std::string("OOM")
                     : gib(static_cast<double>(mf.fit.reserved ? p.peak_reserved_bytes
                                                               : p.peak_allocated_bytes));
      };
      t.row({card, by_width ? fmt::format("largest width at batch {}", e.batch)
                            : fmt::format("largest batch at width {}", e.width),
             by_width ? core::format_count(e.width) : std::to_string(e.batch),
             gib(e.predicted_peak_bytes) + (e.extrapolated ? " (extrapolated)" : ""),
             measured(c.edge),
             by_width ? core::format_count(c.next.width) : std::to_string(c.next.batch),
             measured(c.next), c.verdict});
    }
    for (const auto& p : b.problems) t.row({card, p});
    t.note(fmt::format("{}: one more sequence at width {} costs {} (the fit's c1·w + c2·w²)", card,
                       core::format_count(b.marginal_width), gib(b.marginal_sequence_bytes)));
  }
  t.note(fmt::format("fit of the peak {}: c0 {} + c1 {:.1f} B/token + c2 {:.4g} B/(token·width) over {} points, {} "
                     "residual degrees of freedom, largest residual {}; {}",
                     mf.fit.reserved ? "reserved" : "allocated", gib(mf.fit.c0), mf.fit.c1, mf.fit.c2, mf.fit.points, mf.fit.dof,
                     gib(mf.fit.max_abs_residual_bytes), mf.fit.c2_test.verdict));
  out.push_back(std::move(t));
  return out;
}

}  // namespace tprobe::runs
