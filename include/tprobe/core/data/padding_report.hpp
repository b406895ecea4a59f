// Views of a PaddingReport: evidence JSON and tables; the source and truncation blocks are
// shared with the bucket views.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/data/padding.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

Json to_json(const PaddingReport& report);
std::vector<Table> padding_tables(const PaddingReport& report);  // the tables and the histogram

// JSON shape of one source row / the truncation block, shared with the bucket probe.
Json to_json(const SourceStats& stats, bool with_padding);
Json truncation_json(const SourceBreakdown& breakdown, int64_t max_seq_len);
// The dataset block both probes start their results with: `dataset {name, format, records,
// sources}`, `records`, `dataset_tokens`, `real_tokens`.
void put_dataset_json(Json& j, const std::string& name, const std::string& format,
                      const SourceBreakdown& breakdown);

// The report's section for padding evidence (figures, facts, tables; core/report/section.hpp).
void padding_report_section(SectionBuilder& c);

}  // namespace tprobe::core
