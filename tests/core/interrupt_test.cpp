// The core half of interrupted runs: the bucket sweep stops at the next size and says so, the
// length reader polls the flag, and a second signal removes unfinished atomic writes and exits.
#include "tprobe/core/base/interrupt.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/data/bucket.hpp"
#include "tprobe/core/data/bucket_report.hpp"
#include "tprobe/core/io/lengths.hpp"

namespace tprobe::core {
namespace {

int count_entries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (d != nullptr) {
    const dirent* e = readdir(d);
    if (e == nullptr) break;
    n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
  }
  if (d != nullptr) closedir(d);
  return n;
}

TEST(Interrupt, BucketSweepStopsAndReportsWhatItMeasured) {
  install_interrupt_handlers();
  reset_interrupt_for_testing();
  const LengthDataset ds = synthetic_corpus(2000);
  BucketOptions o;
  const BucketReport full = analyze_bucket(ds, o);
  EXPECT_FALSE(full.interrupted);
  ASSERT_FALSE(full.sweep.empty());
  ::raise(SIGINT);
  ASSERT_TRUE(interrupt_requested());
  EXPECT_EQ(interrupt_signal(), SIGINT);
  EXPECT_EQ(interrupted_exit_code(), 130);
  const BucketReport cut = analyze_bucket(ds, o);
  reset_interrupt_for_testing();
  EXPECT_TRUE(cut.interrupted);
  EXPECT_TRUE(cut.sweep.empty());
  const Json j = to_json(cut);
  EXPECT_TRUE(j["interrupted"].get<bool>());
  EXPECT_TRUE(j["chosen"].is_null());
  EXPECT_EQ(j["sweep_sizes_measured"], 0);
  EXPECT_NE(bucket_tables(cut).at(0).render().find("INTERRUPTED: 0 of"), std::string::npos);
}

TEST(Interrupt, LengthReaderPollsTheFlag) {
  install_interrupt_handlers();
  reset_interrupt_for_testing();
  const std::string path = testing_support::temp_dir() + "/many.txt";
  {
    std::ofstream out(path);
    for (int i = 0; i < 70000; ++i) out << "5\n";
  }
  EXPECT_EQ(read_lengths(path).records(), 70000u);
  ::raise(SIGTERM);
  EXPECT_THROW(read_lengths(path), Interrupted);
  reset_interrupt_for_testing();
}

TEST(Interrupt, SecondSignalRemovesTheTemporaryAndExits) {
  const std::string dir = testing_support::temp_dir() + "/second-signal";
  ::mkdir(dir.c_str(), 0755);
  pid_t pid = fork();
  if (pid == 0) {
    install_interrupt_handlers();
    reset_interrupt_for_testing();
    AtomicFile f(dir + "/out.json");
    f.write_at("{\"half\":", 8, 0);
    ::raise(SIGTERM);  // first: the flag only
    ::raise(SIGTERM);  // second: unlink temporaries, _exit(143)
    _exit(0);          // not reached
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  EXPECT_EQ(count_entries(dir), 0) << "the temporary beside out.json was left";
}

// The torch module's copy of tprobe_core forwards its temporaries to the binary's table (the one
// the binary's handler unlinks): an AtomicFile made there registers and unregisters through the
// shared functions, and its own table stays empty.
std::vector<std::string> g_forwarded;
std::vector<int> g_released;
int forward_add(const char* path) {
  g_forwarded.emplace_back(path);
  return 7;
}
void forward_remove(int slot) { g_released.push_back(slot); }

TEST(Interrupt, AModulesTemporariesGoToTheSharedTable) {
  const std::string dir = testing_support::temp_dir() + "/shared-temporaries";
  ::mkdir(dir.c_str(), 0755);
  const int held = temporaries_held_here();
  share_temporaries(&forward_add, &forward_remove);
  {
    AtomicFile f(dir + "/out.json");
    f.write_at("{}", 2, 0);
    EXPECT_EQ(temporaries_held_here(), held) << "registered in this copy's own table";
    ASSERT_EQ(g_forwarded.size(), 1u);
    EXPECT_EQ(g_forwarded[0].rfind(dir + "/", 0), 0u) << g_forwarded[0];
    f.commit();
  }
  share_temporaries(nullptr, nullptr);
  EXPECT_EQ(g_released, std::vector<int>{7});
  // Back on its own table.
  { AtomicFile g(dir + "/other.json"); EXPECT_EQ(temporaries_held_here(), held + 1); }
  EXPECT_EQ(temporaries_held_here(), held);
}

}  // namespace
}  // namespace tprobe::core
