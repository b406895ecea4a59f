// Reads token-length datasets (JSONL, CSV, text; plain or gzip) and builds the synthetic corpus.
#include "tprobe/core/io/lengths.hpp"

#include <cctype>
#include <charconv>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "base/out_of_memory.hpp"
#include "base/string_util.hpp"
#include "base/strict_json.hpp"
#include "io/line_reader.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/core/base/rng.hpp"

namespace tprobe::core {
namespace {

using detail::trim;

// Quoted in messages, cut so a binary line cannot flood the terminal.
std::string quote(std::string_view s) { return "'" + detail::printable(s, 40) + "'"; }

// Builds the dataset and interns source names.
class Builder {
 public:
  Builder(LengthDataset& ds, const std::string& path) : ds_(ds), path_(path) {}

  void add(int64_t length, std::string_view source, int64_t line) {
    if (ds_.lengths.size() >= 0xFFFFFFFEULL) {
      fail("{}:{}: more than 4,294,967,294 records; tprobe indexes records with 32 bits", path_,
           line);
    }
    auto it = ids_.find(std::string(source));
    uint32_t id = 0;
    if (it == ids_.end()) {
      // Evidence files are JSON: a name that is not UTF-8 could not be written after the
      // analysis ran (JSONL strings are checked by the JSON parser; CSV fields are raw bytes).
      if (!detail::is_valid_utf8(source)) {
        fail("{}:{}: source name {} is not valid UTF-8", path_, line, quote(source));
      }
      id = static_cast<uint32_t>(ds_.source_names.size());
      ds_.source_names.emplace_back(source);
      ids_.emplace(std::string(source), id);
    } else {
      id = it->second;
    }
    detail::room_for_one(ds_.lengths, path_);
    detail::room_for_one(ds_.source, path_);
    ds_.lengths.push_back(length);
    ds_.source.push_back(id);
  }

 private:
  LengthDataset& ds_;
  const std::string& path_;
  std::unordered_map<std::string, uint32_t> ids_;
};

[[noreturn]] void fail_at(const std::string& path, int64_t line, const std::string& what) {
  fail("{}:{}: {}", path, line, what);
}

int64_t check_length(int64_t value, const std::string& path, int64_t line) {
  if (value == 0) fail_at(path, line, "length is 0; every record needs at least one token");
  if (value < 0) fail_at(path, line, fmt::format("length is negative ({})", value));
  if (value > kMaxRecordLength) {
    fail_at(path, line, fmt::format("length {} is above the maximum {}", value, kMaxRecordLength));
  }
  return value;
}

int64_t parse_length_text(std::string_view field, const std::string& path, int64_t line) {
  std::string_view t = trim(field);
  if (t.empty()) fail_at(path, line, "missing length (empty field)");
  std::string_view digits = t;
  if (digits.front() == '+') digits.remove_prefix(1);
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) {
    fail_at(path, line, fmt::format("length {} is out of range", quote(t)));
  }
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty()) {
    fail_at(path, line, fmt::format("length {} is not an integer", quote(t)));
  }
  return check_length(value, path, line);
}

// SAX handler for one JSONL line: takes top-level "length", "source" and the element count of
// a flat "input_ids" without building a DOM (a 16k-token input_ids line allocates nothing).
class JsonRecordSax {
 public:
  using json = nlohmann::json;

  bool have_length = false;
  int64_t length = 0;
  bool have_ids = false;
  int64_t ids = 0;
  std::string source;
  std::string error;
  std::string_view text;  // the line, for a syntax error's place
  // read_record_ids: the ids of input_ids kept here, each in 0..max_id.
  std::vector<int64_t>* capture = nullptr;
  int64_t max_id = 0;

