// End-to-end `tprobe levers --dataset` on the CPU (gemma4-tiny, random weights): the epoch's
// evidence has the documented structure, and every number in it follows from the others — the
// micro-batches from the dataset, the curve from the measured rows, the prediction from the curve,
// the estimate and its interval from the sampled micro-batches — each recomputed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

// 40 records of 3 .. 16 tokens, file order.
std::vector<int64_t> dataset_lengths() {
  std::vector<int64_t> v;
  for (int i = 0; i < 40; ++i) v.push_back(3 + (i * 7) % 14);
  return v;
}

std::string write_dataset(const std::string& dir) {
  std::string text;
  for (int64_t l : dataset_lengths()) text += std::to_string(l) + "\n";
  write_text(dir + "/lengths.txt", text);
  return dir + "/lengths.txt";
}

std::vector<std::string> epoch_args(const std::string& dataset, const std::string& json_path) {
  return {"levers",    "--device",       "cpu",  "--model",   "gemma4-tiny", "--dtype",
          "fp32",      "--rank",         "4",    "--alpha",   "8",           "--widths",
          "8,16",      "--ce-chunk",     "16",   "--repeats", "2",           "--pad-fraction",
          "0.5",       "--levers",       "attention,packing", "--dataset",   dataset,
          "--accum", "4",         "--epoch-samples", "6", "--json",   json_path};
}

double t975_df5() { return 2.570582; }  // Student t, 0.975 quantile, 5 degrees of freedom

