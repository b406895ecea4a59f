// Kernel sequences that repeat, as fusion candidates: runs of consecutive kernels on one stream,
// launched one after another by one thread, whose kernels (by whole name) recur in the same order,
// with the time a fusion of each would remove — the device's idle gaps inside the sequence and
// the CPU time of every launch call but the first. HolisticTraceAnalysis's
// get_frequent_cuda_kernel_sequences finds them below one operator; this searches every stream.
// docs/kernels.md, "Repeated kernel sequences", defines every figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/evidence/kernel_sequences.hpp"
#include "tprobe/core/base/table.hpp"

namespace tprobe::core {

// KernelSequence and KernelSequences, their fields: core/evidence/kernel_sequences.hpp.

Json to_json(const KernelSequences& s);  // results.trace.kernel_sequences
KernelSequences kernel_sequences_from_json(const Json& j, const std::string& where);
// The `top` first sequences (<= 0: all kept).
std::vector<Table> kernel_sequence_tables(const KernelSequences& s, int top = 10);

class SectionBuilder;
// The report's table of results.<base> (a `kernels` evidence's "trace.kernel_sequences").
void kernel_sequence_figures(SectionBuilder& c, const std::string& base);

}  // namespace tprobe::core
