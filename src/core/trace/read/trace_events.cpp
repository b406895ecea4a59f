// The streaming parse of a torch.profiler / Kineto Chrome trace: every token of the document
// through one handler (TraceSax) that classifies each event by its category and keeps what the
// reader needs compactly (trace_parse_internal.hpp's ParsedEvents). Size: over the house's
// 800 lines for a stated reason: the handler is one state machine over the token stream — its
// context stack, the current event's fields and the arrays it fills — and splitting it would put
// that state behind an interface crossed once per token.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>

#include "base/out_of_memory.hpp"
#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "trace/read/detail/trace_parse_internal.hpp"

namespace tprobe::core {
namespace {

using detail::DeviceRow;
using detail::JsonNumberKind;
using detail::JsonToken;
using detail::JsonTokenizer;
using detail::RangeKind;
using detail::saturating_add;

constexpr int64_t kMaxDurationNs = int64_t{86400} * 1000 * 1000 * 1000;  // one day
constexpr std::size_t kMaxMessages = 20;
constexpr std::size_t kMaxNameBytes = std::size_t{1} << 16;

// ---------------------------------------------------------------------------------------------
// Numbers: Kineto writes ts/dur as microseconds with up to three decimals ("1234.567"), relative
// to baseTimeNanoseconds or as absolute epoch microseconds ("1712195495519689.047"). A double
// holds neither exactly at 1.7e15 us, so the decimal text is shifted three places into integer
// nanoseconds: any value int64 ns can hold (|us| <= 9223372036854775.807), exponents included
// ("1.5e3"); digits past the nanosecond round half away from zero. False for anything else.
bool decimal_us_to_ns(std::string_view raw, int64_t& out) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  std::size_t i = 0;
  bool neg = false;
  if (i < raw.size() && (raw[i] == '-' || raw[i] == '+')) neg = raw[i++] == '-';
  const std::size_t int_begin = i;
  while (i < raw.size() && raw[i] >= '0' && raw[i] <= '9') ++i;
  const std::size_t int_end = i;
  std::size_t frac_begin = i, frac_end = i;
  if (i < raw.size() && raw[i] == '.') {
    frac_begin = ++i;
    while (i < raw.size() && raw[i] >= '0' && raw[i] <= '9') ++i;
    frac_end = i;
    if (frac_end == frac_begin) return false;  // "1."
  }
  if (int_end == int_begin) return false;  // ".5", "-", ""
  int64_t exponent = 0;
  if (i < raw.size() && (raw[i] == 'e' || raw[i] == 'E')) {
    ++i;
    bool exp_neg = false;
    if (i < raw.size() && (raw[i] == '-' || raw[i] == '+')) exp_neg = raw[i++] == '-';
    const std::size_t exp_begin = i;
    while (i < raw.size() && raw[i] >= '0' && raw[i] <= '9') {
      exponent = std::min<int64_t>(exponent * 10 + (raw[i] - '0'), 100000);  // clamped: far past
      ++i;                                                                  // any int64
    }
    if (i == exp_begin) return false;
    if (exp_neg) exponent = -exponent;
  }
  if (i != raw.size()) return false;
  // The digits int..frac form one sequence; the first `whole` of them are whole nanoseconds.
  const int64_t int_len = static_cast<int64_t>(int_end - int_begin);
  const int64_t frac_len = static_cast<int64_t>(frac_end - frac_begin);
  const int64_t whole = int_len + exponent + 3;
  auto digit = [&](int64_t k) {  // k-th digit of the sequence, 0 past its end
    if (k < int_len) return raw[int_begin + static_cast<std::size_t>(k)] - '0';
    if (k < int_len + frac_len) return raw[frac_begin + static_cast<std::size_t>(k - int_len)] - '0';
    return 0;
  };
  uint64_t ns = 0;
  for (int64_t k = 0; k < whole; ++k) {
    const int d = digit(k);
    if (ns == 0 && d == 0) {
      if (k >= int_len + frac_len) break;  // only zeros remain
      continue;
    }
    if (ns > (kMax - static_cast<uint64_t>(d)) / 10) return false;  // past int64 ns
    ns = ns * 10 + static_cast<uint64_t>(d);
  }
  if (whole >= 0 && digit(whole) >= 5) {
    if (ns == kMax) return false;
    ++ns;
  }
  out = neg ? -static_cast<int64_t>(ns) : static_cast<int64_t>(ns);
  return true;
}

// Integer part of a double, clamped to int64 (a pid/tid written as a fraction).
int64_t to_int64(double d) {
  if (!(d == d)) return 0;
  if (d >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

// ASCII case-insensitive equality with a lower-case literal.
bool iequals(std::string_view s, std::string_view lower_literal) {
  if (s.size() != lower_literal.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower_literal[i]) return false;
  }
  return true;
}

enum class EventClass {
  kDevice,
  kLaunch,
  kHostOp,
  kGpuAnnotation,
  kFlow,
  kFwdBwd,
  kPython,
  kSync,
  kOther
};

struct Classified {
  EventClass cls = EventClass::kOther;
  ActivityKind kind = ActivityKind::kKernel;
  bool cpu_op = false;  // an operator ("cpu_op", older "Operator"), not a user annotation
};

// Category spellings, compared without case: PyTorch 2.x / Kineto ("kernel", "gpu_memcpy",
// "cuda_runtime", "cpu_op", "user_annotation", "gpu_user_annotation", "ac2g") and the older
// ones ("Kernel", "Memcpy", "Memset", "Runtime", "Operator").
Classified classify(std::string_view cat) {
  if (iequals(cat, "kernel")) return {EventClass::kDevice, ActivityKind::kKernel};
  if (iequals(cat, "gpu_memcpy") || iequals(cat, "memcpy"))
    return {EventClass::kDevice, ActivityKind::kMemcpy};
  if (iequals(cat, "gpu_memset") || iequals(cat, "memset"))
    return {EventClass::kDevice, ActivityKind::kMemset};
  if (iequals(cat, "cuda_runtime") || iequals(cat, "runtime") || iequals(cat, "cuda_driver") ||
      iequals(cat, "privateuse1_runtime") || iequals(cat, "privateuse1_driver")) {
    return {EventClass::kLaunch, ActivityKind::kKernel};
  }
  if (iequals(cat, "cpu_op") || iequals(cat, "operator"))
    return {EventClass::kHostOp, ActivityKind::kKernel, true};
  if (iequals(cat, "user_annotation")) return {EventClass::kHostOp, ActivityKind::kKernel};
  if (iequals(cat, "gpu_user_annotation"))
    return {EventClass::kGpuAnnotation, ActivityKind::kKernel};
  if (iequals(cat, "ac2g")) return {EventClass::kFlow, ActivityKind::kKernel};
  if (iequals(cat, "fwdbwd")) return {EventClass::kFwdBwd, ActivityKind::kKernel};
  if (iequals(cat, "python_function")) return {EventClass::kPython, ActivityKind::kKernel};
  if (iequals(cat, "cuda_sync")) return {EventClass::kSync, ActivityKind::kKernel};
  return {};
}

// N of "ProfilerStep#N", -1 for any other name.
int64_t profiler_step_number(const std::string& name) {
  if (!detail::starts_with(name, "ProfilerStep#")) return -1;
  const std::string num = name.substr(13);
  if (num.empty() || num.size() > 11 || !std::all_of(num.begin(), num.end(), ::isdigit)) return -1;
  return std::stoll(num);
}

// What is being read at each nesting level.
enum class Ctx {
  kTopObject,
  kEvents,    // the traceEvents array
  kEvent,     // one event object
  kArgs,      // an event's args
  kDevProps,  // the deviceProperties array
  kDevProp,   // one device
  kDistInfo,  // distributedInfo
  kMessages,  // a top-level array of strings (Kineto's WARNING / ERROR / INFO lists)
  kSkip,      // anything else
};

// Object keys the reader acts on, sorted once per key instead of compared per value.
enum class Key : uint8_t {
  kOther,
  kPh,
  kCat,
  kName,
  kPid,
  kTid,
  kTs,
  kDur,
  kArgs,
  kExternalId,
  kCorrelation,
  kDevice,
  kStream,
  kBytes,
  kId,
  kComputeMajor,
  kComputeMinor,
  kTotalGlobalMem,
  kNumSms,
  kBaseTime,
  kSchemaVersion,
  kTraceEvents,
  kDeviceProperties,
  kDistributedInfo,
  kRank,
  kWorldSize,
  kSequenceNumber,
  // a cuda_sync event's args
  kWaitOnStream,
  kWaitOnRecordCorrelation,
  kWaitOnEventId,
  // a [memory] event's args (profile_memory=True)
  kMemAddr,
  kMemBytes,
  kMemTotalAllocated,
  kMemTotalReserved,
  kMemDeviceType,
  kMemDeviceId,
  // a row's attribution as tprobe writes it (profile --trace-out)
  kTprobePhase,
  kTprobePart,
  kTprobeLayer,
  kTprobeLayerKind,
};
constexpr int kMemFields = 6;  // kMemAddr .. kMemDeviceId
int mem_field(Key k) {  // 0..5 for the [memory] keys, -1 for the others
  const int i = static_cast<int>(k) - static_cast<int>(Key::kMemAddr);
  return i >= 0 && i < kMemFields ? i : -1;
}
const char* const kMemFieldName[kMemFields] = {"Addr",           "Bytes",       "Total Allocated",
                                               "Total Reserved", "Device Type", "Device Id"};

// k (whose length the caller matched) equals the literal: a fixed-size compare the compiler
// inlines, where a string comparison would call memcmp for every key of the trace.
template <std::size_t N>
bool is(std::string_view k, const char (&literal)[N]) {
  return std::memcmp(k.data(), literal, N - 1) == 0;
}

Key key_of(std::string_view k) {
  switch (k.size()) {
    case 2:
      if (is(k, "ph")) return Key::kPh;
      if (is(k, "ts")) return Key::kTs;
      if (is(k, "id")) return Key::kId;
      break;
    case 3:
      if (is(k, "cat")) return Key::kCat;
      if (is(k, "pid")) return Key::kPid;
      if (is(k, "tid")) return Key::kTid;
      if (is(k, "dur")) return Key::kDur;
      break;
    case 4:
      if (is(k, "name")) return Key::kName;
      if (is(k, "args")) return Key::kArgs;
      if (is(k, "rank")) return Key::kRank;
      if (is(k, "Addr")) return Key::kMemAddr;
      break;
    case 5:
      if (is(k, "bytes")) return Key::kBytes;
      if (is(k, "Bytes")) return Key::kMemBytes;
      break;
    case 6:
      if (is(k, "device")) return Key::kDevice;
      if (is(k, "stream")) return Key::kStream;
      if (is(k, "numSms")) return Key::kNumSms;
      break;
    case 9:
      if (is(k, "Device Id")) return Key::kMemDeviceId;
      break;
    case 10:
      if (is(k, "world_size")) return Key::kWorldSize;
      break;
    case 11:
      if (is(k, "tprobe_part")) return Key::kTprobePart;
      if (is(k, "External id")) return Key::kExternalId;
      if (is(k, "correlation")) return Key::kCorrelation;
      if (is(k, "traceEvents")) return Key::kTraceEvents;
      if (is(k, "Device Type")) return Key::kMemDeviceType;
      break;
    case 12:
      if (is(k, "tprobe_phase")) return Key::kTprobePhase;
      if (is(k, "tprobe_layer")) return Key::kTprobeLayer;
      if (is(k, "computeMajor")) return Key::kComputeMajor;
      if (is(k, "computeMinor")) return Key::kComputeMinor;
      break;
    case 13:
      if (is(k, "schemaVersion")) return Key::kSchemaVersion;
      break;
    case 14:
      if (is(k, "totalGlobalMem")) return Key::kTotalGlobalMem;
      if (is(k, "wait_on_stream")) return Key::kWaitOnStream;
      if (is(k, "Total Reserved")) return Key::kMemTotalReserved;
      break;
    case 15:
      if (is(k, "distributedInfo")) return Key::kDistributedInfo;
      if (is(k, "Sequence number")) return Key::kSequenceNumber;
      if (is(k, "Total Allocated")) return Key::kMemTotalAllocated;
      break;
    case 16:
      if (is(k, "deviceProperties")) return Key::kDeviceProperties;
      break;
    case 17:
      if (is(k, "tprobe_layer_kind")) return Key::kTprobeLayerKind;
      break;
    case 19:
      if (is(k, "baseTimeNanoseconds")) return Key::kBaseTime;
      break;
    case 21:
      if (is(k, "wait_on_cuda_event_id")) return Key::kWaitOnEventId;
      break;
    case 33:
      if (is(k, "wait_on_cuda_event_record_corr_id")) return Key::kWaitOnRecordCorrelation;
      break;
    default:
      break;
  }
  return Key::kOther;
}

bool all_digits(std::string_view v) {
  return std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

class TraceSax {
 public:
  TraceSax(std::string source, TraceSummary& summary, bool keep_parts = true)
      : source_(std::move(source)), s_(summary), keep_parts_(keep_parts) {}

  // Appends to a list that grows with the trace, its growth sized through detail::room_for_one.
  template <typename V>
  void push(V& v, typename V::value_type x) {
    detail::room_for_one(v, source_);
    v.push_back(std::move(x));
  }

  // Pulls every token of the document through the callbacks below.
  void parse(JsonTokenizer& tz) {
    for (;;) {
      switch (tz.next()) {
        case JsonToken::kBeginObject:
          start_object();
          break;
        case JsonToken::kEndObject:
          end_object();
          break;
        case JsonToken::kBeginArray:
          start_array();
          break;
        case JsonToken::kEndArray:
          stack_.pop_back();
          break;
        case JsonToken::kKey:
          key(tz.text());
          break;
        case JsonToken::kString:
          string(tz.text());
          break;
        case JsonToken::kNumber:
          number(tz);
          break;
        case JsonToken::kTrue:
        case JsonToken::kFalse:
        case JsonToken::kNull:
          break;
        case JsonToken::kEnd:
          finish_categories();
          return;
      }
    }
  }

  // What was read, handed over once the document has been parsed.
  detail::ParsedEvents take() {
    for (const auto& [track, open] : open_) out_.unmatched_begin += open > 0 ? open : 0;
    return std::move(out_);
  }

 private:
  struct Event {
    int64_t index = 0;
    char ph = 0;
    std::string cat;
    std::string name;
    bool has_name = false;
    int64_t pid = 0, tid = 0;
    bool has_pid = false;
    int64_t ts_ns = 0, dur_ns = 0;
    bool has_ts = false, has_dur = false;
    int64_t external_id = 0, correlation = 0, device = -1, stream = -1;
    int64_t seq = -1;  // args."Sequence number", -1 absent (or negative: nothing to match)
    // a cuda_sync event's args, -1 absent
    int64_t wait_stream = -1, wait_record = -1, wait_event = -1;
    int64_t bytes = -1;
    std::string bad_bytes;  // args.bytes as written when it is not a non-negative integer
    // pid, tid, args.device or args.stream holding a number that is not an int64 integer (1.5,
    // 1e3, 2^63): "field 'pid' has value 1.5", refused when the event ends.
    std::string bad_id;
    int64_t flow_id = 0;    // "id" of a flow event
    bool has_id = false;
    // A [memory] event's args, by mem_field(): bit k of mem_seen set when field k was read as an
    // integer in its range, of mem_bad when it held something else (mem_bad_raw[k], as written);
    // a field written twice: the later value wins.
    int64_t mem[kMemFields] = {};
    uint64_t mem_addr = 0;
    unsigned mem_seen = 0, mem_bad = 0;
    std::string mem_bad_raw[kMemFields];
    // args.tprobe_*: bit 0 phase, 1 part, 2 layer, 3 layer kind seen; the values as written
    unsigned tag_seen = 0;
    std::string tag_phase, tag_part, tag_kind, tag_layer_raw;
    int64_t tag_layer = -1;

    // Back to a fresh event, keeping the strings' storage for the next one.
    void reset(int64_t i) {
      index = i;
      ph = 0;
      cat.clear();
      name.clear();
      has_name = false;
      pid = tid = 0;
      has_pid = false;
      ts_ns = dur_ns = 0;
      has_ts = has_dur = false;
      external_id = correlation = 0;
      device = stream = -1;
      seq = -1;
      wait_stream = wait_record = wait_event = -1;
      bytes = -1;
      bad_bytes.clear();
      bad_id.clear();
      flow_id = 0;
      has_id = false;
      mem_seen = mem_bad = 0;
      tag_seen = 0;
      tag_layer = -1;
      tag_layer_raw.clear();
    }
  };

  // A counted category ("cat" as spelled) and its class, so an event costs one lookup.
  struct Category {
    std::string cat;
    Classified cls;
    int64_t count = 0;
  };

  Ctx top() const { return stack_.back(); }

  void key(std::string_view k) {
    const Ctx c = top();
    if (c == Ctx::kSkip) {
      key_ = Key::kOther;
      return;
    }
    key_ = key_of(k);
    if (c == Ctx::kTopObject) {
      top_key_.assign(k);
      // A repeated top-level key would merge two traceEvents arrays (or two of anything): the
      // file is two traces pasted together or damaged, not one trace.
      if (!out_.top_keys.insert(top_key_).second) {
        fail("{}: the top-level key '{}' appears twice (a damaged or concatenated trace?)",
             source_, detail::printable(top_key_, 60));
      }
    }
  }

  void start_object() {
    Ctx next = Ctx::kSkip;
    if (stack_.empty()) {
      next = Ctx::kTopObject;
      out_.saw_top_object = true;
    } else {
      const Ctx c = top();
      if (c == Ctx::kEvents) {
        next = Ctx::kEvent;
        ev_.reset(event_index_++);
      } else if (c == Ctx::kEvent && key_ == Key::kArgs) {
        next = Ctx::kArgs;
      } else if (c == Ctx::kDevProps) {
        next = Ctx::kDevProp;
        dev_ = DeviceProperties{};
      } else if (c == Ctx::kTopObject && key_ == Key::kDistributedInfo) {
        next = Ctx::kDistInfo;
      }
    }
    stack_.push_back(next);
  }

  void end_object() {
    const Ctx c = top();
    stack_.pop_back();
    if (c == Ctx::kEvent) finish_event();
    if (c == Ctx::kDevProp) s_.devices.push_back(dev_);
  }

  void start_array() {
    Ctx next = Ctx::kSkip;
    if (stack_.empty()) {
      next = Ctx::kEvents;  // the JSON Array Format: a bare list of events
      out_.saw_events = true;
    } else if (top() == Ctx::kTopObject) {
      if (key_ == Key::kTraceEvents) {
        next = Ctx::kEvents;
        out_.saw_events = true;
      } else if (key_ == Key::kDeviceProperties) {
        next = Ctx::kDevProps;
      } else {
        next = Ctx::kMessages;
        msg_key_ = top_key_;
      }
    }
    stack_.push_back(next);
  }

  void time_field(Key k, int64_t ns) {
    if (k == Key::kTs) {
      ev_.ts_ns = ns;
      ev_.has_ts = true;
    } else {
      ev_.dur_ns = ns;
      ev_.has_dur = true;
    }
  }

  void string(std::string_view v) {
    if (stack_.empty()) return;  // a bare string as the whole document
    const Ctx c = top();
    if (c == Ctx::kEvent) {
      switch (key_) {
        case Key::kPh:
          ev_.ph = v.empty() ? '?' : v[0];
          break;
        case Key::kCat:
          ev_.cat.assign(v);
          break;
        case Key::kName:
          ev_.name.assign(v.substr(0, kMaxNameBytes));
          ev_.has_name = true;
          break;
        case Key::kPid:
          ev_.pid = hash_id(v);
          break;
        case Key::kTid:
          ev_.tid = hash_id(v);
          break;
        case Key::kId:  // a flow's id written as a string: compared for equality only
          ev_.flow_id = hash_id(v);
          ev_.has_id = true;
          break;
        case Key::kTs:
        case Key::kDur:
          string_for_number(key_ == Key::kTs ? "ts" : "dur", v);
        default:
          break;
      }
    } else if (c == Ctx::kArgs) {
      // The ids a row is placed by: a string there ("device": "1") was left out without a word,
      // the row put on its pid's device or stream -1. (A string correlation or External id links
      // nothing, as any id that is not an integer: counted as unlinked, docs/kernels.md.)
      if (key_ == Key::kDevice) string_for_number("args.device", v);
      if (key_ == Key::kStream) string_for_number("args.stream", v);
      if (key_ == Key::kBytes) ev_.bad_bytes = "\"" + std::string(v.substr(0, 40)) + "\"";
      if (key_ == Key::kTprobePhase) tag_text(0, ev_.tag_phase, v);
      if (key_ == Key::kTprobePart) tag_text(1, ev_.tag_part, v);
      if (key_ == Key::kTprobeLayerKind) tag_text(3, ev_.tag_kind, v);
      if (key_ == Key::kTprobeLayer) {
        ev_.tag_seen |= 4u;
        ev_.tag_layer_raw = "\"" + std::string(v.substr(0, 40)) + "\"";
      }
      if (mem_field(key_) >= 0)
        bad_mem_field(mem_field(key_), "\"" + std::string(v.substr(0, 40)) + "\"");
    } else if (c == Ctx::kDevProp) {
      if (key_ == Key::kName) dev_.name.assign(v);
    } else if (c == Ctx::kMessages) {
      if (s_.health.messages.size() < kMaxMessages) {
        std::string m = msg_key_;
        m += ": ";
        m += v;
        s_.health.messages.push_back(std::move(m));
      }
    } else if (c == Ctx::kTopObject) {
      if (key_ == Key::kSchemaVersion) s_.schema_version.assign(v);
    } else if (c == Ctx::kDistInfo) {
      const bool ok = !v.empty() && all_digits(v) && v.size() < 10;
      const int64_t n = ok ? std::stoll(std::string(v)) : 0;
      if (ok && key_ == Key::kRank) s_.rank = n;
      if (ok && key_ == Key::kWorldSize) s_.world_size = n;
    }
  }

  // A string where the trace format has a number (`"ts": "12"`): refused, one line naming the
  // event and the field (before issue 46 a quoted time was read as the number).
  [[noreturn]] void string_for_number(const char* field, std::string_view raw) const {
    fail("{}: traceEvents[{}] field '{}' is the string \"{}\": a trace writes it as a JSON number",
         source_, ev_.index, field, detail::printable(raw, 40));
  }

  static int64_t hash_id(std::string_view s) {
    // Non-numeric pid/tid ("Spans", "stream 7"): a stable id that cannot collide with small ints.
    return static_cast<int64_t>(std::hash<std::string_view>{}(s) | (uint64_t{1} << 62));
  }

  [[noreturn]] void bad_number(Key field, std::string_view raw) const {
    fail(
        "{}: traceEvents[{}] field '{}' has value {}: not a time in microseconds that int64 "
        "nanoseconds can hold (|value| <= 9223372036854775.807)",
        source_, ev_.index, field == Key::kTs ? "ts" : "dur",
        raw.size() > 40 ? std::string(raw.substr(0, 40)) + "..." : std::string(raw));
  }

  // A device, process, thread or stream id that is a number but not an integer int64 holds: kept
  // (the first one) for finish_event to refuse; read as 1, 1.5 would put the row on device 1.
  // The device of a device-side event (a row, a gpu_user_annotation, a cuda_sync): args.device,
  // else pid, else 0. One outside 0..2^31-1 is refused: a wrapped or clamped id would put the
  // event on another device (and raise false overlaps, or tie a sync to another device's rows).
  int32_t device_index() const {
    const int64_t device = ev_.device >= 0 ? ev_.device : (ev_.has_pid ? ev_.pid : 0);
    if (device < 0 || device > std::numeric_limits<int32_t>::max()) {
      fail("{}: traceEvents[{}] ('{}' event '{}') is on device {}: not a device index "
           "(0..2147483647)",
           source_, ev_.index, ev_.cat, ev_.name.substr(0, 60), device);
    }
    return static_cast<int32_t>(device);
  }

  void bad_id(Key field, std::string_view raw) {
    if (!ev_.bad_id.empty()) return;
    const char* name = field == Key::kPid   ? "pid"
                       : field == Key::kTid ? "tid"
                       : field == Key::kDevice ? "args.device"
                                               : "args.stream";
    ev_.bad_id = fmt::format("field '{}' has value {}", name,
                             raw.size() > 40 ? std::string(raw.substr(0, 40)) + "..."
                                             : std::string(raw));
  }

  // Numbers as a typical JSON library hands them over: an int64 (is_int), a uint64 past
  // INT64_MAX, or a double with its text (a fraction, an exponent, a huge integer).
  void number(const JsonTokenizer& tz) {
    if (stack_.empty()) return;  // a bare number as the whole document
    const Ctx c = top();
    const JsonNumberKind kind = tz.number_kind();
    const bool is_int = kind == JsonNumberKind::kInt64;
    const int64_t i = is_int ? tz.int64_value() : 0;
    auto as_double = [&] {
      return kind == JsonNumberKind::kUint64 ? static_cast<double>(tz.uint64_value())
             : is_int                        ? static_cast<double>(i)
                                             : tz.double_value();
    };
    if (c == Ctx::kEvent) {
      switch (key_) {
        case Key::kTs:
        case Key::kDur: {
          // Integers, fractions and exponents alike from the text: exact (decimal_us_to_ns).
          int64_t ns = 0;
          if (!decimal_us_to_ns(tz.text(), ns)) bad_number(key_, tz.text());
          time_field(key_, ns);
          break;
        }
        case Key::kPid:
          if (!is_int) bad_id(key_, tz.text());
          ev_.pid = is_int ? i : to_int64(as_double());
          ev_.has_pid = true;
          break;
        case Key::kTid:
          if (!is_int) bad_id(key_, tz.text());
          ev_.tid = is_int ? i : to_int64(as_double());
          break;
        case Key::kId:  // flow ids are integers; anything else cannot pair and is left out
          if (is_int) {
            ev_.flow_id = i;
            ev_.has_id = true;
          }
          break;
        default:
          break;
      }
    } else if (c == Ctx::kArgs && key_ == Key::kBytes) {
      if (is_int && i >= 0) {
        ev_.bytes = i;
      } else {
        ev_.bad_bytes.assign(tz.text().substr(0, 40));
      }
    } else if (c == Ctx::kArgs && mem_field(key_) >= 0) {
      mem_number(mem_field(key_), tz, kind, i);
    } else if (c == Ctx::kArgs && key_ == Key::kTprobeLayer) {
      ev_.tag_seen |= 4u;
      if (is_int && i >= -1 && i <= std::numeric_limits<int32_t>::max()) {
        ev_.tag_layer = i;
        ev_.tag_layer_raw.clear();
      } else {
        ev_.tag_layer_raw.assign(tz.text().substr(0, 40));
      }
    } else if (c == Ctx::kArgs && !is_int && (key_ == Key::kDevice || key_ == Key::kStream)) {
      bad_id(key_, tz.text());
    } else if (!is_int) {
      return;
    } else if (c == Ctx::kArgs) {
      if (key_ == Key::kExternalId)
        ev_.external_id = i;
      else if (key_ == Key::kCorrelation)
        ev_.correlation = i;
      else if (key_ == Key::kDevice)
        ev_.device = i;
      else if (key_ == Key::kStream)
        ev_.stream = i;
      else if (key_ == Key::kSequenceNumber)
        ev_.seq = i >= 0 ? i : -1;
      else if (key_ == Key::kWaitOnStream)
        ev_.wait_stream = i >= 0 ? i : -1;
      else if (key_ == Key::kWaitOnRecordCorrelation)
        ev_.wait_record = i >= 0 ? i : -1;
      else if (key_ == Key::kWaitOnEventId)
        ev_.wait_event = i >= 0 ? i : -1;
    } else if (c == Ctx::kDevProp) {
      if (key_ == Key::kId)
        dev_.id = static_cast<int32_t>(i);
      else if (key_ == Key::kComputeMajor)
        dev_.compute_major = static_cast<int32_t>(i);
      else if (key_ == Key::kComputeMinor)
        dev_.compute_minor = static_cast<int32_t>(i);
      else if (key_ == Key::kTotalGlobalMem)
        dev_.total_memory_bytes = i;
      else if (key_ == Key::kNumSms)
        dev_.multiprocessors = static_cast<int32_t>(i);
    } else if (c == Ctx::kTopObject) {
      if (key_ == Key::kBaseTime) s_.base_time_ns = i;
      if (key_ == Key::kSchemaVersion) s_.schema_version = std::to_string(i);
    } else if (c == Ctx::kDistInfo) {
      if (key_ == Key::kRank) s_.rank = i;
      if (key_ == Key::kWorldSize) s_.world_size = i;
    }
  }

  // A [memory] event's field (docs/kernels.md, "Memory"): Addr any unsigned 64-bit integer,
  // Bytes any int64 but its minimum (a free's negation must hold), the totals non-negative, the
  // device type 0..2^31-1 and the id -1..2^31-1. Anything else is remembered as the reason the
  // event is left out.
  void mem_number(int field, const JsonTokenizer& tz, JsonNumberKind kind, int64_t i) {
    const bool is_int = kind == JsonNumberKind::kInt64;
    bool ok = false;
    switch (field) {
      case 0:  // Addr
        if (kind == JsonNumberKind::kUint64) {
          ev_.mem_addr = tz.uint64_value();
          ok = true;
        } else if (is_int && i >= 0) {
          ev_.mem_addr = static_cast<uint64_t>(i);
          ok = true;
        }
        break;
      case 1:  // Bytes
        ok = is_int && i != std::numeric_limits<int64_t>::min();
        break;
      case 2:  // Total Allocated
      case 3:  // Total Reserved
        ok = is_int && i >= 0;
        break;
      case 4:  // Device Type
        ok = is_int && i >= 0 && i <= std::numeric_limits<int32_t>::max();
        break;
      default:  // Device Id
        ok = is_int && i >= -1 && i <= std::numeric_limits<int32_t>::max();
        break;
    }
    if (!ok) {
      bad_mem_field(field, std::string(tz.text().substr(0, 40)));
      return;
    }
    ev_.mem[field] = i;
    ev_.mem_seen |= 1u << field;
    ev_.mem_bad &= ~(1u << field);
  }
  void tag_text(unsigned bit, std::string& to, std::string_view v) {
    ev_.tag_seen |= 1u << bit;
    to.assign(v.substr(0, 64));
  }

  // A row's attribution as tprobe wrote it: all four fields, each in the vocabulary of
  // core/trace/step_trace.hpp ("untagged" for both phase and part of a row without one), or the
  // trace is refused in one line; interned, so a row costs one index.
  uint32_t recorded_tag() {
    if (ev_.tag_seen == 0) return detail::kNoRecordedTag;
    static const char* const kField[] = {"tprobe_phase", "tprobe_part", "tprobe_layer",
                                         "tprobe_layer_kind"};
    for (unsigned b = 0; b < 4; ++b) {
      if (!(ev_.tag_seen & (1u << b))) {
        fail("{}: traceEvents[{}] ('{}' event '{}') has a tprobe attribution without "
             "args.{} (tprobe_phase, tprobe_part, tprobe_layer and tprobe_layer_kind go together)",
             source_, ev_.index, ev_.cat, detail::printable(ev_.name, 60), kField[b]);
      }
    }
    auto bad = [&](const char* field, const std::string& raw, const char* want) {
      fail("{}: traceEvents[{}] ('{}' event '{}') has args.{} {}: {}", source_, ev_.index,
           ev_.cat, detail::printable(ev_.name, 60), field, raw, want);
    };
    if (!ev_.tag_layer_raw.empty())
      bad("tprobe_layer", ev_.tag_layer_raw, "not a layer index (an integer -1..2^31-1)");
    const std::string key = ev_.tag_phase + '\x1f' + ev_.tag_part + '\x1f' + ev_.tag_kind +
                            '\x1f' + std::to_string(ev_.tag_layer);
    auto it = recorded_ids_.find(key);
    if (it != recorded_ids_.end()) return it->second;
    std::optional<StepTag> tag;
    const bool untagged = ev_.tag_phase == "untagged";
    if (untagged != (ev_.tag_part == "untagged")) {
      bad(untagged ? "tprobe_part" : "tprobe_phase",
          "\"" + detail::printable(untagged ? ev_.tag_part : ev_.tag_phase, 40) + "\"",
          "a row's phase and part are both \"untagged\" or neither");
    }
    if (!untagged) {
      StepTag t;
      const auto phase = parse_step_phase(ev_.tag_phase);
      const auto part = parse_step_part(ev_.tag_part);
      if (!phase)
        bad("tprobe_phase", "\"" + detail::printable(ev_.tag_phase, 40) + "\"",
            "not a phase (forward, loss, recompute, backward, optimizer or untagged)");
      if (!part)
        bad("tprobe_part", "\"" + detail::printable(ev_.tag_part, 40) + "\"",
            "not a part of tprobe's vocabulary (docs/profile.md, \"Attribution\")");
      if (!parse_layer_kind(ev_.tag_kind, t.layer_kind))
        bad("tprobe_layer_kind", "\"" + detail::printable(ev_.tag_kind, 40) + "\"",
            "not a layer kind (sliding, full or -)");
      t.phase = *phase;
      t.part = *part;
      t.layer = static_cast<int32_t>(ev_.tag_layer);
      tag = t;
    }
    const auto id = static_cast<uint32_t>(out_.recorded_tags.size());
    push(out_.recorded_tags, tag);
    recorded_ids_.emplace(key, id);
    return id;
  }

  void bad_mem_field(int field, std::string raw) {
    ev_.mem_seen &= ~(1u << field);
    ev_.mem_bad |= 1u << field;
    ev_.mem_bad_raw[field] = std::move(raw);
  }

  // A [memory] instant event (profile_memory=True): kept when every field is there and in range,
  // else counted with the reason of the first one left out.
  void memory_event() {
    static const char* const kWant[kMemFields] = {
        "an address (an integer 0..2^64-1)", "a byte count (an integer, negative for a free)",
        "a byte count (a non-negative integer)", "a byte count (a non-negative integer)",
        "a device type (an integer 0..2^31-1)", "a device index (an integer -1..2^31-1)"};
    std::string why;
    if (!ev_.has_ts) why = "no 'ts' field";
    for (int f = 0; f < kMemFields && why.empty(); ++f) {
      if (ev_.mem_bad & (1u << f)) {
        why = fmt::format("args.{} is {}, not {}", kMemFieldName[f], ev_.mem_bad_raw[f], kWant[f]);
      } else if (!(ev_.mem_seen & (1u << f))) {
        why = fmt::format("no args.{}", kMemFieldName[f]);
      }
    }
    if (!why.empty()) {
      ++out_.memory_skipped;
      if (out_.memory_first_skipped.empty())
        out_.memory_first_skipped = fmt::format("traceEvents[{}]: {}", ev_.index, why);
      return;
    }
    detail::MemEvent m;
    m.ts_ns = ev_.ts_ns;
    m.tid = ev_.tid;
    m.addr = ev_.mem_addr;
    m.bytes = ev_.mem[1];
    m.total_allocated = ev_.mem[2];
    m.total_reserved = ev_.mem[3];
    m.device_type = static_cast<int32_t>(ev_.mem[4]);
    m.device_id = static_cast<int32_t>(ev_.mem[5]);
    push(out_.memory_events, m);
  }

  // The event's class, and its count in summary.categories. Bounded: a trace with absurdly many
  // distinct categories is summarised (the first 256), not kept whole.
  Classified count_category() {
    if (ev_.cat.empty()) return {};
    if (last_cat_ < categories_.size() && categories_[last_cat_].cat == ev_.cat) {
      ++categories_[last_cat_].count;
      return categories_[last_cat_].cls;
    }
    auto it = category_ids_.find(ev_.cat);
    if (it != category_ids_.end()) {
      last_cat_ = it->second;
      ++categories_[last_cat_].count;
      return categories_[last_cat_].cls;
    }
    const Classified cls = classify(ev_.cat);
    if (categories_.size() < 256) {
      last_cat_ = categories_.size();
      category_ids_.emplace(ev_.cat, last_cat_);
      push(categories_, {ev_.cat, cls, 1});
    }
    return cls;
  }

  void finish_categories() {
    for (Category& c : categories_) s_.categories[std::move(c.cat)] += c.count;
    categories_.clear();
    category_ids_.clear();
  }

  uint32_t intern(const std::string& raw) {
    auto it = name_ids_.find(raw);
    if (it != name_ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(out_.names.size());
    push(out_.names, demangle(raw));
    name_ids_.emplace(raw, id);
    return id;
  }

  uint32_t intern_op(const std::string& name) {
    auto it = op_ids_.find(name);
    if (it != op_ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(out_.op_names.size());
    push(out_.op_names, name);
    op_ids_.emplace(name, id);
    return id;
  }

  // Size: the state machine's dispatch on one event's category, one short case each.
  void finish_event() {
    if (!ev_.bad_id.empty()) {
      fail("{}: traceEvents[{}] {}: not an id (pid, tid, args.device and args.stream must be "
           "integers that int64 holds)",
           source_, ev_.index, ev_.bad_id);
    }
    ++s_.events;
    const Classified k = count_category();
    if (ev_.ph == 'B') ++open_[{ev_.pid, ev_.tid}];
    if (ev_.ph == 'E') --open_[{ev_.pid, ev_.tid}];
    if (ev_.ph == 'i' && ev_.name == "Record Window End" && ev_.has_ts) {
      out_.has_window_end = true;
      out_.window_end_ns = ev_.ts_ns;
    }
    if (ev_.ph == 0) {
      // No "ph": the Chrome format cannot say what the event is. Counted, not silently dropped.
      ++s_.health.skipped_events;
      return;
    }
    if (ev_.ph != 'X') {
      if ((ev_.ph == 'i' || ev_.ph == 'I') && ev_.name == "[memory]") {
        memory_event();
        return;
      }
      if (k.cls == EventClass::kFlow) ++s_.double_count.flows;
      if (k.cls == EventClass::kFwdBwd && (ev_.ph == 's' || ev_.ph == 'f')) {
        if (!ev_.has_ts || !ev_.has_id) {
          ++s_.health.skipped_events;
          return;
        }
        if (keep_parts_) push(out_.flows, {ev_.flow_id, ev_.tid, ev_.ts_ns, ev_.ph == 's'});
      }
      return;
    }
    switch (k.cls) {
      case EventClass::kDevice: {
        const char* missing = !ev_.has_name  ? "name"
                              : !ev_.has_ts  ? "ts"
                              : !ev_.has_dur ? "dur"
                                             : nullptr;
        if (missing) {
          fail("{}: traceEvents[{}] ('{}' event) has no '{}' field", source_, ev_.index, ev_.cat,
               missing);
        }
        if (ev_.dur_ns > kMaxDurationNs) {
          fail(
              "{}: traceEvents[{}] ('{}' event '{}') lasts {:.0f} s, more than a day, not a "
              "device activity",
              source_, ev_.index, ev_.cat, ev_.name.substr(0, 60), double(ev_.dur_ns) * 1e-9);
        }
        if (ev_.dur_ns < 0) {
          ++s_.health.negative_duration;
          return;
        }
        if (ev_.dur_ns == 0) ++s_.health.zero_duration;
        DeviceRow r;
        r.start_ns = ev_.ts_ns;
        if (__builtin_add_overflow(ev_.ts_ns, ev_.dur_ns, &r.end_ns)) {
          fail("{}: traceEvents[{}] ('{}' event '{}') ends past what int64 nanoseconds hold", source_,
               ev_.index, ev_.cat, ev_.name.substr(0, 60));
        }
        r.correlation = ev_.correlation;
        r.external_id = ev_.external_id;
        r.stream = ev_.stream >= 0 ? ev_.stream : ev_.tid;
        r.device = device_index();
        r.kind = k.kind;
        if (!ev_.bad_bytes.empty()) {
          fail("{}: traceEvents[{}] ('{}' event '{}') has args.bytes {}: not a byte count (a "
               "non-negative integer)",
               source_, ev_.index, ev_.cat, ev_.name.substr(0, 60), ev_.bad_bytes);
        }
        r.bytes = ev_.bytes;
        r.name_id = intern(ev_.name);
        r.recorded_tag = recorded_tag();
        push(out_.rows, r);
        break;
      }
      case EventClass::kLaunch:
        if (ev_.has_ts && ev_.correlation != 0) {
          // The call's duration feeds the launch statistics only: one that is negative or longer
          // than a day is counted in health and the launch kept without it.
          const bool usable = ev_.has_dur && ev_.dur_ns >= 0 && ev_.dur_ns <= kMaxDurationNs;
          if (ev_.has_dur && !usable) ++s_.health.bad_launch_durations;
          push(out_.launches,
               {ev_.correlation, ev_.ts_ns, usable ? ev_.dur_ns : -1, ev_.tid, intern_op(ev_.name)});
        }
        break;
      case EventClass::kHostOp: {
        if (!ev_.has_ts || !ev_.has_dur) {
          ++s_.health.skipped_events;
          return;
        }
        const int64_t end = saturating_add(ev_.ts_ns, std::max<int64_t>(ev_.dur_ns, 0));
        if (!out_.has_host) {
          out_.host_min_ns = ev_.ts_ns;
          out_.host_max_ns = end;
          out_.has_host = true;
        }
        out_.host_min_ns = std::min(out_.host_min_ns, ev_.ts_ns);
        out_.host_max_ns = std::max(out_.host_max_ns, end);
        if (k.cpu_op) push(out_.host_ops, {ev_.tid, ev_.ts_ns, end, intern_op(ev_.name), ev_.seq});
        if (ev_.external_id != 0) push(out_.host_external_ids, ev_.external_id);
        const std::string& n = ev_.name;
        static const char kEvaluate[] = "autograd::engine::evaluate_function";
        if (!k.cpu_op && keep_ranges_) {
          push(out_.user_ranges, {ev_.tid, ev_.ts_ns, end, ev_.external_id, intern_op(ev_.name)});
        }
        if (profiler_step_number(n) >= 0) {
          push(out_.steps, {profiler_step_number(n), ev_.ts_ns, end, ev_.tid});
        } else if (detail::starts_with(n, kEvaluate)) {
          const bool acc = detail::ends_with(n, "AccumulateGrad");
          push(out_.ranges, {ev_.tid, ev_.ts_ns, end, RangeKind::kBackward, ev_.seq, acc});
        } else if (detail::starts_with(n, "Optimizer.")) {
          push(out_.ranges, {ev_.tid, ev_.ts_ns, end, RangeKind::kOptimizer});
        }
        break;
      }
      case EventClass::kGpuAnnotation:
        if (!ev_.has_ts || !ev_.has_dur || ev_.dur_ns < 0) {
          ++s_.health.skipped_events;
        } else if (ev_.dur_ns > 0) {
          const int64_t end = saturating_add(ev_.ts_ns, ev_.dur_ns);
          detail::DeviceRange where;
          where.device = device_index();
          where.stream = ev_.stream >= 0 ? ev_.stream : ev_.tid;
          where.start_ns = ev_.ts_ns;
          where.end_ns = end;
          where.external_id = ev_.external_id;
          push(out_.annotations, {ev_.ts_ns, end, profiler_step_number(ev_.name),
                              ev_.name.substr(0, 200), where});
        }
        break;
      case EventClass::kSync:
        if (ev_.has_ts && ev_.has_dur && ev_.dur_ns >= 0 && ev_.dur_ns <= kMaxDurationNs) {
          detail::SyncEvent e;
          e.ts_ns = ev_.ts_ns;
          e.end_ns = saturating_add(ev_.ts_ns, ev_.dur_ns);
          e.device = device_index();
          e.stream = ev_.stream;
          e.correlation = ev_.correlation;
          e.wait_record_correlation = ev_.wait_record;
          e.wait_stream = ev_.wait_stream;
          e.event_id = ev_.wait_event;
          e.kind = detail::sync_kind_of(ev_.name);
          push(out_.syncs, e);
        } else {
          ++s_.health.skipped_events;
        }
        break;
      case EventClass::kFlow:
        ++s_.double_count.flows;
        break;
      case EventClass::kFwdBwd:
        break;
      case EventClass::kPython:
        python_event();
        break;
      case EventClass::kOther:
        break;
    }
  }

  // A python_function event: kept when it is a module call, one of the few functions that name a
  // part, or torch's backward call (trace_parts_internal.hpp); its time must be a proper interval.
  void python_event() {
    ++out_.python_events;
    if (!ev_.has_ts || !ev_.has_dur || ev_.dur_ns < 0 || ev_.dur_ns > kMaxDurationNs) {
      ++s_.health.skipped_events;
      return;
    }
    if (!keep_parts_) return;  // --parts off: checked and counted, not kept
    detail::PyEvent e;
    e.tid = ev_.tid;
    e.start_ns = ev_.ts_ns;
    e.end_ns = saturating_add(ev_.ts_ns, ev_.dur_ns);
    const std::string& n = ev_.name;
    static const char kModule[] = "nn.Module: ";
    if (n.compare(0, sizeof kModule - 1, kModule) == 0) {
      if (n.size() == sizeof kModule - 1) return;  // no class name: nothing to place rows with
      e.kind = detail::PyKind::kModule;
      e.module = intern_module(n.substr(sizeof kModule - 1));
      out_.has_modules = true;
    } else {
      // "file.py(123): function"
      const std::size_t sep = n.rfind("): ");
      if (sep == std::string::npos) return;
      const std::string_view func = std::string_view(n).substr(sep + 3);
      const std::string_view file = std::string_view(n).substr(0, sep);
      if (func.find("attention_forward") != std::string_view::npos) {
        e.kind = detail::PyKind::kAttentionFunction;
      } else if (file.find("masking_utils") != std::string_view::npos) {
        e.kind = detail::PyKind::kMaskFunction;
      } else if (func.find("loss") != std::string_view::npos ||
                 func.find("Loss") != std::string_view::npos ||
                 func.find("cross_entropy") != std::string_view::npos) {
        e.kind = detail::PyKind::kLossFunction;
      } else if (func == "backward" &&
                 (file.find("torch/_tensor.py") != std::string_view::npos ||
                  file.find("torch/autograd/") != std::string_view::npos)) {
        e.kind = detail::PyKind::kBackwardCall;
      } else {
        return;
      }
    }
    push(out_.python, e);
  }

  uint32_t intern_module(const std::string& name) {
    auto it = module_ids_.find(name);
    if (it != module_ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(out_.module_names.size());
    push(out_.module_names, name);
    module_ids_.emplace(name, id);
    return id;
  }

  std::string source_;
  TraceSummary& s_;
  detail::ParsedEvents out_;
  std::vector<Ctx> stack_;
  Key key_ = Key::kOther;
  std::string top_key_;  // the last key of the top-level object
  std::string msg_key_;
  std::vector<Category> categories_;
  std::unordered_map<std::string, std::size_t> category_ids_;
  std::size_t last_cat_ = 0;
  Event ev_;
  DeviceProperties dev_;
  int64_t event_index_ = 0;
  std::unordered_map<std::string, uint32_t> name_ids_;
  std::unordered_map<std::string, uint32_t> op_ids_;
  std::unordered_map<std::string, uint32_t> recorded_ids_;  // recorded attributions, interned
  bool keep_ranges_ = true;
  bool keep_parts_ = true;
  std::unordered_map<std::string, uint32_t> module_ids_;
  std::map<std::pair<int64_t, int64_t>, int64_t> open_;
};

}  // namespace

namespace detail {

ParsedEvents parse_trace_events(JsonTokenizer& tz, const std::string& label, TraceSummary& summary,
                                bool keep_parts) {
  TraceSax sax(label, summary, keep_parts);
  sax.parse(tz);
  return sax.take();
}

}  // namespace detail
}  // namespace tprobe::core
