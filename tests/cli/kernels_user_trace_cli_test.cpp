// End-to-end: `tprobe kernels` on the traces of the step most users run, recorded on the H200 by
// benchmarks/gpu/user-traces.sh — `model(input_ids, labels).loss.backward()` under PEFT with
// use_reentrant=False and with_stack=True (hf-sdpa-stack-nonreentrant-2x256.json.gz), and the
// same step inside the user's own record_function ranges with a side-stream copy and CUDA sync
// events (hf-sdpa-ranges-nonreentrant-2x256.json.gz) — and the negative controls of the rules
// that place its rows.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_tprobe.hpp"
#include "support/gzip_text.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kDir = std::string(TPROBE_FIXTURES_DIR) + "/traces";
const std::string kStack = kDir + "/hf-sdpa-stack-nonreentrant-2x256.json.gz";

json kernels_results(const std::vector<std::string>& args) {
  const std::string path = make_temp_dir() + "/k.json";
  std::vector<std::string> all = {"kernels"};
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--json");
  all.push_back(path);
  RunResult r = run_tprobe(all);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  return json::parse(read_text(path))["results"];
}

// The text with every "Sequence number" argument taken out (`"Sequence number": N, `).
std::string without_sequence_numbers(const std::string& text) {
  static const std::string key = "\"Sequence number\": ";
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  for (std::size_t k; (k = text.find(key, at)) != std::string::npos;) {
    out.append(text, at, k - at);
    std::size_t e = k + key.size();
    while (e < text.size() && text[e] >= '0' && text[e] <= '9') ++e;
    if (e < text.size() && text[e] == ',') ++e;
    while (e < text.size() && (text[e] == ' ' || text[e] == '\n')) ++e;
    at = e;
  }
  out.append(text, at, std::string::npos);
  return out;
}

// Every row of the standard non-reentrant trace is placed (issue: 4.84 % of its kernel time sat in
// backward ops without a flow: the engine's glue around a node); the negative control strips the
// sequence numbers the rule matches by, and exactly those rows come back untagged.
TEST(KernelsCli, NonReentrantFixtureIsPlacedAndItsGlueNeedsTheSequenceNumbers) {
  const json res = kernels_results({kStack, "--model", "gemma4-tiny"});
  const json& a = res["attribution"];
  EXPECT_EQ(a["rows"], 4689);
  EXPECT_EQ(a["untagged_rows"], 0);
  EXPECT_LE(a["untagged_kernel_share_ratio"].get<double>(), 0.005);
  EXPECT_GT(a["linked_evaluate_rows"].get<int64_t>(), 0);
  double sum = 0;
  for (const json& row : res["by_phase_part"]) sum += row["kernel_s"].get<double>();
  EXPECT_NEAR(sum, a["kernel_s"].get<double>(), 1e-9);

  const std::string dir = make_temp_dir();
  {
    std::ifstream in(kStack, std::ios::binary);
    const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(dir + "/stripped.json", std::ios::binary);
    out << without_sequence_numbers(testing_support::gunzip_text(gz));
  }
  const json control = kernels_results({dir + "/stripped.json", "--model", "gemma4-tiny"});
  const json& c = control["attribution"];
  EXPECT_EQ(c["rows"], 4689);
  EXPECT_EQ(c["linked_evaluate_rows"], 0);
  EXPECT_EQ(c["untagged_unlinked_rows"], a["linked_evaluate_rows"]);
  EXPECT_GT(c["untagged_kernel_share_ratio"].get<double>(), 0.04);
}

}  // namespace
}  // namespace tprobe::testing
