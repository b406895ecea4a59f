// The attention registry is the one home of the attention paths: every probe's --attn takes
// exactly the registry's names for its use, and the mask probe's rules are hf-sdpa plus the
// registry's engine paths. A path added to the registry (and its engine code) shows up here in
// every probe without another edit; a probe with its own list fails this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "run_tprobe.hpp"
#include "tprobe/core/gemma4/attention_path.hpp"
#include "tprobe/core/mask/mask_geometry.hpp"

namespace tprobe::testing {
namespace {

// The value set CLI11 prints for --attn in `tprobe PROBE --help`: "--attn TEXT:{a,b,c}".
std::set<std::string> attn_values(const std::string& probe) {
  RunResult r = run_tprobe({probe, "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  const std::regex re(R"(--attn[^\n{]*\{([^}]*)\})");
  if (!std::regex_search(r.out, m, re)) {
    ADD_FAILURE() << probe << " --help shows no value set for --attn:\n" << r.out;
    return {};
  }
  std::set<std::string> out;
  std::string body = m[1];
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    std::string v = body.substr(start, comma - start);
    v.erase(std::remove(v.begin(), v.end(), ' '), v.end());
    if (!v.empty()) out.insert(v);
    start = comma + 1;
  }
  return out;
}

std::set<std::string> names(core::AttentionUse use) {
  const auto v = core::attention_names(use);
  return {v.begin(), v.end()};
}

TEST(AttentionRegistry, EveryPathHasOneEntryAndOneName) {
  std::set<std::string> seen;
  for (const auto& i : core::attention_registry()) {
    EXPECT_TRUE(seen.insert(i.name).second) << i.name;
    EXPECT_EQ(core::parse_attention_path(i.name), i.path);
    EXPECT_EQ(&core::attention_info(i.path), &i);
    EXPECT_STRNE(i.summary, "");
  }
  EXPECT_EQ(seen.size(), core::attention_path_names().size());
}

TEST(AttentionRegistry, EveryProbeTakesExactlyTheRegistrysNames) {
  EXPECT_EQ(attn_values("flops"), names(core::AttentionUse::kCost));
  EXPECT_EQ(attn_values("parity"), names(core::AttentionUse::kEngine));
  EXPECT_EQ(attn_values("profile"), names(core::AttentionUse::kEngine));
  std::set<std::string> mask = names(core::AttentionUse::kEngine);
  mask.insert("hf-sdpa");
  EXPECT_EQ(attn_values("mask"), mask);
  const auto rules = core::mask_rules_names();
  EXPECT_EQ(std::set<std::string>(rules.begin(), rules.end()), mask);
  // and each help text names every path it takes
  for (const char* probe : {"flops", "parity", "profile"}) {
    RunResult r = run_tprobe({probe, "--help"});
    for (const auto& n : attn_values(probe))
      EXPECT_NE(r.out.find(n + " ("), std::string::npos) << probe << " help lacks " << n;
  }
}

TEST(AttentionRegistry, ARefusedNameListsTheRegistrysNames) {
  RunResult r = run_tprobe({"flops", "--attn", "magic"});
  EXPECT_EQ(r.exit_code, 2);
  for (const auto& n : names(core::AttentionUse::kCost))
    EXPECT_NE(r.err.find(n), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tprobe::testing
