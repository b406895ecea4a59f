// Reading (and writing) Hugging Face Gemma-4 config.json files into core::ModelConfig.
#pragma once

#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::core {

// What the reader learnt besides the text-decoder config.
struct ConfigJsonInfo {
  bool multimodal = false;  // the decoder config sat in "text_config"
  std::vector<std::string> architectures;
  bool has_vision_config = false;  // a non-null vision_config / audio_config
  bool has_audio_config = false;
  bool per_layer_config_form = false;  // geometry came from per_layer_config (transformers >= 5.15)
  // Fields absent from the file that took the Hugging Face default (paths like
  // "text_config.sliding_window"), so a reader can see what was assumed.
  std::vector<std::string> defaulted_fields;
};

struct ConfigJson {
  ModelConfig config;
  ConfigJsonInfo info;
};

// Parses a config.json document (multimodal with "text_config", or text-only). `source` names the
// file in messages and becomes config.name. Rules (docs/inspect.md, docs/gemma4-model.md#config):
// - absent fields take the Hugging Face default and are listed in info.defaulted_fields, except
//   `hidden_size_per_layer_input`: HF defaults it to 256 (per-layer input embeddings ON), which
//   tprobe does not implement, so a missing key is refused with a message naming the field;
// - geometry: flat head_dim / num_key_value_heads, then global_head_dim /
//   num_global_key_value_heads for full layers, then per_layer_config overrides (keys are
//   decimal strings, zero-padded or not; only head_dim and num_key_value_heads may be overridden);
// - refused, naming the field: per-layer input embeddings (hidden_size_per_layer_input > 0),
//   KV sharing (num_kv_shared_layers > 0), attention biases, an activation other than
//   gelu_pytorch_tanh, attention logit softcapping, rope_scaling, rope types other than
//   default/proportional or with a factor != 1, bidirectional attention "all";
// - every field is type-checked (an integer field holding 2816.0 or "2816" is an error).
ConfigJson parse_config_json(const Json& doc, const std::string& source);

// Reads and parses a file; JSON syntax errors name the file, line and column.
ConfigJson read_config_json(const std::string& path);

// The one resolver of "an embedded model, a checkpoint or a config.json" every probe and
// analysis uses: `config_path` when given, else the checkpoint directory's config.json, else
// `model` — an embedded model's name, or (mask's --model) a config.json path.
ModelConfig model_config_of(const std::string& model, const std::string& checkpoint_dir = "",
                            const std::string& config_path = "");

// The inverse, for tests and for writing checkpoints: a config.json document in one of the forms
// the reader accepts. The multimodal form wraps the text config (vision_config/audio_config null).
enum class ConfigJsonForm { kMultimodalFlat, kTextOnlyFlat, kMultimodalPerLayer };
Json to_config_json(const ModelConfig& config,
                    ConfigJsonForm form = ConfigJsonForm::kMultimodalFlat);

}  // namespace tprobe::core
