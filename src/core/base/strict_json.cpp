// Linear-time, duplicate-refusing JSON parsing into ordered_json (see strict_json.hpp).
#include "base/strict_json.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tprobe::core::detail {

namespace {

using ObjectStorage = Json::object_t::Container;
static_assert(std::is_base_of_v<ObjectStorage, Json::object_t>,
              "ordered_json's object is expected to be a vector of pairs; the linear-time "
              "builder appends to it directly");

// Objects this small are searched for a duplicate key directly; bigger ones get a hash set.
constexpr std::size_t kLinearSearchKeys = 16;

// A SAX handler building the DOM like nlohmann's own, except that object members are appended
// (after our own duplicate check) instead of inserted through ordered_map's linear find.
class StrictDomBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  Json root;
  std::string error;  // set when parsing was stopped by us (duplicate, depth)
  std::string_view text;    // the document, for the syntax error's place and context
  std::string syntax_error;  // in tprobe's words (json_syntax_error)

  bool null() { return add(Json(nullptr)); }
  bool boolean(bool v) { return add(Json(v)); }
  bool number_integer(number_integer_t v) { return add(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return add(Json(v)); }
  bool number_float(number_float_t v, const string_t&) { return add(Json(v)); }
  bool string(string_t& v) { return add(Json(std::move(v))); }
  bool binary(binary_t& v) {
    return add(Json::binary(std::vector<std::uint8_t>(v.begin(), v.end())));
  }

  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Frame& f = stack_.back();
    auto& members = static_cast<ObjectStorage&>(f.value->get_ref<Json::object_t&>());
    if (f.keys.empty() && members.size() < kLinearSearchKeys) {
      for (const auto& m : members) {
        if (m.first == k) return duplicate(k);
      }
      if (members.size() + 1 == kLinearSearchKeys) {
        f.keys.reserve(2 * kLinearSearchKeys);
        for (const auto& m : members) f.keys.insert(m.first);
        f.keys.insert(k);
      }
    } else if (!f.keys.insert(k).second) {
      return duplicate(k);
    }
    members.emplace_back(std::move(k), Json());
    slot_ = &members.back().second;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) {
    syntax_error = json_syntax_error(text, position, e);
    return false;
  }

 private:
  struct Frame {
    Json* value;
    std::unordered_set<std::string> keys;  // filled once the object passes kLinearSearchKeys
  };

