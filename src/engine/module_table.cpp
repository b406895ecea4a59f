// Finds and loads libtprobe_torch.so on demand (no libtorch in this file or its library).
#include "tprobe/engine/module_table.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"

namespace tprobe::engine {
namespace {

constexpr const char* kModuleName = "libtprobe_torch.so";
constexpr const char* kEntryPoint = "tprobe_engine";

std::string executable_dir() {
  std::vector<char> buf(4096);
  ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  std::string path(buf.data(), static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

bool readable(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

struct Loaded {
  const Engine* api = nullptr;
  std::string path;
};

}  // namespace

std::vector<std::string> torch_module_candidates() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("TPROBE_TORCH_MODULE"); env && *env) {
    candidates.push_back(env);  // the user's choice, and only that
  } else {
    if (std::string dir = executable_dir(); !dir.empty()) {
      candidates.push_back(dir + "/" + kModuleName);
    }
#ifdef TPROBE_TORCH_MODULE_BUILD_PATH
    candidates.push_back(TPROBE_TORCH_MODULE_BUILD_PATH);
#endif
  }
  return candidates;
}

namespace {

Loaded open_module() {
  const std::vector<std::string> candidates = torch_module_candidates();
  std::string tried;
  for (const std::string& path : candidates) {
    if (!readable(path)) {
      tried += "; " + path + ": not found";
      continue;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      tried += "; " + path + ": " + (why ? why : "dlopen failed");
      continue;
    }
    using Entry = const Engine* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, kEntryPoint));
    if (!entry) {
      tried += "; " + path + ": no symbol " + kEntryPoint;
      continue;
    }
    const Engine* api = entry();
    if (!api || api->version != kEngineVersion) {
      tried += fmt::format("; {}: module API version {} (this binary expects {}): rebuild both",
                           path, api ? api->version : -1, kEngineVersion);
      continue;
    }
    if (api->share_interrupt_flag) api->share_interrupt_flag(core::interrupt_flag());
    if (api->share_temporaries) {
      api->share_temporaries(&core::register_temporary_here, &core::unregister_temporary_here);
    }
    return {api, path};
  }
  // One line: each place looked in, with why it failed.
  fail("this probe needs libtorch, but the torch module could not be loaded (set "
       "TPROBE_TORCH_MODULE to its path, or rebuild): {}",
       tried.empty() ? std::string("no place to look in") : tried.substr(2));
}

std::once_flag g_once;
Loaded g_loaded;
std::string g_error;

}  // namespace

const Engine& load() {
  std::call_once(g_once, [] {
    try {
      g_loaded = open_module();
    } catch (const Error& e) {
      g_error = e.what();
    }
  });
  if (!g_loaded.api) fail("{}", g_error);
  return *g_loaded.api;
}

std::string torch_module_path() { return g_loaded.path; }

}  // namespace tprobe::engine
