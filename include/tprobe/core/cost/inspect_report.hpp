// Views of an InspectReport: the evidence `results` and the tables `tprobe inspect` prints.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/cost/inspect.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

Json to_json(const InspectReport& report);
// The report back from its evidence `results` (what to_json wrote), so that
// to_json(inspect_report_from_json(to_json(r))) == to_json(r); `where` names the document in
// errors ("i.json results"). Throws tprobe::Error naming the field at fault.
InspectReport inspect_report_from_json(const Json& results, const std::string& where);
std::vector<Table> inspect_tables(const InspectReport& report);  // the source line, then every table

// The resolved geometry of every layer, for the evidence (results.config).
Json config_summary_json(const ModelConfig& config);
// Where the tensors came from (results.source): files, prefix, index warnings, config defaults.
Json checkpoint_source_json(const CheckpointSource& source);

Json to_json(const std::vector<DtypeRow>& rows);
Json to_json(const std::vector<Disagreement>& disagreements);
Table disagreements_table(const std::vector<Disagreement>& disagreements);

Json to_json(const BlockSummary& summary);
Json to_json(const QuantizationEstimate& q);
Json to_json(const LoraPlan& plan);
Json to_json(const MemoryEstimate& m);
Table blocks_table(const BlockSummary& summary);
Table quantization_table(const QuantizationEstimate& q);
Table lora_table(const LoraPlan& plan);
Table memory_table(const MemoryEstimate& m);

// The report's section for inspect evidence (figures, facts, tables; core/report/section.hpp).
void inspect_report_section(SectionBuilder& c);

}  // namespace tprobe::core
