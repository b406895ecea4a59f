// The MoE routing a measured step runs (`--routing`): the router's own top-k (computed), or an
// assignment forced onto the same total — balanced, or skewed by a Zipf law — keeping the gates'
// values, so that a step's time and memory can be set against the experts' imbalance. Torch-free:
// the engine asks for the assignment here and only scatters it into a tensor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tprobe::core {

enum class RoutingKind { kComputed, kBalanced, kZipf };

struct Routing {
  RoutingKind kind = RoutingKind::kComputed;
  double zipf_s = 0;  // kZipf: the exponent S > 0

  bool operator==(const Routing& o) const { return kind == o.kind && zipf_s == o.zipf_s; }
  bool operator!=(const Routing& o) const { return !(*this == o); }
};

// "computed", "balanced", "zipf:1.2" (the shortest spelling that reads back to the same S).
std::string to_string(const Routing& r);
// The inverse; anything else (an unknown name, zipf without S, S not a finite number in
// (0, kMaxZipfS]) is a UsageError naming `flag`.
Routing parse_routing(std::string_view text, std::string_view flag);
inline constexpr double kMaxZipfS = 16;

// Each expert's share of the tokens under `r`, as the probability that one token's k distinct
// experts include it (so each share is at most 1 and they sum to `top_k`). Balanced: k / E each.
// Zipf:S: proportional to (e + 1)^-S for expert e = 0, 1, …, capped at 1 with the cap's excess
// spread over the others in proportion (water-filling: the one distribution that is "as Zipf as k
// distinct experts per token allow"). Computed has none: an empty vector.
std::vector<double> routing_shares(int64_t experts, int64_t top_k, const Routing& r);

// The forced top-k: `tokens` × `top_k` expert ids, row-major (token t's choices at t·k … t·k+k−1),
// k distinct experts per token. Expert e gets round(tokens · share_e) of the tokens × k slots
// (largest remainder, ties to the lower expert; balanced puts every expert within one token of the
// others), laid out so that a token never meets the same expert twice: the experts' runs of slots
// in expert order, slot i going to token i mod tokens (a run is never longer than `tokens`).
// Throws Error for top_k outside 1..experts or a computed routing.
std::vector<int32_t> forced_assignment(int64_t tokens, int64_t experts, int64_t top_k,
                                       const Routing& r);

// Summary of one layer's tokens per expert: max / mean, the coefficient of variation (population
// standard deviation / mean) and the experts with none. An empty or all-zero count gives zeros.
struct LoadSummary {
  double max_over_mean = 0;
  double cv = 0;
  std::vector<int64_t> zero_experts;
};
LoadSummary summarize_load(const std::vector<int64_t>& tokens_per_expert);

}  // namespace tprobe::core
