// The strict JSON parser behind every reader of config, index, header and evidence files:
// duplicate keys at any object size, depth limit, order kept, messages safe to print.
#include "base/strict_json.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core::detail {
namespace {

std::string message_of(const std::string& text) {
  try {
    parse_json_strict(text, "doc.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string object_of(int n, const std::string& extra_key = "") {
  std::string s = "{";
  for (int i = 0; i < n; ++i) s += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  if (!extra_key.empty()) s += "\"" + extra_key + "\":0,";
  s.back() = '}';
  return s;
}

TEST(StrictJson, KeepsInsertionOrderAndValues) {
  Json doc = parse_json_strict(R"({"b":1,"a":[true,null,"x",-2,3.5],"c":{"z":{},"y":[]}})", "d");
  ASSERT_TRUE(doc.is_object());
  std::string keys;
  for (const auto& [k, v] : doc.items()) keys += k;
  EXPECT_EQ(keys, "bac");
  EXPECT_EQ(doc["a"][3].get<int64_t>(), -2);
  EXPECT_DOUBLE_EQ(doc["a"][4].get<double>(), 3.5);
  EXPECT_TRUE(doc["c"]["z"].is_object());
  EXPECT_TRUE(doc["c"]["y"].is_array());
  EXPECT_EQ(doc.dump(), R"({"b":1,"a":[true,null,"x",-2,3.5],"c":{"z":{},"y":[]}})");
  EXPECT_EQ(parse_json_strict("7", "d").get<int>(), 7);
  EXPECT_EQ(parse_json_strict("18446744073709551615", "d").get<uint64_t>(), UINT64_MAX);
}

// Small objects are searched directly, big ones through a hash set: both must find a repeat,
// wherever it is (first key, around the switch-over, far past it).
TEST(StrictJson, RefusesADuplicateAtEveryObjectSize) {
  for (int n : {1, 2, 14, 15, 16, 17, 40, 5000}) {
    std::string msg = message_of(object_of(n, "k0"));
    EXPECT_NE(msg.find("doc.json: key 'k0' appears twice"), std::string::npos) << n << ": " << msg;
    msg = message_of(object_of(n, "k" + std::to_string(n - 1)));
    EXPECT_NE(msg.find("appears twice"), std::string::npos) << n << ": " << msg;
    EXPECT_EQ(message_of(object_of(n, "fresh")), "") << n;
  }
  // The same key in sibling or nested objects is fine.
  EXPECT_EQ(message_of(R"({"a":{"x":1},"b":{"x":2,"a":{"x":3}}})"), "");
  EXPECT_NE(message_of(R"([{"x":1},{"x":2,"x":3}])").find("'x' appears twice"), std::string::npos);
}

TEST(StrictJson, RefusesDeepNestingInsteadOfRecursing) {
  std::string deep(kMaxJsonDepth + 1, '[');
  deep += std::string(kMaxJsonDepth + 1, ']');
  EXPECT_NE(message_of(deep).find("nesting deeper than"), std::string::npos);
  std::string ok(kMaxJsonDepth, '[');
  ok += std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(message_of(ok), "");
}

TEST(StrictJson, SyntaxErrorsNameTheDocumentAndQuoteNoRawBytes) {
  std::string msg = message_of(std::string("{\"a\":\x01\xff\xfe garbage"));
  EXPECT_EQ(msg.rfind("doc.json: not valid JSON", 0), 0u) << msg;
  for (char c : msg) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "raw byte in: " << msg;
  EXPECT_NE(message_of("").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message_of("{} {}").find("not valid JSON"), std::string::npos);
}

TEST(StrictJson, PrintableEscapesAndCuts) {
  EXPECT_EQ(printable("ab\n\xff"), "ab\\x0a\\xff");
  EXPECT_EQ(printable(std::string(100, 'x'), 10), std::string(10, 'x') + "...");
}

}  // namespace
}  // namespace tprobe::core::detail
