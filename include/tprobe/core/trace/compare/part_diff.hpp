// The part-level diff of two runs: `kernels A B` on two traces or two evidence files sets their
// phase x part rows side by side, per profiler step. docs/kernels.md, "Parts compared".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"
#include "tprobe/core/trace/attribute/trace_parts.hpp"

namespace tprobe::core {

// One side's phase × part rows: a trace's own attribution, or the by_phase_part rows of a
// `kernels` or `profile` evidence file.
struct PartSide {
  bool available = false;
  std::string why_not;  // when not available
  std::string label;    // path
  std::string origin;   // "trace", "kernels evidence", "profile evidence, point 2x2048"
  int64_t steps = 1;    // profiler steps the rows cover (per-step figures divide by this)
  std::vector<PartRow> rows;
  int64_t kernel_ns = 0;  // Σ rows' kernel time
};
// From evidence results (`where` names the file in errors). Read by the rows' table
// (core/evidence/kernel_trace.hpp: kernel_s a finite number in 0..1e6 s, kernels a non-negative
// integer) and checked: phase, layer_kind and part of the vocabulary (or "untagged").
PartSide part_side_from_evidence(const Json& results, const std::string& probe,
                                 const std::string& where);
// The phase × part rows of cells read from evidence (none where null), checked as above.
std::vector<PartRow> part_rows_from_json(const PartCells& cells, const std::string& where);
PartSide part_side_from_trace(const TraceParts& parts, int64_t steps, const std::string& label);

struct PartDiffRow {
  std::string phase, layer_kind, part;
  int64_t a_ns = 0, b_ns = 0;  // per step
  double a_share_ratio = 0, b_share_ratio = 0;  // of the side's Σ kernel time
};
struct PartDiff {
  bool available = false;
  std::string why_not;
  PartSide a, b;
  std::vector<PartDiffRow> rows;  // phase order, then layer kind, then part; untagged last
};
PartDiff diff_parts(const PartSide& a, const PartSide& b);
Json to_json(const PartDiff& d);
// The object to_json wrote (the sides' summaries and the rows; a side's own rows are not in it).
PartDiff part_diff_from_json(const Json& j, const std::string& where);
std::vector<Table> part_diff_tables(const PartDiff& d);

}  // namespace tprobe::core
