// End-to-end: `tprobe scaling-fit` and `tprobe flops` — evidence keys, refusals, exit codes.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kFixtures = TPROBE_FIXTURES_DIR;

const std::vector<std::string> kDomainPoints = {"--point", "2048:1.776", "--point", "8192:11.570",
                                                "--point", "16384:35.017"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(ScalingFitCli, HelpListsBothProbes) {
  RunResult r = run_tprobe({"--help"});
  EXPECT_NE(r.out.find("  scaling-fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  flops"), std::string::npos) << r.out;
}

TEST(ScalingFitCli, DomainPointsGiveTheEvidenceKeys) {
  JsonRun run = run_json(with({"scaling-fit", "--batch", "2", "--at", "4096"}, kDomainPoints));
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err << run.r.out;
  ASSERT_TRUE(run.written);
  EXPECT_EQ(run.doc["schema"]["name"], "tprobe.scaling-fit");
  EXPECT_EQ(run.doc["status"]["outcome"], "ok");
  const json& res = run.doc["results"];
  EXPECT_EQ(res["model"], "AB");
  EXPECT_EQ(res["batch"], 2);
  EXPECT_EQ(fmt::format("{:.4e}", res["coefficients"]["a_s_per_token"].get<double>()), "6.8715e-04");
  EXPECT_EQ(fmt::format("{:.4e}", res["coefficients"]["b_s_per_token2"].get<double>()), "8.8509e-08");
  EXPECT_FALSE(res["coefficients"].contains("c_s"));
  ASSERT_EQ(res["points"].size(), 3u);
  const double shares[] = {0.209, 0.513, 0.678};
  for (size_t i = 0; i < 3; ++i) {
    const json& p = res["points"][i];
    EXPECT_NEAR(p["quadratic_share"].get<double>(), shares[i], 0.0005) << i;
    EXPECT_NEAR(p["seconds"].get<double>() - p["predicted_s"].get<double>(),
                p["residual_s"].get<double>(), 1e-12);
  }
  EXPECT_TRUE(res["points"][2]["width"].is_number_integer());
  EXPECT_EQ(res["points"][2]["width"], 16384);
  EXPECT_EQ(res["at"][0]["width"], 4096);
  EXPECT_EQ(res["fixed_term"]["testable"], false);
  EXPECT_NE(run.r.out.find("20.9 %"), std::string::npos) << run.r.out;
  EXPECT_NE(run.r.out.find("67.8 %"), std::string::npos);
}

TEST(ScalingFitCli, TooFewWidthsIsRefusedWithExit3AndEvidence) {
  JsonRun run = run_json({"scaling-fit", "--point", "2048:1.776", "--form", "ABC"});
  EXPECT_EQ(run.r.exit_code, 3);
  ASSERT_TRUE(run.written);
  EXPECT_EQ(run.doc["status"]["outcome"], "no");
  EXPECT_EQ(run.doc["results"]["fit_status"], "refused");
  const json& d = run.doc["status"]["diagnostics"][0];
  EXPECT_EQ(d["code"], "underdetermined");
  EXPECT_NE(d["message"].get<std::string>().find("needs at least 3 distinct widths"),
            std::string::npos);
  EXPECT_NE(run.r.out.find("needs at least 3 distinct widths"), std::string::npos);
}

TEST(ScalingFitCli, LinearModelStillWritesBAsZeroAndNoC) {
  JsonRun run = run_json(with({"scaling-fit", "--form", "A"}, kDomainPoints));
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.doc["results"]["coefficients"]["b_s_per_token2"], 0.0);
  EXPECT_FALSE(run.doc["results"]["coefficients"].contains("c_s"));
  EXPECT_TRUE(run.doc["results"]["crossover_width"].is_null());
}

TEST(ScalingFitCli, AutoWithThreeWidthsIsRefused) {
  JsonRun run = run_json(with({"scaling-fit", "--form", "auto"}, kDomainPoints));
  EXPECT_EQ(run.r.exit_code, 3);
  EXPECT_EQ(run.doc["status"]["diagnostics"][0]["code"], "auto_refused");
  EXPECT_NE(run.doc["results"]["refusal"].get<std::string>().find("at least 4 distinct widths"),
            std::string::npos);
}