  bool null() { return scalar("null", false); }
  bool boolean(bool) { return scalar("a boolean", false); }
  bool number_integer(json::number_integer_t v) {
    if (is_length()) return set_length(v);
    if (!keep(v)) return false;
    return scalar("a number", true);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (in_ids_ && depth_ == 2 && capture != nullptr) {
      if (v > static_cast<json::number_unsigned_t>(max_id)) return keep(max_id + 1);
      if (!keep(static_cast<int64_t>(v))) return false;
      return scalar("a number", true);
    }
    if (is_length()) {
      if (v > static_cast<json::number_unsigned_t>(kMaxRecordLength)) {
        return set_error(fmt::format("length {} is above the maximum {}", v, kMaxRecordLength));
      }
      return set_length(static_cast<int64_t>(v));
    }
    return scalar("a number", true);
  }
  bool number_float(json::number_float_t, const json::string_t& text) {
    if (is_length()) return set_error(fmt::format("length {} is not an integer", quote(text)));
    return scalar("a non-integer number", false);
  }
  bool string(json::string_t& s) {
    if (depth_ == 1 && key_ == "source") {
      source = s;
      return true;
    }
    if (is_length()) return set_error(fmt::format("length is a string ({}), not an integer", quote(s)));
    return scalar("a string", false);
  }
  bool binary(json::binary_t&) { return scalar("binary", false); }
  bool start_object(std::size_t) {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    if (in_ids_) return set_error("input_ids must be a flat list of token ids");
    if (depth_ == 1 && is_known_key()) return set_error(fmt::format("'{}' is an object", key_));
    ++depth_;
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ == 0) return set_error("line is a JSON array, expected an object per line");
    if (in_ids_) return set_error("input_ids must be a flat list of token ids");
    if (depth_ == 1 && key_ == "input_ids") {
      in_ids_ = true;
      have_ids = true;
      ids = 0;
    } else if (depth_ == 1 && is_known_key()) {
      return set_error(fmt::format("'{}' is a list", key_));
    }
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    if (in_ids_ && depth_ == 1) in_ids_ = false;
    return true;
  }
  bool key(json::string_t& k) {
    if (depth_ == 1) {
      // A repeated field would make the record mean two things (nlohmann keeps one silently).
      if (!keys_.insert(k).second) {
        return set_error(fmt::format("key {} appears twice in the record", quote(k)));
      }
      key_ = k;
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) {
    if (error.empty()) error = "malformed JSON " + detail::json_syntax_error(text, position, e);
    return false;
  }

 private:
  bool is_length() const { return depth_ == 1 && key_ == "length"; }
  bool is_known_key() const { return key_ == "length" || key_ == "source" || key_ == "input_ids"; }
  bool set_error(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }
  bool keep(int64_t v) {
    if (!in_ids_ || depth_ != 2 || capture == nullptr) return true;
    if (v < 0 || v > max_id) {
      return set_error(fmt::format("input_ids[{}] is {}: a token id must be in 0..{} (the model's "
                                   "vocabulary)",
                                   capture->size(), v, max_id));
    }
    capture->push_back(v);
    return true;
  }
  bool set_length(int64_t v) {
    if (v == 0) return set_error("length is 0; every record needs at least one token");
    if (v < 0) return set_error(fmt::format("length is negative ({})", v));
    if (v > kMaxRecordLength) {
      return set_error(fmt::format("length {} is above the maximum {}", v, kMaxRecordLength));
    }
    have_length = true;
    length = v;
    return true;
  }
  // A scalar value: an element of input_ids, a known field of the wrong type, or ignored.
  bool scalar(const char* what, bool integer) {
    if (depth_ == 0) return set_error("line is not a JSON object");
    if (in_ids_ && depth_ == 2) {
      if (!integer) return set_error(fmt::format("input_ids holds {}, expected token ids", what));
      ++ids;
      return true;
    }
    if (depth_ == 1 && key_ == "length") return set_error(fmt::format("length is {}", what));
    if (depth_ == 1 && key_ == "source") {
      if (std::strcmp(what, "null") == 0) return true;  // null: no source
      return set_error(fmt::format("source is {}, expected a string", what));
    }
    if (depth_ == 1 && key_ == "input_ids") {
      return set_error(fmt::format("input_ids is {}, expected a list", what));
    }
    return true;
  }

  int depth_ = 0;
  bool in_ids_ = false;
  std::string key_;
  std::unordered_set<std::string> keys_;  // top-level keys seen
};

