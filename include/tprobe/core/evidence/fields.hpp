// Evidence fields declared once. A result struct lists its fields in one table — key, member,
// unit, doc line — and its JSON writer, its reader (every field typed, a missing or mistyped one
// an Error naming the file and path), and the docs' field list all come from that table, the way
// kineto declares its metadata fields once. A struct opts in with a free function found by ADL:
//
//   constexpr auto evidence_fields(const ExpertLoad*) {
//     return std::make_tuple(field("layer", &ExpertLoad::layer, "", "the decoder layer"), …);
//   }
//
// Members may be int64_t, int32_t, double, bool, std::string, std::vector<T>, std::optional<T>
// (written as null, read from null or absent), std::map<std::string, T> (an object) or another
// struct with a table (an object); `group(key, doc, fields...)` nests some of a struct's own
// members in an object of their own, `flat(member)` writes a member struct's fields beside them.
// `.at_least(n)` and `.at_most(n)` bound an integer; `.or_null()` writes an empty string or a
// negative integer (-1: unknown) as null (and reads null back as empty or -1; a number read is
// then >= 0), the key still required. A field whose JSON is not one member as it is (a null that a flag decides, an
// enum) is `custom(key, write, read, type, unit, doc)`; with `read` null it is derived: written
// from the other members, and on reading checked against what they give (absent where that is
// null, or with `.absent_ok()` in evidence from before the field). The rules between a struct's
// fields are its `evidence_check(const T&, where)`, found beside the table and run after reading.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/json_read.hpp"

