// Checkpoint directory: config.json + single or sharded safetensors, indexed by tensor name.
#include "tprobe/core/gemma4/checkpoint.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <set>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"

namespace tprobe::core {

namespace {

Json read_json_file(const std::string& path) {
  return detail::parse_json_strict(read_input_file(path, "JSON file", kMaxSmallInputBytes), path);
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    fail("{}: not a checkpoint directory (does not exist or is not a directory)", dir);
  }
  Checkpoint ck;
  ck.dir_ = dir;
  const std::string config_path = dir + "/config.json";
  if (!is_regular_file(config_path)) fail("{}: no config.json in the checkpoint directory", dir);
  ck.config_ = read_config_json(config_path);

  const std::string index_path = dir + "/" + kSafetensorsIndexName;
  const std::string single_path = dir + "/" + kSingleSafetensorsName;
  if (is_regular_file(index_path)) {
    ck.sharded_ = true;
    Json index = read_json_file(index_path);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail("{}: field 'weight_map' must be an object of tensor name -> shard file", index_path);
    }
    std::map<std::string, std::string> weight_map;
    std::set<std::string> shard_names;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) {
        fail("{}: weight_map['{}'] must be a file name string, got {}", index_path, name,
             file.type_name());
      }
      std::string f = file.get<std::string>();
      if (f.empty() || f.front() == '/' || f.find("..") != std::string::npos) {
        fail("{}: weight_map['{}'] = '{}' is not a file name inside the checkpoint", index_path,
             name, f);
      }
      weight_map[name] = f;
      shard_names.insert(f);
    }
    if (shard_names.empty()) fail("{}: weight_map lists no tensors", index_path);
    std::map<std::string, std::size_t> shard_index;
    for (const auto& s : shard_names) {
      std::string path = dir + "/" + s;
      if (!is_regular_file(path))
        fail("{}: shard '{}' listed in the weight_map does not exist", index_path, s);
      shard_index[s] = ck.files_.size();
      ck.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(path)));
    }
    for (std::size_t i = 0; i < ck.files_.size(); ++i) {
      const SafetensorsFile& f = *ck.files_[i];
      for (const auto& t : f.tensors()) {
        auto prior = ck.index_.find(t.name);
        if (prior != ck.index_.end()) {
          fail("{}: tensor '{}' is in two shards: {} and {}", dir, t.name,
               ck.files_[prior->second.file]->path(), f.path());
        }
        auto wm = weight_map.find(t.name);
        if (wm == weight_map.end()) {
          fail("{}: tensor '{}' is in shard {} but not in the weight_map", index_path, t.name,
               f.path());
        }
        if (shard_index[wm->second] != i) {
          fail("{}: weight_map puts tensor '{}' in '{}', but it is in {}", index_path, t.name,
               wm->second, f.path());
        }
        ck.index_.emplace(t.name, Entry{i, &t});
      }
    }
    for (const auto& [name, file] : weight_map) {
      if (!ck.index_.count(name)) {
        fail("{}: weight_map puts tensor '{}' in '{}', which has no such tensor", index_path, name,
             file);
      }
    }
    if (index.contains("metadata") && index["metadata"].is_object() &&
        index["metadata"].contains("total_size") && index["metadata"]["total_size"].is_number()) {
      double declared = index["metadata"]["total_size"].get<double>();
      uint64_t actual = ck.total_bytes();
      if (declared != static_cast<double>(actual)) {
        ck.warnings_.push_back(
            fmt::format("{}: metadata.total_size is {:.0f} bytes but the shards "
                        "hold {} bytes of tensors",
                        index_path, declared, actual));
      }
    }
  } else if (is_regular_file(single_path)) {
    ck.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(single_path)));
    for (const auto& t : ck.files_[0]->tensors()) ck.index_.emplace(t.name, Entry{0, &t});
  } else {
    fail("{}: neither {} nor {} exists", dir, kSafetensorsIndexName, kSingleSafetensorsName);
  }

  std::vector<std::string> names;
  names.reserve(ck.index_.size());
  for (const auto& kv : ck.index_) names.push_back(kv.first);
  try {
    ck.text_prefix_ = detect_text_prefix(names);
  } catch (const Error& e) {
    fail("{}: {}", dir, e.what());
  }
  return ck;
}

std::vector<TensorMeta> Checkpoint::tensors() const {
  std::vector<TensorMeta> out;
  out.reserve(index_.size());
  for (const auto& kv : index_) out.push_back(static_cast<const TensorMeta&>(*kv.second.tensor));
  return out;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& kv : index_) n += kv.second.tensor->end - kv.second.tensor->begin;
  return n;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second.tensor;
}

const SafetensorsFile& Checkpoint::file_of(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("{}: the checkpoint has no tensor named '{}'", dir_, name);
  return *files_[it->second.file];
}

const TensorInfo& Checkpoint::tensor(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) fail("{}: the checkpoint has no tensor named '{}'", dir_, name);
  return *t;
}

std::vector<std::byte> Checkpoint::read(std::string_view name) const {
  return file_of(name).read(name);
}

}  // namespace tprobe::core
