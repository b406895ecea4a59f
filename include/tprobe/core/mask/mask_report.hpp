// JSON and table views of a MaskReport (the geometry part of `tprobe mask`, docs/mask.md).
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/mask/mask_geometry.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

// results.{model, width, ..., layers[], bands[], assertions[]}; schema in docs/mask.md.
Json to_json(const MaskReport& report);
// The report back from its results (those of `tprobe mask`, whose materialised and backends keys
// are engine's and ignored here), every field checked, also against the fields it is derived
// from; throws tprobe::Error naming `where` ("m.json results") and the field. What to_json does not
// write keeps its default: the request's expectations, and per layer each plan's band parameters
// (the bands carry them, and take their call and reason from their first layer). ok, diagnostics
// and outcome are derived from the assertions as analyze_mask derives them.
MaskReport mask_report_from_json(const Json& results, const std::string& where);
std::vector<Table> mask_tables(const MaskReport& report);

// "0-4,6-10" for a sorted index list.
std::string format_ranges(const std::vector<int64_t>& sorted);

// The report's section for mask evidence (figures, facts, tables; core/report/section.hpp).
void mask_report_section(SectionBuilder& c);

}  // namespace tprobe::core