namespace tprobe::core::evidence {

// part / whole, 0 when whole is not positive: the shares and ratios a table derives from its
// counts and times (a derived field's writer and its check on reading use this one formula).
inline double ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

template <typename S, typename M>
struct Field {
  const char* key;
  M S::*member;
  const char* unit;  // "B", "s", "tokens", … or "" for a count or a name
  const char* doc;   // one line for the docs' field list
  int64_t min = json_read::kMinInt;  // integers (and their lists) only
  int64_t max = json_read::kMaxInt;
  bool null_when_empty = false;  // or_null(): "" (a string) or a negative integer (-1) is null
  constexpr Field at_least(int64_t lo) const {
    Field f = *this;
    f.min = lo;
    return f;
  }
  constexpr Field at_most(int64_t hi) const {
    Field f = *this;
    f.max = hi;
    return f;
  }
  constexpr Field or_null() const {
    Field f = *this;
    f.null_when_empty = true;
    return f;
  }
};

template <typename S, typename M>
constexpr Field<S, M> field(const char* key, M S::*member, const char* unit, const char* doc) {
  return {key, member, unit, doc};
}

// `read` gets the field's value, the object's `where` and the key; a missing key is an error,
// unless `.absent_ok()` (evidence from before the field: read is not called) or
// `.absent_if_null()` (where it would be written null).
template <typename S>
struct Custom {
  using Read = void (*)(S&, const Json&, const std::string&, const char*);
  const char* key;
  Json (*write)(const S&);
  Read read;  // nullptr: derived
  const char* type;
  const char* unit;
  const char* doc;
  bool may_be_absent = false;
  bool absent_when_null = false;  // absent only where write() of the fields read before is null
  bool omit_when_null = false;    // and not written where write() is null
  constexpr Custom absent_ok() const {
    Custom c = *this;
    c.may_be_absent = true;
    return c;
  }
  constexpr Custom absent_if_null() const {
    Custom c = *this;
    c.absent_when_null = true;
    return c;
  }
  constexpr Custom omitted_if_null() const {  // absent where it would be null, written or read
    Custom c = absent_if_null();
    c.omit_when_null = true;
    return c;
  }
};

template <typename S>
constexpr Custom<S> custom(const char* key, Json (*write)(const S&), typename Custom<S>::Read read,
                           const char* type, const char* unit, const char* doc) {
  return {key, write, read, type, unit, doc};
}
template <typename S>
constexpr Custom<S> derived(const char* key, Json (*write)(const S&), const char* type,
                            const char* unit, const char* doc) {
  return {key, write, nullptr, type, unit, doc};
}

// A nested object whose fields are members of S itself: the JSON groups what the struct keeps
// flat (`group<S>("alive_at_peak", doc, field(...), ...)`); its fields' paths are "key.field".
template <typename S, typename Tuple>
struct Group {
  const char* key;
  const char* doc;
  Tuple fields;
};
template <typename S, typename... F>
constexpr Group<S, std::tuple<F...>> group(const char* key, const char* doc, F... fields) {
  return {key, doc, std::make_tuple(fields...)};
}

// A member struct with a table whose fields are written into the object itself, beside S's own
// (a row that keeps its totals as a member): `flat(&DeviceRow::totals)`.
template <typename S, typename M>
struct Flat {
  M S::*member;
};
template <typename S, typename M>
constexpr Flat<S, M> flat(M S::*member) {
  return {member};
}

// Fields of S written, and read, only where `pred` holds of the struct (a result's figures that
// exist only when it was computed: `only_if<S>(+[](const S& s) { return s.available; }, ...)`);
// `pred` sees the members read before it. Absent otherwise, and a reader ignores them then.
template <typename S, typename Tuple>
struct OnlyIf {
  bool (*pred)(const S&);
  Tuple fields;
};
template <typename S, typename... F>
constexpr OnlyIf<S, std::tuple<F...>> only_if(bool (*pred)(const S&), F... fields) {
  return {pred, std::make_tuple(fields...)};
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

// A struct's rules between its fields (a part not above its whole): `void evidence_check(const
// T&, const std::string& where)` beside its table, run by the reader after the fields.
template <typename T, typename = void>
struct has_check : std::false_type {};
template <typename T>
struct has_check<T, std::void_t<decltype(evidence_check(std::declval<const T&>(),
                                                        std::declval<const std::string&>()))>>
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
struct bare {  // T without its std::optional
  using type = T;
};
template <typename T>
struct bare<std::optional<T>> {
  using type = T;
};
template <typename T>
struct is_map : std::false_type {};
template <typename T>
struct is_map<std::map<std::string, T>> : std::true_type {};
template <typename F>
struct is_custom : std::false_type {};
template <typename S>
struct is_custom<Custom<S>> : std::true_type {};
template <typename F>
struct is_group : std::false_type {};
template <typename S, typename Tuple>
struct is_group<Group<S, Tuple>> : std::true_type {};
template <typename F>
struct is_only_if : std::false_type {};
template <typename S, typename Tuple>
struct is_only_if<OnlyIf<S, Tuple>> : std::true_type {};
template <typename F>
struct is_flat : std::false_type {};
template <typename S, typename M>
struct is_flat<Flat<S, M>> : std::true_type {};
template <typename M>
auto table_of() {
  return evidence_fields(static_cast<const M*>(nullptr));
}

inline bool is_empty(const std::string& s) { return s.empty(); }
inline bool is_empty(int64_t v) { return v < 0; }  // -1: unknown

template <typename T>
Json encode(const T& v);
template <typename T>
T decode(const Json& v, const std::string& where, int64_t min = json_read::kMinInt,
         int64_t max = json_read::kMaxInt);
// "where: field 'key'" for a scalar, "where.key" for a list or an object (its elements add to it).
std::string field_where(const std::string& where, const char* key, bool scalar);

template <typename T>
std::string type_name() {
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>) {
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
  } else if constexpr (is_map<T>::value) {
    return "{string: " + type_name<typename T::mapped_type>() + "}";
  } else {
    static_assert(has_fields<T>::value, "an evidence member needs a field table");
    return "object";
  }
}

template <typename T, typename Table>
void encode_fields(const T& v, const Table& table, Json& out) {
  auto one = [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    if constexpr (is_custom<F>::value) {
      Json w = f.write(v);
      if (f.omit_when_null && w.is_null()) return;
      out[f.key] = std::move(w);
    } else if constexpr (is_only_if<F>::value) {
      if (f.pred(v)) encode_fields(v, f.fields, out);
    } else if constexpr (is_flat<F>::value) {
      const auto& m = v.*(f.member);
      encode_fields(m, table_of<std::decay_t<decltype(m)>>(), out);
    } else if constexpr (is_group<F>::value) {
      Json& sub = out[f.key] = Json::object();
      encode_fields(v, f.fields, sub);
    } else {
      const auto& m = v.*(f.member);
      using M = std::decay_t<decltype(m)>;
      if constexpr (std::is_same_v<M, std::string> || std::is_same_v<M, int64_t>) {
        if (f.null_when_empty && is_empty(m)) {
          out[f.key] = nullptr;
          return;
        }
      }
      out[f.key] = encode(m);
    }
  };
  std::apply([&](const auto&... f) { (one(f), ...); }, table);
}

template <typename T>
Json encode(const T& v) {
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t> ||
                std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                std::is_same_v<T, std::string>) {
    return Json(v);
  } else if constexpr (is_vector<T>::value) {
    Json out = Json::array();
    for (const auto& e : v) out.push_back(encode(e));
    return out;
  } else if constexpr (is_optional<T>::value) {
    return v ? encode(*v) : Json(nullptr);
  } else if constexpr (is_map<T>::value) {
    Json out = Json::object();
    for (const auto& [k, e] : v) out[k] = encode(e);
    return out;
  } else {
    Json out = Json::object();
    encode_fields(v, evidence_fields(static_cast<const T*>(nullptr)), out);
    return out;
  }
}

