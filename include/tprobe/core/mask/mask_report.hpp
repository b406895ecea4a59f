// JSON and table views of a MaskReport (the geometry part of `tprobe mask`, docs/mask.md).
#pragma once

#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/mask/mask_geometry.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

// results.{model, width, ..., layers[], bands[], assertions[]}; schema in docs/mask.md.
Json to_json(const MaskReport& report);
std::vector<Table> mask_tables(const MaskReport& report);

// "0-4,6-10" for a sorted index list.
std::string format_ranges(const std::vector<int64_t>& sorted);

// The report's section for mask evidence (figures, facts, tables; core/report/section.hpp).
void mask_report_section(SectionBuilder& c);

}  // namespace tprobe::core
