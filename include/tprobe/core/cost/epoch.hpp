// The epoch, not only the step (docs/levers.md, "The epoch"): from a configuration's measured step
// times, a prediction of every micro-batch of an epoch and their sum (GPU hours, optimizer steps,
// FLOPs), and the estimate of the same epoch from a uniform sample of its micro-batches measured
// one by one, with its interval. Torch-free arithmetic and views over core/data/epoch_batches'
// micro-batches; the measurements come from the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/data/epoch_batches.hpp"
#include "tprobe/core/step/attention_path.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::core {

// What a micro-batch costs a path, in the curve's two variables: `tokens` the positions the
// layers compute, `len2` Σ over attended sequences of their length². A path that runs padding
// (the padded baseline) computes every row at the width: tokens = rows·width, len2 =
// rows·width². A path that packs computes the records' real tokens only: tokens = Σ samples,
// len2 = Σ samples².
struct ShapeWork {
  double tokens = 0;
  double len2 = 0;
};
ShapeWork shape_work(const EpochMicroBatch& shape, bool packs);

// One measured step of a configuration at an unpadded point (all `batch` rows `width` long).
struct CurvePoint {
  int64_t batch = 0;
  int64_t width = 0;
  double seconds = 0;  // the median of its repeats
};

// A configuration's step time as a function of the micro-batch's shape:
// t = fixed_s + per_token_s·tokens + per_len2_s·len2. Fitted by scaling-fit's least squares
// (core/cost/scaling_fit: t(w) = C + A·w + B·w² at the points' batch, one median per width),
// form ABC with ≥ 3 distinct widths, AB (no fixed term) with 2; at batch b every row w long,
// tokens = b·w and len2 = b·w², so per_token_s = A/b, per_len2_s = B/b, fixed_s = C.
struct StepCurve {
  bool determined = false;
  std::string refusal;  // why not, when !determined
  std::string form;     // "ABC" or "AB"
  int64_t batch = 0;
  int points = 0, distinct_widths = 0;
  bool exact = false;  // as many widths as parameters: the curve passes through every point
  double c_s = 0, a_s_per_token = 0, b_s_per_token2 = 0;  // scaling-fit's coefficients
  double fixed_s = 0, per_token_s = 0, per_len2_s = 0;
  double seconds(const ShapeWork& w) const {
    return fixed_s + per_token_s * w.tokens + per_len2_s * w.len2;
  }
};
// Points of another batch than the first point's are refused (a usage error: the caller passes
// one configuration's points).
StepCurve fit_step_curve(const std::vector<CurvePoint>& points);

// ceil(micro_batches / accumulation); accumulation ≥ 1.
int64_t optimizer_steps(int64_t micro_batches, int64_t accumulation);

struct EpochPrediction {
  int64_t micro_batches = 0;
  int64_t accumulation = 1;
  int64_t optimizer_steps = 0;
  double seconds = 0;  // Σ over the micro-batches of the curve
  double hours = 0;
  std::vector<double> per_micro_batch_s;  // in epoch order
};
EpochPrediction predict_epoch(const StepCurve& curve, const std::vector<EpochMicroBatch>& shapes,
                              bool packs, int64_t accumulation);

// core/cost/flops' intended and performed FLOPs of every micro-batch on `path`, summed. A packed
// micro-batch counts as its records side by side (each its own causal sequence); a padded one as
// its rows at the width with their real lengths.
struct EpochFlops {
  double intended = 0;
  double performed = 0;
};
EpochFlops epoch_flops(const ModelConfig& config, const std::vector<EpochMicroBatch>& shapes,
                       AttentionPath path, const std::vector<std::string>& lora_targets,
                       int64_t lora_rank, bool gradient_checkpointing);

// ---- sampling ----

// `count` distinct indices drawn uniformly from 0 .. population-1 with Rng(seed), in draw order
// (a partial Fisher-Yates): the first k of them are a uniform sample of k.
std::vector<int64_t> draw_without_replacement(int64_t population, int64_t count, uint64_t seed);

// The Student t quantile: P(T_df ≤ t) = p, for p in (0.5, 1) and df ≥ 1 (bisection on the
// regularized incomplete beta function; 1e-10 relative).
double student_t_quantile(double p, double df);

