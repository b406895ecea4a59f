// Streaming reader of torch.profiler / Kineto Chrome traces (.json, .json.gz): device rows become
// core::KernelRecord and go into the kernel table; host rows are kept only as far as the
// key_averages()-style double count, the forward/backward split and the steps need them.
// Memory is bounded by the distinct kernel names and the events kept, never by the file size
// (tprobe's own streaming JSON tokenizer, no document tree). docs/kernels.md: what is read and
// what is checked.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/trace/stats/critical_path.hpp"
#include "tprobe/core/trace/stats/kernel_sequences.hpp"
#include "tprobe/core/trace/stats/kernel_table.hpp"
#include "tprobe/core/trace/stats/trace_memory.hpp"
#include "tprobe/core/trace/attribute/trace_parts.hpp"
#include "tprobe/core/trace/stats/trace_series.hpp"
#include "tprobe/core/trace/stats/trace_stats.hpp"
#include "tprobe/core/trace/stats/user_ranges.hpp"

namespace tprobe::core {


// What key_averages() would report if a user summed every row's self device time: each kernel
// once as its own device row, once more in the host op that launched it (the op whose
// "External id" the kernel carries), and the gpu_user_annotation ranges (ProfilerStep#N,
// Optimizer.step#... on the device), which key_averages() lists as device rows too. Measured on
// torch 2.11 (docs/kernels.md): exactly that sum. Labelled as the trap in every view, never as a
// total.
// DoubleCount (the key_averages() trap): core/evidence/kernel_trace.hpp.

// The trace's own facts (source, events, steps, health, the key_averages() trap): TraceFacts,
// core/evidence/trace_facts.hpp; the analyses over the selection beside them.
struct TraceSummary : TraceFacts {
  TraceStats stats;  // over the table's selection (trace_stats.hpp)
  CriticalPath critical_path;  // over the selection's window (critical_path.hpp)
  UserRanges user_ranges;      // the selected rows by the user's own ranges (user_ranges.hpp)
  KernelSequences kernel_sequences;  // repeated kernel sequences (kernel_sequences.hpp)
  TraceSeries series;  // queue length and copy bandwidth over time (trace_series.hpp)
  TraceParts parts;  // over the same selection (trace_parts.hpp)
  // The [memory] events (profile_memory=True), over the whole trace: a step's peak holds what
  // earlier steps left allocated (trace_memory.hpp).
  TraceMemory memory;
};

struct TraceResult {
  TraceSummary summary;
  KernelTable table;
};

// Reads a trace file (gzip detected by its magic bytes, not the suffix). Throws tprobe::Error
// naming the file and, for JSON problems, the byte offset; a selection with no device rows is an
// error too (exit 1, docs/kernels.md).
TraceResult read_trace_file(const std::string& path, const KernelTableOptions& options = {},
                            const TracePartsOptions& parts = {});
// The same from bytes already in memory (tests, fuzzing). `label` names it in messages.
TraceResult read_trace_buffer(std::string_view bytes, const std::string& label,
                              const KernelTableOptions& options = {},
                              const TracePartsOptions& parts = {});

// The per-rank traces of a directory (*.json, *.json.gz, *.pt.trace.json[.gz]), sorted by rank
// (distributedInfo.rank, else file name order). Throws when none is found or one is bad.
struct RankTrace {
  std::string path;
  int64_t rank = -1;
  TraceResult result;
};
// Every rank gets the same phase × part attribution as a single trace (`parts`: the layer kinds).
std::vector<RankTrace> read_trace_directory(const std::string& dir,
                                            const KernelTableOptions& options = {},
                                            const TracePartsOptions& parts = {});

}  // namespace tprobe::core
