// A checkpoint directory: config.json plus one model.safetensors or the shards that
// model.safetensors.index.json lists, with one name -> (file, tensor) index over all of them.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::core {

inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";
inline constexpr const char* kSingleSafetensorsName = "model.safetensors";

class Checkpoint {
 public:
  // Opens `dir`: reads config.json, then the index (if present; every listed shard, every
  // weight_map entry checked against its shard, no tensor in two shards, no shard tensor missing
  // from the weight_map) or else the single model.safetensors. Headers only; tensor bytes are
  // read when asked for (SafetensorsFile::read). Throws tprobe::Error naming the file and tensor
  // at fault.
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_.config; }
  const ConfigJsonInfo& config_info() const { return config_.info; }
  // "model.language_model." or "model." (see detect_text_prefix).
  const std::string& text_prefix() const { return text_prefix_; }
  bool sharded() const { return sharded_; }

  std::size_t file_count() const { return files_.size(); }
  const SafetensorsFile& file(std::size_t i) const { return *files_[i]; }

  // All tensors of all files (name, dtype, shape), sorted by name.
  std::vector<TensorMeta> tensors() const;
  std::size_t tensor_count() const { return index_.size(); }
  uint64_t total_bytes() const;  // sum of tensor byte sizes

  // nullptr when absent.
  const TensorInfo* find(std::string_view name) const;
  // The file holding `name`; throws naming the checkpoint and the tensor when absent.
  const SafetensorsFile& file_of(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;
  // The tensor's bytes, read from its file (SafetensorsFile::read).
  std::vector<std::byte> read(std::string_view name) const;

  // Non-fatal observations (e.g. the index's total_size disagrees with the shards).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  struct Entry {
    std::size_t file;
    const TensorInfo* tensor;
  };
  std::string dir_;
  ConfigJson config_;
  std::string text_prefix_;
  bool sharded_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> index_;
  std::vector<std::string> warnings_;
};

}  // namespace tprobe::core
