// Typed reads of a JSON document that name the document and the field when they fail: what every
// `from_json` of an evidence struct is written with, so a schema change or a damaged file is one
// tprobe::Error line ("k.json results.trace.user_ranges rows[2]: field 'kernel_ns' must be an
// integer in 0..9223372036854775807, got "x"") instead of an exception from the JSON library.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"

namespace tprobe::core::json_read {

constexpr int64_t kMinInt = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// `where` names the object ("k.json results.trace.streams[0]"); the field's key is added.
const Json& field(const Json& obj, const char* key, const std::string& where);
// The field, or nullptr when it is absent or null.
const Json* optional(const Json& obj, const char* key);

int64_t integer(const Json& obj, const char* key, const std::string& where,
                int64_t lo = kMinInt, int64_t hi = kMaxInt);
double number(const Json& obj, const char* key, const std::string& where);  // finite
bool boolean(const Json& obj, const char* key, const std::string& where);
std::string string(const Json& obj, const char* key, const std::string& where);
const Json& array(const Json& obj, const char* key, const std::string& where);
const Json& object(const Json& obj, const char* key, const std::string& where);

// Elements of an array field.
int64_t element_integer(const Json& v, const std::string& where, int64_t lo = kMinInt,
                        int64_t hi = kMaxInt);
double element_number(const Json& v, const std::string& where);
std::vector<int64_t> integers(const Json& obj, const char* key, const std::string& where,
                              int64_t lo = kMinInt, int64_t hi = kMaxInt);
std::vector<double> numbers(const Json& obj, const char* key, const std::string& where);
std::vector<std::string> strings(const Json& obj, const char* key, const std::string& where);

// "where[i]": the name of an array's i-th element.
std::string at(const std::string& where, const char* key, std::size_t i);

// Fields that to_json always writes but may write as null: the key must be there (a missing key
// is an error), null reads as none, anything else as the plain helper reads it.
std::optional<int64_t> nullable_integer(const Json& obj, const char* key, const std::string& where,
                                        int64_t lo = kMinInt, int64_t hi = kMaxInt);
std::optional<double> nullable_number(const Json& obj, const char* key, const std::string& where);
std::optional<bool> nullable_boolean(const Json& obj, const char* key, const std::string& where);
std::optional<std::string> nullable_string(const Json& obj, const char* key,
                                           const std::string& where);
// One of `names` (a vocabulary of enum spellings); returns its index.
std::size_t choice(const Json& obj, const char* key, const std::string& where,
                   const std::vector<std::string>& names);
// Seeds and hashes: an integer in 0..2^64-1 (integer() stops at INT64_MAX).
uint64_t element_unsigned(const Json& v, const std::string& where);
uint64_t unsigned_integer(const Json& obj, const char* key, const std::string& where);
// Fields written twice or derived, checked by writing them again from what was read: `read` (as
// the file holds it) must equal `rewritten` (the writer's output from the fields read). Else the
// error names the first JSON path where they part ("where.rows.2.share_ratio") and what the other
// fields make of it. An object's keys may come in any order (a file re-written by another JSON
// tool, keys sorted, is the same evidence).
void check_rewritten(const Json& read, const Json& rewritten, const std::string& where);
// An enum spelled by its to_string(): the one of `values` whose spelling the field holds.
template <typename E>
E enum_value(const Json& obj, const char* key, const std::string& where,
             std::initializer_list<E> values) {
  std::vector<std::string> names;
  for (E e : values) names.push_back(to_string(e));
  return values.begin()[choice(obj, key, where, names)];
}

}  // namespace tprobe::core::json_read
