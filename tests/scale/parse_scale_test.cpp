// Linear-time parsing of JSON objects with many members (issue: a 200,000-tensor safetensors
// header took over a minute through ordered_json's linear-search insert). Two guards, neither a
// wall-clock assertion: the CPU time of 8x the members must grow about 8x, not 64x (process CPU
// time does not stretch when the machine is busy) — the guard that does not depend on the size —
// and ctest's TIMEOUT (tests/CMakeLists.txt) as a backstop. 160,000 members keep the three tests
// at about a minute of CPU under the sanitizers on the 2-core CI machine (400,000 took two).
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <string>

#include "cpu_time.hpp"
#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::core {
namespace {

constexpr int kMembers = 160000;

std::string zero_size_header(int n) {
  std::string s = "{\"__metadata__\":{\"format\":\"pt\"}";
  s.reserve(static_cast<std::size_t>(n) * 72);
  for (int i = 0; i < n; ++i) {
    s += ",\"model.layers.";
    s += std::to_string(i);
    s += ".weight\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[0,0]}";
  }
  s += "}";
  return s;
}

using scale::cpu_seconds;

// Best of two: CPU time of parsing and validating one header.
double parse_cpu_seconds(const std::string& text) {
  double best = 1e30;
  for (int rep = 0; rep < 2; ++rep) {
    const double t0 = cpu_seconds();
    SafetensorsHeader h = parse_safetensors_header(text, 0, "big.safetensors");
    const double t1 = cpu_seconds();
    EXPECT_FALSE(h.tensors.empty());
    best = std::min(best, t1 - t0);
  }
  return best;
}

TEST(ParseScale, SafetensorsHeaderWithManyZeroSizeTensors) {
  SafetensorsHeader h = parse_safetensors_header(zero_size_header(kMembers), 0, "big.safetensors");
  ASSERT_EQ(h.tensors.size(), static_cast<std::size_t>(kMembers));
  EXPECT_EQ(h.tensors.front().name, "model.layers.0.weight");
  EXPECT_EQ(h.tensors.back().name, "model.layers." + std::to_string(kMembers - 1) + ".weight");
  EXPECT_EQ(h.metadata.at("format"), "pt");
}

TEST(ParseScale, CpuTimeGrowsLinearlyWithTheMemberCount) {
  const double small = parse_cpu_seconds(zero_size_header(kMembers / 16));
  const double big = parse_cpu_seconds(zero_size_header(kMembers / 2));
  // Linear: about 8; quadratic: about 64. 24 leaves room for cache effects and timer grain.
  EXPECT_LT(big, 24 * std::max(small, 1e-3)) << "small " << small << " s, big " << big << " s";
}

TEST(ParseScale, DuplicateFoundAtTheEndOfAHugeObject) {
  std::string text = zero_size_header(kMembers / 2);
  text.back() = ',';
  text += "\"model.layers.7.weight\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[0,0]}}";
  try {
    parse_safetensors_header(text, 0, "dup.safetensors");
    FAIL() << "duplicate accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'model.layers.7.weight' appears twice"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tprobe::core
