// Synthetic Gemma-4 checkpoints with real tensor names (sparse files for the 26B shapes).
#include "synthetic_checkpoint.hpp"

#include <fmt/format.h>

#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"

namespace tprobe::testing_support {

std::vector<core::TensorMeta> synthetic_tensors(const core::ModelConfig& config,
                                                const SyntheticOptions& options) {
  std::string prefix = options.multimodal ? core::kMultimodalTextPrefix : core::kTextOnlyPrefix;
  std::vector<core::TensorMeta> out = core::expected_text_tensors(config, prefix);
  if (options.vision_tower) {
    // Shapes of the 26B's vision tower as its published vision_config gives them (hidden 1152,
    // intermediate 4304, 27 layers, head_dim 72); the key names follow HF's conversion code, not
    // a file listing. Only the text decoder's tensors matter to tprobe (docs/gemma4-model.md).
    const core::DType bf = core::DType::kBF16;
    const int64_t w = 1152, inter = 4304;
    out.push_back({"model.vision_tower.patch_embedder.input_proj.weight", bf, {w, 3 * 16 * 16}});
    out.push_back(
        {"model.vision_tower.patch_embedder.position_embedding_table", bf, {2, 10240, w}});
    for (int i = 0; i < 27; ++i) {
      std::string p = fmt::format("model.vision_tower.encoder.layers.{}.", i);
      for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
        out.push_back({p + "self_attn." + proj + ".linear.weight", bf, {w, w}});
      }
      out.push_back({p + "self_attn.q_norm.weight", bf, {72}});
      out.push_back({p + "self_attn.k_norm.weight", bf, {72}});
      out.push_back({p + "mlp.gate_proj.linear.weight", bf, {inter, w}});
      out.push_back({p + "mlp.up_proj.linear.weight", bf, {inter, w}});
      out.push_back({p + "mlp.down_proj.linear.weight", bf, {w, inter}});
      for (const char* norm : {"input_layernorm", "post_attention_layernorm",
                               "pre_feedforward_layernorm", "post_feedforward_layernorm"}) {
        out.push_back({p + norm + ".weight", bf, {w}});
      }
    }
    out.push_back({"model.vision_tower.std_bias", bf, {w}});
    out.push_back({"model.vision_tower.std_scale", bf, {w}});
    out.push_back({"model.embed_vision.embedding_projection.weight", bf, {config.hidden_size, w}});
  }
  return out;
}

void write_checkpoint(const std::string& dir, const core::ModelConfig& config,
                      const std::vector<core::TensorMeta>& tensors,
                      const SyntheticOptions& options) {
  core::ConfigJsonForm form =
      options.multimodal ? options.form : core::ConfigJsonForm::kTextOnlyFlat;
  core::write_file_atomic(dir + "/config.json", core::to_config_json(config, form).dump(2));
  const int shards = std::max(options.shards, 1);
  // Contiguous runs of tensors per shard, balanced by bytes.
  uint64_t total = 0;
  for (const auto& t : tensors) total += t.nbytes();
  std::vector<std::vector<core::TensorToWrite>> parts(static_cast<size_t>(shards));
  std::vector<std::vector<unsigned char>> buffers;
  buffers.reserve(tensors.size());
  uint64_t done = 0;
  for (const auto& t : tensors) {
    size_t shard = total == 0 ? 0
                              : std::min<size_t>(static_cast<size_t>(done * shards / total),
                                                 static_cast<size_t>(shards - 1));
    core::TensorToWrite w{t, nullptr};
    if (options.fill) {
      buffers.emplace_back(t.nbytes());
      for (size_t i = 0; i < buffers.back().size(); ++i) {
        buffers.back()[i] = static_cast<unsigned char>((i * 7 + t.name.size()) & 0xff);
      }
      w.data = buffers.back().data();
    }
    parts[shard].push_back(w);
    done += t.nbytes();
  }
  if (shards == 1) {
    core::write_safetensors(dir + "/model.safetensors", parts[0], {{"format", "pt"}});
    return;
  }
  core::Json index = core::Json::object();
  index["metadata"] = {{"total_size", total}};
  core::Json weight_map = core::Json::object();
  for (int s = 0; s < shards; ++s) {
    std::string name = fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, shards);
    core::write_safetensors(dir + "/" + name, parts[static_cast<size_t>(s)], {{"format", "pt"}});
    for (const auto& w : parts[static_cast<size_t>(s)]) weight_map[w.meta.name] = name;
  }
  index["weight_map"] = weight_map;
  core::write_file_atomic(dir + "/model.safetensors.index.json", index.dump(2));
}

void write_synthetic_checkpoint(const std::string& dir, const core::ModelConfig& config,
                                const SyntheticOptions& options) {
  write_checkpoint(dir, config, synthetic_tensors(config, options), options);
}

}  // namespace tprobe::testing_support
