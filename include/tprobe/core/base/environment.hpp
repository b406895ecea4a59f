// The environment block every evidence file carries: what ran, where, with which libraries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"

namespace tprobe::core {

struct SdpaBackend {
  std::string name;     // "flash", "mem_efficient", "cudnn", "math"
  bool compiled = false;  // present in the linked libtorch
  bool enabled = false;   // the global enable flag libtorch reports
  std::string note;
};

// Filled in layers: core sets the tool fields, tprobe_model the libtorch/CUDA fields,
// tprobe_cupti the CUPTI fields; probes that run attention set attn_requested/attn_resolved.
struct Environment {
  std::string tool_version;
  std::string git_sha;
  std::string compiler;
  std::string host;

  // libtorch is loaded only by the probes that need it (docs/ARCHITECTURE.md); the fields below
  // it are empty when it was not.
  bool torch_loaded = false;
  std::string torch_module;           // path of the loaded libtprobe_torch.so
  std::string torch_not_loaded_reason;  // why not, when a probe asked for it and it failed
  std::string torch_version;          // libtorch the module was built against and runs with
  bool torch_cuda_build = false;      // libtorch compiled with CUDA
  bool cuda_usable = false;
  std::string cuda_unusable_reason;   // set when !cuda_usable
  int device_count = 0;
  std::string device_name;
  std::string compute_capability;     // "9.0"
  int64_t device_memory_bytes = 0;
  int multiprocessors = 0;
  std::string cuda_runtime_version;   // "13.0"
  std::string cuda_driver_version;    // "13.0"

  bool cupti_built = false;
  std::string cupti_version;          // CUPTI API version
  bool cupti_usable = false;
  std::string cupti_unavailable_reason;

  std::vector<SdpaBackend> sdpa_backends;
  std::string attn_requested;
  std::string attn_resolved;
};

// Tool version, git sha, compiler and host name.
Environment base_environment();

Json to_json(const Environment& env);
// Reads the object to_json wrote (env evidence's `results`, every evidence file's `environment`).
// Throws tprobe::Error naming `where` ("e.json results") and the field.
Environment environment_from_json(const Json& j, const std::string& where);
Table environment_table(const Environment& env);

}  // namespace tprobe::core
