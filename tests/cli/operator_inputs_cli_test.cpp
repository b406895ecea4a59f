// profile on the operator's inputs (gemma4-tiny, CPU): the dataset's tokens in the measured step,
// the experts' load per layer, and the forced routing. The digest is checked against a batch
// rebuilt here from the records the evidence names and hashed by coreutils' sha256sum, not by
// tprobe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

constexpr int64_t kExperts = 8, kTopK = 2, kVocab = 512;  // gemma4-tiny (docs/profile.md)

std::vector<std::vector<int64_t>> write_dataset(const std::string& path, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int64_t>> records;
  std::ofstream out(path);
  for (int r = 0; r < 12; ++r) {
    std::vector<int64_t> ids(5 + rng() % 20);
    for (int64_t& id : ids) id = rng() % kVocab;
    out << json{{"input_ids", ids}}.dump() << "\n";
    records.push_back(ids);
  }
  return records;
}

std::string sha256sum_of(const std::vector<int64_t>& ids, const std::string& dir) {
  const std::string bin = dir + "/batch.bin";
  {
    std::ofstream out(bin, std::ios::binary);
    for (int64_t v : ids) {
      unsigned char b[8];
      for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(static_cast<uint64_t>(v) >> (8 * i));
      out.write(reinterpret_cast<const char*>(b), 8);
    }
  }
  FILE* p = popen(("sha256sum " + bin).c_str(), "r");
  char buf[128] = {};
  const std::size_t n = fread(buf, 1, 64, p);
  pclose(p);
  return std::string(buf, n);
}

json profile(const std::string& dir, const std::string& name, std::vector<std::string> extra) {
  const std::string path = dir + "/" + name + ".json";
  std::vector<std::string> args = {"profile", "--device", "cpu", "--model", "gemma4-tiny",
                                   "--dtype", "fp32", "--rank", "4", "--alpha", "8",
                                   "--ce-chunk", "16", "--widths", "16", "--repeats", "1",
                                   "--memory", "off", "--json", path};
  args.insert(args.end(), extra.begin(), extra.end());
  RunResult r = run_tprobe(args);
  EXPECT_EQ(r.exit_code, 0) << name << r.out << r.err;
  return json::parse(read_text(path))["results"];
}