// Checks `table`'s derived fields of `out` against the object `v`, a group's against its own
// object (after every field of the struct was read: a group's derived field may use the others).
template <typename T, typename Table>
void check_derived(const Json& v, const std::string& where, const T& out, const Table& table) {
  auto check = [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    if constexpr (is_only_if<F>::value) {
      if (f.pred(out)) check_derived(v, where, out, f.fields);
    } else if constexpr (is_flat<F>::value) {
      const auto& m = out.*(f.member);
      using M = std::decay_t<decltype(m)>;
      check_derived(v, where, m, table_of<M>());
      if constexpr (has_check<M>::value) evidence_check(m, where);
    } else if constexpr (is_group<F>::value) {
      check_derived(v.at(f.key), where + "." + f.key, out, f.fields);
    } else if constexpr (is_custom<F>::value) {
      if (f.read != nullptr) return;
      const Json want = f.write(out);
      const auto it = v.find(f.key);
      if (it == v.end() && !want.is_null() && !f.may_be_absent)
        ::tprobe::fail("{}: missing field '{}'", where, f.key);
      if (it != v.end() && *it != want)
        ::tprobe::fail("{}: field '{}' is {} but the other fields make it {}", where, f.key,
                       it->dump(), want.dump());
    }
  };
  std::apply([&](const auto&... f) { (check(f), ...); }, table);
}

// Reads `table`'s fields of `out` from the object `v`, then (`checks`) its derived fields.
template <typename T, typename Table>
void decode_fields(const Json& v, const std::string& where, T& out, const Table& table,
                   bool checks = true) {
  auto read_key = [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    const auto it = v.find(f.key);
    if constexpr (is_custom<F>::value) {
      if (f.read == nullptr) return;  // derived: checked below
      if (it == v.end()) {
        if (f.may_be_absent || (f.absent_when_null && f.write(out).is_null())) return;
        ::tprobe::fail("{}: missing field '{}'", where, f.key);
      }
      f.read(out, *it, where, f.key);
    } else if constexpr (is_group<F>::value) {
      if (it == v.end()) ::tprobe::fail("{}: missing field '{}'", where, f.key);
      const std::string at = where + "." + f.key;
      if (!it->is_object()) ::tprobe::fail("{}: must be an object", at);
      decode_fields(*it, at, out, f.fields, false);  // its derived fields: below, with S's
    } else {
      using M = std::decay_t<decltype(out.*(f.member))>;
      if (it == v.end()) {
        if constexpr (is_optional<M>::value) return;
        ::tprobe::fail("{}: missing field '{}'", where, f.key);
      }
      int64_t lo = f.min;
      if constexpr (std::is_same_v<M, std::string> || std::is_same_v<M, int64_t>) {
        if (f.null_when_empty && it->is_null()) {
          if constexpr (std::is_same_v<M, int64_t>) out.*(f.member) = -1;
          return;
        }
        if (f.null_when_empty) lo = std::max<int64_t>(lo, 0);  // a number is never the -1
      }
      // An optional list, map or object is named by path (where.key[i]) like a present one.
      using B = typename bare<M>::type;
      using E = typename element<B>::type;
      const bool scalar = !is_vector<B>::value && !is_map<B>::value && !has_fields<E>::value;
      out.*(f.member) = decode<M>(*it, field_where(where, f.key, scalar), lo, f.max);
    }
  };
  auto read = [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    if constexpr (is_only_if<F>::value) {
      if (f.pred(out)) decode_fields(v, where, out, f.fields, false);
    } else if constexpr (is_flat<F>::value) {
      auto& m = out.*(f.member);
      decode_fields(v, where, m, table_of<std::decay_t<decltype(m)>>(), false);
    } else {
      read_key(f);
    }
  };
  std::apply([&](const auto&... f) { (read(f), ...); }, table);
  // A derived field: what the members read make of it (absent where that is null).
  if (checks) check_derived(v, where, out, table);
}

