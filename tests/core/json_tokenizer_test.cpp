// The streaming JSON tokenizer under the trace reader: tokens and their text, every strict-JSON
// refusal (escapes, surrogates, control characters, UTF-8, numbers, literals, structure,
// truncation, depth), and the same tokens whatever the chunk size.
#include "trace/read/detail/json_tokenizer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core::detail {
namespace {

class StringSource : public JsonByteSource {
 public:
  explicit StringSource(std::string bytes) : bytes_(std::move(bytes)) {}
  std::size_t read(char* buf, std::size_t size) override {
    const std::size_t n = std::min(size, bytes_.size() - pos_);
    bytes_.copy(buf, n, pos_);
    pos_ += n;
    return n;
  }

 private:
  std::string bytes_;
  std::size_t pos_ = 0;
};

// Every token of `doc` as text: "{", "}", "[", "]", "K:<key>", "S:<string>", "N:<raw>/<kind>"
// (i = int64 and its value, u = uint64 and its value, f = double), "true", "false", "null",
// and "END"; or the error message as the last entry.
std::vector<std::string> tokens(const std::string& doc, std::size_t chunk = 1 << 18,
                                int depth = JsonTokenizer::kDefaultMaxDepth) {
  StringSource src(doc);
  JsonTokenizer tz(src, "t.json", chunk, depth);
  std::vector<std::string> out;
  try {
    for (;;) {
      const JsonToken t = tz.next();
      switch (t) {
        case JsonToken::kBeginObject:
          out.push_back("{");
          break;
        case JsonToken::kEndObject:
          out.push_back("}");
          break;
        case JsonToken::kBeginArray:
          out.push_back("[");
          break;
        case JsonToken::kEndArray:
          out.push_back("]");
          break;
        case JsonToken::kKey:
          out.push_back("K:" + std::string(tz.text()));
          break;
        case JsonToken::kString:
          out.push_back("S:" + std::string(tz.text()));
          break;
        case JsonToken::kNumber: {
          std::string n = "N:" + std::string(tz.text()) + "/";
          if (tz.number_kind() == JsonNumberKind::kInt64) {
            n += "i" + std::to_string(tz.int64_value());
          } else if (tz.number_kind() == JsonNumberKind::kUint64) {
            n += "u" + std::to_string(tz.uint64_value());
          } else {
            n += "f";
          }
          out.push_back(n);
          break;
        }
        case JsonToken::kTrue:
          out.push_back("true");
          break;
        case JsonToken::kFalse:
          out.push_back("false");
          break;
        case JsonToken::kNull:
          out.push_back("null");
          break;
        case JsonToken::kEnd:
          out.push_back("END");
          EXPECT_EQ(tz.bytes_read(), static_cast<int64_t>(doc.size()));
          return out;
      }
    }
  } catch (const Error& e) {
    out.push_back(std::string("ERROR: ") + e.what());
  }
  return out;
}

std::string error_of(const std::string& doc, std::size_t chunk = 1 << 18) {
  const std::vector<std::string> t = tokens(doc, chunk);
  if (t.empty() || t.back().rfind("ERROR: ", 0) != 0) return "";
  return t.back().substr(7);
}

// The error without its "near '...'" context (which shows what the current chunk holds).
std::string error_without_context(const std::string& doc, std::size_t chunk) {
  std::string e = error_of(doc, chunk);
  const std::size_t a = e.find(" near '");
  const std::size_t b = e.rfind("': ");
  if (a != std::string::npos && b != std::string::npos && b > a) e.erase(a, b + 1 - a);
  return e;
}

using Tokens = std::vector<std::string>;

TEST(JsonTokenizer, TokensOfADocument) {
  EXPECT_EQ(
      tokens(R"( {"a": [1, -2.5, "x", true, false, null, {}, []], "b": {"c": 0}} )"),
      (Tokens{"{", "K:a", "[", "N:1/i1", "N:-2.5/f", "S:x", "true",   "false", "null", "{",  "}",
              "[", "]",   "]", "K:b",    "{",        "K:c", "N:0/i0", "}",     "}",    "END"}));
  // Any value may be the whole document.
  EXPECT_EQ(tokens("\"s\""), (Tokens{"S:s", "END"}));
  EXPECT_EQ(tokens("12\n"), (Tokens{"N:12/i12", "END"}));
  EXPECT_EQ(tokens("null"), (Tokens{"null", "END"}));
  EXPECT_EQ(tokens("[]"), (Tokens{"[", "]", "END"}));
}

TEST(JsonTokenizer, EscapesDecodeToUtf8) {
  EXPECT_EQ(tokens(R"(["\"\\\/\b\f\n\r\t"])"), (Tokens{"[", "S:\"\\/\b\f\n\r\t", "]", "END"}));
  EXPECT_EQ(tokens(R"(["\u0041\u00e9\u20AC"])"),
            (Tokens{"[", "S:A\xc3\xa9\xe2\x82\xac", "]", "END"}));
  // A surrogate pair is one code point (U+1F600), four UTF-8 bytes.
  EXPECT_EQ(tokens(R"(["a\ud83d\ude00b"])"), (Tokens{"[",
                                                     "S:a\xf0\x9f\x98\x80"
                                                     "b",
                                                     "]", "END"}));
  // \u0000 is a real NUL inside the text.
  EXPECT_EQ(tokens(R"(["x\u0000y"])"), (Tokens{"[", std::string("S:x\0y", 5), "]", "END"}));
  // Escapes in keys too.
  EXPECT_EQ(tokens(R"({"k\u0031": 1})"), (Tokens{"{", "K:k1", "N:1/i1", "}", "END"}));
}

