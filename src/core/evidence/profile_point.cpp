// profile's points and sweep facts (profile_point.hpp): the members the tables' custom fields
// read, each with the checks that tie it to the fields read before it.
#include "tprobe/core/evidence/profile_point.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tprobe/core/base/median.hpp"

namespace tprobe::core {

namespace jr = json_read;

bool StepPoint::padded() const {
  return std::any_of(lengths.begin(), lengths.end(), [&](int64_t l) { return l < width; });
}

int64_t StepPoint::real_tokens() const {
  if (lengths.empty()) return batch * width;
  int64_t n = 0;
  for (int64_t l : lengths) n += l;
  return n;
}

const char* to_string(PointOutcome outcome) {
  switch (outcome) {
    case PointOutcome::kOk:
      return "ok";
    case PointOutcome::kOom:
      return "oom";
    case PointOutcome::kError:
      return "error";
  }
  return "?";
}

Json series_stats_json(const std::vector<double>& samples) {
  if (samples.empty()) return nullptr;
  const double med = median(samples);
  const double lo = *std::min_element(samples.begin(), samples.end());
  const double hi = *std::max_element(samples.begin(), samples.end());
  return {{"median_s", med},
          {"min_s", lo},
          {"max_s", hi},
          {"spread_ratio", med > 0 ? (hi - lo) / med : 0.0}};
}

double median_step_s(const PointFigures& p) { return median(p.step_s); }

namespace evidence_detail {
namespace {

// A width or batch: positive and at most 2^31, so batch × width (padded_tokens) cannot overflow.
constexpr int64_t kMaxShape = int64_t{1} << 31;

std::string at(const std::string& where, const char* key) {
  return fmt::format("{}: field '{}'", where, key);
}

// A field written as null exactly when `null_expected`.
void expect_null_when(const Json& v, const std::string& where, const char* key, bool null_expected,
                      const char* why) {
  if (v.is_null() != null_expected)
    fail("{}: field '{}' is {} but {}", where, key, v.is_null() ? "null" : "set", why);
}

}  // namespace

void read_shape(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  (std::string(key) == "batch" ? p.point.batch : p.point.width) =
      jr::element_integer(v, at(where, key), 1, kMaxShape);
}

void read_lengths(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  if (v.is_null()) return;
  if (!v.is_array()) fail("{} must be an array or null", at(where, key));
  for (std::size_t i = 0; i < v.size(); ++i)
    p.point.lengths.push_back(
        jr::element_integer(v[i], fmt::format("{} {}[{}]", where, key, i), 0, p.point.width));
  // Written as null when every row is real, so an array names one length per row.
  if (static_cast<int64_t>(p.point.lengths.size()) != p.point.batch)
    fail("{} has {} values for batch {}", at(where, key), p.point.lengths.size(), p.point.batch);
}

void read_outcome(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  for (PointOutcome o : {PointOutcome::kOk, PointOutcome::kOom, PointOutcome::kError}) {
    if (v.is_string() && v.get<std::string>() == to_string(o)) {
      p.outcome = o;
      return;
    }
  }
  fail("{} must be one of ok, oom, error, got {}", at(where, key), v.dump());
}

// A series' stats: written from its samples, so only checked for being there exactly when the
// series has samples.
void read_stats(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  const std::string k = key;
  const std::vector<double>& series = k == "step"      ? p.step_s
                                      : k == "forward" ? p.forward_s
                                      : k == "loss"    ? p.loss_s
                                      : k == "backward" ? p.backward_s
                                                        : p.optimizer_s;
  if (v.is_null() != series.empty())
    fail("{} is {} but its series has {} samples", at(where, key), v.is_null() ? "null" : "set",
         series.size());
  if (v.is_null()) return;
  for (const char* s : {"median_s", "min_s", "max_s", "spread_ratio"}) jr::number(v, s, where + "." + key);
}

void read_optimizer(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  p.optimizer_s = evidence::detail::decode<std::vector<double>>(v, where + "." + key);
  if (!p.optimizer_s.empty() && p.optimizer_s.size() != p.step_s.size())
    fail("{} has {} samples but 'samples_s' has {}", at(where, key), p.optimizer_s.size(),
         p.step_s.size());
}

// Both peaks are written, or neither (memory_measured false: the CPU has no caching allocator).
void read_peak(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  const bool allocated = std::string(key) == "peak_allocated_bytes";
  if (allocated) {
    p.memory_measured = !v.is_null();
  } else if (v.is_null() == p.memory_measured) {
    fail("{} is {} but 'peak_allocated_bytes' is {}", at(where, key), v.is_null() ? "null" : "set",
         p.memory_measured ? "set" : "null");
  }
  if (v.is_null()) return;
  (allocated ? p.peak_allocated_bytes : p.peak_reserved_bytes) =
      jr::element_integer(v, at(where, key), 0);
}

// Only an ok point has a loss; a loss that was not finite (a diverged step) is null once the
// evidence is written, and still the non-finite double in a document not yet written.
void read_loss(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  const bool none = v.is_null() || (v.is_number() && !std::isfinite(v.get<double>()));
  if (p.outcome == PointOutcome::kOk) {
    p.loss_value = none ? std::numeric_limits<double>::quiet_NaN()
                        : jr::element_number(v, at(where, key));
  } else if (!none) {
    fail("{} is set but the outcome is '{}'", at(where, key), to_string(p.outcome));
  }
}

void read_traced_step(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  expect_null_when(v, where, key, !p.traced, "it is written for a traced point only");
  if (p.traced) p.traced_step_s = jr::element_number(v, at(where, key));
}

// Written only where positive (the first traced point's priming step).
void read_priming(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  if (v.is_null()) return;
  p.trace_priming_step_s = jr::element_number(v, at(where, key));
  if (!(p.trace_priming_step_s > 0))
    fail("{} must be positive or null, got {}", at(where, key), p.trace_priming_step_s);
}

void read_overhead(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  expect_null_when(v, where, key, !(p.traced && !p.step_s.empty()),
                   "it is written for a traced point with step samples only");
  if (!v.is_null()) jr::element_number(v, at(where, key));
}

void read_tokens(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  if (!v.is_null()) p.point.tokens = evidence::from_json<PointTokens>(v, where + "." + key);
}

void read_routed(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  if (!v.is_null()) p.expert_load.routed_per_layer = jr::element_integer(v, at(where, key), 0);
}

void read_expert_load(PointFigures& p, const Json& v, const std::string& where, const char* key) {
  if (v.is_null()) return;
  p.expert_load.layers =
      evidence::detail::decode<std::vector<ExpertLoadLayer>>(v, where + "." + key);
  for (std::size_t i = 0; i < p.expert_load.layers.size(); ++i) {
    int64_t sum = 0;
    for (int64_t t : p.expert_load.layers[i].tokens) {
      if (t < 0) fail("{} {}[{}].tokens: a negative count ({})", where, key, i, t);
      sum += t;
    }
    if (sum != p.expert_load.routed_per_layer)
      fail("{} {}[{}].tokens: sum to {}, but the point routed {} per layer", where, key, i, sum,
           p.expert_load.routed_per_layer);
  }
}

void read_init_s(StepFigures& s, const Json& v, const std::string& where, const char* key) {
  s.init_s = jr::element_number(v, at(where, key));
  if (s.init_s < 0) fail("{}.{}: negative", where, key);
}

void read_load(StepFigures& s, const Json& v, const std::string& where, const char* key) {
  if (!v.is_null()) s.load = evidence::from_json<LoadFigures>(v, where + "." + key);
}

void read_interrupted_at(StepFigures& s, const Json& v, const std::string& where, const char* key) {
  if (v.is_null()) return;
  if (!v.is_string()) fail("{} must be a string", at(where, key));
  s.interrupted_at = v.get<std::string>();
  if (s.interrupted_at.empty()) fail("{}.{}: empty (written null when there is none)", where, key);
  if (!s.interrupted) fail("{}.{}: set but interrupted is false", where, key);
}

}  // namespace evidence_detail
}  // namespace tprobe::core
