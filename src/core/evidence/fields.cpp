#include "tprobe/core/evidence/fields.hpp"

#include <fmt/format.h>

#include "tprobe/core/base/table.hpp"
#include "tprobe/core/evidence/cost_points.hpp"
#include "tprobe/core/evidence/critical_path.hpp"
#include "tprobe/core/evidence/kernel_sequences.hpp"
#include "tprobe/core/evidence/kernel_table.hpp"
#include "tprobe/core/evidence/kernel_trace.hpp"
#include "tprobe/core/evidence/operator_inputs.hpp"
#include "tprobe/core/evidence/profile_point.hpp"
#include "tprobe/core/evidence/step_memory.hpp"
#include "tprobe/core/evidence/trace_facts.hpp"
#include "tprobe/core/evidence/trace_memory.hpp"
#include "tprobe/core/evidence/trace_series.hpp"
#include "tprobe/core/evidence/trace_stats.hpp"
#include "tprobe/core/evidence/user_ranges.hpp"

namespace tprobe::core::evidence {

namespace detail {

std::string field_where(const std::string& where, const char* key, bool scalar) {
  return scalar ? fmt::format("{}: field '{}'", where, key) : where + "." + key;
}

}  // namespace detail

namespace {

std::string cell_of(const Json& v, const std::string& unit) {
  if (v.is_null()) return "-";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) return v.get<std::string>();
  const double x = v.get<double>();
  if (unit == "s") return format_seconds(x);
  if (unit == "B") return format_bytes(x);
  if (v.is_number_integer()) return format_count(v.get<int64_t>());
  return fmt::format("{:.4g}", x);
}

}  // namespace

std::vector<FieldCells> field_cells(const std::vector<FieldDoc>& docs,
                                    const std::vector<Json>& items) {
  std::vector<FieldCells> out;
  for (const FieldDoc& d : docs) {
    if (d.path.find_first_of(".[") != std::string::npos) continue;  // a member's own fields
    FieldCells row{d, {}};
    bool any = false, scalar = true;
    for (const Json& j : items) {
      const Json v = j.is_object() && j.contains(d.path) ? j[d.path] : Json(nullptr);
      scalar = scalar && !v.is_array() && !v.is_object();
      any = any || !v.is_null();
      row.cells.push_back(scalar ? cell_of(v, d.unit) : "");
    }
    if (scalar && any) out.push_back(std::move(row));
  }
  return out;
}

std::string field_rows(const std::vector<FieldDoc>& docs) {
  std::string out;
  for (const FieldDoc& d : docs) {
    out += fmt::format("| `{}` | {} | {} | {} |\n", d.path, d.type, d.unit.empty() ? "–" : d.unit,
                       d.doc);
  }
  return out;
}

std::vector<FieldDoc> declared_fields() {
  std::vector<FieldDoc> out;
  for (auto docs : {field_docs<PointFigures>("points[]."), field_docs<StepFigures>(),
                    field_docs<PointTokens>("points[].tokens."),
                    field_docs<ExpertLoad>("points[]."), field_docs<LoadFigures>("load."),
                    field_docs<StepMemory>("points[].memory."),
                    field_docs<MemorySample>("points[].memory.timeline.samples[]."),
                    field_docs<KernelTableSlot>(), field_docs<KernelTable>("kernel_table."),
                    field_docs<KernelRow>("kernel_table.kernels[]."),
                    field_docs<RankRow>("rank_summary[]."), field_docs<PartCells>(),
                    field_docs<PartRow>("by_phase_part[]."), field_docs<LayerRow>("by_layer[]."),
                    field_docs<DoubleCount>("trace.key_averages_trap."),
                    field_docs<MemoryFitPoint>("memory_fit.fit.fitted[]."),
                    field_docs<EdgeSearchProbe>("memory_fit.budgets[].searches[].probes[]."),
                    field_docs<EdgeProbe>("memory_edge.rows[].probes[]."),
                    field_docs<LeverFigures>("rows[]."), field_docs<MemoryFacts>("facts."),
                    field_docs<TraceMemory>("memory."),
                    field_docs<MemoryDevice>("memory.devices[]."), field_docs<TraceStats>("trace."),
                    field_docs<OtherStreams>("trace.other_streams."),
                    field_docs<OtherIdle>("trace.other_idle_split."),
                    field_docs<OtherQueues>("trace.other_queue_length."),
                    field_docs<KernelSequences>("trace.kernel_sequences."),
                    field_docs<UserRanges>("trace.user_ranges."),
                    field_docs<TraceSeries>("trace.time_series."),
                    field_docs<CriticalPath>("trace.critical_path."),
                    field_docs<TraceFacts>("trace.")})
    out.insert(out.end(), docs.begin(), docs.end());
  return out;
}

}  // namespace tprobe::core::evidence
