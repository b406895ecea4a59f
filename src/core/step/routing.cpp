#include "tprobe/core/step/routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

std::string to_string(const Routing& r) {
  switch (r.kind) {
    case RoutingKind::kComputed: return "computed";
    case RoutingKind::kBalanced: return "balanced";
    case RoutingKind::kZipf: return fmt::format("zipf:{}", r.zipf_s);
  }
  return "computed";
}

Routing parse_routing(std::string_view text, std::string_view flag) {
  Routing r;
  if (text == "computed") return r;
  if (text == "balanced") {
    r.kind = RoutingKind::kBalanced;
    return r;
  }
  constexpr std::string_view kZipf = "zipf:";
  if (text.substr(0, kZipf.size()) == kZipf) {
    const std::string_view s = text.substr(kZipf.size());
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) ||
        v <= 0 || v > kMaxZipfS) {
      fail_usage("{} '{}': zipf:S needs S, a number in (0, {}]", flag, text, kMaxZipfS);
    }
    r.kind = RoutingKind::kZipf;
    r.zipf_s = v;
    return r;
  }
  fail_usage("{} '{}': expected computed, balanced or zipf:S (S > 0)", flag, text);
}

std::vector<double> routing_shares(int64_t experts, int64_t top_k, const Routing& r) {
  if (r.kind == RoutingKind::kComputed) return {};
  if (experts < 1 || top_k < 1 || top_k > experts)
    fail("routing: top-{} of {} experts: k must be in 1..{}", top_k, experts, experts);
  const auto n = static_cast<std::size_t>(experts);
  const double k = static_cast<double>(top_k);
  if (r.kind == RoutingKind::kBalanced) return std::vector<double>(n, k / static_cast<double>(n));
  std::vector<double> w(n);
  for (std::size_t e = 0; e < n; ++e) w[e] = std::pow(static_cast<double>(e + 1), -r.zipf_s);
  // Water-filling: the weights fall with e, so the capped experts are a prefix. With the first
  // `capped` at 1, the rest share k − capped in proportion; grow the prefix while that pushes the
  // next one past 1.
  std::vector<double> share(n, 0);
  std::size_t capped = 0;
  for (;;) {
    double rest = 0;
    for (std::size_t e = capped; e < n; ++e) rest += w[e];
    const double scale = (k - static_cast<double>(capped)) / rest;
    if (capped < n && w[capped] * scale > 1) {
      ++capped;
      continue;
    }
    for (std::size_t e = 0; e < n; ++e) share[e] = e < capped ? 1.0 : w[e] * scale;
    return share;
  }
}

std::vector<int32_t> forced_assignment(int64_t tokens, int64_t experts, int64_t top_k,
                                       const Routing& r) {
  if (r.kind == RoutingKind::kComputed) fail("routing: the computed routing forces nothing");
  if (tokens < 1) fail("routing: {} tokens", tokens);
  const std::vector<double> share = routing_shares(experts, top_k, r);
  const int64_t slots = tokens * top_k;
  // Largest remainder: floors first, then one more to the largest fractions (lower expert first).
  std::vector<int64_t> quota(share.size());
  std::vector<std::pair<double, std::size_t>> frac;
  int64_t given = 0;
  for (std::size_t e = 0; e < share.size(); ++e) {
    const double want = static_cast<double>(tokens) * share[e];
    quota[e] = std::min<int64_t>(tokens, static_cast<int64_t>(std::floor(want)));
    given += quota[e];
    frac.emplace_back(want - static_cast<double>(quota[e]), e);
  }
  std::stable_sort(frac.begin(), frac.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; given < slots; i = (i + 1) % frac.size()) {
    const std::size_t e = frac[i].second;
    if (quota[e] < tokens) {
      ++quota[e];
      ++given;
    }
  }
  std::vector<int32_t> out(static_cast<std::size_t>(slots));
  int64_t slot = 0;
  for (std::size_t e = 0; e < quota.size(); ++e) {
    for (int64_t q = 0; q < quota[e]; ++q, ++slot) {
      const int64_t token = slot % tokens, choice = slot / tokens;
      out[static_cast<std::size_t>(token * top_k + choice)] = static_cast<int32_t>(e);
    }
  }
  return out;
}

LoadSummary summarize_load(const std::vector<int64_t>& tokens_per_expert) {
  LoadSummary s;
  if (tokens_per_expert.empty()) return s;
  const double n = static_cast<double>(tokens_per_expert.size());
  double sum = 0;
  for (int64_t t : tokens_per_expert) sum += static_cast<double>(t);
  for (std::size_t e = 0; e < tokens_per_expert.size(); ++e) {
    if (tokens_per_expert[e] == 0) s.zero_experts.push_back(static_cast<int64_t>(e));
  }
  if (sum <= 0) return s;
  const double mean = sum / n;
  double var = 0;
  for (int64_t t : tokens_per_expert) var += (static_cast<double>(t) - mean) * (static_cast<double>(t) - mean);
  s.cv = std::sqrt(var / n) / mean;
  s.max_over_mean =
      static_cast<double>(*std::max_element(tokens_per_expert.begin(), tokens_per_expert.end())) /
      mean;
  return s;
}

}  // namespace tprobe::core
