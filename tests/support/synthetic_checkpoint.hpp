// Writes checkpoint directories with real Gemma-4 tensor names for tests and benchmarks:
// config.json plus a single or sharded safetensors, data zero and sparse unless asked otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::testing_support {

struct SyntheticOptions {
  int shards = 1;             // 1: model.safetensors; > 1: model-0000i-of-0000n.safetensors + index
  bool multimodal = true;     // text prefix model.language_model. (else model.)
  bool vision_tower = false;  // add a 26B-like vision tower (27 layers, width 1152) and embedder
  core::ConfigJsonForm form = core::ConfigJsonForm::kMultimodalFlat;
  bool fill = false;  // write a deterministic byte pattern instead of sparse zeros
};

// The tensors a synthetic checkpoint holds (text decoder, optionally the vision tower).
std::vector<core::TensorMeta> synthetic_tensors(const core::ModelConfig& config,
                                                const SyntheticOptions& options);

// Writes config.json and the safetensors files of `tensors` into `dir` (which must exist).
void write_checkpoint(const std::string& dir, const core::ModelConfig& config,
                      const std::vector<core::TensorMeta>& tensors,
                      const SyntheticOptions& options);

// synthetic_tensors + write_checkpoint.
void write_synthetic_checkpoint(const std::string& dir, const core::ModelConfig& config,
                                const SyntheticOptions& options = {});

}  // namespace tprobe::testing_support
