// The two kinds of decoder layer of the Gemma-4 family, sliding-window and full attention: one enum
// for the model configuration (gemma4/) and the step trace's tags (trace/), with its two spellings
// side by side: HF's config names, and the trace's words, where "-" marks a row outside the
// decoder layers (embedding, loss head, optimizer).
#pragma once

#include <optional>
#include <string_view>

namespace tprobe::core {

enum class LayerType { kSliding, kFull };

// HF's config names: "sliding_attention", "full_attention" (config.json's layer_types).
inline const char* to_string(LayerType type) {
  return type == LayerType::kFull ? "full_attention" : "sliding_attention";
}

// The inverse of to_string: false for any other text.
inline bool parse_layer_type(std::string_view text, LayerType& out) {
  if (text == "sliding_attention") {
    out = LayerType::kSliding;
  } else if (text == "full_attention") {
    out = LayerType::kFull;
  } else {
    return false;
  }
  return true;
}

// The trace's word for a layer of `type`, "-" for none: "sliding", "full", "-".
inline const char* layer_kind_name(std::optional<LayerType> type) {
  if (!type) return "-";
  return *type == LayerType::kFull ? "full" : "sliding";
}

// The inverse of layer_kind_name: false for a word outside {"-", "sliding", "full"}.
inline bool parse_layer_kind(std::string_view text, std::optional<LayerType>& out) {
  if (text == "-") {
    out = std::nullopt;
  } else if (text == "sliding") {
    out = LayerType::kSliding;
  } else if (text == "full") {
    out = LayerType::kFull;
  } else {
    return false;
  }
  return true;
}

}  // namespace tprobe::core