TEST(JsonTokenizer, BadEscapesAreRefused) {
  EXPECT_NE(error_of(R"(["\x"])").find("invalid escape '\\x'"), std::string::npos);
  EXPECT_NE(error_of(R"(["\u12G4"])").find("four hex digits"), std::string::npos);
  EXPECT_NE(error_of(R"(["\u12"])").find("four hex digits"), std::string::npos);
  EXPECT_NE(error_of(R"(["\ud83d"])").find("high surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"(["\ud83dx"])").find("high surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"(["\ud83d\u0041"])").find("high surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"(["\ud83d\ud83d"])").find("high surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"(["\ude00"])").find("low surrogate"), std::string::npos);
  // Position: 1-based byte of the offending character, as the message says.
  EXPECT_NE(error_of(R"(["ab\q"])").find("t.json: not valid JSON at byte 6 "), std::string::npos)
      << error_of(R"(["ab\q"])");
}

TEST(JsonTokenizer, ControlCharactersInStringsAreRefused) {
  for (char c : {'\x01', '\n', '\t', '\x1f', '\0'}) {
    const std::string doc = std::string("[\"a") + c + "b\"]";
    EXPECT_NE(error_of(doc).find("control character"), std::string::npos) << int(c);
    EXPECT_NE(error_of(doc).find("at byte 4 "), std::string::npos) << error_of(doc);
  }
  EXPECT_EQ(tokens("[\"a\x7f\"]"), (Tokens{"[", "S:a\x7f", "]", "END"}));  // DEL is allowed
}

TEST(JsonTokenizer, Utf8IsCheckedAndPassedThrough) {
  const std::string ok = "[\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"]";
  EXPECT_EQ(tokens(ok), (Tokens{"[", "S:" + ok.substr(2, ok.size() - 4), "]", "END"}));
  for (const std::string bad :
       {"\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xf0\x80\x80\x80",
        "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\xc3", "\xc3x", "\xe2\x82", "\xe2\x82x"}) {
    const std::string doc = "[\"a" + bad + "\"]";
    EXPECT_NE(error_of(doc).find("UTF-8"), std::string::npos) << error_of(doc);
  }
}

