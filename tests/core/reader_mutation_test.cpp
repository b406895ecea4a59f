// Random corruption of valid inputs: every reader of an outside file must either accept the
// bytes or throw tprobe::Error — never crash, hang or throw anything else. Seeded, so a failure
// names a reproducible case.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/rng.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/io/lengths.hpp"
#include "tprobe/core/io/safetensors.hpp"

namespace tprobe::core {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// One of: flip a byte, overwrite a byte with a structural character, delete a span, duplicate a
// span, truncate. Mutations land in the first `focus` bytes (the header) most of the time.
std::string mutate(const std::string& in, Rng& rng, std::size_t focus) {
  std::string s = in;
  if (s.empty()) return s;
  auto pos = [&] {
    std::size_t range = rng.uniform(4) == 0 ? s.size() : std::min(focus, s.size());
    return static_cast<std::size_t>(rng.uniform(range));
  };
  static const char kStructural[] = "{}[]\",:0123456789-e.ntfaslu \n\\";
  switch (rng.uniform(5)) {
    case 0:
      s[pos()] ^= static_cast<char>(1u << rng.uniform(8));
      break;
    case 1:
      s[pos()] = kStructural[rng.uniform(sizeof(kStructural) - 1)];
      break;
    case 2: {
      std::size_t p = pos();
      s.erase(p, 1 + rng.uniform(8));
      break;
    }
    case 3: {
      std::size_t p = pos();
      s.insert(p, s.substr(p, 1 + rng.uniform(8)));
      break;
    }
    default:
      s.resize(pos());
      break;
  }
  return s;
}

template <typename Fn>
void expect_error_or_success(const std::string& what, int cases, Fn&& attempt) {
  int accepted = 0, refused = 0;
  for (int i = 0; i < cases; ++i) {
    try {
      attempt(i);
      ++accepted;
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << " case " << i << ": threw a non-tprobe exception: " << e.what();
    }
  }
  // The mutations must actually hit the checks, or this test proves nothing.
  EXPECT_GT(refused, cases / 4) << what << ": accepted " << accepted << ", refused " << refused;
}

TEST(ReaderMutation, SafetensorsHeaderAndData) {
  std::string dir = testing_support::temp_dir();
  std::vector<float> a(12, 1.5f);
  std::vector<uint16_t> b(10, 0x3f80);
  write_safetensors(dir + "/ok.safetensors",
                    {{{"model.a", DType::kF32, {3, 4}}, a.data()},
                     {{"model.b", DType::kBF16, {2, 5}}, b.data()},
                     {{"model.c", DType::kF16, {0}}, nullptr}},
                    {{"format", "pt"}});
  const std::string good = slurp(dir + "/ok.safetensors");
  Rng rng(20261129);
  expect_error_or_success("safetensors", 600, [&](int) {
    const std::string path = dir + "/mutated.safetensors";  // case i overwrites case i-1
    spit(path, mutate(good, rng, 8 + 200));
    SafetensorsFile f = SafetensorsFile::open(path);
    for (const auto& t : f.tensors()) {
      const std::vector<std::byte> bytes = f.read(t.name);
      if (bytes.size() != t.end - t.begin) ADD_FAILURE() << "read size differs from the offsets";
      volatile std::byte sink{};
      for (std::byte x : bytes) sink = x;
      (void)sink;
    }
  });
}

TEST(ReaderMutation, LengthDatasets) {
  std::string dir = testing_support::temp_dir();
  const std::string jsonl =
      "{\"length\": 3, \"source\": \"chat\"}\n{\"input_ids\": [1, 2, 3, 4], \"source\": \"code\"}\n"
      "{\"length\": 16384}\n";
  const std::string csv = "length,source\n12,chat\n7,code\n9,chat\n";
  Rng rng(7);
  int n = 0;
  for (const std::string& good : {jsonl, csv}) {
    expect_error_or_success(n == 0 ? "jsonl" : "csv", 400, [&](int) {
      const std::string path = dir + "/mutated.txt";
      spit(path, mutate(good, rng, good.size()));
      LengthDataset ds = load_dataset(path);
      for (int64_t len : ds.lengths) ASSERT_GT(len, 0);
    });
    ++n;
  }
}

TEST(ReaderMutation, ConfigJson) {
  std::string dir = testing_support::temp_dir();
  const std::string good =
      to_config_json(embedded_model("gemma4-26b-a4b"), ConfigJsonForm::kMultimodalPerLayer).dump(1);
  Rng rng(11);
  expect_error_or_success("config.json", 400, [&](int) {
    const std::string path = dir + "/mutated.json";
    spit(path, mutate(good, rng, good.size()));
    ConfigJson c = read_config_json(path);
    for (int64_t l = 0; l < c.config.num_layers; ++l) (void)c.config.layer(l);
  });
}

}  // namespace
}  // namespace tprobe::core
