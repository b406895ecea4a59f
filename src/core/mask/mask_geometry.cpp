// Closed-form mask geometry per query row and each path's mask decision (docs/mask.md).
#include "tprobe/core/mask/mask_geometry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/step/attention_path.hpp"

namespace tprobe::core {
namespace {

// HF's sdpa path passes enable_gqa=True instead of repeating K/V only when no mask is passed, and
// (transformers 5.17, docs/mask.md) only up to this head_dim: at 512 enable_gqa fell back to the
// math kernel. tprobe's sdpa path copies the rule (src/model/torch_compat.cpp).
constexpr int64_t kGqaMaxHeadDim = kFusedAttentionMaxHeadDim;
// The flash kernels refuse head_dim above kFusedAttentionMaxHeadDim; tprobe's flash-window path
// sends such layers to its blockwise-GEMM attention, in query blocks of kBlockwiseBlock positions
// (both in the attention registry, core/gemma4/attention_path.hpp).
constexpr int64_t kFlashMaxHeadDim = kFusedAttentionMaxHeadDim;

const char* kFullyMaskedSdpa =
    "kept with no allowed key in the bool mask; what SDPA returns there depends on the backend "
    "(the backend table records it)";
const char* kFullyMaskedEager =
    "every score gets finfo(dtype).min: the fp32 softmax spreads uniform weight over all keys "
    "(finite, meaningless)";
const char* kNotComputed = "not computed: variable-length packing skips padded positions";
const char* kUnmasked =
    "rows left with no key are let attend to every key (so no SDPA kernel returns NaN there)";
const char* kBlockwiseZeros =
    "not computed: queries past a row's length get zero output and no gradient, keys past it "
    "are masked";

std::string gqa_call(const LayerGeometry& layer, int64_t query_heads, bool gqa_allowed) {
  if (layer.num_kv_heads >= query_heads) return "";
  return gqa_allowed ? ", enable_gqa" : ", repeat_kv";
}

LayerMaskPlan sdpa_plan(const LayerGeometry& layer, int64_t query_heads, int64_t window,
                        const MaskShape& shape, bool hf) {
  LayerMaskPlan p;
  p.keys_before = layer.type == LayerType::kSliding && window > 0 ? window - 1 : -1;
  const bool sliding = layer.type == LayerType::kSliding && window > 0;
  const bool skip = !shape.padded() && (!sliding || shape.width < window);
  p.padded_query_rows = kFullyMaskedSdpa;
  if (skip) {
    p.fast_path = true;
    p.masks_padded_keys = true;  // nothing is padded
    const bool gqa = layer.head_dim <= kGqaMaxHeadDim;
    p.call = fmt::format("sdpa(is_causal{})", gqa_call(layer, query_heads, gqa));
    p.reason = sliding ? fmt::format("no padding, width {} < window {}", shape.width, window)
                       : (shape.has_2d_mask ? "all-ones mask" : "no padding mask");
    if (!hf && gqa && layer.num_kv_heads < query_heads) p.call += " (libtorch >= 2.5)";
    return p;
  }
  p.explicit_mask = true;
  p.call = fmt::format("sdpa(bool mask [B,1,S,S]{})", gqa_call(layer, query_heads, false));
  if (shape.padded()) {
    p.reason = "padding present: the key-padding mask must be materialised";
    // tprobe's engine (src/model/torch_compat.cpp) un-masks rows left empty on sliding layers;
    // transformers 5.17 does so only for torch < 2.5 (docs/mask.md).
    if (!hf && sliding) {
      p.unmask_empty_rows = true;
      p.padded_query_rows = kUnmasked;
    }
  } else {
    p.reason = fmt::format("sliding layer and width {} >= window {}", shape.width, window);
  }
  return p;
}

}  // namespace

KeyInterval reference_keys(int64_t row, int64_t window, int64_t real_length) {
  KeyInterval k;
  k.first = window > 0 ? std::max<int64_t>(0, row - window + 1) : 0;
  k.last = std::min(row, real_length - 1);
  return k;
}

MaskPlanKind MaskRules::plan() const {
  return path ? attention_info(*path).mask : MaskPlanKind::kHfSdpa;
}

std::string to_string(MaskRules rules) {
  return rules.path ? to_string(*rules.path) : "hf-sdpa";
}

std::vector<MaskRules> all_mask_rules() {
  std::vector<MaskRules> out = {MaskRules::hf()};
  for (const AttentionPathInfo& i : attention_registry()) {
    if (i.engine) out.push_back(MaskRules::of(i.path));
  }
  return out;
}

std::vector<std::string> mask_rules_names() {
  std::vector<std::string> names;
  for (MaskRules r : all_mask_rules()) names.emplace_back(to_string(r));
  return names;
}

std::optional<MaskRules> parse_mask_rules(std::string_view text) {
  for (MaskRules r : all_mask_rules()) {
    if (text == to_string(r)) return r;
  }
  return std::nullopt;
}

bool MaskShape::padded() const {
  return std::any_of(lengths.begin(), lengths.end(), [&](int64_t l) { return l < width; });
}

LayerMaskPlan plan_layer_mask(MaskPlanKind rules, const LayerGeometry& layer, int64_t window,
                              const MaskShape& shape, int64_t query_heads) {
  const int64_t heads = query_heads;
  const bool sliding = layer.type == LayerType::kSliding && window > 0;
  switch (rules) {
    case MaskPlanKind::kHfSdpa:
      return sdpa_plan(layer, heads, window, shape, /*hf=*/true);
    case MaskPlanKind::kSdpa:
      return sdpa_plan(layer, heads, window, shape, /*hf=*/false);
    case MaskPlanKind::kMasked: {
      LayerMaskPlan p;
      p.explicit_mask = true;
      p.keys_before = sliding ? window - 1 : -1;
      p.call = "sdpa(bool mask [B,1,S,S])";
      p.reason = "an explicit mask on every layer";
      p.padded_query_rows = kFullyMaskedSdpa;
      return p;
    }
    case MaskPlanKind::kEager: {
      LayerMaskPlan p;
      p.explicit_mask = true;
      p.keys_before = sliding ? window - 1 : -1;
      p.call = "eager(additive mask [B,1,S,S], repeat_kv, fp32 softmax)";
      p.reason = "eager always materialises the mask";
      p.padded_query_rows = kFullyMaskedEager;
      return p;
    }
    case MaskPlanKind::kBlockwise:
    case MaskPlanKind::kFlashVarlen: {
      if (rules == MaskPlanKind::kBlockwise || layer.head_dim > kFlashMaxHeadDim) {
        // Flash refuses the head_dim: the blockwise-GEMM path (src/model/blockwise_attention.cpp)
        // takes the window and the lengths as arguments and builds each block's mask itself.
        LayerMaskPlan p;
        p.fast_path = true;
        p.keys_before = sliding ? window - 1 : -1;
        p.computes_padded_queries = !shape.padded();
        p.padded_query_rows = kBlockwiseZeros;
        p.call = fmt::format("blockwise_gemm(block={}{})", kBlockwiseBlock,
                             sliding ? fmt::format(", window={}", window) : std::string());
        if (shape.padded()) p.call += " with the lengths";
        p.reason = rules == MaskPlanKind::kBlockwise
                       ? std::string("blockwise GEMMs on every layer; the band and the lengths are "
                                     "arguments, no mask tensor")
                       : fmt::format(
                             "head_dim {} > {} (flash refuses it): blockwise GEMMs; the band and "
                             "the lengths are arguments, no mask tensor",
                             layer.head_dim, kFlashMaxHeadDim);
        return p;
      }
      LayerMaskPlan p;
      p.fast_path = true;
      p.keys_before = sliding ? window - 1 : -1;
      p.computes_padded_queries = !shape.padded();
      p.padded_query_rows = kNotComputed;
      p.call = sliding ? fmt::format("flash_varlen(window_left={}, window_right=0)", window - 1)
                       : "flash_varlen(causal)";
      if (shape.padded()) p.call += " over cum_seq from the lengths";
      p.reason = "flash takes the window as arguments: no mask tensor";
      return p;
    }
  }
  fail("unknown mask rules");
}

KeyInterval plan_keys(const LayerMaskPlan& plan, int64_t row, int64_t real_length, int64_t width) {
  KeyInterval k;
  k.first = plan.keys_before < 0 ? 0 : std::max<int64_t>(0, row - plan.keys_before);
  k.last = plan.causal ? row : width - 1;
  k.last = std::min(k.last, plan.masks_padded_keys ? real_length - 1 : width - 1);
  if (k.empty() && plan.unmask_empty_rows) k = KeyInterval{0, width - 1};
  return k;
}

namespace {

std::string violation_kind(const KeyInterval& got, const KeyInterval& expected, int64_t row,
                           int64_t real_length) {
  if (got.count() > 0) {
    if (got.last > row) return "future_key";
    if (got.last >= real_length) return "padded_key";
    if (got.first < expected.first) return "outside_window";
  }
  return "missing_key";
}

}  // namespace

BandCheck check_band(const LayerMaskPlan& plan, int64_t window, const MaskShape& shape) {
  BandCheck c;
  const int64_t width = shape.width;
  // Rows of equal length give equal results: check each distinct length once, weight the counts.
  std::vector<std::pair<int64_t, int64_t>> distinct;  // (length, first batch row)
  std::vector<int64_t> weight;
  for (size_t b = 0; b < shape.lengths.size(); ++b) {
    size_t k = 0;
    while (k < distinct.size() && distinct[k].first != shape.lengths[b]) ++k;
    if (k == distinct.size()) {
      distinct.emplace_back(shape.lengths[b], static_cast<int64_t>(b));
      weight.push_back(0);
    }
    ++weight[k];
  }
  for (size_t d = 0; d < distinct.size(); ++d) {
    const int64_t len = distinct[d].first;
    const int64_t b = distinct[d].second;
    const int64_t n_rows = weight[d];
    int64_t violating = 0, padded_diff = 0, fully = 0;
    for (int64_t i = 0; i < width; ++i) {
      const bool padded_query = i >= len;
      if (padded_query && !plan.computes_padded_queries) continue;
      // The plan's keys (plan_keys) and the reference's (reference_keys), inlined for speed.
      int64_t g_first = plan.keys_before < 0 ? 0 : std::max<int64_t>(0, i - plan.keys_before);
      int64_t g_last =
          std::min(plan.causal ? i : width - 1, plan.masks_padded_keys ? len - 1 : width - 1);
      if (g_last < g_first && plan.unmask_empty_rows) {
        g_first = 0;
        g_last = width - 1;
      }
      const int64_t e_first = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
      const int64_t e_last = std::min(i, len - 1);
      const bool g_empty = g_last < g_first, e_empty = e_last < e_first;
      const bool same = (g_empty && e_empty) || (g_first == e_first && g_last == e_last);
      if (!same) {
        const KeyInterval got{g_first, g_last}, expected{e_first, e_last};
        const BandViolation v{b, i, violation_kind(got, expected, i, len), got, expected};
        if (!padded_query) {
          if (violating++ == 0 && (!c.first_violation || i < c.first_violation->row)) {
            c.first_violation = v;
          }
        } else if (padded_diff++ == 0 &&
                   (!c.first_padded_difference || i < c.first_padded_difference->row)) {
          c.first_padded_difference = v;
        }
      }
      const int64_t n = g_empty ? 0 : g_last - g_first + 1;
      if (!padded_query) {
        if (n > c.max_allowed_per_row) {
          c.max_allowed_per_row = n;
          c.saturates_at_row = i;
        } else if (n == c.max_allowed_per_row && c.saturates_at_row && i < *c.saturates_at_row) {
          c.saturates_at_row = i;
        }
      } else if (n == 0) {
        ++fully;
        if (!c.first_fully_masked_row || i < *c.first_fully_masked_row)
          c.first_fully_masked_row = i;
      }
    }
    const int64_t padded_rows = std::max<int64_t>(0, width - len);
    const int64_t checked = plan.computes_padded_queries ? width : std::min(width, len);
    c.rows_checked += n_rows * checked;
    c.padded_query_rows += n_rows * padded_rows;
    c.violating_rows += n_rows * violating;
    c.padded_rows_differing += n_rows * padded_diff;
    c.fully_masked_rows += n_rows * fully;
  }
  return c;
}

std::vector<LayerType> parse_fast_path_types(const std::string& text) {
  if (text == "none") return {};
  std::vector<LayerType> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(start, end - start);
    LayerType t;
    if (part == "full") {
      t = LayerType::kFull;
    } else if (part == "sliding") {
      t = LayerType::kSliding;
    } else {
      fail_usage("fast-path layer types '{}': expected full, sliding, full,sliding or none", text);
    }
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    start = end + 1;
  }
  return out;
}