// The epoch from n sampled micro-batches out of M (without replacement), 95 % two-sided:
// - expansion: M·mean ± t(n−1)·M·sqrt((1 − n/M)·s²/n), s² the sample variance;
// - ratio (with the prediction of each sampled micro-batch and of the whole epoch P): R = Σm/Σp,
//   estimate R·P ± t(n−1)·M·sqrt((1 − n/M)·s_e²/n), s_e² = Σ(m − R·p)²/(n − 1) — the prediction
//   as a control variate: the estimate needs no model to be right, the model only narrows it.
// With n = M the sample is the epoch (half-widths 0). With n < 2 there is no interval.
struct EpochEstimate {
  int64_t population = 0, n = 0;
  double confidence = 0.95;
  std::optional<double> t;  // t(0.975, n − 1)
  double expansion_s = 0;
  std::optional<double> expansion_half_s;
  std::optional<double> ratio;  // Σ measured / Σ predicted over the sample
  std::optional<double> ratio_s;
  std::optional<double> ratio_half_s;
  // The estimate the verdict uses: the ratio estimate when there is a prediction, else expansion.
  double estimate_s() const { return ratio_s ? *ratio_s : expansion_s; }
  std::optional<double> half_s() const { return ratio_s ? ratio_half_s : expansion_half_s; }
};
EpochEstimate estimate_epoch(const std::vector<double>& measured,
                             const std::vector<double>& predicted, int64_t population,
                             std::optional<double> predicted_total_s);

// How many micro-batches make the estimate's half-width at most `target` of it, from a pilot:
// n₀ = (t(0.975, pilot − 1)·cv / target)², then n = n₀ / (1 + n₀/M) (the finite population), at
// least the pilot and at most `cap` and M. `cv` is the pilot's relative spread: s/mean of the
// measured times (expansion) or s_e/mean (ratio).
int64_t planned_samples(double cv, int64_t pilot, double target, int64_t cap, int64_t population);

// The relative spread a pilot shows: s_e / mean(measured) with a prediction (the ratio
// estimator's residuals), s / mean(measured) without.
double pilot_spread(const std::vector<double>& measured, const std::vector<double>& predicted);

// ---- one configuration's epoch, and the whole epoch block of `levers` ----

struct EpochConfigRow {
  std::string lever, setting;  // as levers' rows
  std::string attn;            // the path it ran
  bool packs = false;          // the path computes a padded micro-batch's real tokens only
  // "predicted", "underdetermined" (not enough measured widths), "not applicable" (why in note)
  std::string status;
  std::string note;
  StepCurve curve;
  std::optional<EpochPrediction> prediction;
  std::optional<EpochFlops> flops;
  // The measurement on sampled micro-batches (measured = false: not asked, or why in
  // measure_note).
  bool measured = false;
  std::string measure_note;
  int64_t pilot = 0, planned = 0;
  std::optional<double> pilot_cv;
  std::vector<int64_t> sample;  // micro-batch indices in the epoch, in the order they ran
  std::vector<double> sample_measured_s, sample_predicted_s;  // ok micro-batches only
  std::vector<std::string> sample_outcomes;                   // per sample entry
  std::optional<EpochEstimate> estimate;
  std::optional<bool> agree;  // predicted within the estimate's interval
};

struct EpochReport {
  std::string dataset;
  int64_t records = 0, truncated_records = 0;
  std::string sampler, rule;
  int64_t micro_batch = 0, max_seq_len = 0, accumulation = 1;
  uint64_t seed = 0;
  int64_t micro_batches = 0, real_tokens = 0, padded_tokens = 0, zero_pad_micro_batches = 0;
  int64_t requested_samples = 0;  // 0: planned from a pilot
  int64_t pilot = 8, cap = 64;
  double target = 0.05;
  std::string loss_head_note;  // what the loss head computes on padded positions
  std::vector<EpochConfigRow> configs;
};

Json to_json(const EpochReport& report);
// The reverse of to_json (a levers evidence file's results.epoch): what to_json derives (waste,
// optimizer steps, the estimate's hours) is recomputed, a curve's refusal and the prediction's
// per-micro-batch times, which it does not write, stay empty. `where` names the object.
EpochReport epoch_report_from_json(const Json& j, const std::string& where);
std::vector<Table> epoch_tables(const EpochReport& report);

class SectionBuilder;
// The epoch's hours per configuration, predicted and measured (with its interval), from a levers
// evidence file's results.epoch as epoch_report_from_json read it (levers_report_section calls it
// when the run had --dataset).
void epoch_report_section(SectionBuilder& c, const EpochReport& epoch);

}  // namespace tprobe::core
