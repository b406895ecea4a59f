// The bucket-to-pair, shuffle-to-mix sampler (docs/findings.md#f7), measured over a bucket sweep.
#include "tprobe/core/data/bucket.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/base/rng.hpp"
#include "base/math_util.hpp"

namespace tprobe::core {
namespace {

using detail::ratio;

double parse_number(const std::string& text, const std::string& whole) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || errno == ERANGE || !std::isfinite(v)) {
    fail_usage("cost model '{}': '{}' is not a finite number", whole, text);
  }
  if (v < 0) fail_usage("cost model '{}': coefficient {} is negative", whole, text);
  return v;
}

// Finishes a micro-batch order from micro-batches laid out in `flat`/`starts` and a permutation.
MicroBatchOrder permuted(const std::vector<uint32_t>& flat, const std::vector<uint64_t>& starts,
                         const std::vector<uint32_t>& perm) {
  MicroBatchOrder out;
  out.records.reserve(flat.size());
  out.starts.reserve(starts.size());
  out.starts.push_back(0);
  for (uint32_t m : perm) {
    for (uint64_t k = starts[m]; k < starts[m + 1]; ++k) out.records.push_back(flat[k]);
    out.starts.push_back(out.records.size());
  }
  return out;
}

uint64_t mix64(uint64_t x) {
  uint64_t s = x;
  return splitmix64(s);
}

SeedStat seed_stat(const std::vector<double>& values) {
  SeedStat s;
  if (values.empty()) return s;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  long double sum = 0;
  for (double v : values) sum += v;
  s.mean = static_cast<double>(sum / static_cast<long double>(values.size()));
  return s;
}

template <typename F>
SeedStat over_seeds(const std::vector<OrderMetrics>& per_seed, F field) {
  std::vector<double> v;
  v.reserve(per_seed.size());
  for (const auto& m : per_seed) v.push_back(field(m));
  return seed_stat(v);
}

SweepRow summarize_row(int64_t bucket, std::vector<uint64_t> seeds,
                       std::vector<OrderMetrics> per_seed, uint64_t fingerprint) {
  SweepRow row;
  row.bucket = bucket;
  row.seeds = std::move(seeds);
  row.per_seed = std::move(per_seed);
  row.fingerprint = fingerprint;
  const auto& ps = row.per_seed;
  row.waste_ratio = over_seeds(ps, [](const OrderMetrics& m) { return m.waste_ratio; });
  row.padded_tokens =
      over_seeds(ps, [](const OrderMetrics& m) { return static_cast<double>(m.padded_tokens); });
  row.zero_pad_share = over_seeds(ps, [](const OrderMetrics& m) { return m.zero_pad_share; });
  row.spw_mean = over_seeds(ps, [](const OrderMetrics& m) { return m.sources_per_window_mean; });
  row.spw_p10 = over_seeds(
      ps, [](const OrderMetrics& m) { return static_cast<double>(m.sources_per_window_p10); });
  row.spw_min = ps.front().sources_per_window_min;
  for (const auto& m : ps) row.spw_min = std::min(row.spw_min, m.sources_per_window_min);
  if (ps.front().predicted_time_s) {
    row.predicted_time_s =
        over_seeds(ps, [](const OrderMetrics& m) { return m.predicted_time_s.value_or(0.0); });
  }
  return row;
}

}  // namespace

CostModel parse_cost(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) {
    fail_usage("cost model '{}': expected A,B or A,B,C (s/token, s/token^2, s)", text);
  }
  CostModel c;
  c.a_s_per_token = parse_number(parts[0], text);
  c.b_s_per_token2 = parse_number(parts[1], text);
  if (parts.size() == 3) c.c_s = parse_number(parts[2], text);
  c.origin = "given coefficients";
  return c;
}

