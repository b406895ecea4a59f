// Tool-level environment facts and the JSON/table views of the whole environment block.
#include "tprobe/core/base/environment.hpp"

#include <unistd.h>

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"

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

Environment environment_from_json(const Json& j, const std::string& where) {
  using namespace json_read;
  constexpr int64_t kMaxInt32 = std::numeric_limits<int>::max();
  Environment env;
  env.tool_version = string(j, "tool_version", where);
  env.git_sha = string(j, "git_sha", where);
  env.compiler = string(j, "compiler", where);
  env.host = string(j, "host", where);

  const Json& torch = object(j, "torch", where);
  const std::string tw = where + " torch";
  env.torch_loaded = boolean(torch, "loaded", tw);
  env.torch_module = string(torch, "module", tw);
  env.torch_not_loaded_reason = string(torch, "not_loaded_reason", tw);
  env.torch_version = string(torch, "version", tw);
  env.torch_cuda_build = boolean(torch, "cuda_build", tw);

  const Json& cuda = object(j, "cuda", where);
  const std::string cw = where + " cuda";
  env.cuda_usable = boolean(cuda, "usable", cw);
  env.cuda_unusable_reason = string(cuda, "unusable_reason", cw);
  env.cuda_runtime_version = string(cuda, "runtime_version", cw);
  env.cuda_driver_version = string(cuda, "driver_version", cw);
  env.device_count = static_cast<int>(integer(cuda, "device_count", cw, 0, kMaxInt32));

  const Json& device = object(j, "device", where);
  const std::string dw = where + " device";
  env.device_name = string(device, "name", dw);
  env.compute_capability = string(device, "compute_capability", dw);
  env.device_memory_bytes = integer(device, "memory_bytes", dw, 0);
  env.multiprocessors = static_cast<int>(integer(device, "multiprocessors", dw, 0, kMaxInt32));
  // The top-level copy is the same string, kept for readers that look there.
  if (string(j, "compute_capability", where) != env.compute_capability) {
    fail("{}: compute_capability '{}' but device.compute_capability '{}'", where,
         string(j, "compute_capability", where), env.compute_capability);
  }

  const Json& cupti = object(j, "cupti", where);
  const std::string pw = where + " cupti";
  env.cupti_built = boolean(cupti, "built", pw);
  env.cupti_version = string(cupti, "version", pw);
  env.cupti_usable = boolean(cupti, "usable", pw);
  env.cupti_unavailable_reason = string(cupti, "unavailable_reason", pw);

  const Json& backends = array(j, "sdpa_backends", where);
  for (std::size_t i = 0; i < backends.size(); ++i) {
    const std::string bw = at(where, "sdpa_backends", i);
    env.sdpa_backends.push_back({string(backends[i], "name", bw),
                                 boolean(backends[i], "compiled", bw),
                                 boolean(backends[i], "enabled", bw),
                                 string(backends[i], "note", bw)});
  }
  env.attn_requested = string(j, "attn_requested", where);
  env.attn_resolved = string(j, "attn_resolved", where);
  return env;
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
