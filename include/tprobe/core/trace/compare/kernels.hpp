// `tprobe kernels`: one trace (or evidence file) → its kernel table; a directory of per-rank
// traces → a table per rank with the communication share, overlap and slowest rank; two inputs →
// their difference. docs/kernels.md documents the inputs, the results and the exit codes.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/trace/compare/kernel_diff.hpp"
#include "tprobe/core/trace/stats/kernel_table.hpp"
#include "tprobe/core/trace/compare/part_diff.hpp"
#include "tprobe/core/trace/attribute/trace_parts.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"

namespace tprobe::core {

// One input: a trace read here, or the kernel table of a tprobe evidence file
// (results.kernel_table of `tprobe kernels` or `tprobe profile`).
struct KernelSource {
  std::string path;
  std::string kind;            // "trace" | "evidence"
  std::string evidence_probe;  // "kernels", "profile", ... (evidence only)
  bool has_trace = false;
  TraceSummary trace;  // kind == "trace"
  KernelTable table;
  PartSide parts;      // its phase × part rows (a trace's attribution or the evidence's rows)
};

// Reads `path` as a trace or an evidence file (told apart by content: an evidence file's first
// key is "schema"). Selection options apply to traces only; given with an evidence file they are
// a usage error (the table was selected when it was written).
KernelSource load_kernel_source(const std::string& path, const KernelTableOptions& options,
                                const TracePartsOptions& parts = {});

// Per rank of a multi-rank job (RankRow: core/evidence/kernel_trace.hpp).
std::vector<RankRow> rank_rows(const std::vector<RankTrace>& ranks);

struct KernelsRequest {
  std::vector<std::string> inputs;  // 1 (file or directory) or 2 (files)
  KernelTableOptions table;
  TracePartsOptions parts;  // layer kinds for the phase × part attribution of traces
};

struct KernelsReport {
  enum class Mode { kSingle, kRanks, kDiff };
  Mode mode = Mode::kSingle;
  std::vector<KernelSource> sources;  // single: 1; diff: 2 (A, B); ranks: one per rank
  std::vector<RankRow> ranks;         // ranks mode
  int64_t slowest_rank = -1;          // the rank with the longest device span
  KernelDiff diff;                    // diff mode
  PartDiff part_diff;                 // diff mode: phase × part rows side by side
  std::vector<Diagnostic> diagnostics;
  Outcome outcome = Outcome::kOk;  // a table is never a "no"
};

KernelsReport analyze_kernels(const KernelsRequest& request);
// The profiler steps a table's selection covers (ProfilerStep#N ranges; 1 without any).
int64_t kernel_table_steps(const KernelTable& table);

// kernels_report.cpp: results for the evidence envelope, their reader, and the human view.
const char* to_string(KernelsReport::Mode mode);  // "single", "ranks", "diff"
Json to_json(const KernelsReport& report);
// The report back from `kernels` evidence results (`where`: "k.json results"). Every source comes
// back with its path, kind, kernel table and phase × part rows (by_phase_part, parts_steps); a
// source read from a trace comes back whole (has_trace): its summary by trace_summary_from_json,
// its attribution by trace_parts_from_json and its [memory] events by trace_memory_from_json. So
// to_json of the report read is the results read, in every mode.
KernelsReport kernels_report_from_json(const Json& results, const std::string& where);
Json to_json(const TraceSummary& summary);
// Its reader: the summary's own facts (devices, profiler steps, categories, health, the
// key_averages trap), the launch-bound statistics, user ranges, kernel sequences, time series and
// critical path, each by its own reader; the derived fields checked by writing them again. The
// attribution and the memory are written beside the summary, not in it, and read by their own
// readers. Throws tprobe::Error naming `where` and the field.
TraceSummary trace_summary_from_json(const Json& j, const std::string& where);
std::vector<Table> kernels_tables(const KernelsReport& report, int top = 25);

// "ProfilerStep#2, ProfilerStep#3, …": the annotation names a trace holds (its first 8), for the
// double-count trap's line in the analysis and the views.
std::string annotation_list(const DoubleCount& d);

}  // namespace tprobe::core
