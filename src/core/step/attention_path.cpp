// The attention registry (attention_path.hpp): every path's name, requirement and rules.
#include "tprobe/core/step/attention_path.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

const std::vector<AttentionPathInfo>& attention_registry() {
  static const std::vector<AttentionPathInfo> r = [] {
    std::vector<AttentionPathInfo> v(5);
    AttentionPathInfo& eager = v[0];
    eager.path = AttentionPath::kEager;
    eager.name = "eager";
    eager.summary = "HF's eager attention: scores in full, additive mask, fp32 softmax";
    eager.mask = MaskPlanKind::kEager;
    eager.lever = false;  // the slow reference
    AttentionPathInfo& sdpa = v[1];
    sdpa.path = AttentionPath::kSdpa;
    sdpa.name = "sdpa";
    sdpa.summary = "scaled_dot_product_attention as HF 5.17 calls it (libtorch >= 2.0)";
    sdpa.needs.torch_major = 2;
    sdpa.needs.api = "scaled_dot_product_attention";
    sdpa.sliding_pairs = sdpa.full_pairs = PairRule::kHfSdpa;
    sdpa.mask = MaskPlanKind::kSdpa;
    AttentionPathInfo& masked = v[2];
    masked.path = AttentionPath::kSdpaMasked;
    masked.name = "sdpa-masked";
    masked.summary =
        "SDPA with an explicit mask on every layer (a FLOP rule; the engine does not run it)";
    masked.engine = false;
    masked.needs.torch_major = 2;
    masked.needs.api = "scaled_dot_product_attention";
    masked.mask = MaskPlanKind::kMasked;
    masked.sliding_pairs = masked.full_pairs = PairRule::kDense;
    masked.lever = false;
    AttentionPathInfo& flash = v[3];
    flash.path = AttentionPath::kFlashWindow;
    flash.name = "flash-window";
    flash.summary =
        "windowed varlen flash on sliding layers, blockwise GEMMs on full ones (CUDA, bf16/fp16, "
        "libtorch >= 2.5)";
    flash.needs = {2, 5, true, true, true, "windowed varlen flash"};
    flash.sliding_pairs = flash.full_pairs = PairRule::kIntended;
    flash.mask = MaskPlanKind::kFlashVarlen;
    flash.packs_padding = true;
    flash.packs_requires = {2, 5, true, true, false, "varlen flash over the rows' lengths"};
    AttentionPathInfo& block = v[4];
    block.path = AttentionPath::kBlockwise;
    block.name = "blockwise";
    block.summary =
        "blockwise-GEMM attention on every layer, windowed on sliding ones (any device)";
    block.sliding_pairs = block.full_pairs = PairRule::kIntended;
    block.mask = MaskPlanKind::kBlockwise;
    block.packs_padding = true;
    block.lever_device = "cpu";  // the CPU's windowed path; on CUDA flash-window is
    return v;
  }();
  return r;
}

const AttentionPathInfo& attention_info(AttentionPath path) {
  const auto& r = attention_registry();
  const auto i = static_cast<std::size_t>(path);
  if (i >= r.size() || r[i].path != path) fail("attention path {} has no registry entry", i);
  return r[i];
}

const char* to_string(AttentionPath path) { return attention_info(path).name; }

std::optional<AttentionPath> parse_attention_path(std::string_view text) {
  for (const AttentionPathInfo& i : attention_registry()) {
    if (text == i.name) return i.path;
  }
  return std::nullopt;
}

std::vector<std::string> attention_names(AttentionUse use) {
  std::vector<std::string> out;
  for (const auto& i : attention_registry()) {
    if (use == AttentionUse::kCost || i.engine) out.emplace_back(i.name);
  }
  return out;
}

AttentionPath attention_path_for(std::string_view text, AttentionUse use, std::string_view what) {
  const std::vector<std::string> names = attention_names(use);
  if (std::find(names.begin(), names.end(), text) == names.end())
    fail_usage("{} '{}': expected one of {}", what, text, fmt::join(names, ", "));
  return *parse_attention_path(text);
}

AttentionPath attention_path_from_name(std::string_view text, std::string_view what) {
  return attention_path_for(text, AttentionUse::kCost, what);
}

bool path_packs_on(AttentionPath path, const std::string& device) {
  const AttentionPathInfo& i = attention_info(path);
  return i.packs_padding && (device == "cuda" || !i.packs_requires.cuda_device);
}

std::optional<AttentionPath> packing_path(const std::string& device) {
  for (const AttentionPathInfo& i : attention_registry()) {
    if (!i.engine || !path_packs_on(i.path, device)) continue;
    if (i.needs.cuda_device && device != "cuda") continue;
    return i.path;
  }
  return std::nullopt;
}

bool sliding_layers_dense(AttentionPath path) {
  const PairRule r = attention_info(path).sliding_pairs;
  return r == PairRule::kDense || r == PairRule::kHfSdpa;
}

}  // namespace tprobe::core
