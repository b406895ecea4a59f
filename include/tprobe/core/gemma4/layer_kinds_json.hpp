// The per-layer kinds of any transformers decoder's config.json, for `kernels --config`: each
// layer's attention (sliding window or full) and feed-forward (MoE or dense), from the fields the
// families write (docs/kernels.md, "Layer kinds"). A Gemma-4 config is read by the Gemma-4 reader
// (config_json.hpp), exactly as before; any other config only for its kinds, every field used
// type- and bounds-checked, a kind the config does not give is "-" with a note saying why.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/layer_type.hpp"

namespace tprobe::core {

struct ConfigLayerKinds {
  bool gemma4 = false;     // read by the Gemma-4 reader (model_type gemma4 / gemma4_text / none)
  std::string model_type;  // as written ("" when absent)
  int64_t num_layers = 0;
  std::vector<std::optional<LayerType>> attention;  // per layer; nullopt: not given ("-")
  std::vector<std::string> ffn;  // per layer "moe" | "dense" | "-"; empty for Gemma-4
  std::vector<std::string> notes;  // which fields gave the kinds, and why any is "-"
};

// `doc` is a parsed config.json; `source` names it in messages. Throws tprobe::Error (one line,
// naming the file and field) for a field of the wrong type or out of bounds.
ConfigLayerKinds parse_layer_kinds_json(const Json& doc, const std::string& source);
ConfigLayerKinds read_layer_kinds_json(const std::string& path);

}  // namespace tprobe::core