// The common line, {"length": N, "source": "S"} in any key order and spacing, parsed by hand: a
// third of the SAX parser's time per line. Anything else (escapes, non-ASCII, other keys or
// types, a sign, leading zeros, a fraction) returns false and goes through the SAX parser, which
// gives the same result for valid lines and the precise message for broken ones.
bool parse_simple_jsonl(const std::string& text, int64_t& length, std::string& source) {
  const char* p = text.data();
  const char* const end = p + text.size();
  auto ws = [&] {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) ++p;
  };
  auto plain_string = [&](std::string_view& out) {
    if (p == end || *p != '"') return false;
    const char* begin = ++p;
    while (p < end && *p != '"') {
      const auto c = static_cast<unsigned char>(*p);
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p;
    }
    if (p == end) return false;
    out = std::string_view(begin, static_cast<std::size_t>(p - begin));
    ++p;
    return true;
  };
  bool have_length = false;
  std::string_view src;
  bool have_source = false;
  ws();
  if (p == end || *p != '{') return false;
  ++p;
  for (;;) {
    ws();
    std::string_view key;
    if (!plain_string(key)) return false;
    ws();
    if (p == end || *p != ':') return false;
    ++p;
    ws();
    if (key == "length") {
      if (have_length) return false;  // repeated: the SAX parser refuses it with a message
      const char* digits = p;
      while (p < end && *p >= '0' && *p <= '9') ++p;
      const auto n = static_cast<std::size_t>(p - digits);
      if (n == 0 || n > 10 || (n > 1 && *digits == '0')) return false;
      int64_t v = 0;
      for (const char* d = digits; d < p; ++d) v = v * 10 + (*d - '0');
      if (v < 1 || v > kMaxRecordLength) return false;
      length = v;
      have_length = true;
    } else if (key == "source") {
      if (have_source || !plain_string(src)) return false;
      have_source = true;
    } else {
      return false;
    }
    ws();
    if (p < end && *p == ',') {
      ++p;
      continue;
    }
    if (p < end && *p == '}') {
      ++p;
      break;
    }
    return false;
  }
  ws();
  if (p != end || !have_length) return false;
  source.assign(have_source ? src : std::string_view());
  return true;
}

void parse_jsonl_line(const std::string& text, Builder& out, const std::string& path,
                      int64_t line) {
  thread_local std::string fast_source;
  int64_t fast_length = 0;
  if (parse_simple_jsonl(text, fast_length, fast_source)) {
    out.add(fast_length, fast_source, line);
    return;
  }
  // nlohmann's lexer ends its input at a NUL byte, which would hide whatever follows it on the
  // line (a second record); the fast path above never accepts one (issue 46).
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
    fail_at(path, line,
            fmt::format("a NUL byte at column {}: a JSONL line is JSON text, which never holds "
                        "one",
                        nul + 1));
  }
  JsonRecordSax sax;
  sax.text = text;
  bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
  if (!ok || !sax.error.empty()) {
    fail_at(path, line, sax.error.empty() ? std::string("malformed JSON") : sax.error);
  }
  if (!sax.have_length && !sax.have_ids) {
    fail_at(path, line, "missing field: the record has neither 'length' nor 'input_ids'");
  }
  int64_t length = sax.have_length ? sax.length : sax.ids;
  if (!sax.have_length && sax.ids == 0) fail_at(path, line, "input_ids is empty (length 0)");
  if (sax.have_length && sax.have_ids && sax.ids != sax.length) {
    fail_at(path, line,
            fmt::format("length {} disagrees with input_ids ({} ids)", sax.length, sax.ids));
  }
  out.add(length, sax.source, line);
}

