// Attention-mask geometry of a Gemma-4 decoder in closed form per query row: the band each layer
// type allows, whether each attention path materialises a mask or keeps a maskless fast path, and
// the assertions that make `tprobe mask` a CI gate (docs/mask.md). No n×n matrix is ever built.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/step/attention_path.hpp"

namespace tprobe::core {

// Keys [first, last] one query row may attend to; empty when last < first.
struct KeyInterval {
  int64_t first = 0;
  int64_t last = -1;
  int64_t count() const { return last >= first ? last - first + 1 : 0; }
  bool empty() const { return last < first; }
  bool operator==(const KeyInterval& o) const {
    return (empty() && o.empty()) || (first == o.first && last == o.last);
  }
};

// The reference rule every path must reproduce (docs/mask.md, "the band"): key j is allowed for
// query i iff j <= i, j > i - window when window > 0, and j < real_length (right padding: keys at
// or past a row's real length are padding). Queries past real_length are padding rows; they keep
// the same rule, so on sliding layers they end up with no key at all once i - window + 1 >=
// real_length.
KeyInterval reference_keys(int64_t row, int64_t window, int64_t real_length);

// The rule sets whose mask decisions are reported: Hugging Face's sdpa path (as read from
// transformers 5.17, docs/mask.md: the reference the band is asserted on) and each engine path of
// the attention registry, whose rules are its entry's mask plan (core::MaskPlanKind).
struct MaskRules {
  std::optional<AttentionPath> path;  // nullopt: Hugging Face's sdpa ("hf-sdpa")
  static MaskRules hf() { return {}; }
  static MaskRules of(AttentionPath p) { return {p}; }
  MaskPlanKind plan() const;  // kHfSdpa, or the path's entry's
  bool operator==(const MaskRules& o) const { return path == o.path; }
  bool operator!=(const MaskRules& o) const { return !(*this == o); }
};
// "hf-sdpa", or the path's name.
std::string to_string(MaskRules rules);
std::optional<MaskRules> parse_mask_rules(std::string_view text);
std::vector<std::string> mask_rules_names();
// hf-sdpa, then every engine path in the registry's order.
std::vector<MaskRules> all_mask_rules();

// The shape of one forward: per-row real lengths (right padding to width) and whether a 2-D
// attention mask is passed at all.
struct MaskShape {
  int64_t width = 0;
  std::vector<int64_t> lengths;  // one per batch row, each in 1..width
  bool has_2d_mask = false;      // a 2-D mask is passed (all ones when no length < width)
  bool padded() const;           // some row shorter than width
};

// How one path computes one layer's attention, and the band its own parameters give.
struct LayerMaskPlan {
  bool explicit_mask = false;  // a 4-D mask tensor is materialised for this layer
  bool fast_path = false;      // maskless: is_causal SDPA or flash with window arguments
  std::string call;            // what runs, e.g. "sdpa(is_causal, enable_gqa)"
  std::string reason;          // the rule that decided
  // The band as the path parameterises it. A path that keeps the is_causal fast path with
  // padding present has masks_padded_keys = false: the padded keys are visible.
  bool causal = true;             // keys after the query excluded
  int64_t keys_before = -1;       // keys allowed before the query (window − 1); −1: unbounded
  bool masks_padded_keys = true;  // keys at or past a row's real length excluded
  bool computes_padded_queries = true;  // false: variable-length packing skips padded positions
  bool unmask_empty_rows = false;       // a row left with no key is let attend to every key
  std::string padded_query_rows;        // how rows with no allowed key are treated
};

// The decision of `rules` for one layer (its type, head_dim and kv heads; `query_heads` query
// heads) of a forward of `shape`. `window` is the layer's window (0 on full layers).
LayerMaskPlan plan_layer_mask(MaskPlanKind plan, const LayerGeometry& layer, int64_t window,
                              const MaskShape& shape, int64_t query_heads);

// The keys a plan lets query `row` see in a row of `real_length` real tokens padded to `width`.
KeyInterval plan_keys(const LayerMaskPlan& plan, int64_t row, int64_t real_length, int64_t width);

// The first (batch row, query row) where a plan's band differs from the reference, and how.
struct BandViolation {
  int64_t batch_row = 0;
  int64_t row = 0;
  std::string kind;  // future_key | outside_window | padded_key | missing_key
  KeyInterval got;
  KeyInterval expected;
};

// One plan checked over every query row of every batch row, closed form per row. Real query rows
// must match the reference exactly (violations); padded query rows (outputs never used) are
// compared too and their differences reported apart, since some paths treat them differently by
// design (variable-length packing, is_causal on right padding, un-masking empty rows).
struct BandCheck {
  int64_t rows_checked = 0;
  int64_t max_allowed_per_row = 0;          // over real query rows
  std::optional<int64_t> saturates_at_row;  // first real row reaching the maximum
  int64_t padded_query_rows = 0;            // query rows past their row's real length
  int64_t fully_masked_rows = 0;            // rows with no allowed key (padded queries only)
  std::optional<int64_t> first_fully_masked_row;
  int64_t violating_rows = 0;  // real query rows whose keys differ from the reference
  std::optional<BandViolation> first_violation;
  int64_t padded_rows_differing = 0;
  std::optional<BandViolation> first_padded_difference;
};

BandCheck check_band(const LayerMaskPlan& plan, int64_t window, const MaskShape& shape);

// What the probe asserts (CI gates); every assertion that fails makes the outcome "no".
struct MaskExpectations {
  std::optional<int64_t> window;  // sliding layers allow exactly this many keys once saturated
  // Layer types that must take the fast path; every other type must not. Empty vector: none.
  std::optional<std::vector<LayerType>> fast_path;
};

struct MaskRequest {
  int64_t width = 16384;
  int64_t batch = 2;
  std::vector<int64_t> lengths;          // empty: no 2-D mask, every row full width
  MaskRules rules = MaskRules::hf();  // the rules the assertions and `mask`/`fast_path` use
  MaskExpectations expect;
};

// One decoder layer: geometry and each rule set's decision.
struct MaskLayer {
  int64_t layer = 0;
  LayerType type = LayerType::kSliding;
  int64_t window = 0;  // 0 on full layers
  int64_t head_dim = 0;
  int64_t query_heads = 0;
  int64_t kv_heads = 0;
  std::vector<LayerMaskPlan> plans;  // one per all_mask_rules(), same order
};

// One (rule set, layer type) band: identical for every layer of that type.
struct MaskBand {
  MaskRules rules = MaskRules::hf();
  LayerType type = LayerType::kSliding;
  int64_t window = 0;
  int64_t first_layer = 0;  // the lowest layer index of this type (checks run on its geometry)
  LayerMaskPlan plan;
  BandCheck check;
};

struct MaskAssertion {
  std::string name;  // band | window | fast_path
  bool passed = true;
  std::string message;
  std::optional<int64_t> layer;
  std::optional<int64_t> batch_row;
  std::optional<int64_t> row;
};

struct MaskReport {
  std::string model;
  MaskRequest request;
  MaskShape shape;
  int64_t sliding_window = 0;
  std::vector<MaskLayer> layers;
  std::vector<MaskBand> bands;
  std::vector<MaskAssertion> assertions;
  bool ok = true;         // every assertion passed
  std::vector<Diagnostic> diagnostics;  // one error per failed assertion ("mask_<name>")
  Outcome outcome = Outcome::kOk;       // kNo when an assertion failed
  double geometry_s = 0;  // wall time of the row checks
};

// Throws tprobe::Error for a non-positive width or batch, a lengths list whose size is not
// batch, a length outside 1..width, a config without layers, or an expected window < 1.
MaskReport analyze_mask(const ModelConfig& config, const MaskRequest& request);

// The layer-type list of --expect-fast-path: "full", "sliding", "full,sliding" or "none".
// Throws UsageError naming the value otherwise.
std::vector<LayerType> parse_fast_path_types(const std::string& text);

}  // namespace tprobe::core