std::vector<uint32_t> sort_by_length(const std::vector<int64_t>& lengths) {
  const std::size_t n = lengths.size();
  std::vector<uint32_t> idx(n);
  if (n == 0) return idx;
  const int64_t mx = *std::max_element(lengths.begin(), lengths.end());
  if (mx <= static_cast<int64_t>(4 * n) + (int64_t{1} << 20)) {
    // Counting sort: stable, so ties stay in index order; O(n + max length).
    std::vector<uint32_t> count(static_cast<std::size_t>(mx) + 2, 0);
    for (int64_t len : lengths) ++count[static_cast<std::size_t>(len) + 1];
    for (std::size_t k = 1; k < count.size(); ++k) count[k] += count[k - 1];
    for (std::size_t i = 0; i < n; ++i) {
      idx[count[static_cast<std::size_t>(lengths[i])]++] = static_cast<uint32_t>(i);
    }
    return idx;
  }
  std::iota(idx.begin(), idx.end(), 0U);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](uint32_t a, uint32_t b) { return lengths[a] < lengths[b]; });
  return idx;
}

MicroBatchOrder bucket_order(const std::vector<uint32_t>& sorted, int64_t bucket,
                             int64_t micro_batch, uint64_t seed) {
  if (bucket < micro_batch || micro_batch < 1) {
    fail_usage("bucket {} is smaller than the micro-batch {}", bucket, micro_batch);
  }
  const std::size_t n = sorted.size();
  const auto b = static_cast<std::size_t>(bucket);
  const auto mb = static_cast<std::size_t>(micro_batch);
  Rng rng(seed);
  std::vector<uint32_t> flat = sorted;
  std::vector<uint64_t> starts;
  starts.reserve(n / mb + n / b + 2);
  for (std::size_t lo = 0; lo < n; lo += b) {
    const std::size_t hi = std::min(n, lo + b);
    shuffle(flat.begin() + static_cast<std::ptrdiff_t>(lo),
            flat.begin() + static_cast<std::ptrdiff_t>(hi), rng);
    for (std::size_t s = lo; s < hi; s += mb) starts.push_back(s);
  }
  starts.push_back(n);
  std::vector<uint32_t> perm(starts.size() - 1);
  std::iota(perm.begin(), perm.end(), 0U);
  shuffle(perm.begin(), perm.end(), rng);  // the global shuffle: it mixes sources (item 7)
  return permuted(flat, starts, perm);
}

namespace {

// Length (< 2^31) and source of each record in one word: measuring a shuffled order reads one
// record at random per row, and one cache miss per row instead of two halves the sweep's time.
std::vector<uint64_t> pack_records(const std::vector<int64_t>& lengths,
                                   const std::vector<uint32_t>& source) {
  std::vector<uint64_t> packed(lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    packed[i] = (static_cast<uint64_t>(lengths[i]) << 32) | source[i];
  }
  return packed;
}

OrderMetrics measure_packed(const MicroBatchOrder& order, const std::vector<uint64_t>& packed,
                            std::size_t source_count, int64_t accum,
                            const std::optional<CostModel>& cost) {
  OrderMetrics m;
  const std::size_t count = order.micro_batches();
  m.micro_batches = static_cast<int64_t>(count);
  double time = 0.0;
  std::vector<uint64_t> stamp(source_count, UINT64_MAX);
  std::vector<int64_t> per_window;
  per_window.reserve(count / static_cast<std::size_t>(accum) + 1);
  int64_t distinct = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const uint64_t window = i / static_cast<uint64_t>(accum);
    if (i % static_cast<uint64_t>(accum) == 0 && i > 0) {
      per_window.push_back(distinct);
      distinct = 0;
    }
    int64_t width = 0, lo = INT64_MAX, real = 0;
    for (uint64_t k = order.starts[i]; k < order.starts[i + 1]; ++k) {
      const uint64_t rec = packed[order.records[k]];
      const auto len = static_cast<int64_t>(rec >> 32);
      width = std::max(width, len);
      lo = std::min(lo, len);
      real += len;
      uint64_t& st = stamp[rec & 0xFFFFFFFFULL];
      if (st != window) {
        st = window;
        ++distinct;
      }
    }
    const auto rows = static_cast<int64_t>(order.starts[i + 1] - order.starts[i]);
    m.real_tokens += real;
    m.padded_tokens += rows * width;
    if (lo == width) ++m.zero_pad_micro_batches;
    if (cost) time += cost->seconds(width);
  }
  if (count > 0) per_window.push_back(distinct);
  m.waste_ratio = ratio(m.padded_tokens - m.real_tokens, m.padded_tokens);
  m.zero_pad_share = ratio(m.zero_pad_micro_batches, m.micro_batches);
  m.windows = static_cast<int64_t>(per_window.size());
  if (!per_window.empty()) {
    long double sum = 0;
    for (int64_t v : per_window) sum += v;
    m.sources_per_window_mean = static_cast<double>(sum / per_window.size());
    std::sort(per_window.begin(), per_window.end());
    m.sources_per_window_min = per_window.front();
    m.sources_per_window_p10 = percentile_sorted(per_window, 10);
  }
  if (cost) m.predicted_time_s = time;
  return m;
}

}  // namespace

