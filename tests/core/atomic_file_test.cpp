// Atomic writes: the whole file or the old one, never a temporary left behind.
#include "tprobe/core/base/atomic_file.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int entries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

TEST(AtomicFile, WritesAndReplaces) {
  std::string dir = testing_support::temp_dir();
  write_file_atomic(dir + "/a.json", "first");
  EXPECT_EQ(slurp(dir + "/a.json"), "first");
  write_file_atomic(dir + "/a.json", "second, longer");
  EXPECT_EQ(slurp(dir + "/a.json"), "second, longer");
  EXPECT_EQ(entries(dir), 1);
}

TEST(AtomicFile, FailureNamesThePathAndLeavesNoTemporary) {
  std::string dir = testing_support::temp_dir();
  try {
    write_file_atomic(dir + "/no/such/dir/out.json", "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out.json"), std::string::npos);
  }
  EXPECT_EQ(entries(dir), 0);
  EXPECT_THROW(write_file_atomic("", "x"), Error);
}

TEST(AtomicFile, RenameOverDirectoryFailsCleanly) {
  std::string dir = testing_support::temp_dir();
  std::string target = dir + "/is_a_dir";
  ASSERT_EQ(mkdir(target.c_str(), 0755), 0);
  EXPECT_THROW(write_file_atomic(target, "x"), Error);
  EXPECT_EQ(entries(dir), 1);  // only the directory; the temporary was removed
}

}  // namespace
}  // namespace tprobe::core
