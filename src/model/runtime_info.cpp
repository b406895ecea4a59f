// Queries libtorch (and, in CUDA builds, the CUDA runtime) for the environment block.
#include "tprobe/model/engine.hpp"

#include <torch/torch.h>

#include <fmt/format.h>

#include "tprobe/config.hpp"
#include "tprobe/model/torch_compat.hpp"

#if TPROBE_HAS_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#endif

namespace tprobe::model {

// The engine works in engine's request and result types.
using namespace engine;
#if TPROBE_HAS_TORCH_CUDA
namespace {

std::string cuda_version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

}  // namespace
#endif

void describe_torch(core::Environment& env) {
  env.torch_version = torch_version();
  env.torch_cuda_build = TPROBE_HAS_TORCH_CUDA != 0;
  env.sdpa_backends = sdpa_backends();
#if TPROBE_HAS_TORCH_CUDA
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) env.cuda_runtime_version = cuda_version_string(runtime);
  int driver = 0;
  cudaError_t derr = cudaDriverGetVersion(&driver);
  if (derr == cudaSuccess && driver > 0) env.cuda_driver_version = cuda_version_string(driver);
  if (!torch::cuda::is_available()) {
    env.cuda_usable = false;
    env.cuda_unusable_reason = driver > 0 ? "no CUDA device visible" : "no CUDA driver installed";
    return;
  }
  env.cuda_usable = true;
  env.device_count = static_cast<int>(torch::cuda::device_count());
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(0);
  env.device_name = prop->name;
  env.compute_capability = fmt::format("{}.{}", prop->major, prop->minor);
  env.device_memory_bytes = static_cast<int64_t>(prop->totalGlobalMem);
  env.multiprocessors = prop->multiProcessorCount;
#else
  env.cuda_usable = false;
  env.cuda_unusable_reason = "libtorch " + env.torch_version + " was built without CUDA";
#endif
}

DeviceMemory device_memory() {
  DeviceMemory d;
#if TPROBE_HAS_TORCH_CUDA
  if (!torch::cuda::is_available()) {
    d.unavailable = "no CUDA device is visible";
    return d;
  }
  size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (err != cudaSuccess) {
    d.unavailable = fmt::format("cudaMemGetInfo failed: {}", cudaGetErrorString(err));
    return d;
  }
  // Before tprobe's first CUDA allocation the caching allocator has no device to report (libtorch
  // throws "Invalid device argument", measured on the H100 host): tprobe holds nothing yet.
  try {
    d.own_reserved_bytes = cuda_reserved_bytes();
  } catch (const c10::Error& e) {
    if (std::string(e.what()).find("Invalid device argument") == std::string::npos) throw;
    d.own_reserved_bytes = 0;
  }
  d.total_bytes = static_cast<int64_t>(total_bytes);
  d.free_bytes = static_cast<int64_t>(free_bytes);
  d.source = fmt::format("cudaMemGetInfo on cuda:0 ({})", at::cuda::getDeviceProperties(0)->name);
#else
  d.unavailable = "libtorch " + torch_version() + " was built without CUDA";
#endif
  return d;
}

}  // namespace tprobe::model