OrderMetrics measure_order(const MicroBatchOrder& order, const std::vector<int64_t>& lengths,
                           const std::vector<uint32_t>& source, std::size_t source_count,
                           int64_t accum, const std::optional<CostModel>& cost) {
  return measure_packed(order, pack_records(lengths, source), source_count, accum, cost);
}

uint64_t micro_batch_set_fingerprint(const MicroBatchOrder& order,
                                     const std::vector<int64_t>& lengths) {
  uint64_t acc = 0;
  std::vector<int64_t> members;
  for (std::size_t i = 0; i < order.micro_batches(); ++i) {
    members.clear();
    for (uint64_t k = order.starts[i]; k < order.starts[i + 1]; ++k) {
      members.push_back(lengths[order.records[k]]);
    }
    std::sort(members.begin(), members.end());
    uint64_t h = 0x243f6a8885a308d3ULL;
    for (int64_t len : members) h = mix64(h ^ static_cast<uint64_t>(len));
    acc += mix64(h);  // a sum: independent of the micro-batches' order
  }
  return acc;
}

bool is_noop_sweep(const std::vector<uint64_t>& fingerprints) {
  if (fingerprints.size() < 2) return false;
  return std::all_of(fingerprints.begin(), fingerprints.end(),
                     [&](uint64_t f) { return f == fingerprints.front(); });
}

// Records per bucket: tprobe indexes records with 32 bits, so a bigger bucket is one bucket.
constexpr int64_t kMaxBucket = int64_t{1} << 32;

void validate(const BucketOptions& o) {
  if (o.micro_batch < 1) fail_usage("--batch {}: must be at least 1 row per micro-batch", o.micro_batch);
  if (o.micro_batch > 65536) fail_usage("--batch {}: above 65,536 rows per micro-batch", o.micro_batch);
  if (o.accum < 1) fail_usage("accum {}: must be at least 1", o.accum);
  if (o.accum > (int64_t{1} << 20)) fail_usage("accum {}: above 1,048,576", o.accum);
  if (o.max_seq_len < 1) fail_usage("max-seq-len {}: must be at least 1", o.max_seq_len);
  if (o.max_seq_len > kMaxRecordLength) {
    fail_usage("max-seq-len {}: above {}", o.max_seq_len, kMaxRecordLength);
  }
  if (o.sweep.size() > 1000) fail_usage("sweep has {} sizes; at most 1,000", o.sweep.size());
  if (o.seeds < 1 || o.seeds > 1000) fail_usage("seeds {}: must be in [1, 1000]", o.seeds);
  for (int64_t b : o.sweep) {
    if (b < o.micro_batch) {
      fail_usage("sweep bucket {} is smaller than the micro-batch (--batch {})", b, o.micro_batch);
    }
    if (b > kMaxBucket) fail_usage("sweep bucket {} is above {}", b, kMaxBucket);
  }
  if (o.bucket != 0 && o.bucket < o.micro_batch) {
    fail_usage("bucket {} is smaller than the micro-batch (--batch {})", o.bucket, o.micro_batch);
  }
  if (o.bucket > kMaxBucket) fail_usage("bucket {} is above {}", o.bucket, kMaxBucket);
}

std::vector<int64_t> default_sweep(int64_t micro_batch) {
  std::vector<int64_t> out;
  for (int64_t b : {2, 8, 32, 128, 512}) {
    const int64_t size = std::max(b, micro_batch);
    if (std::find(out.begin(), out.end(), size) == out.end()) out.push_back(size);
  }
  return out;
}

