// Replays every file of tests/fuzz/corpus/<entry>/ through the fuzzers' entry points in an
// ordinary build: inputs that once crashed a reader (and the seeds) stay fixed in CI.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_entries.hpp"

namespace tprobe::fuzz {
namespace {

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

class FuzzCorpus : public ::testing::TestWithParam<Entry> {};

TEST_P(FuzzCorpus, EveryFileIsAcceptedOrRefusedWithATprobeError) {
  const Entry entry = GetParam();
  const std::vector<std::string> files =
      files_in(std::string(TPROBE_FUZZ_CORPUS_DIR) + "/" + entry.name);
  ASSERT_FALSE(files.empty()) << "no corpus for " << entry.name;
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The entry swallows tprobe::Error; any other exception fails here, a crash fails the run.
    EXPECT_NO_THROW(entry.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Readers, FuzzCorpus, ::testing::ValuesIn(entries()),
                         [](const ::testing::TestParamInfo<Entry>& param) {
                           return std::string(param.param.name);
                         });

}  // namespace
}  // namespace tprobe::fuzz
