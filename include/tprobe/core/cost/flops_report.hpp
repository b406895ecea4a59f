// JSON and table views of a FlopsReport, with MFU against a step time and a peak.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/cost/flops.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

// The measured H200 bf16 dense GEMM rate (docs/findings.md#h200), the roofline tprobe's MFU figures use.
inline constexpr double kDefaultPeakTflops = 790.0;

struct FlopsRates {
  std::optional<double> step_time_s;
  double peak_tflops = kDefaultPeakTflops;
};

Json to_json(const FlopsReport& report, const FlopsRates& rates);

// What flops evidence holds: the count and the rates its MFU divides by.
struct FlopsEvidence {
  FlopsReport report;
  FlopsRates rates;
};
// Reads the `results` object to_json wrote; sums and ratios are recomputed from the rows, the
// diagnostics and outcome keep their defaults. Throws tprobe::Error naming `where` ("f.json
// results") and the field.
FlopsEvidence flops_report_from_json(const Json& results, const std::string& where);
std::vector<Table> flops_tables(const FlopsReport& report, const FlopsRates& rates);

// The report's section for flops evidence (figures, facts, tables; core/report/section.hpp).
void flops_report_section(SectionBuilder& c);

}  // namespace tprobe::core
