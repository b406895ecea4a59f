// The scaling fit's quadratic share against the measured share of the parts that grow with w²,
// like for like: both shares of the step, at each traced width, and the difference split into
// measured terms (docs/profile.md, "Two methods").
//
// Each series — the step, each part's traced kernel time, and the remainder (step − Σ parts:
// idle gaps, host waits, the traced step against the timed mean) — is fitted with the same form at
// the same widths. Least squares is linear in the data, so the step's coefficients are the sums of
// the series' coefficients, and at every width
//   fit share − parts share = Σ_{linear parts} B_p w²/t̂ + B_r w²/t̂ − Σ_{w² parts} (k_p/t − B_p w²/t̂)
// holds exactly: the quadratic growth the fit finds in parts that should be linear, that of the
// remainder, and the non-quadratic (linear term and residual) share of the w² parts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/cost/scaling_fit.hpp"

namespace tprobe::core {

struct PartSeries {
  std::string name;       // e.g. "full/attention_core"
  bool quadratic = false; // grows with w² on the path that ran
  std::vector<double> seconds;  // one per width
};

struct ShareCheckInput {
  FitModel model = FitModel::kAB;  // the form of the step's fit
  std::vector<double> widths;      // distinct, one per traced point
  std::vector<int> repeats;        // timed repeats behind each mean (the fit's weights)
  std::vector<double> step_s;      // mean timed step at each width
  std::vector<PartSeries> parts;
  double threshold = 0.05;         // a difference above this is explained term by term
};

struct ShareTerm {
  std::string name;   // "quadratic growth of full/experts", "linear term of full/attention_core", ...
  double share = 0;   // of the step (a fraction; adds up to the difference)
};

struct ShareCheckRow {
  double width = 0;
  double fit_quadratic_share = 0;    // B·w² / t̂(w) of the step's fit
  double parts_quadratic_share = 0;  // Σ w² parts / mean step
  double difference = 0;             // fit − parts
  bool explained = false;            // |difference| ≤ threshold, or the terms are listed
  std::vector<ShareTerm> terms;      // every term, largest magnitude first
};

struct ShareCheck {
  bool determined = false;
  std::string refusal;  // why not
  FitModel model = FitModel::kAB;
  double threshold = 0.05;
  std::vector<std::string> quadratic_parts;
  std::vector<ShareCheckRow> rows;
};

ShareCheck check_quadratic_shares(const ShareCheckInput& in);
Json to_json(const ShareCheck& c);
// Its reader: every field to_json writes (a row's within_threshold checked against its difference
// and the threshold), so that to_json(share_check_from_json(to_json(c))) is to_json(c). Throws
// tprobe::Error naming `where` and the field.
ShareCheck share_check_from_json(const Json& j, const std::string& where);

}  // namespace tprobe::core
