// End-to-end: --help, --version, env, the evidence envelope and exit codes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

TEST(Cli, HelpListsEverySubcommand) {
  RunResult r = run_tprobe({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* sub : {"env", "inspect", "padding", "bucket", "scaling-fit", "flops", "parity"}) {
    EXPECT_NE(r.out.find(std::string("  ") + sub), std::string::npos) << sub << "\n" << r.out;
  }
}

TEST(Cli, VersionNamesToolShaAndLibtorch) {
  RunResult r = run_tprobe({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("tprobe "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("git "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libtorch "), std::string::npos) << r.out;
}

TEST(Cli, NoSubcommandIsUsageError) {
  RunResult r = run_tprobe({});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(Cli, UnknownOptionIsUsageError) {
  RunResult r = run_tprobe({"env", "--no-such-option"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such-option"), std::string::npos) << r.err;
}

TEST(Cli, EnvWritesTheEnvelope) {
  std::string dir = make_temp_dir();
  std::string path = dir + "/env.json";
  RunResult r = run_tprobe({"env", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("libtorch"), std::string::npos);
  json doc = json::parse(read_text(path));
  EXPECT_EQ(doc["schema"]["name"], "tprobe.env");
  EXPECT_EQ(doc["schema"]["version"], 1);
  EXPECT_EQ(doc["tool"]["name"], "tprobe");
  EXPECT_FALSE(doc["tool"]["git_sha"].get<std::string>().empty());
  EXPECT_EQ(doc["invocation"]["argv"].back(), path);
  EXPECT_EQ(doc["invocation"]["options"]["json"], path);
  EXPECT_GE(doc["invocation"]["wall_time_s"].get<double>(), 0.0);
  EXPECT_EQ(doc["status"]["outcome"], "ok");
  EXPECT_TRUE(doc["status"]["diagnostics"].is_array());
  const json& env = doc["environment"];
  EXPECT_FALSE(env["torch"]["version"].get<std::string>().empty());
  EXPECT_TRUE(env["cuda"]["usable"].is_boolean());
  if (!env["cuda"]["usable"].get<bool>()) {
    EXPECT_FALSE(env["cuda"]["unusable_reason"].get<std::string>().empty());
    // Without a device CUPTI must say why rather than claim to work.
    EXPECT_FALSE(env["cupti"]["usable"].get<bool>());
    EXPECT_FALSE(env["cupti"]["unavailable_reason"].get<std::string>().empty());
  }
  EXPECT_FALSE(env["sdpa_backends"].empty());
  EXPECT_EQ(doc["results"]["torch"], env["torch"]);
}

TEST(Cli, UnwritableEvidencePathIsErrorAndLeavesNothing) {
  std::string dir = make_temp_dir();
  std::string path = dir + "/missing-dir/env.json";
  RunResult r = run_tprobe({"env", "--json", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing-dir"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(path));
}

}  // namespace
}  // namespace tprobe::testing