// Splits one CSV line: comma separated, double quotes around a field, "" inside quotes.
bool split_csv(std::string_view line, std::vector<std::string>& fields) {
  fields.clear();
  std::string cur;
  bool quoted = false;
  bool was_quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur.push_back('"');
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur.push_back(c);
      }
    } else if (c == '"' && trim(cur).empty() && !was_quoted) {
      quoted = true;
      was_quoted = true;
      cur.clear();
    } else if (c == ',') {
      fields.push_back(was_quoted ? cur : std::string(trim(cur)));
      cur.clear();
      was_quoted = false;
    } else if (was_quoted && c != ' ' && c != '\t') {
      return false;  // text after a closing quote
    } else if (!was_quoted) {
      cur.push_back(c);
    }
  }
  if (quoted) return false;
  fields.push_back(was_quoted ? cur : std::string(trim(cur)));
  return true;
}

struct CsvLayout {
  std::size_t columns = 0;
  std::size_t length = 0;
  std::size_t source = 0;
  bool has_source = false;
};

CsvLayout parse_csv_header(const std::string& text, const std::string& path, int64_t line) {
  std::vector<std::string> fields;
  if (!split_csv(text, fields)) fail_at(path, line, "malformed CSV header (unbalanced quotes)");
  CsvLayout layout;
  layout.columns = fields.size();
  bool has_length = false;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (fields[i] == "length") {
      if (has_length) fail_at(path, line, "CSV header names 'length' twice");
      has_length = true;
      layout.length = i;
    } else if (fields[i] == "source") {
      if (layout.has_source) fail_at(path, line, "CSV header names 'source' twice");
      layout.has_source = true;
      layout.source = i;
    }
  }
  if (!has_length) {
    if (fields.size() == 1) {
      fail_at(path, line,
              fmt::format("{} is neither a length, a JSON object, nor a CSV header with a "
                          "'length' column",
                          quote(text)));
    }
    fail_at(path, line, fmt::format("CSV header {} has no 'length' column", quote(text)));
  }
  return layout;
}

bool blank(const std::string& s) { return trim(s).empty(); }

LengthFormat sniff(std::string_view first) {
  std::string_view t = trim(first);
  if (!t.empty() && t.front() == '{') return LengthFormat::kJsonl;
  if (!t.empty() && (std::isdigit(static_cast<unsigned char>(t.front())) || t.front() == '-' ||
                     t.front() == '+')) {
    return LengthFormat::kText;
  }
  return LengthFormat::kCsv;
}

const char* format_name(LengthFormat f) {
  switch (f) {
    case LengthFormat::kJsonl: return "jsonl";
    case LengthFormat::kCsv: return "csv";
    case LengthFormat::kText: return "text";
    case LengthFormat::kAuto: return "auto";
  }
  return "?";
}

// One source of the synthetic corpus: its share of records and its length quantile function,
// piecewise linear between knots (cumulative probability in 1/10,000, length in tokens).
struct SyntheticSource {
  const char* name;
  uint32_t weight_permille;
  std::vector<std::pair<int64_t, int64_t>> knots;
};

// Tuned so the corpus looks like the post-mortem's (docs/findings.md#f7–f8): mean length ~2.6k,
// 142..16,384, and everything above 8,192 tokens in the two dialogue sources (46 % and 96 % of
// their records), with a point mass at the 16,384 cap as a tokenizer limit leaves it.
const std::vector<SyntheticSource>& synthetic_sources() {
  static const std::vector<SyntheticSource> kSources = {
      {"chat", 330, {{0, 142}, {5000, 560}, {9000, 1500}, {9900, 3200}, {10000, 6000}}},
      {"code", 170, {{0, 180}, {5000, 1500}, {9000, 4000}, {9900, 6500}, {10000, 8000}}},
      {"qa_docs", 210, {{0, 200}, {5000, 1300}, {9000, 3200}, {9900, 6000}, {10000, 7000}}},
      {"summarize", 170, {{0, 600}, {5000, 2400}, {9000, 4800}, {9900, 7000}, {10000, 8192}}},
      {"dialogue_long",
       85,
       {{0, 2000}, {3000, 5000}, {5400, 8192}, {9000, 14000}, {9600, 16384}, {10000, 16384}}},
      {"dialogue_agent", 35, {{0, 6000}, {400, 8192}, {6000, 16384}, {10000, 16384}}},
  };
  return kSources;
}

}  // namespace

