// The strict JSON parser behind every reader of config, index, header and evidence files:
// duplicate keys at any object size, depth limit, order kept, messages safe to print.
#include "base/strict_json.hpp"

#include <gtest/gtest.h>

#include <cstring>
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

// Syntax errors in tprobe's words with the byte (from 1), the line and column past the first
// line, and the bytes before it; never nlohmann's wording (issue 33).
TEST(StrictJson, SyntaxErrorsSayWhatAndWhereInTprobesWords) {
  EXPECT_EQ(message_of("this is not json\n"),
            "doc.json: not valid JSON at byte 2 near 'th': not a JSON value (an object, array, "
            "string, number, true, false or null)");
  EXPECT_EQ(message_of("{\"a\": 1,\n \"b\": [1, 2,, 3]}"),
            "doc.json: not valid JSON at byte 22 (line 2, column 13) near ' \"b\": [1, 2,,': "
            "unexpected ',' where a value should be");
  EXPECT_EQ(message_of("{\"a\" 1}"),
            "doc.json: not valid JSON at byte 6 near '{\"a\" 1': unexpected '1' where ':' should "
            "be");
  EXPECT_EQ(message_of("{\"a\": 1} x"),
            "doc.json: not valid JSON at byte 10 near '{\"a\": 1} x': more text follows the end of "
            "the JSON document");
  EXPECT_EQ(message_of("{\"a\": \"x\ty\"}"),
            "doc.json: not valid JSON at byte 9 near '{\"a\": \"x\\x09': a control character "
            "(\\x09) in a string (JSON needs it escaped)");
  EXPECT_EQ(message_of("[\"\\q\"]"),
            "doc.json: not valid JSON at byte 4 near '[\"\\q': invalid escape '\\q' in a string");
  EXPECT_EQ(message_of("{\"a\": 1e999}"),
            "doc.json: not valid JSON at byte 11 near '{\"a\": 1e999': a number too large for a "
            "double");
  EXPECT_EQ(message_of("{\"a\": [1, 2"),
            "doc.json: not valid JSON at byte 11 near '{\"a\": [1, 2': the text ends inside the "
            "JSON document (cut short?)");
  EXPECT_EQ(message_of(" \n"),
            "doc.json: not valid JSON at byte 0: the text is empty (no JSON value)");
  for (const char* bad : {"-x", "[1.]", "[tru]", "{\"a\":1,}", "\xef\xbb", "[\"\xff\"]"}) {
    const std::string msg = message_of(bad);
    EXPECT_EQ(msg.rfind("doc.json: not valid JSON at byte ", 0), 0u) << msg;
    EXPECT_EQ(msg.find("syntax error"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("last read"), std::string::npos) << msg;
  }
}

// Issue 46: nlohmann's lexer takes a NUL byte for the end of its input, so "DOC\0ANOTHER" passed
// the end-of-document check and the second document was never read. A raw NUL anywhere is
// refused, naming its byte; an escaped \u0000 in a string and trailing whitespace still parse.
TEST(StrictJson, RefusesANulByteAnywhere) {
  const std::string nul(1, '\0');
  for (const std::string& bad :
       {"{\"a\": 1}" + nul + "{\"a\": 2}", "{\"a\": 1}" + nul, "{\"a\": 1}\n" + nul + "\n",
        nul + "{\"a\": 1}", "{\"a\":" + nul + " 1}", "{\"a\": \"x" + nul + "y\"}",
        "[1, 2]" + nul + "garbage", nul}) {
    const std::string msg = message_of(bad);
    EXPECT_EQ(msg.rfind("doc.json: not valid JSON at byte " +
                            std::to_string(bad.find('\0') + 1),
                        0),
              0u)
        << msg;
    EXPECT_NE(msg.find("a NUL byte"), std::string::npos) << msg;
    for (char c : msg) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "raw byte in: " << msg;
  }
  // Negative controls: the escape is JSON's way to write a NUL, and whitespace may end a file.
  Json doc = parse_json_strict("{\"a\": \"x\\u0000y\"}", "d");
  EXPECT_EQ(doc["a"].get<std::string>(), std::string("x\0y", 3));
  for (const char* tail : {"\n", " \t\r\n", "\r\n\r\n", ""}) {
    EXPECT_EQ(message_of(std::string("{\"a\": 1}") + tail), "") << "tail of " << std::strlen(tail);
  }
  // Any other text after the document is still refused as before.
  EXPECT_NE(message_of("{\"a\": 1}\n{\"a\": 2}").find("more text follows"), std::string::npos);
}

TEST(StrictJson, PrintableEscapesAndCuts) {
  EXPECT_EQ(printable("ab\n\xff"), "ab\\x0a\\xff");
  EXPECT_EQ(printable(std::string(100, 'x'), 10), std::string(10, 'x') + "...");
}

}  // namespace
}  // namespace tprobe::core::detail
