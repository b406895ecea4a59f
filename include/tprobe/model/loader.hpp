// Loading a Gemma-4 checkpoint into a Gemma4Model, and PEFT adapter save/load.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "tprobe/core/evidence/operator_inputs.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/model/gemma4.hpp"

namespace tprobe::model {

// Text-decoder tensors only (the checkpoint's prefix: "model.language_model." or "model.";
// vision/audio towers skipped; lm_head.weight, if saved, ignored: the head is tied). Converts to
// options.dtype on options.device. Throws tprobe::Error naming the tensor for a missing,
// mis-shaped or non-float tensor, or any config/checkpoint disagreement.
//
// How (docs/profile.md, "A checkpoint's load"): every tensor whose dtype is the model's is read in
// chunks of at most `chunk_bytes`, in file order, by `readers` threads (pread into staging
// buffers, pinned on a CUDA device, two per reader) while this thread copies each filled buffer
// into the parameter the model already holds: no second copy of the weights on the device, and
// on the host only the staging buffers beside the page cache. A tensor of another dtype is read
// whole and converted. `figures`, when given, gets the method, the bytes and the readers (the
// caller times the load with the model's construction around it).
struct LoadPlan {
  int64_t readers = 4;
  int64_t chunk_bytes = int64_t{32} << 20;
};
Gemma4Model load_model(const core::Checkpoint& checkpoint, const ModelOptions& options,
                       const LoadPlan& plan = {}, core::LoadFigures* figures = nullptr);

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
