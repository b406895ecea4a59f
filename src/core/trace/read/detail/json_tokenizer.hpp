// A streaming pull tokenizer for strict JSON over a chunked byte source (internal to tprobe_core).
//
// The trace reader's hot loop: Chrome traces run to gigabytes, so the document is never held
// whole; the tokenizer keeps one chunk and hands out tokens whose text points into that chunk
// when it can (no copy, no allocation), or into a scratch buffer when a string has escapes or a
// token straddles two chunks. It checks the grammar as it goes (object/array nesting, commas,
// colons, one document and nothing after it) and refuses what a strict parser refuses: bad
// escapes and lone surrogates, control characters and ill-formed UTF-8 in strings, malformed
// or non-finite numbers, bad literals, input that ends early, nesting deeper than a limit, a
// string or number longer than kMaxTokenBytes.
// Errors are tprobe::Error naming the source and the 1-based byte position of the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tprobe::core::detail {

// Where the bytes come from: read() fills up to `size` bytes and returns how many; 0 only at the
// end. It may return fewer than asked at any time (the tokenizer copes with any split).
class JsonByteSource {
 public:
  virtual ~JsonByteSource() = default;
  virtual std::size_t read(char* buf, std::size_t size) = 0;
};

enum class JsonToken : uint8_t {
  kBeginObject,
  kEndObject,
  kBeginArray,
  kEndArray,
  kKey,     // an object member's name; text() is the decoded name
  kString,  // text() is the decoded value
  kNumber,  // text() is the number as written; number_kind() and friends say what it holds
  kTrue,
  kFalse,
  kNull,
  kEnd,  // the document is complete and only white space followed it
};

// How a number token reads, with the classes a typical JSON library uses: an integer that fits
// int64 (either sign), a non-negative integer past INT64_MAX that still fits uint64, or
// anything else (a fraction, an exponent, or an integer too large for both).
enum class JsonNumberKind : uint8_t { kInt64, kUint64, kFloat };

class JsonTokenizer {
 public:
  static constexpr std::size_t kDefaultChunk = std::size_t{1} << 18;
  static constexpr int kDefaultMaxDepth = 512;
  // One string (key or value) or number token longer than this is refused, naming the limit: a
  // 2 GiB kernel name would otherwise be buffered whole (4.2 GB resident, issue 23).
  static constexpr std::size_t kMaxTokenBytes = std::size_t{16} << 20;

  // `label` names the source in error messages (a path, or a buffer's name).
  JsonTokenizer(JsonByteSource& src, std::string label, std::size_t chunk = kDefaultChunk,
                int max_depth = kDefaultMaxDepth);

  // The next token. The text of the previous token is invalid after this call.
  JsonToken next();

  // Key, string or number text of the last token; valid until the next call to next().
  std::string_view text() const { return text_; }

  JsonNumberKind number_kind() const { return number_kind_; }
  int64_t int64_value() const { return int_value_; }     // kInt64
  uint64_t uint64_value() const { return uint_value_; }  // kUint64
  double double_value() const;                           // any number (strtod of the text)

  // Containers open around the next token (0 at the top level).
  int depth() const { return static_cast<int>(stack_.size()); }
  // Bytes taken from the source so far (the whole input once kEnd was returned).
  int64_t bytes_read() const { return base_ + static_cast<int64_t>(end_); }
  // True before any byte was read and the source had none.
  bool empty_input();

 private:
  enum class Expect : uint8_t {
    kValue,            // at the top, after ':' or after ',' in an array
    kValueOrEndArray,  // after '['
    kKeyOrEndObject,   // after '{'
    kKey,              // after ',' in an object
    kColon,            // after a key
    kCommaOrEnd,       // after a member or an element
    kDone,             // the top-level value is complete
  };

  bool refill();
  int get_slow();          // next byte, refilling; -1 at the end
  bool skip_whitespace();  // false at the end of input
  void start_bom();
  JsonToken value(char c);
  void scan_string();
  void scan_escape();
  void scan_number();
  void classify_number();
  JsonToken scan_literal(char c);
  JsonToken close(bool object);
  void push(bool object);
  void after_value() { expect_ = stack_.empty() ? Expect::kDone : Expect::kCommaOrEnd; }
  void take_separator();

  int64_t offset() const { return base_ + static_cast<int64_t>(pos_); }
  [[noreturn]] void error(int64_t at, const std::string& what) const;
  [[noreturn]] void error_here(const std::string& what) const { error(offset(), what); }
  [[noreturn]] void truncated_in(const char* what) const;

  JsonByteSource& src_;
  std::string label_;
  std::vector<char> buf_;
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  int64_t base_ = 0;  // input offset of buf_[0]
  bool eof_ = false;
  bool started_ = false;
  std::size_t token_start_ = 0;  // in buf_, for the "near ..." of error messages
  int64_t token_offset_ = 0;
  int max_depth_;
  std::vector<bool> stack_;  // true: object
  Expect expect_ = Expect::kValue;
  std::string scratch_;
  std::string_view text_;
  JsonNumberKind number_kind_ = JsonNumberKind::kInt64;
  int64_t int_value_ = 0;
  uint64_t uint_value_ = 0;
};

}  // namespace tprobe::core::detail