TEST(EpochCli, EveryEpochNumberFollowsFromTheOthers) {
  const std::string dir = make_temp_dir();
  const std::string data = write_dataset(dir);
  RunResult r = run_tprobe(epoch_args(data, dir + "/e.json"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("The epoch:"), std::string::npos) << r.out;
  const json res = json::parse(read_text(dir + "/e.json"))["results"];
  const json& e = res["epoch"];
  ASSERT_TRUE(e.is_object()) << res.dump();

  // The sequential micro-batches, rebuilt from the file: pairs in file order.
  const std::vector<int64_t> len = dataset_lengths();
  std::vector<std::vector<int64_t>> mbs;
  for (std::size_t i = 0; i < len.size(); i += 2) mbs.push_back({len[i], len[i + 1]});
  int64_t real = 0, padded = 0;
  for (const auto& m : mbs) {
    real += m[0] + m[1];
    padded += 2 * std::max(m[0], m[1]);
  }
  EXPECT_EQ(e["sampler"], "sequential");
  EXPECT_EQ(e["micro_batches"], static_cast<int64_t>(mbs.size()));
  EXPECT_EQ(e["real_tokens"], real);
  EXPECT_EQ(e["padded_tokens"], padded);
  EXPECT_EQ(e["max_seq_len"], 16);  // the widest --widths
  EXPECT_EQ(e["optimizer_steps"], 5);  // ceil(20 / 4)

  std::set<std::string> measured;
  std::vector<int64_t> first_sample;
  for (const json& c : e["configs"]) {
    SCOPED_TRACE(c.dump());
    const std::string status = c["status"];
    ASSERT_TRUE(status == "predicted" || status == "underdetermined" || status == "not run" ||
                status == "not applicable");
    if (status != "predicted") continue;
    // The curve passes through the medians of the configuration's unpadded rows (2 widths: AB).
    const json& k = c["curve"];
    EXPECT_EQ(k["form"], "AB");
    const double b = k["batch"].get<double>();
    EXPECT_NEAR(k["per_token_s"].get<double>(), k["a_s_per_token"].get<double>() / b, 1e-15);
    EXPECT_NEAR(k["per_len2_s"].get<double>(), k["b_s_per_token2"].get<double>() / b, 1e-15);
    int rows_checked = 0;
    for (const json& row : res["rows"]) {
      if (row["outcome"] != "ok" || !row["lengths"].empty() || row["lever"] == "batch") continue;
      const std::string lever = row["lever"];
      if (c["lever"].get<std::string>().find(lever) == std::string::npos) continue;
      const double w = row["width"].get<double>();
      const double t = k["a_s_per_token"].get<double>() * w + k["b_s_per_token2"].get<double>() * w * w;
      EXPECT_NEAR(t, row["median_s"].get<double>(), 1e-9 + 1e-6 * t) << row.dump();
      ++rows_checked;
    }
    EXPECT_GE(rows_checked, 2);
    // The prediction: the curve over every micro-batch (dense rows at the width on a padded path,
    // the real tokens on one that packs).
    const bool packs = c["packs"];
    auto predict = [&](const std::vector<int64_t>& m) {
      double tokens = 0, len2 = 0;
      const double w = static_cast<double>(std::max(m[0], m[1]));
      for (int64_t l : m) {
        const double x = packs ? static_cast<double>(l) : w;
        tokens += x;
        len2 += x * x;
      }
      return k["fixed_s"].get<double>() + k["per_token_s"].get<double>() * tokens +
             k["per_len2_s"].get<double>() * len2;
    };
    double total = 0;
    for (const auto& m : mbs) total += predict(m);
    const json& p = c["predicted"];
    EXPECT_NEAR(p["seconds"].get<double>(), total, 1e-9 * total);
    EXPECT_NEAR(p["hours"].get<double>(), total / 3600, 1e-12);
    EXPECT_EQ(p["optimizer_steps"], 5);
    EXPECT_GT(c["flops"]["performed"].get<double>(), 0);
    EXPECT_GE(c["flops"]["performed"].get<double>(), 0.5 * c["flops"]["intended"].get<double>());

    const json& s = c["sampled"];
    if (!s["measured"].get<bool>()) continue;
    measured.insert(c["lever"]);
    // Six distinct micro-batches of the epoch, the same six for every configuration.
    const auto sample = s["sample"].get<std::vector<int64_t>>();
    ASSERT_EQ(sample.size(), 6u);
    EXPECT_EQ(std::set<int64_t>(sample.begin(), sample.end()).size(), 6u);
    for (int64_t i : sample) EXPECT_TRUE(i >= 0 && i < 20);
    if (first_sample.empty()) first_sample = sample;
    EXPECT_EQ(sample, first_sample);
    const auto m = s["measured_s"].get<std::vector<double>>();
    const auto pr = s["predicted_s"].get<std::vector<double>>();
    ASSERT_EQ(m.size(), 6u);
    ASSERT_EQ(pr.size(), 6u);
    for (std::size_t i = 0; i < 6; ++i) {
      EXPECT_GT(m[i], 0);
      EXPECT_NEAR(pr[i], predict(mbs[static_cast<size_t>(sample[i])]), 1e-12 + 1e-9 * pr[i]);
    }
    // The ratio estimate and its interval, recomputed.
    const double sm = std::accumulate(m.begin(), m.end(), 0.0);
    const double sp = std::accumulate(pr.begin(), pr.end(), 0.0);
    const double ratio = sm / sp;
    double se2 = 0;
    for (std::size_t i = 0; i < 6; ++i) se2 += std::pow(m[i] - ratio * pr[i], 2);
    se2 /= 5;
    const double half = t975_df5() * 20 * std::sqrt((1 - 6.0 / 20) * se2 / 6);
    const double est = ratio * total;
    EXPECT_EQ(s["estimator"], "ratio");
    EXPECT_NEAR(s["ratio"].get<double>(), ratio, 1e-12);
    EXPECT_NEAR(s["estimate_s"].get<double>(), est, 1e-9 * est);
    EXPECT_NEAR(s["half_s"].get<double>(), half, 1e-5 * half + 1e-12);
    EXPECT_NEAR(s["estimate_hours"].get<double>(), est / 3600, 1e-12);
    EXPECT_EQ(s["agree"].get<bool>(), std::abs(total - est) <= half);
    // The expansion estimate beside it: 20 × the sample's mean.
    EXPECT_NEAR(s["expansion_s"].get<double>(), 20 * sm / 6, 1e-9 * sm);
  }
  // The default --epoch-measure: the baseline and the configuration the packing lever runs.
  EXPECT_EQ(measured.size(), 2u);
  bool packing_measured = false;
  for (const std::string& l : measured) packing_measured |= l.find("packing") != std::string::npos;
  EXPECT_TRUE(packing_measured);
}

TEST(EpochCli, PackedSamplerRunsOnlyWhereAttentionStaysInsideEachRecord) {
  const std::string dir = make_temp_dir();
  auto args = epoch_args(write_dataset(dir), dir + "/p.json");
  args.insert(args.end(), {"--sampler", "packed", "--epoch-measure", "none"});
  RunResult r = run_tprobe(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json e = json::parse(read_text(dir + "/p.json"))["results"]["epoch"];
  EXPECT_EQ(e["sampler"], "packed");
  const std::vector<int64_t> len = dataset_lengths();
  EXPECT_EQ(e["real_tokens"], std::accumulate(len.begin(), len.end(), int64_t{0}));
  for (const json& c : e["configs"]) {
    if (c["packs"].get<bool>()) {
      EXPECT_EQ(c["status"], "predicted") << c.dump();
    } else {
      EXPECT_EQ(c["status"], "not applicable") << c.dump();
    }
    EXPECT_FALSE(c["sampled"]["measured"].get<bool>());
  }
}

TEST(EpochCli, BrokenOrderFilesAndSamplersFailBeforeAnyStep) {
  const std::string dir = make_temp_dir();
  const std::string data = write_dataset(dir);
  write_text(dir + "/bad.jsonl",
             R"({"schema":"tprobe.bucket-order","version":1,"records":40,"micro_batches":20,"micro_batch":2,"max_seq_len":16})"
             "\n"
             R"({"micro_batch":0,"width":9,"records":[0,40]})"
             "\n");
  auto args = epoch_args(data, dir + "/x.json");
  args.insert(args.end(), {"--sampler", "order:" + dir + "/bad.jsonl"});
  RunResult r = run_tprobe(args);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("bad.jsonl:2: record index 40 outside 0 .. 39"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("baseline"), std::string::npos) << "a step ran: " << r.out;
  EXPECT_FALSE(file_exists(dir + "/x.json"));
  // Another dataset's order: its record count.
  write_text(dir + "/other.jsonl",
             R"({"schema":"tprobe.bucket-order","version":1,"records":2,"micro_batches":1,"micro_batch":2,"max_seq_len":16})"
             "\n"
             R"({"micro_batch":0,"width":9,"records":[0,1]})"
             "\n");
  args = epoch_args(data, dir + "/x.json");
  args.insert(args.end(), {"--sampler", "order:" + dir + "/other.jsonl"});
  r = run_tprobe(args);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("written for a dataset of 2 records; this one has 40"), std::string::npos)
      << r.err;
  for (const char* bad : {"bucket:0", "random", "order:"}) {
    args = epoch_args(data, dir + "/x.json");
    args.insert(args.end(), {"--sampler", bad});
    r = run_tprobe(args);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
  }
  args = epoch_args(data, dir + "/x.json");
  args.insert(args.end(), {"--epoch-measure", "magic"});
  r = run_tprobe(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // The output guard knows the order file is an input: --json cannot overwrite it.
  write_text(dir + "/order.jsonl", "x\n");
  args = epoch_args(data, dir + "/order.jsonl");
  args.insert(args.end(), {"--sampler", "order:" + dir + "/order.jsonl"});
  r = run_tprobe(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(read_text(dir + "/order.jsonl"), "x\n");
}

}  // namespace
}  // namespace tprobe::testing
