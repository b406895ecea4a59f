// Repeated kernel sequences as fusion candidates (kernel_sequences.hpp; docs/kernels.md,
// "Repeated kernel sequences").
#include "tprobe/core/trace/stats/kernel_sequences.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"
#include "trace/stats/detail/kernel_sequences_internal.hpp"

namespace tprobe::core {
namespace detail {
namespace {

constexpr uint64_t kBase = 0x9E3779B97F4A7C15ull;  // odd: the polynomial hash's base

struct Run {
  std::vector<uint32_t> ids;
  std::vector<int64_t> start, end, call;  // call: launch-call duration, -1 unknown
};

struct Entry {
  std::size_t run = 0, pos = 0;  // the first occurrence
  int64_t occurrences = 0;
  std::size_t last_run = SIZE_MAX, last_end = 0;  // the last counted occurrence's end
  int64_t kernel_ns = 0, gap_ns = 0, call_ns = 0;
  bool dropped = false;
};

uint64_t hash_of(const std::vector<uint32_t>& ids, std::size_t pos, std::size_t len) {
  uint64_t h = 0;
  for (std::size_t k = 0; k < len; ++k) h = h * kBase + ids[pos + k] + 1;
  return h;
}

}  // namespace

KernelSequences find_kernel_sequences(const std::vector<SequenceRow>& rows,
                                      const std::vector<std::string>& names) {
  KernelSequences out;
  // Runs: per (device, stream) in start order, broken by a memcpy/memset row, a row without a
  // launch, or a change of launching thread.
  std::vector<std::size_t> order(rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const SequenceRow &x = rows[a], &y = rows[b];
    if (x.device != y.device) return x.device < y.device;
    if (x.stream != y.stream) return x.stream < y.stream;
    return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : a < b;
  });
  std::vector<Run> runs;
  Run cur;
  const SequenceRow* prev = nullptr;
  auto flush = [&] {
    if (cur.ids.size() >= static_cast<std::size_t>(KernelSequences::kMinLength))
      runs.push_back(std::move(cur));
    cur = Run{};
  };
  for (std::size_t i : order) {
    const SequenceRow& r = rows[i];
    if (r.kind == ActivityKind::kKernel) ++out.kernels;
    const bool joins = prev != nullptr && prev->device == r.device && prev->stream == r.stream &&
                       r.kind == ActivityKind::kKernel && r.launched && prev->tid == r.tid;
    if (!joins) flush();
    prev = nullptr;
    if (r.kind != ActivityKind::kKernel || !r.launched) continue;
    cur.ids.push_back(r.name_id);
    cur.start.push_back(r.start_ns);
    cur.end.push_back(r.end_ns);
    cur.call.push_back(r.launch_dur_ns);
    prev = &r;
  }
  flush();
  out.runs = static_cast<int64_t>(runs.size());

  // Per length, every window counted once per non-overlapping occurrence; kept when it recurs.
  std::map<int, std::unordered_map<uint64_t, Entry>> kept;  // length -> hash -> entry
  for (int len = KernelSequences::kMinLength; len <= KernelSequences::kMaxLength; ++len) {
    const auto L = static_cast<std::size_t>(len);
    uint64_t top_power = 1;  // kBase^(L-1)
    for (std::size_t k = 1; k < L; ++k) top_power *= kBase;
    std::unordered_map<uint64_t, Entry> seen;
    seen.reserve(static_cast<std::size_t>(out.kernels));  // at most one entry per window
    for (std::size_t ri = 0; ri < runs.size(); ++ri) {
      const Run& run = runs[ri];
      if (run.ids.size() < L) continue;
      uint64_t h = hash_of(run.ids, 0, L);
      for (std::size_t p = 0; p + L <= run.ids.size(); ++p) {
        if (p > 0) h = (h - (run.ids[p - 1] + 1ull) * top_power) * kBase + run.ids[p + L - 1] + 1;
        auto [it, fresh] = seen.try_emplace(h);
        Entry& e = it->second;
        if (fresh) {
          e.run = ri;
          e.pos = p;
        } else if (!std::equal(run.ids.begin() + static_cast<std::ptrdiff_t>(p),
                               run.ids.begin() + static_cast<std::ptrdiff_t>(p + L),
                               runs[e.run].ids.begin() + static_cast<std::ptrdiff_t>(e.pos))) {
          ++out.hash_collisions;
          continue;
        }
        if (e.last_run == ri && p < e.last_end) continue;  // overlaps the one counted before
        e.last_run = ri;
        e.last_end = p + L;
        ++e.occurrences;
        for (std::size_t k = p; k < p + L; ++k) {
          e.kernel_ns += run.end[k] - run.start[k];
          if (k > p) {
            e.gap_ns += std::max<int64_t>(0, run.start[k] - run.end[k - 1]);
            if (run.call[k] > 0) e.call_ns += run.call[k];
          }
        }
      }
    }
    auto& keep = kept[len];
    for (auto& [h, e] : seen) {
      if (e.occurrences >= KernelSequences::kMinOccurrences) keep.emplace(h, e);
    }
  }
  // Maximal: a sequence one kernel longer, on either side, that recurs as often replaces it.
  for (int len = KernelSequences::kMaxLength; len > KernelSequences::kMinLength; --len) {
    auto& shorter = kept[len - 1];
    for (const auto& [h, e] : kept[len]) {
      const Run& run = runs[e.run];
      for (std::size_t from : {e.pos, e.pos + 1}) {
        auto s = shorter.find(hash_of(run.ids, from, static_cast<std::size_t>(len - 1)));
        if (s != shorter.end() && s->second.occurrences == e.occurrences) s->second.dropped = true;
      }
    }
  }
  for (const auto& [len, by_hash] : kept) {
    for (const auto& [h, e] : by_hash) {
      if (e.dropped) continue;
      ++out.found;
      const Run& run = runs[e.run];
      KernelSequence s;
      for (std::size_t k = e.pos; k < e.pos + static_cast<std::size_t>(len); ++k)
        s.kernels.push_back(names[run.ids[k]]);
      s.occurrences = e.occurrences;
      s.kernel_ns = e.kernel_ns;
      s.gap_ns = e.gap_ns;
      s.launches_removed = static_cast<int64_t>(len - 1) * e.occurrences;
      s.launch_call_ns = e.call_ns;
      s.first_start_ns = run.start[e.pos];
      out.top.push_back(std::move(s));
    }
  }
  std::sort(out.top.begin(), out.top.end(), [](const KernelSequence& a, const KernelSequence& b) {
    if (a.gap_ns != b.gap_ns) return a.gap_ns > b.gap_ns;
    if (a.occurrences != b.occurrences) return a.occurrences > b.occurrences;
    if (a.kernels.size() != b.kernels.size()) return a.kernels.size() > b.kernels.size();
    if (a.first_start_ns != b.first_start_ns) return a.first_start_ns < b.first_start_ns;
    return a.kernels < b.kernels;
  });
  if (out.top.size() > KernelSequences::kKept) out.top.resize(KernelSequences::kKept);
  return out;
}

}  // namespace detail

