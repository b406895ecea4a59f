// Loading a Gemma-4 checkpoint into a Gemma4Model, and PEFT adapter save/load.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/model/gemma4.hpp"

namespace tprobe::model {

// Text-decoder tensors only (the checkpoint's prefix: "model.language_model." or "model.";
// vision/audio towers skipped; lm_head.weight, if saved, ignored: the head is tied). Converts to
// options.dtype on options.device. Throws tprobe::Error naming the tensor for a missing,
// mis-shaped or non-float tensor, or any config/checkpoint disagreement.
Gemma4Model load_model(const core::Checkpoint& checkpoint, const ModelOptions& options);

// One tensor of a safetensors file as a torch tensor (copied), converted to dtype and device.
torch::Tensor read_tensor(const core::SafetensorsFile& file, const std::string& name,
                          c10::optional<torch::Dtype> dtype, const torch::Device& device);

// PEFT layout: DIR/adapter_model.safetensors with names
// "base_model.model." + text_prefix + "layers.N.self_attn.q_proj.lora_A.weight", and
// DIR/adapter_config.json (peft_type LORA, r, lora_alpha, target_modules, ...). Atomic writes.
void save_adapter(Gemma4Model& model, const std::string& dir,
                  const std::string& text_prefix = "model.language_model.");
// Reads the adapter with core::read_lora_adapter (the reader lora-gate uses: the config checked
// against its own tensors, one file or shards), refuses what tprobe's LoRA does not compute
// (rsLoRA, DoRA, rank/alpha patterns, a regex target_modules, no lora_alpha), attaches adapters of
// that shape and fills them (either text prefix). Throws naming the file and tensor for anything
// missing or mis-shaped.
void load_adapter(Gemma4Model& model, const std::string& dir);

}  // namespace tprobe::model
