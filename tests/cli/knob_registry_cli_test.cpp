// The knob registry is the one home of every step knob (core/step/knobs.hpp) and the attention
// registry of every attention path: each probe the binary registers (read from `tprobe --help`,
// never a hand list) that shows a knob's flag takes exactly that knob's values, and says each in its
// help; the mask probe's rule sets are hf-sdpa plus the registry's engine paths. A value added to a
// registry (and its engine code) shows up in every probe without another edit; a probe with a list
// of its own fails this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "run_tprobe.hpp"
#include "tprobe/core/mask/mask_geometry.hpp"
#include "tprobe/core/step/knobs.hpp"

namespace tprobe::testing {
namespace {

// The subcommands `tprobe --help` lists.
std::vector<std::string> probes() {
  RunResult r = run_tprobe({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out;
  const std::size_t at = r.out.find("Subcommands:");
  EXPECT_NE(at, std::string::npos) << r.out;
  std::regex re(R"(\n  ([a-z][a-z-]*)\s)");
  for (auto it = std::sregex_iterator(r.out.begin() + static_cast<std::ptrdiff_t>(at), r.out.end(), re);
       it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

// The value set CLI11 prints for `flag` in a help text ("--attn TEXT:{a,b,c}"); nullopt when the
// help has no such option.
std::optional<std::set<std::string>> values(const std::string& help, const std::string& flag) {
  std::smatch m;
  const std::regex re("\\n\\s*" + flag + R"( TEXT:\{([^}]*)\})");
  if (!std::regex_search(help, m, re)) return std::nullopt;
  std::set<std::string> out;
  std::string body = m[1];
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    std::string v = body.substr(start, comma - start);
    v.erase(std::remove(v.begin(), v.end(), ' '), v.end());
    if (!v.empty()) out.insert(v);
    start = comma + 1;
  }
  return out;
}

std::set<std::string> set_of(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

TEST(KnobRegistry, EveryRegisteredProbeTakesExactlyTheRegistrysValues) {
  const std::vector<std::string> all = probes();
  ASSERT_GE(all.size(), 10u);
  int checked = 0;
  for (const std::string& probe : all) {
    const RunResult r = run_tprobe({probe, "--help"});
    ASSERT_EQ(r.exit_code, 0) << probe << r.err;
    for (const core::KnobInfo& k : core::knob_registry()) {
      if (k.values.empty()) continue;  // an integer (--batch)
      const auto got = values(r.out, k.flag);
      if (!got) continue;
      ++checked;
      if (probe == "mask" && k.id == core::Knob::kAttn) {
        // mask's --attn picks the rule set its assertions use: hf-sdpa or an engine path
        EXPECT_EQ(*got, set_of(core::mask_rules_names()));
        continue;
      }
      // every value the engine runs (flops: every path with a FLOP rule), old spellings too
      const bool all_values = *got == set_of(core::knob_value_names(k.id, false, true));
      const bool engine = *got == set_of(core::knob_value_names(k.id, true, true));
      EXPECT_TRUE(all_values || engine) << probe << " " << k.flag;
      for (const std::string& v : *got) {
        const bool alias = std::any_of(k.aliases.begin(), k.aliases.end(),
                                       [&](const auto& a) { return v == a.first; });
        if (!alias) {
          EXPECT_NE(r.out.find(v + " ("), std::string::npos) << probe << " help lacks " << v;
        }
      }
    }
  }
  EXPECT_GE(checked, 12);  // profile's seven knobs, parity's three, flops' two, mask's rules
  const auto rules = core::mask_rules_names();
  EXPECT_EQ(rules.front(), "hf-sdpa");
  std::set<std::string> engine = set_of(core::attention_names(core::AttentionUse::kEngine));
  engine.insert("hf-sdpa");
  EXPECT_EQ(set_of(rules), engine);
}

TEST(KnobRegistry, ARefusedValueListsTheRegistrysNames) {
  RunResult r = run_tprobe({"flops", "--attn", "magic"});
  EXPECT_EQ(r.exit_code, 2);
  for (const auto& n : core::attention_names(core::AttentionUse::kCost))
    EXPECT_NE(r.err.find(n), std::string::npos) << r.err;
  r = run_tprobe({"profile", "--norm", "magic"});
  EXPECT_EQ(r.exit_code, 2);
  for (const auto& n : core::knob_value_names(core::Knob::kNorm, true))
    EXPECT_NE(r.err.find(n), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tprobe::testing
