// Names of the attention paths (the one spelling every probe's --attn uses).
#include "tprobe/core/gemma4/attention_path.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

namespace {
constexpr AttentionPath kAll[] = {AttentionPath::kEager, AttentionPath::kSdpa,
                                  AttentionPath::kSdpaMasked, AttentionPath::kFlashWindow,
                                  AttentionPath::kBlockwise};
}  // namespace

const char* to_string(AttentionPath path) {
  switch (path) {
    case AttentionPath::kEager:
      return "eager";
    case AttentionPath::kSdpa:
      return "sdpa";
    case AttentionPath::kSdpaMasked:
      return "sdpa-masked";
    case AttentionPath::kFlashWindow:
      return "flash-window";
    case AttentionPath::kBlockwise:
      return "blockwise";
  }
  return "?";
}

std::optional<AttentionPath> parse_attention_path(std::string_view text) {
  for (AttentionPath p : kAll) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

AttentionPath attention_path_from_name(std::string_view text, std::string_view what) {
  if (auto p = parse_attention_path(text)) return *p;
  fail_usage("{} '{}': expected one of {}", what, text, fmt::join(attention_path_names(), ", "));
}

std::vector<std::string> attention_path_names() {
  std::vector<std::string> out;
  for (AttentionPath p : kAll) out.emplace_back(to_string(p));
  return out;
}

const std::vector<AttentionPathInfo>& attention_registry() {
  static const std::vector<AttentionPathInfo> r = [] {
    std::vector<AttentionPathInfo> v(5);
    v[0].path = AttentionPath::kEager;
    v[0].name = "eager";
    v[0].summary = "HF's eager attention: scores in full, additive mask, fp32 softmax";
    v[0].sliding_dense = true;
    v[1].path = AttentionPath::kSdpa;
    v[1].name = "sdpa";
    v[1].summary = "scaled_dot_product_attention as HF 5.17 calls it (libtorch >= 2.0)";
    v[1].torch_major = 2;
    v[1].sliding_dense = true;
    v[2].path = AttentionPath::kSdpaMasked;
    v[2].name = "sdpa-masked";
    v[2].summary = "SDPA with an explicit mask on every layer (a FLOP rule; the engine does not run it)";
    v[2].engine = false;
    v[2].torch_major = 2;
    v[2].sliding_dense = true;
    v[3].path = AttentionPath::kFlashWindow;
    v[3].name = "flash-window";
    v[3].summary = "windowed varlen flash on sliding layers, blockwise GEMMs on full ones (CUDA, "
                   "bf16/fp16, libtorch >= 2.5)";
    v[3].cuda_only = true;
    v[3].half_only = true;
    v[3].torch_major = 2;
    v[3].torch_minor = 5;
    v[3].packs_padding = true;
    v[3].packs_padding_cuda_only = true;
    v[4].path = AttentionPath::kBlockwise;
    v[4].name = "blockwise";
    v[4].summary = "blockwise-GEMM attention on every layer, windowed on sliding ones (any device)";
    v[4].packs_padding = true;
    return v;
  }();
  return r;
}

const AttentionPathInfo& attention_info(AttentionPath path) {
  for (const auto& i : attention_registry()) {
    if (i.path == path) return i;
  }
  fail("attention path {} has no registry entry", static_cast<int>(path));
}

std::vector<std::string> attention_names(AttentionUse use) {
  std::vector<std::string> out;
  for (const auto& i : attention_registry()) {
    if (use == AttentionUse::kCost || i.engine) out.emplace_back(i.name);
  }
  return out;
}

std::string attention_help(AttentionUse use) {
  std::string out = "Attention path:";
  for (const auto& i : attention_registry()) {
    if (use == AttentionUse::kEngine && !i.engine) continue;
    out += fmt::format(" {} ({});", i.name, i.summary);
  }
  out.back() = '.';
  return out;
}

AttentionPath attention_path_for(std::string_view text, AttentionUse use, std::string_view what) {
  const std::vector<std::string> names = attention_names(use);
  if (std::find(names.begin(), names.end(), text) == names.end())
    fail_usage("{} '{}': expected one of {}", what, text, fmt::join(names, ", "));
  return *parse_attention_path(text);
}

bool sliding_layers_dense(AttentionPath path) { return attention_info(path).sliding_dense; }

}  // namespace tprobe::core
