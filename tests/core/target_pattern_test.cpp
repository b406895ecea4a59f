// The linear-time target_modules matcher: Python re.fullmatch results worked by hand for the
// subset, every refused construct with its message, and the hostile patterns of issue 23 bounded.
#include "tprobe/core/adapter/target_pattern.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

bool fm(const std::string& pattern, const std::string& text) {
  return TargetPattern(pattern, "cfg").full_match(text);
}

std::string refusal(const std::string& pattern) {
  try {
    TargetPattern p(pattern, "cfg");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TargetPattern, PeftStylePatternsFullMatch) {
  const std::string q = "model.language_model.layers.3.self_attn.q_proj";
  EXPECT_TRUE(fm(".*\\.(q_proj|v_proj)", q));
  EXPECT_TRUE(fm(R"(.*layers\.\d+\.self_attn\.(q|k|v|o)_proj)", q));
  EXPECT_FALSE(fm(R"(.*layers\.\d+\.self_attn\.(k|v|o)_proj)", q));
  // Full match, not search: a suffix alone does not match.
  EXPECT_FALSE(fm("q_proj", q));
  EXPECT_FALSE(fm(".*self_attn", q));
  EXPECT_TRUE(fm("^.*q_proj$", q));
  EXPECT_TRUE(fm(R"(.*\.layers\.[0-9]{1,2}\.self_attn\.[qk]_proj)", q));
  EXPECT_FALSE(fm(R"(.*\.layers\.[0-9]{2}\.self_attn\.[qk]_proj)", q));
  EXPECT_TRUE(fm(R"(.*\.layers\.[^a-z]\..*)", q));
  EXPECT_TRUE(fm(R"((?:model\.)?language_model.*_proj)", "language_model.x.up_proj"));
  EXPECT_TRUE(fm("a+b*c?", "aaab"));
  EXPECT_FALSE(fm("a+b*c?", "bc"));
  EXPECT_TRUE(fm("a*?b+?", "aabb"));  // lazy forms: the same full matches
  EXPECT_TRUE(fm("a{3}", "aaa"));
  EXPECT_FALSE(fm("a{3}", "aaaa"));
  EXPECT_TRUE(fm("a{2,}", "aaaaa"));
  EXPECT_FALSE(fm("a{2,}", "a"));
  EXPECT_TRUE(fm("a{,2}", ""));
  EXPECT_TRUE(fm("x{y}", "x{y}"));  // not a counted repetition: literal braces, as in Python
  EXPECT_TRUE(fm("a|", ""));
  EXPECT_TRUE(fm(R"(\w+\s\W)", "ab_9 ."));
  EXPECT_TRUE(fm(R"([\d_-]+)", "1_-2"));
  EXPECT_TRUE(fm("[]a]", "]"));
  EXPECT_FALSE(fm(".", "\n"));
  EXPECT_TRUE(fm("(a*)*", "aaaa"));  // an empty-matching loop terminates
  EXPECT_TRUE(fm("(a|b)*c", "ababbac"));
}

TEST(TargetPattern, ConstructsOutsideTheSubsetAreRefusedSayingWhat) {
  EXPECT_NE(refusal(R"((a)\1)").find("backreference"), std::string::npos);
  EXPECT_NE(refusal("(?=a)a").find("lookaround"), std::string::npos);
  EXPECT_NE(refusal("(?<!a)b").find("lookaround"), std::string::npos);
  EXPECT_NE(refusal("(?P<n>a)").find("named groups"), std::string::npos);
  EXPECT_NE(refusal("(?i)a").find("inline flags"), std::string::npos);
  EXPECT_NE(refusal(R"(\bq)").find("'\\b'"), std::string::npos);
  EXPECT_NE(refusal("a{65}").find("above 64"), std::string::npos);
  EXPECT_NE(refusal("a**").find("repetition of a repetition"), std::string::npos);
  EXPECT_NE(refusal("a*+").find("possessive"), std::string::npos);
  EXPECT_NE(refusal("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(refusal("(a").find("without its ')'"), std::string::npos);
  EXPECT_NE(refusal("a)").find("unbalanced"), std::string::npos);
  EXPECT_NE(refusal("[a").find("without its ']'"), std::string::npos);
  EXPECT_NE(refusal("[z-a]").find("reversed"), std::string::npos);
  EXPECT_NE(refusal("a\\").find("trailing backslash"), std::string::npos);
  EXPECT_NE(refusal("a{5,2}").find("n < m"), std::string::npos);
  // Each message names the file and the offset.
  const std::string m = refusal("ab(?=c)");
  EXPECT_EQ(m.rfind("cfg: target_modules regex 'ab(?=c)'", 0), 0u) << m;
  EXPECT_NE(m.find("offset 3"), std::string::npos) << m;
}

TEST(TargetPattern, HostilePatternsAreBounded) {
  // 20,000 nested groups: std::regex recursed to SIGSEGV; refused by length here, and nesting
  // within the length bound by depth.
  const std::string nested = std::string(20000, '(') + "a" + std::string(20000, ')');
  EXPECT_NE(refusal(nested).find("longer than 4096"), std::string::npos);
  const std::string deep = std::string(2000, '(') + "a" + std::string(2000, ')');
  EXPECT_NE(refusal(deep).find("nested deeper than 32"), std::string::npos);
  const std::string ok = std::string(32, '(') + "a" + std::string(32, ')');
  EXPECT_TRUE(TargetPattern(ok, "cfg").full_match("a"));
  // A length bound.
  EXPECT_NE(refusal(std::string(5000, 'a')).find("longer than 4096"), std::string::npos);
  // Counted repetitions that multiply: refused by program size, not by running out of memory.
  EXPECT_NE(refusal("((((a{64}){64}){64}){64})").find("instructions"), std::string::npos);
  // The backtracking trap runs in linear time: .*(.*)*(.*)*...X against a long name without X.
  std::string trap = ".*";
  for (int i = 0; i < 30; ++i) trap += "(.*)*";
  trap += "X";
  const TargetPattern p(trap, "cfg");
  const std::string name = std::string(4000, 'a');
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(p.full_match(name));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0);  // milliseconds in practice; a backtracker takes longer than the universe
  EXPECT_TRUE(p.full_match(name + "X"));
}

}  // namespace
}  // namespace tprobe::core