TEST(JsonTokenizer, NumbersKeepTheirTextAndKind) {
  EXPECT_EQ(tokens("[0, -0, 1.5, -1.5e10, 1E+2, 2e-3, 123456789012.345]"),
            (Tokens{"[", "N:0/i0", "N:-0/i0", "N:1.5/f", "N:-1.5e10/f", "N:1E+2/f", "N:2e-3/f",
                    "N:123456789012.345/f", "]", "END"}));
  EXPECT_EQ(tokens("[9223372036854775807, 9223372036854775808, 18446744073709551615]"),
            (Tokens{"[", "N:9223372036854775807/i9223372036854775807",
                    "N:9223372036854775808/u9223372036854775808",
                    "N:18446744073709551615/u18446744073709551615", "]", "END"}));
  EXPECT_EQ(tokens("[18446744073709551616, -9223372036854775808, -9223372036854775809]"),
            (Tokens{"[", "N:18446744073709551616/f", "N:-9223372036854775808/i-9223372036854775808",
                    "N:-9223372036854775809/f", "]", "END"}));
  EXPECT_EQ(tokens("[1e-400]"), (Tokens{"[", "N:1e-400/f", "]", "END"}));  // underflow: finite
  StringSource src("[12.25e1]");
  JsonTokenizer tz(src, "t");
  tz.next();
  ASSERT_EQ(tz.next(), JsonToken::kNumber);
  EXPECT_DOUBLE_EQ(tz.double_value(), 122.5);
}

TEST(JsonTokenizer, InvalidNumbersAreRefused) {
  for (const std::string bad :
       {"01", "1.", ".5", "-", "+1", "1e", "1e+", "--1", "1.2.3", "1ee2", "-a", "1.e5", "0x10"}) {
    const std::string doc = "[" + bad + "]";
    EXPECT_NE(error_of(doc).find("not valid JSON at byte"), std::string::npos) << bad;
  }
  EXPECT_NE(error_of("[1e400]").find("number overflow"), std::string::npos);
  EXPECT_NE(error_of("[-1e400]").find("number overflow"), std::string::npos);
  EXPECT_NE(error_of("[" + std::string(400, '9') + "]").find("number overflow"), std::string::npos);
}

TEST(JsonTokenizer, LiteralsAreExact) {
  for (const std::string bad : {"tru", "nul", "trUe", "fals", "nulll", "truex", "n"}) {
    const std::string doc = "[" + bad + "]";
    EXPECT_NE(error_of(doc).find("not valid JSON at byte"), std::string::npos) << bad;
  }
  EXPECT_NE(error_of("[nUll]").find("at byte 3 "), std::string::npos) << error_of("[nUll]");
}

TEST(JsonTokenizer, StructureIsChecked) {
  const char* bad[] = {
      "[1,]",    "[,1]",     "{\"a\":1,}", "{\"a\" 1}", "{\"a\":1 \"b\":2}",
      "[1 2]",   "{1: 2}",   "{a: 1}",     "[1}",       "{\"a\": 1]",
      "]",       "}",        "[1]]",       "{} {}",     "[1] x",
      "{\"a\"}", "{\"a\":}", "{,}",        ":",         "'a'",
  };
  for (const char* doc : bad) {
    EXPECT_NE(error_of(doc).find("not valid JSON at byte"), std::string::npos) << doc;
  }
  EXPECT_NE(error_of("[1] x").find("after the end of the JSON document"), std::string::npos);
  EXPECT_NE(error_of("[1] x").find("at byte 5 "), std::string::npos) << error_of("[1] x");
  EXPECT_EQ(tokens("[1] \r\n\t "), (Tokens{"[", "N:1/i1", "]", "END"}));
}

TEST(JsonTokenizer, EveryTruncationIsAnErrorSayingSo) {
  const std::string doc =
      "{\"a\": [1, -2.5e3, \"x\\u00e9\\ud83d\\ude00\xc3\xa9\", true, false, null], \"b\": {}}";
  ASSERT_EQ(tokens(doc).back(), "END");
  for (std::size_t n = 0; n < doc.size(); ++n) {
    const std::string e = error_of(doc.substr(0, n));
    EXPECT_NE(e.find("truncated"), std::string::npos) << n << ": " << e;
    EXPECT_EQ(e.rfind("t.json: ", 0), 0u) << e;
  }
  EXPECT_NE(error_of("").find("ends after byte 0"), std::string::npos) << error_of("");
  EXPECT_NE(error_of("  \n").find("truncated"), std::string::npos);
  // Inside a token: the position is just past the last byte.
  EXPECT_NE(error_of("[\"ab").find("at byte 5 (uncompressed) near '\"ab'"), std::string::npos)
      << error_of("[\"ab");
}

