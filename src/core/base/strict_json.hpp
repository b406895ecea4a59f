// Internal: JSON parsing that refuses duplicate keys (nlohmann silently keeps one of them, which
// would let a config or index mean two things) and runs in linear time in the document size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"

namespace tprobe::core::detail {

// Deeper nesting than this is refused: no file tprobe reads nests more than a few levels.
inline constexpr std::size_t kMaxJsonDepth = 256;

// Parses `text` into an insertion-ordered Json. On a syntax error, a key repeated within one
// object, nesting deeper than kMaxJsonDepth, a NUL byte anywhere in `text` (nlohmann would end
// the document there and ignore what follows) or any text but whitespace after the document
// throws tprobe::Error "<source>: <what>".
// Linear time: objects are filled by appending (ordered_json's own insert searches the object
// linearly, which made a 200,000-tensor safetensors header take minutes), and duplicates are
// found with a hash set once an object grows past a few keys.
Json parse_json_strict(std::string_view text, const std::string& source);

// A syntax error nlohmann's SAX parser reported in `text`, in tprobe's words (never nlohmann's):
// "at byte N (line L, column C) near '...': <what>", N counting from 1 as the trace tokenizer's
// messages do, the line and column only when `text` has a line break before the byte.
// `position` is the bytes the parser had read when it stopped (the SAX parse_error argument; it
// counts the end of the text as one more), `e` its exception (its id and text classify the error).
std::string json_syntax_error(std::string_view text, std::size_t position,
                              const nlohmann::detail::exception& e);

// "at byte N (line L, column C) near '...'" for byte `at` (0-based) of `text`: the place
// json_syntax_error names.
std::string place_near(std::string_view text, std::size_t at);

// json_error_text (tprobe/core/base/evidence.hpp) is public: the probe driver turns nlohmann's
// exceptions into messages with it.
using core::json_error_text;

// `text` made safe to quote in a one-line message: bytes outside printable ASCII become \xNN,
// and anything past `max_chars` is cut with "...".
std::string printable(std::string_view text, std::size_t max_chars = 60);

}  // namespace tprobe::core::detail
