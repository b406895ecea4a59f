// End-to-end: `tprobe mask` — the evidence's layers, the CI assertions' exit codes and messages,
// config.json input, the materialised check and the backends section on a CPU build.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kFixtures = TPROBE_FIXTURES_DIR;

TEST(MaskCli, UnpaddedGatePasses) {
  JsonRun run = run_json(
      {"mask", "--width", "16384", "--expect-window", "1024", "--expect-fast-path", "full"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  const json& layers = run.doc["results"]["layers"];
  ASSERT_EQ(layers.size(), 30u);
  EXPECT_EQ(layers[0]["mask"], "explicit");
  EXPECT_EQ(layers[0]["max_allowed_per_row"], 1024);
  EXPECT_EQ(layers[0]["saturates_at_row"], 1023);
  EXPECT_EQ(layers[5]["mask"], "none");
  EXPECT_EQ(layers[5]["fast_path"], true);
  EXPECT_EQ(run.doc["status"]["outcome"], "ok");
  EXPECT_NE(run.r.out.find("mask geometry"), std::string::npos);
}

TEST(MaskCli, PaddingFailsTheFullFastPathGate) {
  JsonRun run = run_json({"mask", "--lengths", "16384,8192", "--expect-fast-path", "full"});
  EXPECT_EQ(run.r.exit_code, 3) << run.r.out << run.r.err;
  EXPECT_NE(run.r.out.find("layer 5 (full_attention) gets an explicit mask"), std::string::npos)
      << run.r.out;
  EXPECT_NE(run.r.out.find("batch row 1 query row 8192"), std::string::npos) << run.r.out;
  EXPECT_EQ(run.doc["status"]["outcome"], "no");
}

TEST(MaskCli, WrongWindowFailsWithLayerAndRow) {
  RunResult r = run_tprobe({"mask", "--expect-window", "512"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.out.find("layer 0 (sliding_attention): query row 512 allows 513 keys"),
            std::string::npos)
      << r.out;
}

TEST(MaskCli, ReadsAConfigJson) {
  JsonRun run = run_json({"mask", kFixtures + "/gemma4-tiny-hf/config.json", "--width", "64",
                          "--batch", "1", "--expect-window", "8"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  EXPECT_EQ(run.doc["results"]["sliding_window"], 8);
  EXPECT_EQ(run.doc["results"]["layers"][0]["max_allowed_per_row"], 8);
}

TEST(MaskCli, BadInputs) {
  EXPECT_EQ(run_tprobe({"mask", "--lengths", "5"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"mask", "--width", "100", "--lengths", "100,101"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"mask", "--expect-fast-path", "global"}).exit_code, 2);
  RunResult missing = run_tprobe({"mask", "/nonexistent/config.json"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/config.json"), std::string::npos) << missing.err;
}

TEST(MaskCli, MaterialisedCheckPasses) {
  JsonRun run = run_json({"mask", "--width", "2048", "--lengths", "2048,1000", "--materialise"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  const json& m = run.doc["results"]["materialised"];
  EXPECT_EQ(m["ok"], true);
  ASSERT_EQ(m["rows"].size(), 2u);
  EXPECT_EQ(m["rows"][0]["max_allowed_per_row"], 1024);
  EXPECT_EQ(m["rows"][0]["shape"], json({2, 1, 2048, 2048}));
}

TEST(MaskCli, BackendsOnACpuBuildSayNotSupported) {
  JsonRun run = run_json({"mask", "--width", "256", "--backends"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.out << run.r.err;
  const json& s = run.doc["results"]["backends_status"];
  if (s["supported"] == true) GTEST_SKIP() << "CUDA build with a device";
  EXPECT_TRUE(run.doc["results"]["backends"].empty());
  EXPECT_NE(run.r.out.find("not supported"), std::string::npos) << run.r.out;
  EXPECT_FALSE(s["reason"].get<std::string>().empty());
}

}  // namespace
}  // namespace tprobe::testing
