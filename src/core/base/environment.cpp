// Tool-level environment facts and the JSON/table views of the whole environment block.
#include "tprobe/core/base/environment.hpp"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "tprobe/config.hpp"

namespace tprobe::core {

Environment base_environment() {
  Environment env;
  env.tool_version = TPROBE_VERSION;
  env.git_sha = TPROBE_GIT_SHA;
#if defined(__clang__)
  env.compiler = fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  env.compiler = fmt::format("gcc {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  env.compiler = "unknown";
#endif
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) env.host = host;
  return env;
}

Json to_json(const Environment& env) {
  Json backends = Json::array();
  for (const auto& b : env.sdpa_backends) {
    backends.push_back(
        {{"name", b.name}, {"compiled", b.compiled}, {"enabled", b.enabled}, {"note", b.note}});
  }
  Json j;
  j["tool_version"] = env.tool_version;
  j["git_sha"] = env.git_sha;
  j["compiler"] = env.compiler;
  j["host"] = env.host;
  j["torch"] = {{"loaded", env.torch_loaded},
                {"module", env.torch_module},
                {"not_loaded_reason", env.torch_not_loaded_reason},
                {"version", env.torch_version},
                {"cuda_build", env.torch_cuda_build}};
  j["cuda"] = {{"usable", env.cuda_usable},
               {"unusable_reason", env.cuda_unusable_reason},
               {"runtime_version", env.cuda_runtime_version},
               {"driver_version", env.cuda_driver_version},
               {"device_count", env.device_count}};
  j["device"] = {{"name", env.device_name},
                 {"compute_capability", env.compute_capability},
                 {"memory_bytes", env.device_memory_bytes},
                 {"multiprocessors", env.multiprocessors}};
  j["compute_capability"] = env.compute_capability;
  j["cupti"] = {{"built", env.cupti_built},
                {"version", env.cupti_version},
                {"usable", env.cupti_usable},
                {"unavailable_reason", env.cupti_unavailable_reason}};
  j["sdpa_backends"] = std::move(backends);
  j["attn_requested"] = env.attn_requested;
  j["attn_resolved"] = env.attn_resolved;
  return j;
}

Table environment_table(const Environment& env) {
  Table t("tprobe environment");
  t.column("item", Align::kLeft).column("value", Align::kLeft);
  t.row({"tprobe", fmt::format("{} ({})", env.tool_version, env.git_sha)});
  t.row({"compiler", env.compiler});
  t.row({"host", env.host});
  if (!env.torch_loaded) {
    t.row({"libtorch", env.torch_not_loaded_reason.empty()
                           ? "not loaded (this probe does not use it)"
                           : "not loaded: " + env.torch_not_loaded_reason});
    return t;
  }
  t.row({"libtorch", fmt::format("{}{}", env.torch_version,
                                 env.torch_cuda_build ? " (CUDA build)" : " (CPU-only build)")});
  t.row({"CUDA usable", env.cuda_usable ? "yes" : "no: " + env.cuda_unusable_reason});
  if (env.cuda_usable) {
    t.row({"device", fmt::format("{} (x{})", env.device_name, env.device_count)});
    t.row({"compute capability", fmt::format("{} (sm_{})", env.compute_capability,
                                             [&] {
                                               std::string s = env.compute_capability;
                                               s.erase(std::remove(s.begin(), s.end(), '.'), s.end());
                                               return s;
                                             }())});
    t.row({"device memory", format_bytes(static_cast<double>(env.device_memory_bytes))});
    t.row({"multiprocessors", std::to_string(env.multiprocessors)});
  }
  if (!env.cuda_runtime_version.empty()) t.row({"CUDA runtime", env.cuda_runtime_version});
  if (!env.cuda_driver_version.empty()) t.row({"CUDA driver", env.cuda_driver_version});
  std::string cupti = env.cupti_built ? "built, API version " + env.cupti_version : "not built";
  if (env.cupti_built) {
    cupti += env.cupti_usable ? ", usable" : ", unusable: " + env.cupti_unavailable_reason;
  } else if (!env.cupti_unavailable_reason.empty()) {
    cupti += ": " + env.cupti_unavailable_reason;
  }
  t.row({"CUPTI", cupti});
  for (const auto& b : env.sdpa_backends) {
    std::string v = b.compiled ? (b.enabled ? "compiled, enabled" : "compiled, disabled") : "absent";
    if (!b.note.empty()) v += " — " + b.note;
    t.row({"SDPA " + b.name, v});
  }
  return t;
}

}  // namespace tprobe::core