template <typename T>
T decode(const Json& v, const std::string& where, int64_t min, int64_t max) {
  namespace jr = core::json_read;
  if constexpr (std::is_same_v<T, int64_t>) {
    return jr::element_integer(v, where, min, max);
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return static_cast<int32_t>(
        jr::element_integer(v, where, std::max<int64_t>(min, INT32_MIN),
                            std::min<int64_t>(max, INT32_MAX)));
  } else if constexpr (std::is_same_v<T, double>) {
    return jr::element_number(v, where);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) ::tprobe::fail("{} must be true or false", where);
    return v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) ::tprobe::fail("{} must be a string", where);
    return v.get<std::string>();
  } else if constexpr (is_vector<T>::value) {
    if (!v.is_array()) ::tprobe::fail("{}: must be a list", where);
    T out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(
          decode<typename T::value_type>(v[i], where + "[" + std::to_string(i) + "]", min, max));
    return out;
  } else if constexpr (is_optional<T>::value) {
    if (v.is_null()) return std::nullopt;
    return decode<typename T::value_type>(v, where, min, max);
  } else if constexpr (is_map<T>::value) {
    if (!v.is_object()) ::tprobe::fail("{}: must be an object", where);
    T out;
    for (const auto& [k, e] : v.items())
      out[k] = decode<typename T::mapped_type>(e, where + "." + k, min, max);
    return out;
  } else {
    if (!v.is_object()) ::tprobe::fail("{}: must be an object", where);
    T out{};
    decode_fields(v, where, out, evidence_fields(static_cast<const T*>(nullptr)));
    if constexpr (has_check<T>::value) evidence_check(static_cast<const T&>(out), where);
    return out;
  }
}

template <typename T, typename Table>
void docs_fields(std::vector<FieldDoc>& out, const std::string& prefix, const Table& table) {
  auto one = [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    if constexpr (is_only_if<F>::value) {
      docs_fields<T>(out, prefix, f.fields);
    } else if constexpr (is_flat<F>::value) {
      using M = std::decay_t<decltype(std::declval<T>().*(f.member))>;
      docs_fields<M>(out, prefix, table_of<M>());
    } else if constexpr (is_custom<F>::value) {
      out.push_back({prefix + f.key, f.type, f.unit, f.doc});
    } else if constexpr (is_group<F>::value) {
      out.push_back({prefix + f.key, "object", "", f.doc});
      docs_fields<T>(out, prefix + f.key + ".", f.fields);
    } else {
      using M = std::decay_t<decltype(std::declval<T>().*(f.member))>;
      using E = typename element<M>::type;
      const std::string path = prefix + f.key;
      std::string type = type_name<M>();
      if (f.null_when_empty) type += " or null";
      out.push_back({path, type, f.unit, f.doc});
      if constexpr (has_fields<E>::value)
        docs_fields<E>(out, path + (is_vector<M>::value ? "[]." : "."), table_of<E>());
    }
  };
  std::apply([&](const auto&... f) { (one(f), ...); }, table);
}
template <typename T>
void docs(std::vector<FieldDoc>& out, const std::string& prefix) {
  docs_fields<T>(out, prefix, evidence_fields(static_cast<const T*>(nullptr)));
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
// The items' fields that are scalars in the evidence, in table order, each with one cell per item
// (its value by its unit: "s" a time, "B" bytes, an integer a count, null "-"): what a view of
// the items, field by field, shows, so a field added to the table is in the text table and the
// report with no other edit. A field that is a list or an object for an item, or null (or absent)
// for every item, is left out.
struct FieldCells {
  FieldDoc doc;
  std::vector<std::string> cells;
};
std::vector<FieldCells> field_cells(const std::vector<FieldDoc>& docs, const std::vector<Json>& items);
template <typename S>
std::vector<FieldCells> field_cells(const std::vector<const S*>& items) {
  std::vector<Json> js;
  for (const S* s : items) js.push_back(to_json(*s));
  return field_cells(field_docs<S>(), js);
}
// One markdown table row per field: "| `path` | type | unit | doc |".
std::string field_rows(const std::vector<FieldDoc>& docs);
// Every field of every table in core/evidence (fields.cpp lists the tables): the keys no source
// outside core/evidence may name (tests/core/evidence_keys_test.cpp).
std::vector<FieldDoc> declared_fields();

}  // namespace tprobe::core::evidence