LengthFormat parse_length_format(const std::string& text) {
  if (text == "auto") return LengthFormat::kAuto;
  if (text == "jsonl") return LengthFormat::kJsonl;
  if (text == "csv") return LengthFormat::kCsv;
  if (text == "text") return LengthFormat::kText;
  fail_usage("format '{}' is not one of auto, jsonl, csv, text", text);
}

namespace {

LengthDataset read_lengths_from(detail::LineReader& reader, const std::string& path,
                                LengthFormat format) {
  LengthDataset ds;
  ds.name = path;
  Builder builder(ds, path);
  std::string line;
  CsvLayout csv;
  bool header_seen = false;
  std::vector<std::string> fields;
  while (reader.next(line)) {
    // A UTF-8 byte-order mark (some editors and exporters write one) is not part of the data.
    if (reader.line_number() == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (blank(line)) continue;
    const int64_t n = reader.line_number();
    if ((n & 0xffff) == 0) throw_if_interrupted();  // a 10^7-line file takes seconds
    if (format == LengthFormat::kAuto) format = sniff(line);
    switch (format) {
      case LengthFormat::kJsonl:
        parse_jsonl_line(line, builder, path, n);
        break;
      case LengthFormat::kText:
        builder.add(parse_length_text(line, path, n), {}, n);
        break;
      case LengthFormat::kCsv:
        if (!header_seen) {
          csv = parse_csv_header(line, path, n);
          header_seen = true;
          break;
        }
        if (!split_csv(line, fields)) fail_at(path, n, "malformed CSV line (unbalanced quotes)");
        if (fields.size() != csv.columns) {
          fail_at(path, n, fmt::format("expected {} CSV fields, got {}", csv.columns,
                                       fields.size()));
        }
        builder.add(parse_length_text(fields[csv.length], path, n),
                    csv.has_source ? std::string_view(fields[csv.source]) : std::string_view(),
                    n);
        break;
      case LengthFormat::kAuto:
        break;
    }
  }
  ds.format = format_name(format);
  if (ds.lengths.empty()) {
    fail("{}: no records ({} lines read{})", path, reader.line_number(),
         header_seen ? ", only a CSV header" : "");
  }
  return ds;
}

}  // namespace

std::vector<std::vector<int64_t>> read_record_ids(const std::string& path,
                                                  const std::vector<int64_t>& wanted,
                                                  int64_t max_id) {
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    if (wanted[i] < 0 || (i > 0 && wanted[i] <= wanted[i - 1]))
      fail("read_record_ids: the records wanted must ascend without repeats");
  }
  std::vector<std::vector<int64_t>> out(wanted.size());
  detail::LineReader reader(path);
  std::string line;
  int64_t record = -1;
  std::size_t next = 0;
  bool sniffed = false;
  while (next < wanted.size() && reader.next(line)) {
    if (reader.line_number() == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (blank(line)) continue;
    const int64_t n = reader.line_number();
    if ((n & 0xffff) == 0) throw_if_interrupted();
    if (!sniffed) {
      sniffed = true;
      if (sniff(line) != LengthFormat::kJsonl) {
        fail_usage("{}: {} records have no token ids; the measured step needs JSONL records with "
                   "input_ids",
                   path, format_name(sniff(line)));
      }
    }
    if (++record != wanted[next]) continue;
    if (line.find('\0') != std::string::npos) fail_at(path, n, "a NUL byte in a JSONL line");
    JsonRecordSax sax;
    sax.text = line;
    sax.capture = &out[next];
    sax.max_id = max_id;
    const bool ok = nlohmann::json::sax_parse(line.begin(), line.end(), &sax);
    if (!ok || !sax.error.empty())
      fail_at(path, n, sax.error.empty() ? std::string("malformed JSON") : sax.error);
    if (!sax.have_ids || out[next].empty())
      fail_at(path, n, fmt::format("record {} has no input_ids: the measured step needs the "
                                   "tokens, not only a length",
                                   record));
    ++next;
  }
  if (next < wanted.size())
    fail("{}: record {} asked for, but the file holds {} records", path, wanted[next], record + 1);
  return out;
}

LengthDataset read_lengths(const std::string& path, LengthFormat format) {
  // The record lists grow through detail::room_for_one (a growth that fails names its bytes);
  // any smaller allocation that fails names how far the read had got.
  detail::LineReader reader(path);
  return detail::reading(
      path, [&] { return reader.bytes_read(); },
      [&] { return read_lengths_from(reader, path, format); });
}

LengthDataset synthetic_corpus(int64_t records, uint64_t seed) {
  if (records < 1) fail_usage("a synthetic corpus needs at least 1 record, got {}", records);
  if (records > kMaxSyntheticRecords) {
    fail_usage("a synthetic corpus of {} records: at most {} (12 bytes each in memory, before the "
               "probe's own copies)",
               records, kMaxSyntheticRecords);
  }
  const auto& sources = synthetic_sources();
  LengthDataset ds;
  ds.name = "synthetic";
  ds.format = "synthetic";
  for (const auto& s : sources) ds.source_names.emplace_back(s.name);
  const auto n = static_cast<std::size_t>(records);
  detail::allocating("the synthetic corpus", n * (sizeof(int64_t) + sizeof(uint32_t)), [&] {
    ds.lengths.reserve(n);
    ds.source.reserve(n);
  });
  Rng rng(seed);
  constexpr uint64_t kScale = 1000;  // knots are in 1/10,000; draws in 1/10,000,000
  for (int64_t i = 0; i < records; ++i) {
    if ((i & 0xffff) == 0) throw_if_interrupted();  // 5*10^7 records take seconds
    uint64_t pick = rng.uniform(1000);
    std::size_t s = 0;
    while (s + 1 < sources.size() && pick >= sources[s].weight_permille) {
      pick -= sources[s].weight_permille;
      ++s;
    }
    const auto& knots = sources[s].knots;
    const int64_t u = static_cast<int64_t>(rng.uniform(10000 * kScale));
    std::size_t k = 1;
    while (k + 1 < knots.size() && u >= knots[k].first * static_cast<int64_t>(kScale)) ++k;
    const int64_t c0 = knots[k - 1].first * kScale, c1 = knots[k].first * kScale;
    const int64_t l0 = knots[k - 1].second, l1 = knots[k].second;
    const int64_t length = l0 + (l1 - l0) * (u - c0) / (c1 - c0);
    ds.lengths.push_back(length);
    ds.source.push_back(static_cast<uint32_t>(s));
  }
  return ds;
}

LengthDataset load_dataset(const std::string& spec, LengthFormat format) {
  const std::string prefix = "synthetic";
  if (spec == prefix) return synthetic_corpus();
  if (spec.rfind(prefix + ":", 0) == 0) {
    std::string_view n = std::string_view(spec).substr(prefix.size() + 1);
    int64_t records = 0;
    auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), records);
    if (ec != std::errc() || ptr != n.data() + n.size() || records < 1) {
      fail_usage("dataset '{}': expected synthetic:N with N a positive record count", spec);
    }
    if (records > kMaxSyntheticRecords) {
      fail_usage("dataset '{}': at most {} synthetic records (12 bytes each in memory, before "
                 "the probe's own copies)",
                 spec, kMaxSyntheticRecords);
    }
    LengthDataset ds = synthetic_corpus(records);
    ds.name = spec;
    return ds;
  }
  return read_lengths(spec, format);
}

int64_t percentile_sorted(const std::vector<int64_t>& sorted, int percent) {
  if (sorted.empty()) fail("percentile of an empty list");
  if (percent <= 0 || percent > 100) fail("percentile {} is outside (0, 100]", percent);
  const std::size_t n = sorted.size();
  std::size_t rank = (static_cast<std::size_t>(percent) * n + 99) / 100;  // ceil(p n / 100)
  if (rank < 1) rank = 1;
  return sorted[rank - 1];
}

}  // namespace tprobe::core
