// Repeated kernel sequences as the kernels command's evidence holds them
// (results.trace.kernel_sequences, docs/kernels.md "Repeated kernel sequences"), each field
// declared once (core/evidence/fields.hpp); core/trace/stats's kernel_sequences finds them and
// shows them.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"

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

constexpr auto evidence_fields(const KernelSequence*) {
  using evidence::derived;
  using evidence::field;
  using Q = KernelSequence;
  return std::make_tuple(
      field("kernels", &Q::kernels, "", "whole names, in launch order"),
      derived<Q>("length", +[](const Q& q) { return Json(q.kernels.size()); }, "integer", "",
                 "the number of kernels"),
      field("occurrences", &Q::occurrences, "", "non-overlapping, over every stream").at_least(0),
      field("kernel_ns", &Q::kernel_ns, "ns", "the kernels' device time over them").at_least(0),
      field("gap_ns", &Q::gap_ns, "ns", "device idle between their kernels").at_least(0),
      field("launches_removed", &Q::launches_removed, "", "(length - 1) x occurrences")
          .at_least(0),
      field("launch_call_ns", &Q::launch_call_ns, "ns", "those launch calls' CPU time")
          .at_least(0),
      field("first_start_ns", &Q::first_start_ns, "ns", "the first occurrence's start"));
}
inline auto evidence_fields(const KernelSequences*) {
  using evidence::derived;
  using evidence::field;
  using S = KernelSequences;
  return std::make_tuple(
      derived<S>("min_length", +[](const S&) { return Json(S::kMinLength); }, "integer", "",
                 "the shortest sequence searched"),
      derived<S>("max_length", +[](const S&) { return Json(S::kMaxLength); }, "integer", "",
                 "the longest"),
      derived<S>("min_occurrences", +[](const S&) { return Json(S::kMinOccurrences); }, "integer",
                 "", "the fewest occurrences kept"),
      field("kernels", &S::kernels, "", "kernel rows scanned").at_least(0),
      field("runs", &S::runs, "", "the runs they fall into").at_least(0),
      field("found", &S::found, "", "maximal repeated sequences, before the cut").at_least(0),
      field("hash_collisions", &S::hash_collisions, "", "windows left out").at_least(0),
      field("top", &S::top, "", "the 50 kept, by gap_ns, occurrences, length"));
}

}  // namespace tprobe::core
