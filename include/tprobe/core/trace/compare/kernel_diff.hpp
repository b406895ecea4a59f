// Two kernel tables side by side (`tprobe kernels A B`): per category and per kernel family, the
// change in time, count and share, sorted by what moved most (docs/kernels.md).
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/trace/stats/kernel_table.hpp"

namespace tprobe::core {

struct DiffRow {
  std::string key;       // category name or kernel family
  std::string category;  // for family rows: the category of the family's first kernel
  int64_t a_ns = 0, b_ns = 0;
  int64_t a_count = 0, b_count = 0;
  double a_share_ratio = 0, b_share_ratio = 0;
  int64_t delta_ns() const { return b_ns - a_ns; }
};

struct KernelDiff {
  std::string a_label, b_label;
  BusyTotals a_totals, b_totals;
  std::vector<DiffRow> categories;  // by |delta| descending
  std::vector<DiffRow> families;    // by |delta| descending
};

KernelDiff diff_kernel_tables(const KernelTable& a, const std::string& a_label,
                              const KernelTable& b, const std::string& b_label);

Json to_json(const KernelDiff& diff);
KernelDiff kernel_diff_from_json(const Json& j, const std::string& where);
std::vector<Table> kernel_diff_tables(const KernelDiff& diff, int top = 25);

}  // namespace tprobe::core
