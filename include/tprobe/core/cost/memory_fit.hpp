// A torch-free model of a LoRA training step's peak GPU memory against its micro-batch shape,
// and what fits in a budget:
//   peak(b, w) = c0 + c1·(b·w) + c2·(b·w²)
// b sequences of w tokens. c0: what does not grow with the batch (weights, adapter and optimizer
// state, the CUDA context the allocator sees, workspaces), in bytes; c1: what grows with the tokens
// (checkpointed layer inputs, the loss head's logits, the recomputed layer's working set), in bytes
// per token; c2: what grows with tokens × width (materialised attention scores and masks), in
// bytes per token per token of width. Least squares over the points that did not run out of memory.
//
// The design columns are 1, x1 = b·w and x2 = b·w². Distinct (b, w) are distinct (x1, x2) (w =
// x2/x1), but three distinct points need not determine the fit: the system is singular exactly when
// every (x1, x2) lies on one line. That is the case at one width (x2 = w·x1: a line through the
// origin, however many batches), at one token count b·w (x1 constant), and on lines like
// x2 = 7168·x1 − 62914560, which (10, 1024), (6, 2048) and (5, 3072) all lie on. fit_memory tests
// that exactly, in 128-bit integers, before it solves anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/evidence/cost_points.hpp"

namespace tprobe::core {

// One measured step, and the largest shapes the model accepts: MemoryFitPoint,
// kMaxMemoryFitBatch and kMaxMemoryFitWidth (core/evidence/cost_points.hpp).

// Is c2·b·w² needed? The F-test of c0 + c1·x1 against the full model (with one term between
// them, F = t² of c2), at level alpha. Needs a residual degree of freedom: through 3 points the
// full model is exact and tests nothing.
struct QuadraticTermTest {
  bool testable = false;
  std::string why_not;              // when !testable
  int64_t dof = 0;                  // points − 3
  double alpha = 0.05;
  std::optional<double> c2_std_error;  // bytes/(token·width)
  std::optional<double> f;
  std::optional<double> p_value;
  bool significant = false;
  std::string verdict;              // one sentence, also when untestable
};

struct MemoryFit {
  bool ok = false;
  std::string why_not;        // refused: fewer than 3 distinct points, all on one line, or
                              // numerically singular; nothing below the counts is set then
  bool reserved = false;      // the fitted peak: reserved (true) or allocated
  double c0 = 0;              // bytes
  double c1 = 0;              // bytes per token
  double c2 = 0;              // bytes per token per token of width
  int64_t points = 0;         // fitted (not OOM)
  int64_t distinct_points = 0;
  int64_t excluded_oom = 0;
  int64_t dof = 0;            // points − 3
  bool exact = false;         // dof == 0: the surface passes through every point
  double max_abs_residual_bytes = 0;
  double rms_residual_bytes = 0;         // sqrt(mean residual²)
  std::optional<double> residual_std_bytes;  // sqrt(rss / dof), when dof > 0
  std::vector<double> residuals_bytes;   // measured − predicted, one per fitted point, input order
  std::vector<int64_t> fitted_indices;   // each residual's index in the input
  std::vector<MemoryFitPoint> fitted_points;  // input order
  std::vector<MemoryFitPoint> oom_points;     // excluded from the fit, kept for the checks
  // The measured range: an edge beyond it is an extrapolation.
  int64_t max_fitted_tokens = 0;           // largest b·w fitted
  int64_t max_fitted_token_width = 0;      // largest b·w² fitted
  QuadraticTermTest c2_test;
};

// Throws tprobe::UsageError on a broken point (batch or width outside 1..the largest accepted,
// a negative peak, a non-OOM point whose fitted peak is not positive, reserved below allocated)
// or alpha outside [1e-6, 0.5]. A shape that cannot determine the fit is a refusal (ok = false),
// not an exception. Solved by modified Gram–Schmidt on the centred columns in long double.
MemoryFit fit_memory(const std::vector<MemoryFitPoint>& points, bool reserved, double alpha = 0.05);

// c0 + c1·b·w + c2·b·w². Throws tprobe::Error for a refused fit or non-finite coefficients,
// UsageError for a batch or width outside the accepted range.
double predict_peak(const MemoryFit& fit, int64_t batch, int64_t width);

// c1·w + c2·w²: what one more sequence of width w adds (batch + 1 against batch).
double marginal_sequence_bytes(const MemoryFit& fit, int64_t width);

struct MemoryEdgeRequest {
  double gpu_memory_bytes = 0;
  double reserve_bytes = 0;     // kept free: fragmentation, other processes, the context
  int64_t width_step = 256;
  int64_t max_width = int64_t{1} << 20;
  int64_t max_batch = 1024;
};

struct MemoryEdge {
  std::string axis;            // "width" (largest_width) or "batch" (largest_batch)
  int64_t batch = 0;           // the edge; on the searched axis 0 when fits_nothing
  int64_t width = 0;
  int64_t step = 0;            // the search's step on its axis: width_step, or 1 sequence
  double predicted_peak_bytes = 0;  // at the edge; fits_nothing: at the first step
  std::optional<double> next_predicted_peak_bytes;  // one step past the edge, when in range
  double budget_bytes = 0;     // gpu_memory − reserve
  bool reserved = false;       // the peak the fit predicts
  bool fits_nothing = false;   // not even one step fits
  bool capped = false;         // the edge is the search's limit: the budget allows more
  bool extrapolated = false;   // the edge is past the largest fitted b·w or b·w²
  std::string note;            // one line: why, and anything that qualifies it
};

// The largest width, a multiple of width_step up to max_width, whose predicted peak at `batch`
// is within the budget, and every narrower step's too: the first crossing from below, so a fit
// with c2 < 0, which bends back under the budget far past the measured range, is not answered
// from that far side. Throws UsageError for a broken request or batch.
MemoryEdge largest_width(const MemoryFit& fit, int64_t batch, const MemoryEdgeRequest& request);
// The largest batch up to max_batch at `width`, the first crossing from below likewise
// (width_step is not used).
MemoryEdge largest_batch(const MemoryFit& fit, int64_t width, const MemoryEdgeRequest& request);

// The edge and the step past it, measured. verdict: "held" (the edge fits and the next step runs
// out of memory), "conservative" (the next step fits too: the prediction was short by at least a
// step), "over" (the edge runs out of memory: the prediction overshot). The errors are measured −
// predicted, in bytes, of the peak the fit predicts, where a peak was measured.
struct MemoryEdgeCheck {
  MemoryEdge predicted;
  MemoryFitPoint edge;
  MemoryFitPoint next;
  double budget_bytes = 0;
  std::string verdict;
  std::optional<double> edge_error_bytes;
  std::optional<double> next_error_bytes;
  std::string message;
};

// Throws UsageError when the prediction fits nothing, the points are not at the edge and one
// step past it along its axis, a point is broken, or the budget is not a positive finite number.
MemoryEdgeCheck check_edge(const MemoryEdge& predicted, const MemoryFitPoint& edge,
                           const MemoryFitPoint& next, double budget_bytes);

Json to_json(const MemoryFit& fit);
Json to_json(const MemoryEdge& edge);
Json to_json(const MemoryEdgeCheck& check);
// A point's writer and reader are its table's (evidence::to_json, evidence::from_json).
// Their readers: every field the writers above write, each checked (counts not negative, shapes
// within the accepted range, the derived fields — a fitted point's predicted bytes, the residual
// statistics' presence — against what the read fields make of them), so that
// to_json(x_from_json(to_json(x))) is to_json(x). An F written null (infinite) reads back as
// none. Throw tprobe::Error naming `where` and the field.
MemoryFit memory_fit_from_json(const Json& j, const std::string& where);
MemoryEdge memory_edge_from_json(const Json& j, const std::string& where);
MemoryEdgeCheck memory_edge_check_from_json(const Json& j, const std::string& where);

}  // namespace tprobe::core
