// A PEFT LoRA adapter directory read from disk: adapter_config.json plus the adapter weights
// (single adapter_model.safetensors or shards listed by an index), with every lora_A / lora_B
// tensor paired into its module and normed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::core {

inline constexpr const char* kAdapterConfigName = "adapter_config.json";
inline constexpr const char* kAdapterWeightsName = "adapter_model.safetensors";
inline constexpr const char* kAdapterIndexName = "adapter_model.safetensors.index.json";

// What adapter_config.json says that the gate needs. target_modules is either a list (PEFT's
// "name or suffix" rule) or one string (PEFT: re.fullmatch against the module name).
struct AdapterConfig {
  std::string peft_type;
  int64_t r = 0;
  double lora_alpha = 0.0;
  std::vector<std::string> target_modules;   // the list form
  std::string target_regex;                  // the string form; "" when a list was given
  std::vector<int64_t> layers_to_transform;  // empty: every layer
  std::vector<std::string> exclude_modules;  // list form only
  bool rank_pattern = false;                 // a non-empty rank_pattern: ranks vary per module
  bool alpha_pattern = false;                // a non-empty alpha_pattern: alphas vary per module
  // Their entries in the file's order: PEFT gives a module the value of the first key that
  // matches its name (the key as a regex after an optional "<prefix>.", the whole name matched)
  // instead of r / lora_alpha. Ranks are positive integers, alphas positive finite numbers.
  std::vector<std::pair<std::string, int64_t>> rank_patterns;
  std::vector<std::pair<std::string, double>> alpha_patterns;
  bool use_rslora = false;                   // alpha / sqrt(r) scaling
  // Whole modules PEFT saves beside the LoRA pairs (e.g. lm_head, embed_tokens): names matched as
  // target_modules' list form is (the name, or a ".<name>" suffix of the module's path).
  std::vector<std::string> modules_to_save;
  // "none", "all" (every bias of the model is trained and saved) or "lora_only" (the biases of
  // the adapted modules).
  std::string bias = "none";
  bool use_dora = false;                     // weight-decomposed LoRA (magnitude vectors)
  std::string base_model_name_or_path;
};

// Frobenius norm and content facts of one tensor, computed in double from its stored bytes.
struct TensorStats {
  std::string name;  // as stored
  std::string file;  // the safetensors file holding it
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  double norm = 0.0;       // over the finite elements
  int64_t nonzero = 0;     // elements != 0
  int64_t non_finite = 0;  // NaN or Inf elements
};

// One adapted module: the lora_A / lora_B pair that shares a module path (and adapter name).
struct AdapterModule {
  std::string module;  // PEFT module name, e.g. "model.language_model.layers.5.self_attn.q_proj"
  std::string adapter_name;  // "" for the saved form (".lora_A.weight"), e.g. "default" otherwise
  std::string text_prefix;   // "model.language_model.", "language_model.model.", "model." or ""
  int64_t layer = -1;        // decoder layer, -1 outside the text decoder's layers
  std::string path;          // inside the layer, e.g. "self_attn.q_proj"; "" outside
  std::string target;        // last name component, e.g. "q_proj"
  std::optional<TensorStats> a, b;
};

struct LoraAdapter {
  std::string dir;
  AdapterConfig config;
  std::vector<std::string> files;  // safetensors files read
  bool sharded = false;
  std::vector<AdapterModule> modules;  // sorted by (layer, path, module, adapter name)
  std::vector<std::string>
      naming_forms;  // distinct "base_model.model.<prefix>...lora_X[.name].weight" forms seen
  std::vector<TensorStats>
      other_tensors;  // tensors that are not lora_A/lora_B (DoRA magnitudes, ...)
};

// modules_to_save: at most this many entries, each at most this many bytes (PEFT's lists name a
// handful of modules: lm_head, embed_tokens, score); more is refused (exit 1), so the gate's
// matching stays linear in the adapter's tensor names.
inline constexpr std::size_t kMaxModulesToSave = 64;
inline constexpr std::size_t kMaxModuleToSaveBytes = 256;

// PEFT's LoraConfig default for lora_alpha, used for the scale when the config has none.
inline constexpr double kPeftDefaultLoraAlpha = 8.0;

// What PEFT multiplies one module's update lora_B·lora_A by: the rank and alpha rank_pattern /
// alpha_pattern give the module (the first key matching its name after an optional
// "<prefix>."), else r and lora_alpha (kPeftDefaultLoraAlpha when absent), and the scaling
// alpha / rank, or alpha / sqrt(rank) with use_rslora.
struct ModuleScaling {
  int64_t rank = 0;
  double alpha = 0.0;
  double scaling = 0.0;
  std::string rank_key;   // the rank_pattern key that gave the rank; "" for r
  std::string alpha_key;  // the alpha_pattern key that gave the alpha; "" for lora_alpha
};

// Parses adapter_config.json text; `path` is used in messages. Throws tprobe::Error naming the
// field for a missing/ill-typed r, lora_alpha, target_modules, use_rslora, use_dora or a
// peft_type other than LORA.
AdapterConfig parse_adapter_config(const std::string& text, const std::string& path);

// Norms a tensor's bytes (F32, F16, BF16, F64). Throws naming the tensor for other dtypes or a
// byte count that does not match the shape.
TensorStats tensor_stats(const TensorInfo& info, const ByteSpan& bytes, const std::string& file);

// Reads `dir`: adapter_config.json, then adapter_model.safetensors.index.json (every shard
// validated, no tensor in two shards, weight_map and shards agree) or adapter_model.safetensors.
// A pickled adapter_model.bin is refused with a message saying how to re-save it.
// Then the config is checked against the tensors (check_config_against_tensors).
LoraAdapter read_lora_adapter(const std::string& dir);

// One ModuleScaling per entry of `modules`, in order (the pattern keys compiled once; `where`
// names the config in a refused key's message).
std::vector<ModuleScaling> module_scalings(const AdapterConfig& config,
                                           const std::vector<AdapterModule>& modules,
                                           const std::string& where);

// The adapter's own config against its tensors, shared by lora-gate and parity --adapter
// (model/loader.cpp): every lora_A is [r, in] and lora_B [out, r] with the config's r, or the
// rank its rank_pattern gives the module; lora_alpha when given is a positive number (0 would
// scale every update to nothing), and every adapted module is one target_modules names (PEFT's list rule, or a full match of the string form). Throws
// tprobe::Error naming the tensor, its file and the config.
void check_config_against_tensors(const LoraAdapter& adapter, const std::string& config_path);

}  // namespace tprobe::core