TEST(ScalingFitCli, ExactFitHasNoErrorBars) {
  JsonRun run = run_json({"scaling-fit", "--point", "1:3", "--point", "2:10"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.doc["results"]["fit_status"], "exact");
  EXPECT_TRUE(run.doc["results"]["std_errors"]["a_s_per_token"].is_null());
  EXPECT_NEAR(run.doc["results"]["coefficients"]["b_s_per_token2"].get<double>(), 2.0, 1e-12);
  EXPECT_EQ(run.doc["status"]["diagnostics"][0]["code"], "exact_fit");
}

TEST(ScalingFitCli, AutoChoosesABWhenThereIsNoFixedTerm) {
  // t = 7e-4·w + 9e-8·w² with ±3 ms of alternating noise at six widths.
  std::vector<std::string> args = {"scaling-fit", "--form", "auto"};
  int i = 0;
  for (double w : {1024.0, 2048.0, 4096.0, 8192.0, 12288.0, 16384.0}) {
    double t = 7e-4 * w + 9e-8 * w * w + (i++ % 2 ? 0.003 : -0.003);
    args.push_back("--point");
    args.push_back(fmt::format("{}:{:.6f}", w, t));
  }
  JsonRun run = run_json(args);
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.doc["results"]["model"], "AB");
  EXPECT_EQ(run.doc["results"]["model_requested"], "auto");
  EXPECT_NE(run.doc["results"]["selection"]["reason"].get<std::string>().find("dropped C"),
            std::string::npos);
  EXPECT_EQ(run.doc["results"]["fixed_term"]["testable"], true);
  EXPECT_EQ(run.doc["results"]["fixed_term"]["needed"], false);
}

