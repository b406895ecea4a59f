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
#include "tprobe/core/base/table.hpp"

namespace tprobe::core {

struct KernelSequence {
  std::vector<std::string> kernels;  // whole demangled names, in launch order
  int64_t occurrences = 0;           // non-overlapping, over every stream
  int64_t kernel_ns = 0;             // the kernels' device time over the occurrences
  int64_t gap_ns = 0;                // device idle between consecutive kernels inside them
  int64_t launches_removed = 0;      // (length - 1) x occurrences
  int64_t launch_call_ns = 0;        // CPU time of those launch calls (calls with a duration)
  int64_t first_start_ns = 0;        // the first occurrence's first kernel start
};

struct KernelSequences {
  static constexpr int kMinLength = 3;
  static constexpr int kMaxLength = 12;
  static constexpr int kMinOccurrences = 2;
  static constexpr std::size_t kKept = 50;  // sequences in the evidence (by gap_ns)
  int64_t kernels = 0;     // kernel rows scanned (the selection)
  int64_t runs = 0;        // runs they fall into (a stream, one launching thread, no copy between)
  int64_t found = 0;       // maximal repeated sequences found, before the cut to kKept
  int64_t hash_collisions = 0;  // windows whose hash matched another sequence's (left out)
  std::vector<KernelSequence> top;  // by gap_ns, then occurrences, then length, descending
};

Json to_json(const KernelSequences& s);  // results.trace.kernel_sequences
KernelSequences kernel_sequences_from_json(const Json& j, const std::string& where);
// The `top` first sequences (<= 0: all kept).
std::vector<Table> kernel_sequence_tables(const KernelSequences& s, int top = 10);

class SectionBuilder;
// The report's table of results.<base> (a `kernels` evidence's "trace.kernel_sequences").
void kernel_sequence_figures(SectionBuilder& c, const std::string& base);

}  // namespace tprobe::core
