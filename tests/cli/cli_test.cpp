// End-to-end: --help, --version, env, the evidence envelope and exit codes.
#include <gtest/gtest.h>

#include <cstdlib>

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

TEST(Cli, VersionNamesToolAndSha) {
  RunResult r = run_tprobe({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("tprobe "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("git "), std::string::npos) << r.out;
}

// Sets an environment variable for the child processes of one test.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  const char* name_;
};

TEST(Cli, CoreProbesRunWithoutTheTorchModule) {
  // With the module pointed at nothing, a probe that needs no model must still run: it never
  // tries to load libtorch (docs/ARCHITECTURE.md, libtorch on demand).
  ScopedEnv env("TPROBE_TORCH_MODULE", "/nonexistent/libtprobe_torch.so");
  std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"padding", "--json", dir + "/p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(read_text(dir + "/p.json"));
  EXPECT_EQ(doc["environment"]["torch"]["loaded"], false);
  EXPECT_EQ(doc["environment"]["torch"]["version"], "");
}

TEST(Cli, TorchProbeWithoutTheModuleIsAClearError) {
  ScopedEnv env("TPROBE_TORCH_MODULE", "/nonexistent/libtprobe_torch.so");
  std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"parity", "--checkpoint", dir, "--reference", dir + "/r.safetensors",
                            "--json", dir + "-p.json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("/nonexistent/libtprobe_torch.so: not found"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir + "-p.json"));
  // env reports why instead of failing.
  r = run_tprobe({"env", "--json", dir + "/e.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(read_text(dir + "/e.json"));
  EXPECT_EQ(doc["environment"]["torch"]["loaded"], false);
  EXPECT_NE(doc["environment"]["torch"]["not_loaded_reason"].get<std::string>().find("not found"),
            std::string::npos);
}

TEST(Cli, TorchProbesLoadTheModule) {
  std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"env", "--json", dir + "/e.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(read_text(dir + "/e.json"));
  EXPECT_EQ(doc["environment"]["torch"]["loaded"], true);
  EXPECT_FALSE(doc["environment"]["torch"]["version"].get<std::string>().empty());
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