// Size: the bands, the assertions and the plan per path over one walk of the query rows.
MaskReport analyze_mask(const ModelConfig& config, const MaskRequest& request) {
  // The geometry walks every query row (closed form per row), so the width is bounded: 4M
  // tokens is 16× Gemma-4's longest context and takes seconds.
  constexpr int64_t kMaxWidth = int64_t{1} << 22;
  if (request.width < 1) fail_usage("mask: width {} must be at least 1", request.width);
  if (request.width > kMaxWidth) {
    fail_usage("mask: width {} is above {} tokens", request.width, kMaxWidth);
  }
  if (request.batch < 1) fail_usage("mask: batch {} must be at least 1", request.batch);
  if (request.batch > 65536) fail_usage("mask: batch {} is above 65,536", request.batch);
  if (config.layer_types.empty()) fail("model '{}' has no layers", config.name);
  if (!request.lengths.empty() && static_cast<int64_t>(request.lengths.size()) != request.batch) {
    fail_usage("mask: {} lengths for batch {}: give one real length per row", request.lengths.size(),
         request.batch);
  }
  for (int64_t l : request.lengths) {
    if (l < 1 || l > request.width) {
      fail_usage("mask: length {} is outside 1..{} (the width)", l, request.width);
    }
  }
  if (request.expect.window && *request.expect.window < 1) {
    fail_usage("mask: expected window {} must be at least 1", *request.expect.window);
  }
  const auto t0 = std::chrono::steady_clock::now();
  MaskReport r;
  r.model = config.name;
  r.request = request;
  r.sliding_window = config.sliding_window;
  r.shape.width = request.width;
  r.shape.has_2d_mask = !request.lengths.empty();
  r.shape.lengths = request.lengths.empty()
                        ? std::vector<int64_t>(static_cast<size_t>(request.batch), request.width)
                        : request.lengths;
  const std::vector<MaskRules> rules = all_mask_rules();
  const size_t selected =
      static_cast<size_t>(std::find(rules.begin(), rules.end(), request.rules) - rules.begin());

  for (int64_t i = 0; i < static_cast<int64_t>(config.layer_types.size()); ++i) {
    const LayerGeometry g = config.layer(i);
    MaskLayer l;
    l.layer = i;
    l.type = g.type;
    l.window = g.type == LayerType::kSliding ? config.sliding_window : 0;
    l.head_dim = g.head_dim;
    l.query_heads = config.num_attention_heads;
    l.kv_heads = g.num_kv_heads;
    for (MaskRules rs : rules) {
      l.plans.push_back(
          plan_layer_mask(rs.plan(), g, l.window, r.shape, config.num_attention_heads));
    }
    r.layers.push_back(std::move(l));
  }
  // One band per (rules, layer type): the first layer of the type stands for the rest, since the
  // band depends only on the type's window (head_dim changes the call, not the band).
  for (size_t ri = 0; ri < rules.size(); ++ri) {
    for (LayerType t : {LayerType::kSliding, LayerType::kFull}) {
      auto it = std::find_if(r.layers.begin(), r.layers.end(),
                             [&](const MaskLayer& l) { return l.type == t; });
      if (it == r.layers.end()) continue;
      MaskBand band;
      band.rules = rules[ri];
      band.type = t;
      band.window = it->window;
      band.first_layer = it->layer;
      band.plan = it->plans[ri];
      band.check = check_band(band.plan, band.window, r.shape);
      r.bands.push_back(std::move(band));
    }
  }
  // Band assertions: the selected rules must reproduce the reference band on every row.
  for (const MaskBand& b : r.bands) {
    if (b.rules != request.rules) continue;
    MaskAssertion a;
    a.name = "band";
    a.layer = b.first_layer;
    if (b.check.first_violation) {
      const BandViolation& v = *b.check.first_violation;
      a.passed = false;
      a.batch_row = v.batch_row;
      a.row = v.row;
      a.message = fmt::format(
          "{} layer {} ({}): batch row {} query row {} allows keys [{}, {}] ({} keys), expected "
          "[{}, {}] ({} keys): {} ({} rows wrong)",
          to_string(b.rules), b.first_layer, to_string(b.type), v.batch_row, v.row, v.got.first,
          v.got.last, v.got.count(), v.expected.first, v.expected.last, v.expected.count(), v.kind,
          b.check.violating_rows);
    } else {
      a.message = fmt::format("{} {} layers: every real query row matches the reference band",
                              to_string(b.rules), to_string(b.type));
      if (b.check.padded_rows_differing > 0) {
        a.message += fmt::format(" ({} padded query rows treated otherwise: {})",
                                 b.check.padded_rows_differing, b.plan.padded_query_rows);
      }
    }
    r.assertions.push_back(std::move(a));
  }
  if (request.expect.window) {
    const int64_t n = *request.expect.window;
    MaskAssertion a;
    a.name = "window";
    auto it = std::find_if(r.bands.begin(), r.bands.end(), [&](const MaskBand& b) {
      return b.rules == request.rules && b.type == LayerType::kSliding;
    });
    if (it == r.bands.end()) {
      a.passed = false;
      a.message =
          fmt::format("expected window {}, but model '{}' has no sliding layers", n, config.name);
    } else {
      a.layer = it->first_layer;
      // Each real row of the first batch row must allow min(i + 1, n) keys.
      const int64_t len = r.shape.lengths[0];
      for (int64_t i = 0; i < len; ++i) {
        const int64_t got = plan_keys(it->plan, i, len, r.shape.width).count();
        const int64_t want = std::min(i + 1, n);
        if (got != want) {
          a.passed = false;
          a.batch_row = 0;
          a.row = i;
          a.message = fmt::format(
              "{} layer {} (sliding_attention): query row {} allows {} keys, expected {} for "
              "window {} (config sliding_window {})",
              to_string(request.rules), it->first_layer, i, got, want, n, config.sliding_window);
          break;
        }
      }
      if (a.passed && it->window != n) {
        a.passed = false;
        a.message = fmt::format(
            "config sliding_window {} != expected {}; width {} is too narrow to see the "
            "difference in the rows",
            it->window, n, r.shape.width);
      }
      if (a.passed) {
        a.message = fmt::format("sliding layers allow exactly {} keys from row {} on", n, n - 1);
        if (len < n) a.message = fmt::format("sliding window {} (rows shorter than it)", n);
      }
    }
    r.assertions.push_back(std::move(a));
  }
  if (request.expect.fast_path) {
    const auto& want_types = *request.expect.fast_path;
    MaskAssertion a;
    a.name = "fast_path";
    int64_t failing = 0;
    for (const MaskLayer& l : r.layers) {
      const bool want = std::find(want_types.begin(), want_types.end(), l.type) != want_types.end();
      const LayerMaskPlan& p = l.plans[selected];
      if (p.fast_path == want) continue;
      if (failing++ > 0) continue;
      a.passed = false;
      a.layer = l.layer;
      if (want) {
        // The first row where the band differs from plain causal: what is_causal would get wrong.
        std::optional<int64_t> row;
        std::optional<int64_t> brow;
        for (size_t b = 0; b < r.shape.lengths.size(); ++b) {
          int64_t first = r.shape.width;
          if (l.window > 0 && l.window < r.shape.width) first = l.window;
          if (r.shape.lengths[b] < r.shape.width) first = std::min(first, r.shape.lengths[b]);
          if (first < r.shape.width && (!row || first < *row)) {
            row = first;
            brow = static_cast<int64_t>(b);
          }
        }
        a.row = row;
        a.batch_row = brow;
        a.message =
            fmt::format("{} layer {} ({}) gets an explicit mask, expected the fast path: {}",
                        to_string(request.rules), l.layer, to_string(l.type), p.reason);
        if (row) {
          a.message += fmt::format(" (is_causal would be wrong from batch row {} query row {} on)",
                                   *brow, *row);
        }
      } else {
        a.message =
            fmt::format("{} layer {} ({}) keeps the fast path ({}), expected an explicit mask",
                        to_string(request.rules), l.layer, to_string(l.type), p.call);
      }
    }
    if (failing > 1) a.message += fmt::format("; {} layers disagree in all", failing);
    if (a.passed) a.message = "every layer's fast-path decision is as expected";
    r.assertions.push_back(std::move(a));
  }
  r.ok = std::all_of(r.assertions.begin(), r.assertions.end(),
                     [](const MaskAssertion& a) { return a.passed; });
  for (const MaskAssertion& a : r.assertions) {
    if (!a.passed) r.diagnostics.push_back({Severity::kError, "mask_" + a.name, a.message});
  }
  r.outcome = r.ok ? Outcome::kOk : Outcome::kNo;
  r.geometry_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tprobe::core
