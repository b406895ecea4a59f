// Internal: JSON parsing that refuses duplicate keys (nlohmann silently keeps one of them, which
// would let a config or index mean two things).
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"

namespace tprobe::core::detail {

// Parses `text`; on a syntax error or a key repeated within one object throws tprobe::Error
// "<source>: <what>". `what_json` names the document in the syntax message ("not valid JSON").
inline Json parse_json_strict(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  Json::parser_callback_t on_event = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() &&
            !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  Json doc;
  try {
    doc = Json::parse(text.begin(), text.end(), on_event);
  } catch (const Json::exception& e) {
    fail("{}: not valid JSON: {}", source, e.what());
  }
  if (!duplicate.empty()) fail("{}: key '{}' appears twice in one JSON object", source, duplicate);
  return doc;
}

}  // namespace tprobe::core::detail