TEST(OperatorInputsCli, TheDatasetsTokensRunAndTheirDigestIsTheNamedRecords) {
  const std::string dir = make_temp_dir();
  const auto a = write_dataset(dir + "/a.jsonl", 1), b = write_dataset(dir + "/b.jsonl", 2);
  const json ra = profile(dir, "a", {"--dataset", dir + "/a.jsonl", "--routing", "zipf:1.2"});
  const json rb = profile(dir, "b", {"--dataset", dir + "/b.jsonl", "--routing", "balanced"});
  const json rr = profile(dir, "random", {});
  ASSERT_EQ(ra["points"].size(), 1u);
  ASSERT_EQ(rb["points"].size(), 1u);
  const json& pa = ra["points"][0];
  const json& pb = rb["points"][0];
  // The batch rebuilt by hand: each row's records end to end, cut at the width (filled rows).
  const int64_t batch = pa["batch"], width = pa["width"];
  std::vector<int64_t> ids;
  for (const json& row : pa["tokens"]["records"]) {
    std::vector<int64_t> r;
    for (const json& rec : row) {
      const auto& src = a.at(rec.get<size_t>());
      r.insert(r.end(), src.begin(), src.end());
    }
    ASSERT_GE(static_cast<int64_t>(r.size()), width);
    ids.insert(ids.end(), r.begin(), r.begin() + width);
  }
  ASSERT_EQ(static_cast<int64_t>(ids.size()), batch * width);
  EXPECT_EQ(pa["tokens"]["sha256"], sha256sum_of(ids, dir));
  EXPECT_NE(pa["tokens"]["sha256"], pb["tokens"]["sha256"]);  // two datasets, two digests
  EXPECT_TRUE(rr["points"][0]["tokens"].is_null());             // random ids: no tokens
  // The counts: one entry per MoE layer (all 6 of gemma4-tiny), each summing to B × S × k.
  for (const json* r : {&ra, &rb, &rr}) {
    const json& p = (*r)["points"][0];
    EXPECT_EQ(p["routed_per_layer"], batch * width * kTopK);
    ASSERT_EQ(p["expert_load"].size(), 6u);
    for (const json& layer : p["expert_load"]) {
      int64_t sum = 0;
      for (const json& t : layer["tokens"]) sum += t.get<int64_t>();
      EXPECT_EQ(sum, batch * width * kTopK);
      EXPECT_EQ(layer["tokens"].size(), static_cast<size_t>(kExperts));
    }
  }
  // Balanced: every expert within one token of the others, in every layer.
  for (const json& layer : pb["expert_load"]) {
    std::vector<int64_t> t = layer["tokens"].get<std::vector<int64_t>>();
    EXPECT_LE(*std::max_element(t.begin(), t.end()) - *std::min_element(t.begin(), t.end()), 1);
  }
  // Zipf 1.2: max / mean is E·π_max / k, π by water-filling (Σ min(1, c·(e+1)^-S) = k,
  // bisected here), within 5 %.
  auto total = [](long double c) {
    long double t = 0;
    for (int e = 0; e < kExperts; ++e) t += std::min<long double>(1, c * std::pow(e + 1.0L, -1.2L));
    return t;
  };
  long double lo = 0, hi = 64;
  for (int i = 0; i < 200; ++i) ((total((lo + hi) / 2) < kTopK) ? lo : hi) = (lo + hi) / 2;
  const double implied = static_cast<double>(kExperts * std::min<long double>(1, hi) / kTopK);
  for (const json& layer : pa["expert_load"]) {
    EXPECT_NEAR(layer["max_over_mean"].get<double>(), implied, 0.05 * implied);
  }
  EXPECT_EQ(ra["provenance"]["config"]["routing"], "zipf:1.2");
  EXPECT_EQ(rr["provenance"]["config"]["routing"], "computed");
}

TEST(OperatorInputsCli, BadDatasetsAndRoutingsAreOneLineUsageErrors) {
  const std::string dir = make_temp_dir();
  {
    std::ofstream(dir + "/lengths.jsonl") << "{\"length\": 40}\n{\"length\": 40}\n";
    std::ofstream(dir + "/big.jsonl") << "{\"input_ids\": [1, 2, 512, 4]}\n{\"input_ids\": [3, 4]}\n";
    std::ofstream(dir + "/l.csv") << "length\n40\n";
  }
  const std::vector<std::string> base = {"profile", "--device", "cpu", "--model", "gemma4-tiny",
                                         "--widths", "16", "--json", dir + "/out.json"};
  auto refused = [&](std::vector<std::string> extra, int code, const std::string& words) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = run_tprobe(args);
    EXPECT_EQ(r.exit_code, code) << r.out << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
    EXPECT_FALSE(file_exists(dir + "/out.json"));
  };
  refused({"--routing", "zipf:0"}, 2, "--routing");
  refused({"--routing", "zipf"}, 2, "--routing");
  refused({"--dataset", dir + "/lengths.jsonl"}, 1, "has no input_ids");
  refused({"--dataset", dir + "/big.jsonl", "--sampler", "sequential"}, 1, "0..511");
  refused({"--dataset", dir + "/l.csv"}, 2, "input_ids");
  refused({"--dataset", "synthetic"}, 2, "no token ids");
  refused({"--dataset", dir + "/l.csv"}, 2, "csv records");
  refused({"--sampler", "shuffled"}, 2, "--dataset");
  refused({"--dataset", dir + "/lengths.jsonl", "--pad-fraction", "0.5"}, 2, "--pad-fraction");
}

}  // namespace
}  // namespace tprobe::testing
