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
// Reads the `results` object to_json wrote; what it does not write (diagnostics, the outcome, the
// total row's name) keeps its default. Throws tprobe::Error naming `where` ("p.json results") and
// the field.
PaddingReport padding_report_from_json(const Json& results, const std::string& where);
std::vector<Table> padding_tables(const PaddingReport& report);  // the tables and the histogram

// JSON shape of one source row / the truncation block, shared with the bucket probe.
Json to_json(const SourceStats& stats, bool with_padding);
Json truncation_json(const SourceBreakdown& breakdown, int64_t max_seq_len);
// The dataset block both probes start their results with: `dataset {name, format, records,
// sources}`, `records`, `dataset_tokens`, `real_tokens`.
void put_dataset_json(Json& j, const std::string& name, const std::string& format,
                      const SourceBreakdown& breakdown);
// Their readers. A source row's `source` null is the unnamed source "".
SourceStats source_stats_from_json(const Json& row, bool with_padding, const std::string& where);
// `dataset` and the totals into `breakdown.total`; `per_source` rows into `breakdown.sources`
// (with_padding as written); `truncation` into the total's truncated counts, returning
// max_seq_len.
void dataset_from_json(const Json& results, const std::string& where, bool with_padding,
                       std::string& name, std::string& format, SourceBreakdown& breakdown);
int64_t truncation_from_json(const Json& results, const std::string& where,
                             SourceBreakdown& breakdown);

// The report's section for padding evidence (figures, facts, tables; core/report/section.hpp).
void padding_report_section(SectionBuilder& c);

}  // namespace tprobe::core
