// Evidence fields declared once. A result struct lists its fields in one table — key, member,
// unit, doc line — and its JSON writer, its reader (every field typed, a missing or mistyped one
// an Error naming the file and path), and the docs' field list all come from that table, the way
// kineto declares its metadata fields once. A struct opts in with a free function found by ADL:
//
//   constexpr auto evidence_fields(const ExpertLoad*) {
//     return std::make_tuple(field("layer", &ExpertLoad::layer, "", "the decoder layer"), …);
//   }
//
// Members may be int64_t, double, bool, std::string, std::vector<T>, std::optional<T> (written as
// null, read from null or absent) or another struct with a table (an object).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/json_read.hpp"

namespace tprobe::core::evidence {

template <typename S, typename M>
struct Field {
  const char* key;
  M S::*member;
  const char* unit;  // "B", "s", "tokens", … or "" for a count or a name
  const char* doc;   // one line for the docs' field list
};

template <typename S, typename M>
constexpr Field<S, M> field(const char* key, M S::*member, const char* unit, const char* doc) {
  return {key, member, unit, doc};
}

// One row of the docs' field list: the path below the struct ("tokens.records[][]"), the JSON
// type, the unit and the doc line.
struct FieldDoc {
  std::string path, type, unit, doc;
};

namespace detail {

template <typename T, typename = void>
struct has_fields : std::false_type {};
template <typename T>
struct has_fields<T, std::void_t<decltype(evidence_fields(static_cast<const T*>(nullptr)))>>
    : std::true_type {};

template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};
template <typename T>
struct element {
  using type = T;
};
template <typename T>
struct element<std::vector<T>> {
  using type = typename element<T>::type;
};
template <typename T>
struct is_optional : std::false_type {};
template <typename T>
struct is_optional<std::optional<T>> : std::true_type {};

template <typename T>
Json encode(const T& v);
template <typename T>
T decode(const Json& v, const std::string& where);

template <typename T>
std::string type_name() {
  if constexpr (std::is_same_v<T, int64_t>) {
    return "integer";
  } else if constexpr (std::is_same_v<T, double>) {
    return "number";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "boolean";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "string";
  } else if constexpr (is_vector<T>::value) {
    return "[" + type_name<typename T::value_type>() + "]";
  } else if constexpr (is_optional<T>::value) {
    return type_name<typename T::value_type>() + " or null";
  } else {
    static_assert(has_fields<T>::value, "an evidence member needs a field table");
    return "object";
  }
}

template <typename T>
Json encode(const T& v) {
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
                std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    return Json(v);
  } else if constexpr (is_vector<T>::value) {
    Json out = Json::array();
    for (const auto& e : v) out.push_back(encode(e));
    return out;
  } else if constexpr (is_optional<T>::value) {
    return v ? encode(*v) : Json(nullptr);
  } else {
    Json out = Json::object();
    std::apply([&](const auto&... f) { ((out[f.key] = encode(v.*(f.member))), ...); },
               evidence_fields(static_cast<const T*>(nullptr)));
    return out;
  }
}

template <typename T>
T decode(const Json& v, const std::string& where) {
  namespace jr = core::json_read;
  if constexpr (std::is_same_v<T, int64_t>) {
    return jr::element_integer(v, where);
  } else if constexpr (std::is_same_v<T, double>) {
    return jr::element_number(v, where);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) ::tprobe::fail("{}: must be true or false", where);
    return v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) ::tprobe::fail("{}: must be a string", where);
    return v.get<std::string>();
  } else if constexpr (is_vector<T>::value) {
    if (!v.is_array()) ::tprobe::fail("{}: must be a list", where);
    T out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(decode<typename T::value_type>(v[i], where + "[" + std::to_string(i) + "]"));
    return out;
  } else if constexpr (is_optional<T>::value) {
    if (v.is_null()) return std::nullopt;
    return decode<typename T::value_type>(v, where);
  } else {
    if (!v.is_object()) ::tprobe::fail("{}: must be an object", where);
    T out{};
    std::apply(
        [&](const auto&... f) {
          (([&] {
             using M = std::decay_t<decltype(out.*(f.member))>;
             const auto it = v.find(f.key);
             const std::string at = where + "." + f.key;
             if (it == v.end()) {
               if constexpr (is_optional<M>::value) return;
               ::tprobe::fail("{}: missing field '{}'", where, f.key);
             }
             out.*(f.member) = decode<M>(*it, at);
           }()),
           ...);
        },
        evidence_fields(static_cast<const T*>(nullptr)));
    return out;
  }
}

template <typename T>
void docs(std::vector<FieldDoc>& out, const std::string& prefix) {
  std::apply(
      [&](const auto&... f) {
        (([&] {
           using M = std::decay_t<decltype(std::declval<T>().*(f.member))>;
           using E = typename element<M>::type;
           const std::string path = prefix + f.key;
           out.push_back({path, type_name<M>(), f.unit, f.doc});
           if constexpr (has_fields<E>::value) docs<E>(out, path + (is_vector<M>::value ? "[]." : "."));
         }()),
         ...);
      },
      evidence_fields(static_cast<const T*>(nullptr)));
}

}  // namespace detail

// The struct's JSON object, one key per field in table order.
template <typename S>
Json to_json(const S& s) {
  return detail::encode(s);
}
// The struct from `j`: every field present (an optional one may be absent or null) and of its
// type; keys the table does not name are ignored (a newer writer's). `where` names the object.
template <typename S>
S from_json(const Json& j, const std::string& where) {
  return detail::decode<S>(j, where);
}
// The docs' field list of S, each path below `prefix`.
template <typename S>
std::vector<FieldDoc> field_docs(const std::string& prefix = "") {
  std::vector<FieldDoc> out;
  detail::docs<S>(out, prefix);
  return out;
}
// One markdown table row per field: "| `path` | type | unit | doc |".
std::string field_rows(const std::vector<FieldDoc>& docs);

}  // namespace tprobe::core::evidence
