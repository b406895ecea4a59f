// The whole `scaling-fit` analysis over already-read points, and its JSON and table views.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/cost/scaling_fit.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

enum class SampleMode { kMedian, kRaw };

struct ScalingFitInput {
  std::vector<FitPoint> points;          // every point and repeat, as read
  std::vector<std::string> skipped;      // input points not used (failed profile points)
  std::optional<int64_t> batch;          // --batch
  std::string batch_option = "the batch to fit";  // how the user chooses it, for messages
  std::string model = "AB";              // A, AB, AC, ABC or auto
  SampleMode samples = SampleMode::kMedian;
  std::vector<int64_t> at_widths;        // --at
  std::optional<WidthDistribution> widths;  // --widths-from
  double alpha = 0.05;
};

struct ScalingFitReport {
  ScalingFitInput input;
  int64_t batch = 0;                    // 0: no input said
  std::vector<std::string> dropped;     // points at another batch
  std::vector<FitPoint> fitted_points;  // after batch selection and --samples
  std::optional<ModelSelection> selection;
  bool refused = false;
  std::string refusal;  // why (auto or fit refused)
  std::optional<ModelFit> fit;
  std::optional<FixedTermVerdict> fixed_term;
  std::vector<WidthTerms> at;
  std::optional<WeightedShare> weighted;
  std::vector<Diagnostic> diagnostics;
  Outcome outcome = Outcome::kOk;  // kNo when the fit was refused
};

// Throws tprobe::UsageError for an unknown model name or a non-positive --at width.
ScalingFitReport analyze_scaling(ScalingFitInput input);

Json to_json(const ScalingFitReport& report);
// The report back from the `results` of scaling-fit evidence (`where` names it in errors: "f.json
// results"), so that to_json of it is the JSON read. What results do not hold (the diagnostics,
// --batch as given) stays default. Throws tprobe::Error naming the field for a broken object.
ScalingFitReport scaling_fit_report_from_json(const Json& results, const std::string& where);
// A scaling-fit evidence file's report.
ScalingFitReport read_scaling_fit_evidence(const std::string& path);

// The fitted A, B and C as a cost model takes them (`bucket --scaling-fit`): refused for a refused
// fit and for a negative coefficient, which would predict negative time at some width. C is 0
// when the fit has none.
struct FittedCost {
  double a_s_per_token = 0;
  double b_s_per_token2 = 0;
  double c_s = 0;
};
FittedCost fitted_cost(const ScalingFitReport& report, const std::string& path);
std::vector<Table> scaling_fit_tables(const ScalingFitReport& report);

// The report's section for scaling-fit evidence (figures, facts, tables; core/report/section.hpp).
void scaling_fit_report_section(SectionBuilder& c);

}  // namespace tprobe::core
