// On a machine with a CUDA device: the environment block must describe it completely.
#include <gtest/gtest.h>

#include "probes/probe.hpp"

namespace tprobe {
namespace {

TEST(GpuEnvironment, DeviceFactsAreFilled) {
  core::Environment env = probes::collect_environment(probes::Needs::kTorch);
  if (!env.cuda_usable) GTEST_SKIP() << "no CUDA device: " << env.cuda_unusable_reason;
  EXPECT_GE(env.device_count, 1);
  EXPECT_FALSE(env.device_name.empty());
  EXPECT_FALSE(env.compute_capability.empty());
  EXPECT_GT(env.device_memory_bytes, int64_t{1} << 30);
  EXPECT_GT(env.multiprocessors, 0);
  EXPECT_FALSE(env.cuda_runtime_version.empty());
  EXPECT_FALSE(env.cuda_driver_version.empty());
  EXPECT_TRUE(env.torch_cuda_build);
  if (env.cupti_built) {
    EXPECT_TRUE(env.cupti_usable) << env.cupti_unavailable_reason;
    EXPECT_FALSE(env.cupti_version.empty());
  }
}

}  // namespace
}  // namespace tprobe
