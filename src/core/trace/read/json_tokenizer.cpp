// The streaming pull tokenizer of json_tokenizer.hpp: in-chunk fast paths, byte-by-byte slow
// paths for tokens that straddle chunks or carry escapes.
#include "trace/read/detail/json_tokenizer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "tprobe/core/base/error.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tprobe::core::detail {
namespace {

// Bytes a string scan must stop at: the closing quote, a backslash, a control character (not
// allowed raw in JSON strings) and the lead of a multi-byte UTF-8 sequence (checked for
// well-formedness).
struct SpecialTable {
  bool special[256] = {};
  constexpr SpecialTable() {
    for (int c = 0; c < 0x20; ++c) special[c] = true;
    for (int c = 0x80; c < 0x100; ++c) special[c] = true;
    special[static_cast<unsigned char>('"')] = true;
    special[static_cast<unsigned char>('\\')] = true;
  }
};
constexpr SpecialTable kSpecial;

const char* find_special(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches them.
    const __m128i hit =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmplt_epi8(v, space));
    const int mask = _mm_movemask_epi8(hit);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < end && !kSpecial.special[static_cast<unsigned char>(*p)]) ++p;
  return p;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool is_number_char(char c) {
  return is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// Continuation bytes after a UTF-8 lead byte (0 for a byte that cannot lead), and the range of
// the first continuation byte (which excludes overlongs, surrogates and code points past
// U+10FFFF); later continuation bytes are 0x80..0xBF.
int utf8_continuations(unsigned char c, unsigned char& lo, unsigned char& hi) {
  lo = 0x80;
  hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) return 1;
  if (c >= 0xe0 && c <= 0xef) {
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
    return 2;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
    return 3;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

std::string printable(const char* p, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(p[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

}  // namespace

JsonTokenizer::JsonTokenizer(JsonByteSource& src, std::string label, std::size_t chunk,
                             int max_depth)
    : src_(src),
      label_(std::move(label)),
      buf_(chunk > 0 ? chunk : 1),
      max_depth_(max_depth > 0 ? max_depth : 1) {}

bool JsonTokenizer::refill() {
  if (eof_) return false;
  // At the end the last chunk stays in place, for the "near ..." of an error message.
  const std::size_t n = src_.read(buf_.data(), buf_.size());
  if (n == 0) {
    eof_ = true;
    return false;
  }
  base_ += static_cast<int64_t>(end_);
  pos_ = 0;
  end_ = n;
  return true;
}

int JsonTokenizer::get_slow() {
  if (pos_ == end_ && !refill()) return -1;
  return static_cast<unsigned char>(buf_[pos_++]);
}

bool JsonTokenizer::empty_input() { return pos_ == end_ && !refill() && base_ + end_ == 0; }

bool JsonTokenizer::skip_whitespace() {
  for (;;) {
    while (pos_ < end_) {
      if (!is_space(buf_[pos_])) return true;
      ++pos_;
    }
    if (!refill()) return false;
  }
}

void JsonTokenizer::start_bom() {
  started_ = true;
  if (pos_ == end_ && !refill()) return;
  if (static_cast<unsigned char>(buf_[pos_]) != 0xef) return;
  token_offset_ = offset();
  ++pos_;
  const int b = get_slow();
  const int c = b == 0xbb ? get_slow() : b;
  if (b != 0xbb || c != 0xbf) {
    if (c < 0) truncated_in("a byte order mark");
    error(offset() - 1,
          "the input starts with 0xEF but not with the UTF-8 byte order mark EF BB BF");
  }
}

// After a key or a value: the ':' or ',' that usually follows, taken now when it is in this
// chunk (never refilling: the token's text may point into the chunk), so that the next call
// starts right at the next token. Anything else is left for next() to judge.
void JsonTokenizer::take_separator() {
  std::size_t i = pos_;
  while (i < end_ && is_space(buf_[i])) ++i;
  if (i == end_) return;
  if (expect_ == Expect::kColon) {
    if (buf_[i] != ':') return;
    expect_ = Expect::kValue;
  } else if (expect_ == Expect::kCommaOrEnd) {
    if (buf_[i] != ',') return;
    expect_ = stack_.back() ? Expect::kKey : Expect::kValue;
  } else {
    return;
  }
  pos_ = i + 1;
}

JsonToken JsonTokenizer::next() {
  if (!started_) start_bom();
  for (;;) {
    if ((pos_ == end_ || is_space(buf_[pos_])) && !skip_whitespace()) {
      if (expect_ == Expect::kDone) return JsonToken::kEnd;
      fail(
          "{}: the JSON ends after byte {} (uncompressed) before the document is complete: the "
          "trace is truncated (an interrupted export?)",
          label_, bytes_read());
    }
    token_start_ = pos_;
    token_offset_ = offset();
    const char c = buf_[pos_];
    switch (expect_) {
      case Expect::kDone:
        error_here("more data after the end of the JSON document");
      case Expect::kColon:
        if (c != ':') error_here("expected ':' after an object key");
        ++pos_;
        expect_ = Expect::kValue;
        continue;
      case Expect::kCommaOrEnd: {
        const bool object = stack_.back();
        if (c == ',') {
          ++pos_;
          expect_ = object ? Expect::kKey : Expect::kValue;
          continue;
        }
        if (c == (object ? '}' : ']')) {
          ++pos_;
          return close(object);
        }
        error_here(object ? "expected ',' or '}' after an object member"
                          : "expected ',' or ']' after an array element");
      }
      case Expect::kKeyOrEndObject:
        if (c == '}') {
          ++pos_;
          return close(true);
        }
        [[fallthrough]];
      case Expect::kKey:
        if (c != '"') error_here("expected a string as the object key");
        ++pos_;
        scan_string();
        expect_ = Expect::kColon;
        take_separator();
        return JsonToken::kKey;
      case Expect::kValueOrEndArray:
        if (c == ']') {
          ++pos_;
          return close(false);
        }
        [[fallthrough]];
      case Expect::kValue:
        return value(c);
    }
  }
}

JsonToken JsonTokenizer::close(bool object) {
  stack_.pop_back();
  after_value();
  take_separator();
  return object ? JsonToken::kEndObject : JsonToken::kEndArray;
}

void JsonTokenizer::push(bool object) {
  if (static_cast<int>(stack_.size()) >= max_depth_) {
    error_here(fmt::format("objects and arrays nest deeper than {} levels", max_depth_));
  }
  stack_.push_back(object);
}

JsonToken JsonTokenizer::value(char c) {
  switch (c) {
    case '{':
      push(true);
      ++pos_;
      expect_ = Expect::kKeyOrEndObject;
      return JsonToken::kBeginObject;
    case '[':
      push(false);
      ++pos_;
      expect_ = Expect::kValueOrEndArray;
      return JsonToken::kBeginArray;
    case '"':
      ++pos_;
      scan_string();
      after_value();
      take_separator();
      return JsonToken::kString;
    case 't':
    case 'f':
    case 'n': {
      const JsonToken t = scan_literal(c);
      after_value();
      take_separator();
      return t;
    }
    default:
      if (c == '-' || is_digit(c)) {
        scan_number();
        after_value();
        take_separator();
        return JsonToken::kNumber;
      }
      error_here("expected a value (object, array, string, number, true, false or null)");
  }
}

JsonToken JsonTokenizer::scan_literal(char c) {
  const char* word = c == 't' ? "true" : c == 'f' ? "false" : "null";
  const JsonToken token = c == 't'   ? JsonToken::kTrue
                          : c == 'f' ? JsonToken::kFalse
                                     : JsonToken::kNull;
  const std::size_t n = std::strlen(word);
  if (end_ - pos_ >= n && std::memcmp(buf_.data() + pos_, word, n) == 0) {
    pos_ += n;
    return token;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const int b = get_slow();
    if (b < 0) truncated_in("a literal");
    if (b != static_cast<unsigned char>(word[i])) {
      error(offset() - 1, fmt::format("invalid literal (expected '{}')", word));
    }
  }
  return token;
}

void JsonTokenizer::scan_string() {
  const char* seg = buf_.data() + pos_;  // start of the bytes not yet copied to scratch_
  const char* p = seg;
  const char* end = buf_.data() + end_;
  bool scratch = false;
  const int64_t start = offset();
  auto flush = [&](const char* upto) {
    if (!scratch) {
      scratch_.assign(seg, static_cast<std::size_t>(upto - seg));
      scratch = true;
    } else {
      scratch_.append(seg, static_cast<std::size_t>(upto - seg));
    }
    if (scratch_.size() > kMaxTokenBytes) {
      error(start, fmt::format("a string longer than {} bytes (the limit for one JSON string)",
                               kMaxTokenBytes));
    }
  };
  auto resume = [&] {
    seg = p = buf_.data() + pos_;
    end = buf_.data() + end_;
  };
  for (;;) {
    p = find_special(p, end);
    if (p == end) {
      flush(p);
      pos_ = end_;
      if (!refill()) truncated_in("a string");
      resume();
      continue;
    }
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"') {
      if (scratch) {
        flush(p);
        text_ = scratch_;
      } else {
        text_ = std::string_view(seg, static_cast<std::size_t>(p - seg));
        if (text_.size() > kMaxTokenBytes) {  // a chunk larger than the limit holds it whole
          error(start, fmt::format("a string longer than {} bytes (the limit for one JSON "
                                   "string)",
                                   kMaxTokenBytes));
        }
      }
      pos_ = static_cast<std::size_t>(p + 1 - buf_.data());
      return;
    }
    if (c == '\\') {
      flush(p);
      pos_ = static_cast<std::size_t>(p + 1 - buf_.data());
      scan_escape();
      resume();
      continue;
    }
    if (c < 0x20) {
      pos_ = static_cast<std::size_t>(p - buf_.data());
      error_here(fmt::format("control character 0x{:02x} in a string (JSON needs it escaped)", c));
    }
    unsigned char lo = 0, hi = 0;
    const int n = utf8_continuations(c, lo, hi);
    if (n == 0) {
      pos_ = static_cast<std::size_t>(p - buf_.data());
      error_here(fmt::format("byte 0x{:02x} cannot start a UTF-8 character (ill-formed UTF-8)", c));
    }
    if (end - p > n) {
      for (int k = 1; k <= n; ++k) {
        const auto b = static_cast<unsigned char>(p[k]);
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) {
          pos_ = static_cast<std::size_t>(p + k - buf_.data());
          error_here("ill-formed UTF-8 sequence in a string");
        }
      }
      p += n + 1;
      continue;
    }
    // The sequence straddles the chunk's end: byte by byte through scratch_.
    flush(p);
    scratch_.push_back(static_cast<char>(c));
    pos_ = static_cast<std::size_t>(p + 1 - buf_.data());
    for (int k = 1; k <= n; ++k) {
      const int b = get_slow();
      if (b < 0) truncated_in("a string");
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) {
        error(offset() - 1, "ill-formed UTF-8 sequence in a string");
      }
      scratch_.push_back(static_cast<char>(b));
    }
    resume();
  }
}

// After a backslash: one escape, decoded onto scratch_.
void JsonTokenizer::scan_escape() {
  auto hex4 = [this]() -> uint32_t {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int b = get_slow();
      if (b < 0) truncated_in("a string");
      uint32_t d;
      if (b >= '0' && b <= '9') {
        d = static_cast<uint32_t>(b - '0');
      } else if (b >= 'a' && b <= 'f') {
        d = static_cast<uint32_t>(b - 'a' + 10);
      } else if (b >= 'A' && b <= 'F') {
        d = static_cast<uint32_t>(b - 'A' + 10);
      } else {
        error(offset() - 1, "\\u must be followed by four hex digits");
      }
      v = v * 16 + d;
    }
    return v;
  };
  const int e = get_slow();
  if (e < 0) truncated_in("a string");
  switch (e) {
    case '"':
    case '\\':
    case '/':
      scratch_.push_back(static_cast<char>(e));
      return;
    case 'b':
      scratch_.push_back('\b');
      return;
    case 'f':
      scratch_.push_back('\f');
      return;
    case 'n':
      scratch_.push_back('\n');
      return;
    case 'r':
      scratch_.push_back('\r');
      return;
    case 't':
      scratch_.push_back('\t');
      return;
    case 'u': {
      uint32_t cp = hex4();
      if (cp >= 0xdc00 && cp <= 0xdfff) {
        error(offset() - 1, "a low surrogate \\uDC00..\\uDFFF must follow a high one");
      }
      if (cp >= 0xd800 && cp <= 0xdbff) {
        const int a = get_slow();
        const int b = a == '\\' ? get_slow() : a;
        if (a < 0 || b < 0) truncated_in("a string");
        if (a != '\\' || b != 'u') {
          error(offset() - 1, "a high surrogate \\uD800..\\uDBFF must be followed by a low one");
        }
        const uint32_t low = hex4();
        if (low < 0xdc00 || low > 0xdfff) {
          error(offset() - 1, "a high surrogate \\uD800..\\uDBFF must be followed by a low one");
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      }
      append_utf8(scratch_, cp);
      return;
    }
    default:
      error(offset() - 1, fmt::format("invalid escape '\\{}' in a string",
                                      printable(reinterpret_cast<const char*>(&e), 1)));
  }
}

void JsonTokenizer::scan_number() {
  const std::size_t start = pos_;
  std::size_t i = pos_;
  while (i < end_ && is_number_char(buf_[i])) ++i;
  pos_ = i;
  if (i < end_) {
    text_ = std::string_view(buf_.data() + start, i - start);
  } else {
    // The number may go on in the next chunk.
    scratch_.assign(buf_.data() + start, i - start);
    while (refill()) {
      std::size_t j = 0;
      while (j < end_ && is_number_char(buf_[j])) ++j;
      scratch_.append(buf_.data(), j);
      pos_ = j;
      if (scratch_.size() > kMaxTokenBytes) {
        error_here(fmt::format("a number longer than {} bytes", kMaxTokenBytes));
      }
      if (j < end_) break;
    }
    text_ = scratch_;
  }
  classify_number();
}

// Checks the JSON number grammar on text_ and sorts it the way the trace reader needs.
void JsonTokenizer::classify_number() {
  const char* s = text_.data();
  const std::size_t n = text_.size();
  std::size_t i = 0;
  auto bad = [&](std::size_t at) {
    if (at == n && eof_) truncated_in("a number");
    error(token_offset_ + static_cast<int64_t>(at),
          at == n ? "the number is incomplete" : "invalid number");
  };
  const bool neg = s[0] == '-';
  if (neg) ++i;
  const std::size_t int_begin = i;
  if (i < n && s[i] == '0') {
    ++i;
  } else if (i < n && s[i] >= '1' && s[i] <= '9') {
    while (i < n && is_digit(s[i])) ++i;
  } else {
    bad(i);
  }
  const std::size_t int_end = i;
  bool integer = true, exponent = false;
  if (i < n && s[i] == '.') {
    integer = false;
    ++i;
    if (i >= n || !is_digit(s[i])) bad(i);
    while (i < n && is_digit(s[i])) ++i;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    integer = false;
    exponent = true;
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= n || !is_digit(s[i])) bad(i);
    while (i < n && is_digit(s[i])) ++i;
  }
  if (i != n) bad(i);
  if (integer) {
    uint64_t v = 0;
    bool overflow = false;
    for (std::size_t k = int_begin; k < int_end; ++k) {
      const auto d = static_cast<uint64_t>(s[k] - '0');
      if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) {
        overflow = true;
        break;
      }
      v = v * 10 + d;
    }
    constexpr uint64_t kMaxI64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (!overflow && !neg) {
      if (v <= kMaxI64) {
        number_kind_ = JsonNumberKind::kInt64;
        int_value_ = static_cast<int64_t>(v);
      } else {
        number_kind_ = JsonNumberKind::kUint64;
        uint_value_ = v;
      }
      return;
    }
    if (!overflow && v <= kMaxI64 + 1) {
      number_kind_ = JsonNumberKind::kInt64;
      int_value_ =
          v == kMaxI64 + 1 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(v);
      return;
    }
  }
  number_kind_ = JsonNumberKind::kFloat;
  // Below 1e308 without an exponent: finite for certain, no need to convert here.
  if ((exponent || int_end - int_begin > 308) && !std::isfinite(double_value())) {
    error(token_offset_, "number overflow (not a finite double)");
  }
}