Json to_json(const KernelSequences& s) { return evidence::to_json(s); }

KernelSequences kernel_sequences_from_json(const Json& j, const std::string& where) {
  return evidence::from_json<KernelSequences>(j, where);
}

void kernel_sequence_figures(SectionBuilder& c, const std::string& base) {
  const Json* j = c.find(base);
  if (j == nullptr) return;  // evidence written before sequences were searched
  KernelSequences s;
  try {
    s = kernel_sequences_from_json(*j, c.field_name(base));
  } catch (const Error&) {
    c.absent(base, "the repeated kernel sequences");
    return;
  }
  if (s.top.empty()) {
    c.note("repeated kernel sequences: none recurs (3 to 12 kernels, at least twice)");
    return;
  }
  ReportTable t;
  t.id = "tab-kernels-sequences";
  t.title = "Repeated kernel sequences: fusion candidates by the device idle a fusion removes";
  t.header = {"#", "kernels in order", "occurrences", "device time", "idle inside",
              "launches removed", "their CPU time"};
  for (std::size_t i = 0; i < s.top.size() && i < 10; ++i) {
    const KernelSequence& q = s.top[i];
    std::string names;
    for (std::size_t k = 0; k < q.kernels.size(); ++k)
      names += (k ? " → " : "") + kernel_label(q.kernels[k], 28);
    t.rows.push_back({std::to_string(i + 1), names, format_count(q.occurrences), format_ns(q.kernel_ns),
                      format_ns(q.gap_ns), format_count(q.launches_removed), format_ns(q.launch_call_ns)});
  }
  t.source = c.source();
  t.fields = {c.field_name(base + ".top[]")};
  c.table(std::move(t));
}

std::vector<Table> kernel_sequence_tables(const KernelSequences& s, int top) {
  std::vector<Table> out;
  if (s.top.empty()) return out;
  const std::size_t n =
      top > 0 ? std::min<std::size_t>(s.top.size(), static_cast<std::size_t>(top)) : s.top.size();
  Table t(fmt::format("Repeated kernel sequences (fusion candidates), top {} of {} by the device "
                      "idle a fusion would remove",
                      n, s.found));
  t.column("#").column("kernels in order", Align::kLeft).column("occurrences").column(
      "device time").column("idle inside").column("launches removed").column("their CPU time");
  for (std::size_t i = 0; i < n; ++i) {
    const KernelSequence& q = s.top[i];
    std::string names;
    for (std::size_t k = 0; k < q.kernels.size(); ++k) {
      if (k > 0) names += " → ";
      names += kernel_label(q.kernels[k], 28);
    }
    t.row({std::to_string(i + 1), names, format_count(q.occurrences), format_ns(q.kernel_ns),
           format_ns(q.gap_ns), format_count(q.launches_removed), format_ns(q.launch_call_ns)});
  }
  t.note(fmt::format(
      "{} to {} consecutive kernels on one stream, launched by one thread with no copy between, "
      "recurring at least {} times (non-overlapping); a sequence one kernel longer that recurs as "
      "often replaces it; idle inside: the device's gaps between the sequence's kernels, which a "
      "fused kernel would not have; whole names in results.trace.kernel_sequences",
      KernelSequences::kMinLength, KernelSequences::kMaxLength, KernelSequences::kMinOccurrences));
  out.push_back(t);
  return out;
}

}  // namespace tprobe::core