  // Places `v` where the next value goes and returns its address.
  Json* place(Json&& v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    Json* top = stack_.back().value;
    if (top->is_array()) {
      auto& items = top->get_ref<Json::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool add(Json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(Json&& container) {
    if (stack_.size() >= kMaxJsonDepth) {
      error = "nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      return false;
    }
    Json* where = place(std::move(container));
    stack_.push_back(Frame{where, {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  bool duplicate(const std::string& k) {
    error = "key '" + printable(k) + "' appears twice in one JSON object";
    return false;
  }

  std::vector<Frame> stack_;
  Json* slot_ = nullptr;  // the member value the next value fills, after key()
};

}  // namespace

Json parse_json_strict(std::string_view text, const std::string& source) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so a document followed by a NUL
  // and anything at all (a second document) would pass its end-of-input check (issue 46). JSON
  // text never holds a raw NUL (in a string it is written \u0000), so one anywhere is refused.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    fail("{}: not valid JSON {}: a NUL byte, which JSON text never holds (a string writes it "
         "\\u0000)",
         source, place_near(text, nul));
  }
  StrictDomBuilder builder;
  builder.text = text;
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const Json::exception& e) {
    fail("{}: not valid JSON: {}", source, printable(json_error_text(e.what()), 200));
  }
  if (!builder.error.empty()) fail("{}: {}", source, builder.error);
  if (!builder.syntax_error.empty()) fail("{}: not valid JSON {}", source, builder.syntax_error);
  if (!ok) fail("{}: not valid JSON", source);
  return std::move(builder.root);
}

namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// What is wrong at byte `at` (0-based) of `text`, which is not its end, from nlohmann's class of
// error (its lexer's and parser's texts are only read here, never shown).
std::string what_is_wrong(std::string_view text, std::size_t at,
                          const nlohmann::detail::exception& e) {
  const std::string_view what = e.what();
  const auto c = static_cast<unsigned char>(text[at]);
  const std::string byte = printable(text.substr(at, 1));
  if (e.id == 406) return "a number too large for a double";
  if (contains(what, "expected end of input")) {
    return "more text follows the end of the JSON document";
  }
  if (contains(what, "invalid string: control character")) {
    return fmt::format("a control character (\\x{:02x}) in a string (JSON needs it escaped)", c);
  }
  if (contains(what, "invalid string: ill-formed UTF-8")) {
    return "a string holds bytes that are not UTF-8";
  }
  if (contains(what, "invalid string: forbidden character after backslash")) {
    return "invalid escape '\\" + byte + "' in a string";
  }
  if (contains(what, "invalid string: '\\u' must be followed")) {
    return "\\u must be followed by four hex digits";
  }
  if (contains(what, "invalid string: surrogate")) {
    return "a \\u surrogate (\\uD800..\\uDFFF) without its pair";
  }
  if (contains(what, "invalid number")) return "not a JSON number";
  if (contains(what, "invalid literal")) {
    return "not a JSON value (an object, array, string, number, true, false or null)";
  }
  if (contains(what, "invalid BOM")) return "a UTF-8 byte order mark cut short";
  std::string out = "unexpected '" + byte + "'";
  // The parser's expectation, in its token names ("':'", "string literal", ...), reworded.
  const std::size_t exp = what.find("; expected ");
  if (exp != std::string_view::npos) {
    std::string expected(what.substr(exp + 11));
    if (expected == "string literal") expected = "a string (an object key)";
    if (expected == "'[', '{', or a literal") expected = "a value";
    out += " where " + printable(expected, 60) + " should be";
  }
  return out;
}

}  // namespace

std::string place_near(std::string_view text, std::size_t at) {
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const std::string place =
      line > 1 ? fmt::format("at byte {} (line {}, column {})", at + 1, line, at - line_start + 1)
               : fmt::format("at byte {}", at + 1);
  const std::size_t from = at >= line_start + 30 ? at - 30 : line_start;
  const std::string near = printable(text.substr(from, at + 1 - from), 40);
  return fmt::format("{} near '{}'", place, near);
}

std::string json_syntax_error(std::string_view text, std::size_t position,
                              const nlohmann::detail::exception& e) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return "at byte 0: the text is empty (no JSON value)";
  }
  // The parser counts the end of the text as a byte read: past the end, the text ended early.
  const bool ended = position > text.size();
  const std::size_t at = ended ? text.size() - 1 : (position == 0 ? 0 : position - 1);
  const std::string what =
      ended ? "the text ends inside the JSON document (cut short?)" : what_is_wrong(text, at, e);
  return fmt::format("{}: {}", place_near(text, at), what);
}

std::string printable(std::string_view text, std::size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(text.size(), max_chars) + 8);
  std::size_t shown = 0;
  for (char ch : text) {
    if (shown >= max_chars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
    ++shown;
  }
  return out;
}

}  // namespace tprobe::core::detail

namespace tprobe::core {

std::string json_error_text(std::string_view what) {
  // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
  if (!what.empty() && what.front() == '[') {
    const std::size_t close = what.find("] ");
    if (close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  // "parse error at line 1, column 5: ..." -> "at line 1, column 5: ..."; "parse error: ..."
  // -> "...".
  if (what.substr(0, 12) == "parse error ") what.remove_prefix(12);
  if (what.substr(0, 13) == "parse error: ") what.remove_prefix(13);
  return std::string(what);
}

}  // namespace tprobe::core
