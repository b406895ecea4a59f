// Views of a kernel table: the evidence JSON (the shape `tprobe kernels` and `tprobe profile`
// both write under results.kernel_table, documented in docs/kernels.md), the reader of that
// JSON (so `tprobe kernels A B` can hold a trace against an evidence file), and human tables.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/trace/stats/kernel_table.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

// The kernel_table object's version, kKernelTableSchemaVersion: core/evidence/kernel_table.hpp.

// results.kernel_table. Every kernel row keeps its whole demangled name; times in integer ns.
Json to_json(const KernelTable& table);

// Reads the object to_json wrote (what a diff needs: totals, kernels, categories, phases,
// architecture, device properties). Throws tprobe::Error naming `where` and the field.
KernelTable kernel_table_from_json(const Json& j, const std::string& where);

// The human view: totals side by side, categories, the top `top` kernels, steps, phases,
// architecture. `top` <= 0 lists every kernel.
std::vector<Table> kernel_table_tables(const KernelTable& table, int top = 25);

// The report's section for kernels evidence (figures, facts, tables; core/report/section.hpp).
void kernels_report_section(SectionBuilder& c);
// The kernel table's figures and facts from `table` (kernels' results, or the table a profile
// embeds); `base`: its field path relative to results ("" or "kernel_table.").
void kernel_table_figures(SectionBuilder& c, const Json& table, const std::string& base);

}  // namespace tprobe::core
