// End-to-end: `tprobe padding` and `tprobe bucket` on the embedded corpus and on small files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

TEST(PaddingCli, HelpListsBothProbes) {
  RunResult r = run_tprobe({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("  padding"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  bucket"), std::string::npos) << r.out;
}

TEST(PaddingCli, EmbeddedCorpusWritesTheDocumentedKeys) {
  std::string path = make_temp_dir() + "/padding.json";
  RunResult r = run_tprobe({"padding", "--max-seq-len", "8192", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("padding waste"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("length histogram"), std::string::npos);
  EXPECT_NE(r.out.find("#####"), std::string::npos);
  json doc = json::parse(read_text(path));
  EXPECT_EQ(doc["schema"]["name"], "tprobe.padding");
  EXPECT_EQ(doc["invocation"]["options"]["max-seq-len"], 8192);
  EXPECT_EQ(doc["invocation"]["options"]["batch"], 2);
  const json& res = doc["results"];
  EXPECT_EQ(res["records"], 20982);
  double waste = res["waste_ratio"].get<double>();
  EXPECT_GT(waste, 0.0);
  EXPECT_LT(waste, 1.0);
  int64_t real = res["real_tokens"], padded = res["padded_tokens"];
  EXPECT_DOUBLE_EQ(waste, static_cast<double>(padded - real) / static_cast<double>(padded));
  const json& trunc = res["truncation"];
  EXPECT_EQ(trunc["max_seq_len"], 8192);
  ASSERT_EQ(trunc["per_source"].size(), 6u);
  int64_t lost = 0;
  for (const auto& s : trunc["per_source"]) lost += s["truncated_tokens"].get<int64_t>();
  EXPECT_EQ(lost, trunc["truncated_tokens"].get<int64_t>());
  EXPECT_GT(lost, 0);
  EXPECT_EQ(res["dataset_tokens"].get<int64_t>() - lost, real);
  EXPECT_GT(res["loss_head"]["naive_ce_transient_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(res["histogram"].empty());
}

// lengths 3 5 2 8 4 at max_seq_len 6, micro-batch 2: micro-batches (3,5) (2,6) (4) are 5, 6 and 4
// wide: 26 padded tokens for 20 real ones.
TEST(PaddingCli, LiteralFileGivesHandWorkedNumbers) {
  std::string dir = make_temp_dir();
  write_text(dir + "/lengths.csv", "length,source\n3,a\n5,a\n2,b\n8,b\n4,a\n");
  RunResult r = run_tprobe({"padding", "--dataset", dir + "/lengths.csv", "--max-seq-len", "6",
                            "--json", dir + "/p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json res = json::parse(read_text(dir + "/p.json"))["results"];
  EXPECT_EQ(res["real_tokens"], 20);
  EXPECT_EQ(res["padded_tokens"], 26);
  EXPECT_DOUBLE_EQ(res["waste_ratio"].get<double>(), 6.0 / 26.0);
  EXPECT_EQ(res["truncation"]["per_source"][1]["source"], "b");
  EXPECT_EQ(res["truncation"]["per_source"][1]["truncated_tokens"], 2);
  EXPECT_EQ(res["truncation"]["per_source"][0]["truncated_tokens"], 0);
}

// fixtures/lengths/small.jsonl: lengths 3 5 2 8 4 7(input_ids) 12 1; at max_seq_len 6 they are
// 3 5 2 6 4 6 6 1 (33 tokens; 8, 7, 12 lose 2 + 1 + 6 = 9). Pairs in file order: (3,5) w5,
// (2,6) w6, (4,6) w6, (6,1) w6: 10 + 12 + 12 + 12 = 46 padded tokens; pad: chat 2+2, dialogue
// 4, code 5.
// The dataset is the main input: positional as users type it, the option form kept; both are the
// same run, the evidence records the path either way, and giving both is a usage error.
TEST(PaddingCli, DatasetIsPositionalOrAnOption) {
  std::string dir = make_temp_dir();
  const std::string data = std::string(TPROBE_FIXTURES_DIR) + "/lengths/small.jsonl";
  RunResult a = run_tprobe({"padding", data, "--max-seq-len", "6", "--json", dir + "/a.json"});
  RunResult b =
      run_tprobe({"padding", "--dataset", data, "--max-seq-len", "6", "--json", dir + "/b.json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  json ja = json::parse(read_text(dir + "/a.json")), jb = json::parse(read_text(dir + "/b.json"));
  EXPECT_EQ(ja["results"], jb["results"]);
  EXPECT_EQ(ja["invocation"]["options"]["dataset"], data);
  EXPECT_EQ(jb["invocation"]["options"]["dataset"], data);
  RunResult c = run_tprobe({"bucket", data, "--sweep", "2", "--json", dir + "/c.json"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  RunResult both = run_tprobe({"padding", data, "--dataset", data});
  EXPECT_EQ(both.exit_code, 2) << both.err;
  RunResult none = run_tprobe({"padding", "--json", dir + "/d.json"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(json::parse(read_text(dir + "/d.json"))["invocation"]["options"]["dataset"],
            "synthetic");
}

TEST(PaddingCli, FixtureGivesHandWorkedNumbers) {
  std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"padding", "--dataset", std::string(TPROBE_FIXTURES_DIR) +
                            "/lengths/small.jsonl", "--max-seq-len", "6", "--json",
                            dir + "/p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json res = json::parse(read_text(dir + "/p.json"))["results"];
  EXPECT_EQ(res["dataset_tokens"], 42);
  EXPECT_EQ(res["real_tokens"], 33);
  EXPECT_EQ(res["padded_tokens"], 46);
  EXPECT_EQ(res["micro_batch_widths"], json({5, 6, 6, 6}));
  EXPECT_EQ(res["width"]["at_max_count"], 3);
  EXPECT_EQ(res["truncation"]["truncated_records"], 3);
  EXPECT_EQ(res["truncation"]["truncated_tokens"], 9);
  const json& src = res["per_source"];
  ASSERT_EQ(src.size(), 3u);
  EXPECT_EQ(src[0]["source"], "chat");
  EXPECT_EQ(src[0]["pad_tokens"], 4);
  EXPECT_EQ(src[1]["source"], "dialogue");
  EXPECT_EQ(src[1]["pad_tokens"], 4);
  EXPECT_EQ(src[1]["truncated_tokens"], 8);
  EXPECT_EQ(src[2]["source"], "code");
  EXPECT_EQ(src[2]["pad_tokens"], 5);
  EXPECT_EQ(src[2]["truncated_tokens"], 1);
}

TEST(PaddingCli, BrokenDatasetIsErrorNamingFileAndLineAndWritesNothing) {
  std::string dir = make_temp_dir();
  for (const char* text : {"5\n0\n", "5\n-2\n", "5\nfive\n", "{\"length\": 3}\n{\"src\": 1}\n"}) {
    write_text(dir + "/bad.txt", text);
    for (const char* probe : {"padding", "bucket"}) {
      std::vector<std::string> args{probe, "--dataset", dir + "/bad.txt", "--json", dir + "/e.json"};
      if (std::string(probe) == "bucket") {
        args.push_back("--emit-order");
        args.push_back(dir + "/o.jsonl");
      }
      RunResult r = run_tprobe(args);
      EXPECT_EQ(r.exit_code, 1) << probe << " " << text << r.err;
      EXPECT_NE(r.err.find(dir + "/bad.txt:2:"), std::string::npos) << r.err;
      EXPECT_FALSE(file_exists(dir + "/e.json"));
      EXPECT_FALSE(file_exists(dir + "/o.jsonl"));
    }
  }
  write_text(dir + "/empty.txt", "");
  RunResult r = run_tprobe({"padding", "--dataset", dir + "/empty.txt", "--json", dir + "/e.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no records"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir + "/e.json"));
}

TEST(PaddingCli, NonsenseOptionsAreUsageErrors) {
  std::string dir = make_temp_dir();
  const std::vector<std::vector<std::string>> cases = {
      {"padding", "--batch", "0"},
      {"padding", "--sampler", "random"},
      {"padding", "--no-such-option"},
      {"padding", "--dataset", "synthetic:0"},
      {"bucket", "--batch", "0"},
      {"bucket", "--bucket", "1"},
      {"bucket", "--batch", "4", "--sweep", "2,8"},
      {"bucket", "--cost", "1,x"},
      {"bucket", "--cost", "1,2", "--scaling-fit", dir + "/fit.json"},
      {"bucket", "--seeds", "0"},
  };
  for (auto args : cases) {
    args.push_back("--json");
    args.push_back(dir + "/u.json");
    RunResult r = run_tprobe(args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << " " << args[2] << "\n" << r.err;
    EXPECT_FALSE(file_exists(dir + "/u.json"));
  }
}

TEST(BucketCli, SweepEvidenceAndEmittedOrder) {
  std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"bucket", "--dataset", "synthetic:4000", "--cost",
                            "6.8715e-4,8.8509e-8", "--json", dir + "/b.json", "--emit-order",
                            dir + "/order.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("baseline (sequential)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("NO-OP"), std::string::npos);
  json doc = json::parse(read_text(dir + "/b.json"));
  EXPECT_EQ(doc["schema"]["name"], "tprobe.bucket");
  EXPECT_TRUE(doc["status"]["diagnostics"].empty());
  const json& res = doc["results"];
  EXPECT_FALSE(res["noop_sweep"].get<bool>());
  ASSERT_EQ(res["sweep"].size(), 5u);
  std::vector<int64_t> buckets;
  for (const auto& row : res["sweep"]) {
    buckets.push_back(row["bucket"]);
    for (const char* key : {"waste_ratio", "zero_pad_share", "predicted_time_s"}) {
      EXPECT_TRUE(row[key].is_number()) << key;
    }
    EXPECT_TRUE(row["sources_per_window"]["mean"].is_number());
    EXPECT_TRUE(row["sources_per_window"]["min"].is_number());
    EXPECT_TRUE(row["sources_per_window"]["p10"].is_number());
    EXPECT_EQ(row["per_seed"].size(), 3u);
    EXPECT_LT(row["predicted_time_s"].get<double>(), res["baseline"]["predicted_time_s"].get<double>());
  }
  EXPECT_EQ(buckets, (std::vector<int64_t>{2, 8, 32, 128, 512}));
  EXPECT_EQ(doc["invocation"]["options"]["sweep"], json({2, 8, 32, 128, 512}));
  EXPECT_EQ(res["chosen"]["bucket"], 2);
  // The emitted order: header, then every record exactly once.
  std::string text = read_text(dir + "/order.jsonl");
  std::size_t nl = text.find('\n');
  json header = json::parse(text.substr(0, nl));
  EXPECT_EQ(header["schema"], "tprobe.bucket-order");
  EXPECT_EQ(header["bucket"], 2);
  EXPECT_EQ(header["seed"], 0);
  std::vector<int> seen(4000, 0);
  std::size_t start = nl + 1, lines = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    json mb = json::parse(text.substr(start, end - start));
    for (const auto& rec : mb["records"]) ++seen.at(rec.get<std::size_t>());
    ++lines;
    start = end + 1;
  }
  EXPECT_EQ(lines, header["micro_batches"].get<std::size_t>());
  for (int s : seen) ASSERT_EQ(s, 1);
  EXPECT_EQ(res["padded_tokens"], res["sweep"][0]["per_seed"][0]["padded_tokens"]);
}

TEST(BucketCli, DefaultSweepFollowsTheMicroBatch) {
  std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"bucket", "--dataset", "synthetic:500", "--batch", "4",
                            "--seeds", "1", "--json", dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(read_text(dir + "/b.json"));
  EXPECT_EQ(doc["invocation"]["options"]["sweep"], json({4, 8, 32, 128, 512}));
  EXPECT_EQ(doc["results"]["sweep"][0]["bucket"], 4);
}

TEST(BucketCli, NoOpSweepIsALoudWarning) {
  std::string dir = make_temp_dir();
  write_text(dir + "/same.txt", "5\n9\n5\n5\n");
  RunResult r = run_tprobe({"bucket", "--dataset", dir + "/same.txt", "--json", dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NO-OP SWEEP"), std::string::npos) << r.out;
  json doc = json::parse(read_text(dir + "/b.json"));
  ASSERT_EQ(doc["status"]["diagnostics"].size(), 1u);
  EXPECT_EQ(doc["status"]["diagnostics"][0]["code"], "noop_sweep");
  EXPECT_EQ(doc["status"]["diagnostics"][0]["severity"], "warning");
  EXPECT_TRUE(doc["results"]["noop_sweep"].get<bool>());
}

TEST(BucketCli, CostFromAScalingFitFile) {
  std::string dir = make_temp_dir();
  // A real scaling-fit file (read whole by its own reader), its coefficients set by hand:
  // t(w) = 1 + 0.5 w per micro-batch; lengths 4 4 -> one micro-batch of width 4 -> 3 s.
  RunResult fit = run_tprobe({"scaling-fit", "--form", "ABC", "--point", "1000:1", "--point",
                              "2000:2.5", "--point", "3000:4.2", "--point", "4000:6.1", "--json",
                              dir + "/real.json"});
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  json doc = json::parse(read_text(dir + "/real.json"));
  doc["results"]["coefficients"] = {{"a_s_per_token", 0.5}, {"b_s_per_token2", 0}, {"c_s", 1}};
  write_text(dir + "/fit.json", doc.dump());
  write_text(dir + "/two.txt", "4\n4\n");
  RunResult r = run_tprobe({"bucket", "--dataset", dir + "/two.txt", "--sweep", "2",
                            "--scaling-fit", dir + "/fit.json", "--json", dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json res = json::parse(read_text(dir + "/b.json"))["results"];
  EXPECT_DOUBLE_EQ(res["sweep"][0]["predicted_time_s"].get<double>(), 3.0);
  EXPECT_EQ(res["cost_model"]["origin"], dir + "/fit.json");
  doc["results"]["coefficients"].erase("b_s_per_token2");
  write_text(dir + "/bad.json", doc.dump());
  r = run_tprobe({"bucket", "--dataset", dir + "/two.txt", "--scaling-fit", dir + "/bad.json",
                  "--json", dir + "/c.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("b_s_per_token2"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir + "/c.json"));
}

}  // namespace
}  // namespace tprobe::testing
