// Names of the attention paths (the one spelling every probe's --attn uses).
#include "tprobe/core/gemma4/attention_path.hpp"

#include <fmt/format.h>

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

bool sliding_layers_dense(AttentionPath path) {
  return path == AttentionPath::kEager || path == AttentionPath::kSdpa ||
         path == AttentionPath::kSdpaMasked;
}

}  // namespace tprobe::core