double JsonTokenizer::double_value() const {
  char small[64];
  if (text_.size() < sizeof small) {
    std::memcpy(small, text_.data(), text_.size());
    small[text_.size()] = '\0';
    return std::strtod(small, nullptr);
  }
  const std::string copy(text_);
  return std::strtod(copy.c_str(), nullptr);
}

void JsonTokenizer::truncated_in(const char* what) const {
  error(bytes_read(), fmt::format("the input ends inside {}: the trace is truncated (an "
                                  "interrupted export?)",
                                  what));
}

void JsonTokenizer::error(int64_t at, const std::string& what) const {
  // Context: from the token's start (if it began in this chunk) up to the byte at fault.
  std::size_t start = token_offset_ >= base_ ? static_cast<std::size_t>(token_offset_ - base_) : 0;
  const int64_t rel = at - base_;
  std::size_t stop = rel < 0 ? start : static_cast<std::size_t>(std::min<int64_t>(rel + 1, end_));
  start = std::min(start, end_);
  if (stop < start) stop = start;
  if (stop - start > 40) start = stop - 40;
  fail("{}: not valid JSON at byte {} (uncompressed) near '{}': {}", label_, at + 1,
       printable(buf_.data() + start, stop - start), what);
}

}  // namespace tprobe::core::detail