TEST(ScalingFitCli, ProfileEvidenceMediansAtOneBatch) {
  JsonRun run = run_json({"scaling-fit", "--profile", kFixtures + "/profile_points.json", "--batch", "2"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  const json& res = run.doc["results"];
  EXPECT_EQ(res["samples"], "median");
  ASSERT_EQ(res["points"].size(), 3u);
  EXPECT_DOUBLE_EQ(res["points"][0]["seconds"].get<double>(), 1.777);  // median of 3 repeats
  EXPECT_EQ(res["input_points"].size(), 7u);  // every repeat kept as raw data
  EXPECT_EQ(res["skipped"].size(), 1u);       // the OOM point
  EXPECT_EQ(res["dropped"].size(), 1u);       // the batch-1 point
  JsonRun raw = run_json({"scaling-fit", "--profile", kFixtures + "/profile_points.json", "--batch",
                      "2", "--samples", "raw"});
  ASSERT_EQ(raw.r.exit_code, 0) << raw.r.err;
  EXPECT_EQ(raw.doc["results"]["points"].size(), 6u);
  EXPECT_EQ(raw.doc["results"]["degrees_of_freedom"], 4);
}

TEST(ScalingFitCli, MixedBatchesWithoutBatchIsAnError) {
  JsonRun run = run_json({"scaling-fit", "--profile", kFixtures + "/profile_points.json"});
  EXPECT_EQ(run.r.exit_code, 1);
  EXPECT_NE(run.r.err.find("--batch"), std::string::npos) << run.r.err;
  EXPECT_FALSE(run.written);
}

TEST(ScalingFitCli, WidthsFromWeightsTheShare) {
  JsonRun run = run_json(with({"scaling-fit", "--widths-from", kFixtures + "/bucket_histogram.json",
                           "--batch", "2"},
                          kDomainPoints));
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  const json& w = run.doc["results"]["widths_from"];
  EXPECT_EQ(w["micro_batches"], 4);
  EXPECT_EQ(w["key"], "results.width_histogram");
  // Two 2048s, one 8192, one 16384 under A = 6.8715e-4, B = 8.8509e-8 (docs/findings.md#f1).
  const double a = 6.8715e-4, b = 8.8509e-8;
  double quad = 0, tot = 0;
  for (double x : {2048.0, 2048.0, 8192.0, 16384.0}) {
    quad += b * x * x;
    tot += a * x + b * x * x;
  }
  EXPECT_NEAR(w["quadratic_share"].get<double>(), quad / tot, 1e-4);
}

TEST(ScalingFitCli, WidthsFromBucketEvidenceUseTheChosenOrder) {
  // bucket writes the chosen order's micro-batch widths; they must be the widths of the order it
  // emits, and scaling-fit must weight its quadratic share by exactly those widths.
  std::string dir = make_temp_dir();
  JsonRun bucket = run_json({"bucket", "--dataset", kFixtures + "/lengths/small.jsonl",
                             "--batch", "2", "--sweep", "2,4", "--emit-order",
                             dir + "/order.jsonl"});
  ASSERT_EQ(bucket.r.exit_code, 0) << bucket.r.err;
  const json& widths = bucket.doc["results"]["micro_batch_widths"];
  ASSERT_TRUE(widths.is_array());
  std::vector<int64_t> emitted;
  std::istringstream lines(read_text(dir + "/order.jsonl"));
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) emitted.push_back(json::parse(line)["width"].get<int64_t>());
  ASSERT_EQ(widths.size(), emitted.size());
  for (size_t i = 0; i < emitted.size(); ++i) EXPECT_EQ(widths[i].get<int64_t>(), emitted[i]) << i;

  write_text(dir + "/bucket.json", bucket.doc.dump());
  JsonRun fit = run_json(
      with({"scaling-fit", "--widths-from", dir + "/bucket.json", "--batch", "2"}, kDomainPoints));
  ASSERT_EQ(fit.r.exit_code, 0) << fit.r.err;
  const json& w = fit.doc["results"]["widths_from"];
  EXPECT_EQ(w["key"], "results.micro_batch_widths");
  EXPECT_EQ(w["micro_batches"].get<size_t>(), emitted.size());
  const double a = 6.8715e-4, b = 8.8509e-8;
  double quad = 0, tot = 0;
  for (int64_t x : emitted) {
    quad += b * double(x) * double(x);
    tot += a * double(x) + b * double(x) * double(x);
  }
  EXPECT_NEAR(w["quadratic_share"].get<double>(), quad / tot, 1e-4);
}

TEST(ScalingFitCli, BadInputsHaveTheirExitCodes) {
  std::string dir = make_temp_dir();
  std::string csv = dir + "/bad.csv";
  write_text(csv, "width,seconds\n2048,1.7\n8192,fast\n");
  JsonRun bad_csv = run_json({"scaling-fit", "--csv", csv});
  EXPECT_EQ(bad_csv.r.exit_code, 1);
  EXPECT_NE(bad_csv.r.err.find(csv + ":3: seconds 'fast'"), std::string::npos) << bad_csv.r.err;
  EXPECT_FALSE(bad_csv.written);

  JsonRun no_hist = run_json(with({"scaling-fit", "--widths-from", kFixtures + "/profile_points.json"},
                              kDomainPoints));
  EXPECT_EQ(no_hist.r.exit_code, 1);
  EXPECT_FALSE(no_hist.written);

  EXPECT_EQ(run_tprobe({"scaling-fit"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"scaling-fit", "--point", "2048"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"scaling-fit", "--point", "1:1", "--form", "ABCD"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"scaling-fit", "--point", "1:1", "--samples", "mean"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"scaling-fit", "--point", "1:1", "--batch", "0"}).exit_code, 2);
}

TEST(FlopsCli, DefaultRunGivesConsistentEvidence) {
  JsonRun run = run_json({"flops", "--step-time", "13.4"});
  ASSERT_EQ(run.r.exit_code, 0) << run.r.err;
  EXPECT_EQ(run.doc["schema"]["name"], "tprobe.flops");
  const json& res = run.doc["results"];
  EXPECT_EQ(res["model"], "gemma4-26b-a4b");
  EXPECT_EQ(res["batch"], 2);
  EXPECT_EQ(res["width"], 16384);
  EXPECT_EQ(res["attention_path"], "sdpa");
  EXPECT_EQ(res["lora"]["modules"], 205);
  EXPECT_EQ(res["lora"]["trainable_params"], 74342400);
  double intended = 0, performed = 0;
  for (const auto& row : res["components"]) {
    intended += row["intended"]["total_flop"].get<double>();
    performed += row["performed"]["total_flop"].get<double>();
  }
  EXPECT_NEAR(intended / res["totals"]["intended"]["total_flop"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(performed / res["totals"]["performed"]["total_flop"].get<double>(), 1.0, 1e-12);
  const json& m = res["mfu"];
  EXPECT_EQ(m["peak_tflops"], 790.0);
  EXPECT_NEAR(m["performed_ratio"].get<double>(),
              performed / (13.4 * 790e12), 1e-12);
  EXPECT_NE(run.r.out.find("MFU at 13.400 s"), std::string::npos) << run.r.out;
}

TEST(FlopsCli, ConfigJsonGivesTheSameCountAsTheEmbeddedModel) {
  // The published 26B-A4B config written in the per_layer_config form must count exactly like
  // the embedded model; a config whose window differs must not.
  std::string dir = make_temp_dir();
  core::ModelConfig c = core::embedded_model("gemma4-26b-a4b");
  write_text(dir + "/config.json",
             core::to_config_json(c, core::ConfigJsonForm::kMultimodalPerLayer).dump(2));
  c.sliding_window = 4096;
  write_text(dir + "/wide.json", core::to_config_json(c).dump(2));
  JsonRun embedded = run_json({"flops", "--model", "gemma4-26b-a4b"});
  JsonRun from_file = run_json({"flops", "--config", dir + "/config.json"});
  JsonRun wide = run_json({"flops", "--config", dir + "/wide.json"});
  ASSERT_EQ(embedded.r.exit_code, 0) << embedded.r.err;
  ASSERT_EQ(from_file.r.exit_code, 0) << from_file.r.err;
  ASSERT_EQ(wide.r.exit_code, 0) << wide.r.err;
  EXPECT_EQ(from_file.doc["results"]["totals"], embedded.doc["results"]["totals"]);
  EXPECT_GT(wide.doc["results"]["totals"]["intended"]["total_flop"].get<double>(),
            embedded.doc["results"]["totals"]["intended"]["total_flop"].get<double>());

  write_text(dir + "/broken.json", "{\"text_config\": {\"hidden_size\": \"2816\"");
  JsonRun broken = run_json({"flops", "--config", dir + "/broken.json"});
  EXPECT_EQ(broken.r.exit_code, 1);
  EXPECT_NE(broken.r.err.find("broken.json"), std::string::npos) << broken.r.err;
  EXPECT_FALSE(broken.written);
}

TEST(FlopsCli, PaddingAndPathsChangePerformedWork) {
  JsonRun causal = run_json({"flops"});
  JsonRun padded = run_json({"flops", "--lengths", "16384,8192"});
  JsonRun window = run_json({"flops", "--attn", "flash-window", "--targets", "none"});
  ASSERT_EQ(causal.r.exit_code, 0);
  ASSERT_EQ(padded.r.exit_code, 0) << padded.r.err;
  ASSERT_EQ(window.r.exit_code, 0) << window.r.err;
  EXPECT_EQ(padded.doc["results"]["padded"], true);
  EXPECT_GT(padded.doc["results"]["attention_pairs"]["full_attention"]["performed"].get<double>(),
            causal.doc["results"]["attention_pairs"]["full_attention"]["performed"].get<double>());
  EXPECT_EQ(window.doc["results"]["lora"]["modules"], 0);
  const json& wp = window.doc["results"]["attention_pairs"]["sliding_attention"];
  EXPECT_EQ(wp["performed"], wp["intended"]);
  EXPECT_TRUE(causal.doc["results"]["mfu"]["performed_ratio"].is_null());
}

TEST(FlopsCli, BadOptionsAreUsageErrors) {
  EXPECT_EQ(run_tprobe({"flops", "--lengths", "5"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"flops", "--lengths", "20000,5"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"flops", "--attn", "flash"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"flops", "--targets", "qproj"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"flops", "--model", "gemma5"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"flops", "--step-time", "-1"}).exit_code, 2);
  EXPECT_EQ(run_tprobe({"flops", "--checkpointing", "maybe"}).exit_code, 2);
}

}  // namespace
}  // namespace tprobe::testing