TEST(JsonTokenizer, NestingDepthIsLimited) {
  EXPECT_EQ(tokens(std::string(512, '[') + std::string(512, ']')).back(), "END");
  EXPECT_NE(error_of(std::string(513, '[') + std::string(513, ']')).find("deeper than 512"),
            std::string::npos);
  EXPECT_NE(tokens("[[{\"a\": []}]]", 1 << 18, 3).back().find("deeper than 3"), std::string::npos);
  EXPECT_EQ(tokens("[[{\"a\": 1}]]", 1 << 18, 3).back(), "END");
}

TEST(JsonTokenizer, ByteOrderMark) {
  EXPECT_EQ(tokens("\xef\xbb\xbf[1]"), (Tokens{"[", "N:1/i1", "]", "END"}));
  EXPECT_NE(error_of("\xef\xbb[1]").find("byte order mark"), std::string::npos);
  EXPECT_NE(error_of("[\xef\xbb\xbf]").find("not valid JSON"), std::string::npos);
}

// A document with every kind of token, long strings (past the 16-byte vector scan), escapes,
// raw multi-byte UTF-8 and numbers of every kind: fed in chunks of 1, 2, 3, 7, 64 bytes and in
// one piece, the tokens are the same.
TEST(JsonTokenizer, ChunkSizeDoesNotChangeTheTokens) {
  const std::string doc =
      "\xef\xbb\xbf{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
      "\"void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::"
      "BFloat16> >(int, at::detail::Array<char*, 3>)\", \"pid\": 0, \"tid\": 7, "
      "\"ts\": 1764576000123.456, \"dur\": 35.125, \"args\": {\"External id\": 12, "
      "\"grid\": [264, 1, 1], \"blocks per SM\": 1.9, \"x\": null, \"y\": true, \"z\": false}},"
      "{\"name\": \"esc \\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9\\u20ac\\ud83d\\ude00 end\", "
      "\"raw\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", "
      "\"n\": [-0, 9223372036854775808, 18446744073709551616, -9223372036854775809, 1e-7, "
      "0.000001, 12345678901234567890123]}], \"k\\u0065y\": \"\"}\n";
  const Tokens whole = tokens(doc);
  ASSERT_EQ(whole.back(), "END");
  ASSERT_GT(whole.size(), 40u);
  for (std::size_t chunk : {1, 2, 3, 7, 64}) EXPECT_EQ(tokens(doc, chunk), whole) << chunk;
}

// Errors too: the same message and position whatever the chunking.
TEST(JsonTokenizer, ChunkSizeDoesNotChangeTheErrors) {
  const std::string bad[] = {
      "[\"abcdefghijklmnopqrstuvwxyz\\x\"]",
      "[\"abcdefghijklmnopqrstuvwxyz\\ud83dx\"]",
      "[\"abcdefghijklmnopqrstuvwxyz\x01\"]",
      "[\"abcdefghijklmnopqrstuvwxyz\xe2\x82x\"]",
      "[1234567890123.45.6]",
      "[1234567890123e400]",
      "[true, fals]",
      "{\"a\": 1} [",
      "{\"abcdefghijklmnopqrstuvwxyz\": [1, 2",
      "[\"abcdefghijklmnopqrstuvwxyz",
  };
  for (const std::string& doc : bad) {
    const std::string whole = error_without_context(doc, 1 << 18);
    ASSERT_FALSE(whole.empty()) << doc;
    for (std::size_t chunk : {1, 2, 3, 7, 64}) {
      EXPECT_EQ(error_without_context(doc, chunk), whole) << doc << " chunk " << chunk;
    }
  }
}

}  // namespace
}  // namespace tprobe::core::detail