BucketReport analyze_bucket(const LengthDataset& ds, const BucketOptions& options) {
  validate(options);
  if (ds.records() == 0) fail("dataset '{}' has no records", ds.name);
  BucketReport r;
  r.dataset = ds.name;
  r.format = ds.format;
  r.options = options;
  if (r.options.sweep.empty()) r.options.sweep = default_sweep(r.options.micro_batch);
  std::sort(r.options.sweep.begin(), r.options.sweep.end());
  r.options.sweep.erase(std::unique(r.options.sweep.begin(), r.options.sweep.end()),
                        r.options.sweep.end());
  const BucketOptions& o = r.options;
  r.breakdown = source_breakdown(ds, o.max_seq_len);
  const std::vector<int64_t> eff = truncate_lengths(ds.lengths, o.max_seq_len);
  const std::vector<uint32_t> sorted = sort_by_length(eff);
  const std::size_t sources = ds.source_names.size();
  const std::vector<uint64_t> packed = pack_records(eff, ds.source);

  std::vector<uint64_t> seeds;
  for (int64_t k = 0; k < o.seeds; ++k) seeds.push_back(o.seed + static_cast<uint64_t>(k));

  {
    std::vector<OrderMetrics> per_seed;
    uint64_t fp = 0;
    for (uint64_t s : seeds) {
      MicroBatchOrder ord = plain_order(ds.records(), o.micro_batch, o.baseline, s);
      if (s == seeds.front()) fp = micro_batch_set_fingerprint(ord, eff);
      per_seed.push_back(measure_packed(ord, packed, sources, o.accum, o.cost));
    }
    r.baseline = summarize_row(0, seeds, std::move(per_seed), fp);
  }
  std::vector<uint64_t> fingerprints;
  for (int64_t b : o.sweep) {
    // SIGINT/SIGTERM: stop between bucket sizes; what was measured is reported as such.
    if (interrupt_requested()) {
      r.interrupted = true;
      break;
    }
    std::vector<OrderMetrics> per_seed;
    uint64_t fp = 0;
    for (uint64_t s : seeds) {
      MicroBatchOrder ord = bucket_order(sorted, b, o.micro_batch, s);
      if (s == seeds.front()) fp = micro_batch_set_fingerprint(ord, eff);
      per_seed.push_back(measure_packed(ord, packed, sources, o.accum, o.cost));
    }
    SweepRow row = summarize_row(b, seeds, std::move(per_seed), fp);
    if (row.predicted_time_s && r.baseline.predicted_time_s &&
        r.baseline.predicted_time_s->mean > 0) {
      row.saving_ratio = 1.0 - row.predicted_time_s->mean / r.baseline.predicted_time_s->mean;
    }
    fingerprints.push_back(fp);
    r.sweep.push_back(std::move(row));
  }
  r.noop_sweep = is_noop_sweep(fingerprints);
  if (r.noop_sweep) {
    r.diagnostics.push_back({Severity::kWarning, "noop_sweep",
                             "every bucket size produced the same micro-batches: the sweep varied "
                             "nothing (a sampler that re-sorts inside buckets does this)"});
  }
  if (r.sweep.empty()) return r;  // interrupted before the first bucket size: nothing to choose

  if (o.bucket != 0) {
    r.chosen_bucket = o.bucket;
  } else {
    // Best: lowest mean predicted time when there is a cost model, else lowest mean waste;
    // ties go to the smaller bucket (the sweep is ascending).
    const SweepRow* best = &r.sweep.front();
    for (const auto& row : r.sweep) {
      const double v = row.predicted_time_s ? row.predicted_time_s->mean : row.waste_ratio.mean;
      const double bv = best->predicted_time_s ? best->predicted_time_s->mean : best->waste_ratio.mean;
      if (v < bv) best = &row;
    }
    r.chosen_bucket = best->bucket;
  }
  auto in_sweep = std::find_if(r.sweep.begin(), r.sweep.end(),
                               [&](const SweepRow& row) { return row.bucket == r.chosen_bucket; });
  if (in_sweep != r.sweep.end()) {
    r.chosen = in_sweep->per_seed.front();
  } else {
    r.chosen = measure_packed(bucket_order(sorted, r.chosen_bucket, o.micro_batch, o.seed),
                              packed, sources, o.accum, o.cost);
  }
  // The chosen order's widths, so scaling-fit --widths-from can weight by the sampler's shapes.
  const MicroBatchOrder chosen = bucket_order(sorted, r.chosen_bucket, o.micro_batch, o.seed);
  r.chosen_widths = micro_batch_widths(chosen, eff);
  return r;
}

}  // namespace tprobe::core
