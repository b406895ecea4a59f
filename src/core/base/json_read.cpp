// Typed reads of a JSON document with one-line errors (json_read.hpp).
#include "tprobe/core/base/json_read.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core::json_read {
namespace {

std::string shown(const Json& v) { return detail::printable(v.dump(), 40); }

}  // namespace

const Json& field(const Json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) fail("{}: expected an object holding '{}', got {}", where, key, shown(obj));
  auto it = obj.find(key);
  if (it == obj.end()) fail("{}: missing field '{}'", where, key);
  return *it;
}

const Json* optional(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

int64_t element_integer(const Json& v, const std::string& where, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxInt)) ||
      v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    fail("{} must be an integer in {}..{}, got {}", where, lo, hi, shown(v));
  }
  return v.get<int64_t>();
}

double element_number(const Json& v, const std::string& where) {
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    fail("{} must be a finite number, got {}", where, shown(v));
  return v.get<double>();
}

int64_t integer(const Json& obj, const char* key, const std::string& where, int64_t lo,
                int64_t hi) {
  return element_integer(field(obj, key, where), fmt::format("{}: field '{}'", where, key), lo, hi);
}

double number(const Json& obj, const char* key, const std::string& where) {
  return element_number(field(obj, key, where), fmt::format("{}: field '{}'", where, key));
}

bool boolean(const Json& obj, const char* key, const std::string& where) {
  const Json& v = field(obj, key, where);
  if (!v.is_boolean()) fail("{}: field '{}' must be true or false, got {}", where, key, shown(v));
  return v.get<bool>();
}

std::string string(const Json& obj, const char* key, const std::string& where) {
  const Json& v = field(obj, key, where);
  if (!v.is_string()) fail("{}: field '{}' must be a string, got {}", where, key, shown(v));
  return v.get<std::string>();
}

const Json& array(const Json& obj, const char* key, const std::string& where) {
  const Json& v = field(obj, key, where);
  if (!v.is_array()) fail("{}: field '{}' must be an array, got {}", where, key, shown(v));
  return v;
}

const Json& object(const Json& obj, const char* key, const std::string& where) {
  const Json& v = field(obj, key, where);
  if (!v.is_object()) fail("{}: field '{}' must be an object, got {}", where, key, shown(v));
  return v;
}

std::string at(const std::string& where, const char* key, std::size_t i) {
  return fmt::format("{} {}[{}]", where, key, i);
}

std::vector<int64_t> integers(const Json& obj, const char* key, const std::string& where,
                              int64_t lo, int64_t hi) {
  const Json& a = array(obj, key, where);
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(element_integer(a[i], at(where, key, i), lo, hi));
  return out;
}

std::vector<double> numbers(const Json& obj, const char* key, const std::string& where) {
  const Json& a = array(obj, key, where);
  std::vector<double> out;
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(element_number(a[i], at(where, key, i)));
  return out;
}

std::vector<std::string> strings(const Json& obj, const char* key, const std::string& where) {
  const Json& a = array(obj, key, where);
  std::vector<std::string> out;
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string()) fail("{} must be a string, got {}", at(where, key, i), shown(a[i]));
    out.push_back(a[i].get<std::string>());
  }
  return out;
}

// Fields written as null, enum spellings and unsigned integers.

std::optional<int64_t> nullable_integer(const Json& obj, const char* key, const std::string& where,
                                        int64_t lo, int64_t hi) {
  if (field(obj, key, where).is_null()) return std::nullopt;
  return integer(obj, key, where, lo, hi);
}

std::optional<double> nullable_number(const Json& obj, const char* key, const std::string& where) {
  if (field(obj, key, where).is_null()) return std::nullopt;
  return number(obj, key, where);
}

std::optional<bool> nullable_boolean(const Json& obj, const char* key, const std::string& where) {
  if (field(obj, key, where).is_null()) return std::nullopt;
  return boolean(obj, key, where);
}

std::optional<std::string> nullable_string(const Json& obj, const char* key,
                                           const std::string& where) {
  if (field(obj, key, where).is_null()) return std::nullopt;
  return string(obj, key, where);
}

uint64_t element_unsigned(const Json& v, const std::string& where) {
  // nlohmann parses a non-negative literal as unsigned; one built in memory may be signed.
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  fail("{} must be an integer in 0..{}, got {}", where, std::numeric_limits<uint64_t>::max(),
       shown(v));
}

uint64_t unsigned_integer(const Json& obj, const char* key, const std::string& where) {
  return element_unsigned(field(obj, key, where), fmt::format("{}: field '{}'", where, key));
}

std::size_t choice(const Json& obj, const char* key, const std::string& where,
                   const std::vector<std::string>& names) {
  const std::string v = string(obj, key, where);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == v) return i;
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  fail("{}: field '{}' must be one of {}, got \"{}\"", where, key, list,
       detail::printable(v, 40));
}

void check_rewritten(const Json& read, const Json& rewritten, const std::string& where) {
  if (read == rewritten) return;  // ordered_json: equal in key order too
  const Json patch = Json::diff(rewritten, read);  // by key: empty when only the order differs
  if (patch.empty()) return;
  const std::string pointer = patch.empty() ? "" : patch[0].value("path", "");
  std::string field = pointer;
  std::replace(field.begin(), field.end(), '/', '.');
  std::string expected = "nothing";
  const Json::json_pointer at(pointer);
  if (rewritten.contains(at)) {
    expected = rewritten.at(at).dump(-1, ' ', true, Json::error_handler_t::replace);
    if (expected.size() > 80) expected = expected.substr(0, 77) + "...";
  }
  fail("{}{}: not what the other fields make of it ({})", where, field, expected);
}

}  // namespace tprobe::core::json_read
