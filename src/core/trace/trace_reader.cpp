// Streaming reader of torch.profiler / Kineto Chrome traces into core::KernelRecord and the table.
#include "tprobe/core/trace/trace_reader.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <unordered_map>

#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "base/decoded_file.hpp"
#include "base/out_of_memory.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "trace/json_tokenizer.hpp"
#include "trace/critical_path_internal.hpp"
#include "trace/kernel_sequences_internal.hpp"
#include "trace/trace_events_internal.hpp"
#include "trace/trace_memory_internal.hpp"
#include "trace/trace_parts_internal.hpp"
#include "trace/trace_reader_internal.hpp"
#include "trace/trace_stats_internal.hpp"
#include "trace/user_ranges_internal.hpp"

namespace tprobe::core {
namespace {

using detail::JsonNumberKind;
using detail::JsonToken;
using detail::JsonTokenizer;

constexpr int64_t kMaxDurationNs = int64_t{86400} * 1000 * 1000 * 1000;  // one day
constexpr std::size_t kMaxMessages = 20;
constexpr std::size_t kMaxNameBytes = std::size_t{1} << 16;

// ---------------------------------------------------------------------------------------------
// Bytes in: a gzip or plain file (base/decoded_file.hpp), or a buffer
// (inflated here when it starts with the gzip magic).
class ByteSource : public detail::JsonByteSource {
 public:
  // read(): the next chunk into buf; 0 at the end. Throws tprobe::Error on a read or inflate
  // failure.
  virtual bool gzip() const = 0;
};

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      fail("cannot open trace '{}': {}", path, std::strerror(errno));
    if (S_ISDIR(st.st_mode))
      fail("trace '{}' is a directory (give the directory alone for per-rank traces)", path);
    const int fd = open_input(path);  // a FIFO does not hold a signal off (input_file.hpp)
    if (fd < 0) fail("cannot open trace '{}': {}", path, std::strerror(errno));
    // Plain or gzip by content; bytes after the last gzip member are an error (padding's reader).
    file_ = std::make_unique<detail::DecodedFile>(fd, path);
  }

  std::size_t read(char* buf, std::size_t size) override {
    const std::size_t n = file_->read(buf, size, fmt::format("after {} bytes", total_));
    total_ += static_cast<int64_t>(n);
    return n;
  }
  bool gzip() const override { return file_->gzip(); }

 private:
  std::string path_;
  std::unique_ptr<detail::DecodedFile> file_;
  int64_t total_ = 0;
};

class BufferSource : public ByteSource {
 public:
  BufferSource(std::string_view bytes, std::string label)
      : bytes_(bytes), label_(std::move(label)) {
    gzip_ = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
            static_cast<unsigned char>(bytes[1]) == 0x8b;
    if (gzip_) {
      std::memset(&z_, 0, sizeof z_);
      if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) fail("{}: cannot start zlib", label_);
      z_open_ = true;
      feed();
    }
  }
  ~BufferSource() override {
    if (z_open_) inflateEnd(&z_);
  }
  BufferSource(const BufferSource&) = delete;
  BufferSource& operator=(const BufferSource&) = delete;

  std::size_t read(char* buf, std::size_t size) override {
    if (!gzip_) {
      const std::size_t n = std::min(size, bytes_.size() - pos_);
      std::memcpy(buf, bytes_.data() + pos_, n);
      pos_ += n;
      return n;
    }
    if (done_) return 0;
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(size);
    while (z_.avail_out == size) {
      if (z_.avail_in == 0 && fed_ < bytes_.size()) feed();
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        // Another member may follow (gzip allows it); anything else after the stream is an
        // error, as for files.
        const std::size_t at = fed_ - z_.avail_in;
        if (at < bytes_.size()) {
          if (static_cast<unsigned char>(bytes_[at]) != 0x1f) {
            fail("{}: {} bytes of data that are not gzip follow the gzip stream at byte {} (a "
                 "damaged or concatenated file?)",
                 label_, bytes_.size() - at, at);
          }
          inflateReset(&z_);
          continue;
        }
        done_ = true;
        break;
      }
      if ((rc == Z_BUF_ERROR || rc == Z_OK) && z_.avail_in == 0 && z_.avail_out == size) {
        fail(
            "{}: gzip data ends after {} compressed bytes before its end marker (truncated "
            "gzip file?)",
            label_, z_.total_in);
      }
      if (rc != Z_OK) {
        fail("{}: gzip data is corrupt after {} compressed bytes: {}", label_, z_.total_in,
             z_.msg ? z_.msg : "inflate failed");
      }
    }
    return size - z_.avail_out;
  }
  bool gzip() const override { return gzip_; }

 private:
  std::string_view bytes_;
  std::string label_;
  // zlib counts input in 32 bits: a large buffer is handed over 1 GiB at a time.
  void feed() {
    const std::size_t n = std::min<std::size_t>(bytes_.size() - fed_, std::size_t{1} << 30);
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes_.data() + fed_));
    z_.avail_in = static_cast<uInt>(n);
    fed_ += n;
  }

  std::size_t pos_ = 0;
  std::size_t fed_ = 0;
  bool gzip_ = false;
  bool z_open_ = false;
  bool done_ = false;
  z_stream z_;
};

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

// a + b, or the int64 limit it passes (host events' ends: an end no device row reaches).
int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
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

// One device row, compact: the name is an index into the interned names.
struct DeviceRow {
  int64_t start_ns;
  int64_t end_ns;
  int64_t correlation;
  int64_t external_id;
  int64_t stream;
  int64_t bytes;  // args.bytes, -1 if absent
  uint32_t name_id;
  int32_t device;
  ActivityKind kind;
};

using Launch = detail::RuntimeCall;

// A cpu_op event, for the host-op census (the name interned apart from the kernels').
struct HostOp {
  int64_t tid;
  int64_t start_ns;
  int64_t end_ns;
  int64_t seq;  // args."Sequence number" (an autograd node's or its forward op's), -1 if absent
  uint32_t name_id;
};

enum class RangeKind : uint8_t { kBackward, kOptimizer };
struct HostRange {
  int64_t tid;
  int64_t start_ns;
  int64_t end_ns;
  RangeKind kind;
  int64_t seq = -1;             // kBackward: the evaluated node's sequence number, -1 if absent
  bool accumulate_grad = false;  // kBackward: "evaluate_function: torch::autograd::AccumulateGrad"
};

// N of "ProfilerStep#N", -1 for any other name.
int64_t profiler_step_number(const std::string& name) {
  if (!detail::starts_with(name, "ProfilerStep#")) return -1;
  const std::string num = name.substr(13);
  if (num.empty() || num.size() > 11 || !std::all_of(num.begin(), num.end(), ::isdigit)) return -1;
  return std::stoll(num);
}

struct Annotation {
  int64_t start_ns;
  int64_t end_ns;
  int64_t step;  // ProfilerStep#N on the device: N; anything else: -1 until placed
  std::string name;
  detail::DeviceRange range;  // its device, stream and External id
};

struct StepSeen {
  int64_t step;
  int64_t start_ns;
  int64_t end_ns;
  int64_t tid;
};

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
      if (is(k, "External id")) return Key::kExternalId;
      if (is(k, "correlation")) return Key::kCorrelation;
      if (is(k, "traceEvents")) return Key::kTraceEvents;
      if (is(k, "Device Type")) return Key::kMemDeviceType;
      break;
    case 12:
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

  // --- results -------------------------------------------------------------------------------
  bool saw_events() const { return saw_events_; }
  bool has_top_key(const char* key) const { return top_keys_.count(key) > 0; }
  bool saw_top_object() const { return saw_top_object_; }
  std::vector<std::string>& names() { return names_; }
  std::vector<DeviceRow>& rows() { return rows_; }
  std::vector<Launch>& launches() { return launches_; }
  std::vector<HostOp>& host_ops() { return host_ops_; }
  std::vector<std::string>& op_names() { return op_names_; }
  std::vector<HostRange>& ranges() { return ranges_; }
  std::vector<StepSeen>& steps() { return steps_; }
  std::vector<int64_t>& host_external_ids() { return host_ext_; }
  std::vector<Annotation>& annotations() { return annotations_; }
  std::vector<detail::UserRange>& user_ranges() { return user_ranges_; }
  std::vector<detail::SyncEvent>& syncs() { return syncs_; }
  std::vector<detail::PyEvent>& python() { return python_; }
  std::vector<detail::FlowEnd>& flows() { return flows_; }
  std::vector<std::string>& module_names() { return module_names_; }
  int64_t python_events() const { return python_events_; }
  std::vector<detail::MemEvent>& memory_events() { return mem_events_; }
  int64_t memory_skipped() const { return mem_skipped_; }
  const std::string& memory_first_skipped() const { return mem_first_skipped_; }
  bool has_modules() const { return has_modules_; }
  int64_t host_min_ns() const { return host_min_; }
  int64_t host_max_ns() const { return host_max_; }
  bool has_host() const { return has_host_; }
  bool has_window_end() const { return has_window_end_; }
  int64_t window_end_ns() const { return window_end_; }
  int64_t unmatched_begin() const {
    int64_t n = 0;
    for (const auto& [track, open] : open_) n += open > 0 ? open : 0;
    return n;
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
      if (!top_keys_.insert(top_key_).second) {
        fail("{}: the top-level key '{}' appears twice (a damaged or concatenated trace?)",
             source_, detail::printable(top_key_, 60));
      }
    }
  }

  void start_object() {
    Ctx next = Ctx::kSkip;
    if (stack_.empty()) {
      next = Ctx::kTopObject;
      saw_top_object_ = true;
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
      saw_events_ = true;
    } else if (top() == Ctx::kTopObject) {
      if (key_ == Key::kTraceEvents) {
        next = Ctx::kEvents;
        saw_events_ = true;
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
        case Key::kDur: {
          int64_t ns = 0;
          if (!decimal_us_to_ns(v, ns)) bad_number(key_, v);
          time_field(key_, ns);
          break;
        }
        default:
          break;
      }
    } else if (c == Ctx::kArgs) {
      if (key_ == Key::kBytes) ev_.bad_bytes = "\"" + std::string(v.substr(0, 40)) + "\"";
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
      ++mem_skipped_;
      if (mem_first_skipped_.empty())
        mem_first_skipped_ = fmt::format("traceEvents[{}]: {}", ev_.index, why);
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
    push(mem_events_, m);
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
    const uint32_t id = static_cast<uint32_t>(names_.size());
    push(names_, demangle(raw));
    name_ids_.emplace(raw, id);
    return id;
  }

  uint32_t intern_op(const std::string& name) {
    auto it = op_ids_.find(name);
    if (it != op_ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(op_names_.size());
    push(op_names_, name);
    op_ids_.emplace(name, id);
    return id;
  }

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
      has_window_end_ = true;
      window_end_ = ev_.ts_ns;
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
        if (keep_parts_) push(flows_, {ev_.flow_id, ev_.tid, ev_.ts_ns, ev_.ph == 's'});
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
        push(rows_, r);
        break;
      }
      case EventClass::kLaunch:
        if (ev_.has_ts && ev_.correlation != 0) {
          // The call's duration feeds the launch statistics only: one that is negative or longer
          // than a day is counted in health and the launch kept without it.
          const bool usable = ev_.has_dur && ev_.dur_ns >= 0 && ev_.dur_ns <= kMaxDurationNs;
          if (ev_.has_dur && !usable) ++s_.health.bad_launch_durations;
          push(launches_,
               {ev_.correlation, ev_.ts_ns, usable ? ev_.dur_ns : -1, ev_.tid, intern_op(ev_.name)});
        }
        break;
      case EventClass::kHostOp: {
        if (!ev_.has_ts || !ev_.has_dur) {
          ++s_.health.skipped_events;
          return;
        }
        const int64_t end = saturating_add(ev_.ts_ns, std::max<int64_t>(ev_.dur_ns, 0));
        if (!has_host_) {
          host_min_ = ev_.ts_ns;
          host_max_ = end;
          has_host_ = true;
        }
        host_min_ = std::min(host_min_, ev_.ts_ns);
        host_max_ = std::max(host_max_, end);
        if (k.cpu_op) push(host_ops_, {ev_.tid, ev_.ts_ns, end, ev_.seq, intern_op(ev_.name)});
        if (ev_.external_id != 0) push(host_ext_, ev_.external_id);
        const std::string& n = ev_.name;
        static const char kEvaluate[] = "autograd::engine::evaluate_function";
        if (!k.cpu_op && keep_ranges_) {
          push(user_ranges_, {ev_.tid, ev_.ts_ns, end, ev_.external_id, intern_op(ev_.name)});
        }
        if (profiler_step_number(n) >= 0) {
          push(steps_, {profiler_step_number(n), ev_.ts_ns, end, ev_.tid});
        } else if (detail::starts_with(n, kEvaluate)) {
          const bool acc = detail::ends_with(n, "AccumulateGrad");
          push(ranges_, {ev_.tid, ev_.ts_ns, end, RangeKind::kBackward, ev_.seq, acc});
        } else if (detail::starts_with(n, "Optimizer.")) {
          push(ranges_, {ev_.tid, ev_.ts_ns, end, RangeKind::kOptimizer});
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
          push(annotations_, {ev_.ts_ns, end, profiler_step_number(ev_.name),
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
          push(syncs_, e);
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
    ++python_events_;
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
      has_modules_ = true;
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
    push(python_, e);
  }

  uint32_t intern_module(const std::string& name) {
    auto it = module_ids_.find(name);
    if (it != module_ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(module_names_.size());
    push(module_names_, name);
    module_ids_.emplace(name, id);
    return id;
  }

  std::string source_;
  TraceSummary& s_;
  std::vector<Ctx> stack_;
  Key key_ = Key::kOther;
  std::string top_key_;  // the last key of the top-level object
  std::set<std::string> top_keys_;  // every key of the top-level object so far
  std::string msg_key_;
  std::vector<Category> categories_;
  std::unordered_map<std::string, std::size_t> category_ids_;
  std::size_t last_cat_ = 0;
  Event ev_;
  DeviceProperties dev_;
  int64_t event_index_ = 0;
  bool saw_events_ = false;
  bool saw_top_object_ = false;
  std::unordered_map<std::string, uint32_t> name_ids_;
  std::vector<std::string> names_;
  std::vector<DeviceRow> rows_;
  std::vector<Launch> launches_;
  std::vector<HostOp> host_ops_;
  std::unordered_map<std::string, uint32_t> op_ids_;
  std::vector<std::string> op_names_;
  std::vector<HostRange> ranges_;
  std::vector<StepSeen> steps_;
  std::vector<int64_t> host_ext_;
  std::vector<Annotation> annotations_;
  std::vector<detail::UserRange> user_ranges_;
  std::vector<detail::SyncEvent> syncs_;
  bool keep_ranges_ = true;
  std::vector<detail::PyEvent> python_;
  std::vector<detail::FlowEnd> flows_;
  bool keep_parts_ = true;
  std::unordered_map<std::string, uint32_t> module_ids_;
  std::vector<std::string> module_names_;
  int64_t python_events_ = 0;
  bool has_modules_ = false;
  std::vector<detail::MemEvent> mem_events_;
  int64_t mem_skipped_ = 0;
  std::string mem_first_skipped_;
  std::map<std::pair<int64_t, int64_t>, int64_t> open_;
  int64_t host_min_ = 0, host_max_ = 0;
  bool has_host_ = false;
  bool has_window_end_ = false;
  int64_t window_end_ = 0;
};

// Merged ranges of one kind on one thread, for "is this launch inside a backward op?".
class RangeIndex {
 public:
  void add(int64_t tid, int64_t start, int64_t end) { by_tid_[tid].emplace_back(start, end); }
  void seal() {
    for (auto& [tid, v] : by_tid_) merge_intervals(v);
  }
  bool contains(int64_t tid, int64_t ts) const {
    auto it = by_tid_.find(tid);
    if (it == by_tid_.end()) return false;
    const auto& v = it->second;
    auto r = std::upper_bound(v.begin(), v.end(), std::make_pair(ts, INT64_MAX));
    if (r == v.begin()) return false;
    --r;
    return ts >= r->first && ts <= r->second;
  }
  bool has_tid(int64_t tid) const { return by_tid_.count(tid) > 0; }
  std::vector<int64_t> tids() const {
    std::vector<int64_t> out;
    for (const auto& [tid, v] : by_tid_) out.push_back(tid);
    return out;
  }

 private:
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_tid_;
};

// The bytes a source has handed the tokenizer, for the out-of-memory message.
class CountingSource : public detail::JsonByteSource {
 public:
  explicit CountingSource(ByteSource& in) : in_(in) {}
  std::size_t read(char* buf, std::size_t size) override {
    const std::size_t n = in_.read(buf, size);
    delivered_ += n;
    return n;
  }
  uint64_t delivered() const { return delivered_; }

 private:
  ByteSource& in_;
  uint64_t delivered_ = 0;
};

TraceResult read_counted(ByteSource& src, CountingSource& counted, const std::string& label,
                         const KernelTableOptions& options, const TracePartsOptions& parts_options,
                         std::size_t chunk) {
  TraceResult result;
  TraceSummary& s = result.summary;
  s.source = label;
  TraceSax sax(label, s, parts_options.attribute);
  JsonTokenizer tz(counted, label, chunk);
  if (tz.empty_input()) fail("{}: the file is empty (no JSON)", label);
  sax.parse(tz);
  s.gzip = src.gzip();
  s.uncompressed_bytes = tz.bytes_read();
  if (!sax.saw_events()) {
    if (sax.has_top_key("nodes")) {
      fail("{}: a PyTorch execution trace (ExecutionTraceObserver's graph of 'nodes'), not a "
           "Chrome trace: it holds no device rows; record the step with torch.profiler (Kineto)",
           label);
    }
    fail("{}: no 'traceEvents' array: not a Chrome trace written by torch.profiler / Kineto",
         label);
  }
  // Trace kinds that hold events but no device rows, each named for what it is.
  if (sax.rows().empty()) {
    const auto count = [&](const char* cat) {
      const auto it = s.categories.find(cat);
      return it == s.categories.end() ? int64_t{0} : it->second;
    };
    if (const int64_t n = count("cuda_profiler_range"); n > 0) {
      fail("{}: a CUPTI range-profiler trace ({} cuda_profiler_range events: counter metrics per "
           "range, no kernel rows); record with ProfilerActivity.CUDA and without "
           "profiler_metrics for a kernel table",
           label, n);
    }
    if (count("kernel") == 0 && count("cuda_runtime") == 0 && count("cuda_driver") == 0 &&
        count("cpu_op") > 0) {
      fail("{}: a CPU-only trace ({} cpu_op events, no CUDA runtime or device activity): record "
           "with ProfilerActivity.CUDA for a kernel table",
           label, count("cpu_op"));
    }
  }

  // Every difference taken below (spans, launch delays, idle waits) must fit int64: the device
  // rows' and launches' times must lie within 2^63 ns (292 years) of each other.
  {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (const DeviceRow& r : sax.rows()) {
      lo = std::min(lo, r.start_ns);
      hi = std::max(hi, r.end_ns);
    }
    for (const Launch& l : sax.launches()) {
      lo = std::min(lo, l.ts_ns);
      hi = std::max(hi, l.ts_ns);
    }
    int64_t width = 0;
    if (lo <= hi && __builtin_sub_overflow(hi, lo, &width)) {
      fail("{}: the device rows and launches span {} us .. {} us, more than int64 nanoseconds "
           "hold (292 years)",
           label, lo / 1000, hi / 1000);
    }
  }

  // Steps: ProfilerStep#N on the host (several threads may carry the same N: keep the widest).
  std::map<int64_t, TraceStepRange> steps;
  for (const StepSeen& st : sax.steps()) {
    auto it = steps.find(st.step);
    if (it == steps.end()) {
      steps[st.step] = TraceStepRange{st.step, st.start_ns, st.end_ns};
    } else {
      it->second.start_ns = std::min(it->second.start_ns, st.start_ns);
      it->second.end_ns = std::max(it->second.end_ns, st.end_ns);
    }
  }
  for (const auto& [n, r] : steps) s.steps.push_back(r);
  std::set<int64_t> step_tids;
  for (const StepSeen& st : sax.steps()) step_tids.insert(st.tid);

  // Phase ranges, and the threads that only ever run backward work (autograd's device threads).
  RangeIndex backward, optimizer;
  for (const HostRange& r : sax.ranges()) {
    (r.kind == RangeKind::kBackward ? backward : optimizer).add(r.tid, r.start_ns, r.end_ns);
  }
  backward.seal();
  optimizer.seal();
  std::set<int64_t> backward_only;
  for (int64_t tid : backward.tids()) {
    if (!step_tids.count(tid)) backward_only.insert(tid);
  }

  std::vector<Launch>& launches = sax.launches();
  std::sort(launches.begin(), launches.end(),
            [](const Launch& a, const Launch& b) {
              // Ties (one correlation written twice): the earlier call, whatever the file order.
              return a.correlation != b.correlation ? a.correlation < b.correlation
                                                    : a.ts_ns < b.ts_ns;
            });
  std::vector<int64_t>& ext = sax.host_external_ids();
  std::sort(ext.begin(), ext.end());
  ext.erase(std::unique(ext.begin(), ext.end()), ext.end());

  auto step_of = [&](int64_t ts) -> int64_t {
    // The step whose host range holds the launch (the last one starting at or before ts).
    auto it = std::upper_bound(s.steps.begin(), s.steps.end(), ts,
                               [](int64_t t, const TraceStepRange& r) { return t < r.start_ns; });
    if (it == s.steps.begin()) return -1;
    --it;
    return ts <= it->end_ns ? it->step : -1;
  };

  // Resolve each device row's launch, step and phase.
  std::vector<DeviceRow>& rows = sax.rows();
  std::vector<int64_t> row_step(rows.size(), -1);
  std::vector<uint8_t> row_phase(rows.size(), 0);  // 0 unknown, 1 forward, 2 backward, 3 optimizer
  std::vector<int64_t> row_launch(rows.size(), -1);  // index into launches
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DeviceRow& r = rows[i];
    const Launch* launch = nullptr;
    if (r.correlation != 0) {
      auto it = std::lower_bound(launches.begin(), launches.end(), r.correlation,
                                 [](const Launch& l, int64_t c) { return l.correlation < c; });
      if (it != launches.end() && it->correlation == r.correlation) {
        launch = &*it;
        row_launch[i] = it - launches.begin();
      }
    }
    const int64_t when = launch ? launch->ts_ns : r.start_ns;
    row_step[i] = step_of(when);
    if (launch) {
      if (optimizer.contains(launch->tid, launch->ts_ns)) {
        row_phase[i] = 3;
      } else if (backward.contains(launch->tid, launch->ts_ns) ||
                 backward_only.count(launch->tid)) {
        row_phase[i] = 2;
      } else {
        row_phase[i] = 1;
      }
    }
  }
  std::set<int64_t> present_set(row_step.begin(), row_step.end());
  std::vector<int64_t> present(present_set.begin(), present_set.end());
  std::vector<int64_t> selected = select_steps(present, options);

  // Health over every device row (not only the selection: a broken trace is broken).
  TraceHealth& h = s.health;
  h.unmatched_begin = sax.unmatched_begin();
  {
    std::vector<std::size_t> order(rows.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const DeviceRow &x = rows[a], &y = rows[b];
      if (x.device != y.device) return x.device < y.device;
      if (x.stream != y.stream) return x.stream < y.stream;
      return x.start_ns < y.start_ns;
    });
    for (std::size_t k = 1; k < order.size(); ++k) {
      const DeviceRow &p = rows[order[k - 1]], &c = rows[order[k]];
      if (p.device == c.device && p.stream == c.stream && c.start_ns < p.end_ns) {
        ++h.stream_overlaps;
        h.stream_overlap_ns += std::min(p.end_ns, c.end_ns) - c.start_ns;
      }
    }
    constexpr int64_t kSlack = 1000000000;  // 1 s
    for (const DeviceRow& r : rows) {
      if (sax.has_host() &&
          (r.start_ns < saturating_add(sax.host_min_ns(), -kSlack) ||
           r.end_ns > saturating_add(sax.host_max_ns(), kSlack))) {
        ++h.out_of_range;
      }
      if (sax.has_window_end() && r.end_ns > sax.window_end_ns()) ++h.past_trace_end;
    }
  }

  // The table, and the key_averages()-style double count over the same selection.
  KernelTableBuilder builder(s.devices, options, present, selected);
  KernelRecord rec;
  static const char* const kPhase[] = {"", "forward", "backward", "optimizer"};
  DoubleCount& dc = s.double_count;
  const std::vector<std::string>& names = sax.names();
  std::vector<detail::StatRow> stat_rows;
  // Module attribution only when there are modules to attribute with: a trace without them pays
  // nothing (the phase split above is all it can have).
  const bool parts = sax.has_modules();
  detail::PartsInput parts_in;
  std::vector<std::size_t> selected_rows;  // indices into rows, in file order
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DeviceRow& r = rows[i];
    rec.kind = r.kind;
    rec.name = names[r.name_id];
    rec.start_ns = r.start_ns;
    rec.end_ns = r.end_ns;
    rec.device = r.device;
    rec.stream = r.stream;
    rec.correlation_id = r.correlation;
    rec.step = row_step[i];
    rec.phase = kPhase[row_phase[i]];
    const int64_t before = builder.added();
    builder.add(rec);
    if (builder.added() == before) continue;  // outside the selection
    selected_rows.push_back(i);
    detail::StatRow sr;
    sr.start_ns = r.start_ns;
    sr.end_ns = r.end_ns;
    sr.stream = r.stream;
    sr.bytes = r.bytes;
    sr.launch = row_launch[i];
    sr.name_id = r.name_id;
    sr.device = r.device;
    sr.kind = r.kind;
    stat_rows.push_back(sr);
    if (parts) {
      detail::PartsRow pr;
      pr.start_ns = r.start_ns;
      pr.end_ns = r.end_ns;
      pr.kind = r.kind;
      if (row_launch[i] >= 0) {
        const Launch& l = launches[static_cast<std::size_t>(row_launch[i])];
        pr.launched = true;
        pr.tid = l.tid;
        pr.launch_ns = l.ts_ns;
      }
      parts_in.rows.push_back(pr);
    }
    dc.device_rows_ns += r.end_ns - r.start_ns;
    if (r.external_id != 0 && std::binary_search(ext.begin(), ext.end(), r.external_id)) {
      dc.host_attributed_ns += r.end_ns - r.start_ns;
      ++dc.linked_rows;
    } else {
      ++dc.unlinked_rows;
    }
  }
  // gpu_user_annotation rows: a ProfilerStep#N range belongs to step N; others (Optimizer.step
  // on the device) to the device-side ProfilerStep range holding their start.
  std::vector<Annotation>& anns = sax.annotations();
  for (Annotation& a : anns) {
    if (a.step >= 0) continue;
    for (const Annotation& st : anns) {
      if (st.step >= 0 && a.start_ns >= st.start_ns && a.start_ns <= st.end_ns) a.step = st.step;
    }
  }
  for (const Annotation& a : anns) {
    if (std::binary_search(selected.begin(), selected.end(), a.step) ||
        (options.steps.empty() && options.skip_first <= 0)) {
      dc.annotation_ns += a.end_ns - a.start_ns;
      ++dc.annotations;
      if (dc.annotation_names.size() < 8 &&
          std::find(dc.annotation_names.begin(), dc.annotation_names.end(), a.name) ==
              dc.annotation_names.end()) {
        dc.annotation_names.push_back(a.name);
      }
    }
  }
  if (builder.added() == 0 && !rows.empty()) {
    // The trace has device activity, just none selected: say what it holds, not how to record.
    std::set<int32_t> devices;
    for (const DeviceRow& r : rows) devices.insert(r.device);
    std::string list, chosen;
    for (int32_t d : devices) list += (list.empty() ? "" : ", ") + std::to_string(d);
    for (int64_t st : selected)
      chosen += (chosen.empty() ? "steps " : ", ") + (st < 0 ? "outside" : std::to_string(st));
    if (options.device >= 0) chosen += fmt::format(", device {}", options.device);
    fail("{}: none of the trace's {} device row(s) (on device {}) is in the selection ({})", label,
         rows.size(), list, chosen);
  }
  result.table = builder.finish();

  // The launch-bound statistics over the same selection.
  std::vector<detail::StatLaunch> stat_launches(launches.size());
  for (std::size_t i = 0; i < launches.size(); ++i)
    stat_launches[i] = {launches[i].ts_ns, launches[i].dur_ns, launches[i].tid};
  const bool all_steps = options.steps.empty() && options.skip_first <= 0;
  std::vector<detail::StatOp> stat_ops;
  stat_ops.reserve(sax.host_ops().size());
  for (const HostOp& op : sax.host_ops()) {
    const bool sel =
        all_steps || std::binary_search(selected.begin(), selected.end(), step_of(op.start_ns));
    stat_ops.push_back({op.tid, op.start_ns, op.end_ns, op.name_id, sel});
  }
  s.stats = detail::compute_trace_stats(stat_rows, stat_launches, stat_ops, names, sax.op_names());
  s.series = detail::compute_trace_series(stat_rows, stat_launches, names);

  // Repeated kernel sequences over the selection (kernel_sequences.hpp).
  {
    std::vector<detail::SequenceRow> seq;
    seq.reserve(selected_rows.size());
    for (const std::size_t i : selected_rows) {
      const DeviceRow& r = rows[i];
      detail::SequenceRow q;
      q.start_ns = r.start_ns;
      q.end_ns = r.end_ns;
      q.device = r.device;
      q.stream = r.stream;
      q.name_id = r.name_id;
      q.kind = r.kind;
      if (row_launch[i] >= 0) {
        const Launch& l = launches[static_cast<std::size_t>(row_launch[i])];
        q.launched = true;
        q.tid = l.tid;
        q.launch_dur_ns = l.dur_ns;
      }
      seq.push_back(q);
    }
    s.kernel_sequences = detail::find_kernel_sequences(seq, names);
  }

  // The selected rows by the user's own ranges (user_ranges.hpp).
  {
    detail::UserRangesInput ur;
    std::vector<detail::DeviceRange> device_ranges;
    device_ranges.reserve(sax.annotations().size());
    for (const Annotation& a : sax.annotations()) device_ranges.push_back(a.range);
    ur.ranges = &sax.user_ranges();
    ur.devices = &device_ranges;
    ur.names = &sax.op_names();
    ur.rows.reserve(selected_rows.size());
    for (const std::size_t i : selected_rows) {
      const DeviceRow& r = rows[i];
      detail::RangeRow rr;
      rr.start_ns = r.start_ns;
      rr.end_ns = r.end_ns;
      rr.device = r.device;
      rr.stream = r.stream;
      rr.kind = r.kind;
      if (row_launch[i] >= 0) {
        const Launch& l = launches[static_cast<std::size_t>(row_launch[i])];
        rr.launched = true;
        rr.tid = l.tid;
        rr.launch_ns = l.ts_ns;
      }
      ur.rows.push_back(rr);
    }
    s.user_ranges = detail::analyze_user_ranges(ur);
  }

  // The critical path over the selection's window (critical_path.hpp), read from the arrays above
  // in place.
  {
    detail::CriticalPathInput cp;
    cp.ops = &stat_ops;
    cp.ranges = &sax.user_ranges();
    cp.calls = &launches;
    cp.host_names = &sax.op_names();
    cp.rows = &stat_rows;
    cp.row_names = &names;
    static const detail::CpPhase kRowPhase[] = {detail::CpPhase::kUnknown, detail::CpPhase::kForward,
                                                detail::CpPhase::kBackward,
                                                detail::CpPhase::kOptimizer};
    cp.row_phase.reserve(selected_rows.size());
    for (const std::size_t i : selected_rows) cp.row_phase.push_back(kRowPhase[row_phase[i]]);
    cp.syncs = std::move(sax.syncs());
    // The whole trace without steps, or with every step; else the selected steps' span.
    const bool whole = all_steps || std::all_of(selected.begin(), selected.end(),
                                                [](int64_t st) { return st < 0; });
    cp.window_start_ns = std::numeric_limits<int64_t>::max();
    cp.window_end_ns = std::numeric_limits<int64_t>::min();
    auto widen = [&](int64_t a, int64_t b) {
      cp.window_start_ns = std::min(cp.window_start_ns, a);
      cp.window_end_ns = std::max(cp.window_end_ns, b);
    };
    if (whole) {
      for (const detail::StatOp& op : stat_ops) widen(op.start_ns, op.end_ns);
      for (const detail::UserRange& u : sax.user_ranges()) widen(u.start_ns, u.end_ns);
      for (const Launch& l : launches) {
        if (l.dur_ns >= 0) widen(l.ts_ns, saturating_add(l.ts_ns, l.dur_ns));
      }
      for (const detail::StatRow& r : stat_rows) widen(r.start_ns, r.end_ns);
    } else {
      for (const TraceStepRange& st : s.steps) {
        if (std::binary_search(selected.begin(), selected.end(), st.step))
          widen(st.start_ns, st.end_ns);
      }
    }
    if (cp.window_start_ns > cp.window_end_ns) cp.window_start_ns = cp.window_end_ns = 0;
    for (const TraceStepRange& st : s.steps) {
      if (whole || std::binary_search(selected.begin(), selected.end(), st.step))
        cp.step_ranges.push_back({st.step, st.start_ns, st.end_ns});
    }
    cp.worker_tids.assign(backward_only.begin(), backward_only.end());
    for (const HostRange& r : sax.ranges())
      cp.phase_ranges.push_back({r.tid, r.start_ns, r.end_ns, r.kind == RangeKind::kOptimizer});
    s.critical_path = detail::analyze_critical_path(cp);
  }

  // Phase × part × layer through the module events and the fwdbwd flows (trace_parts.hpp).
  std::vector<detail::PartsOp> parts_ops;
  if (parts) {
    parts_ops.reserve(sax.host_ops().size());
    for (const HostOp& op : sax.host_ops())
      parts_ops.push_back({op.tid, op.start_ns, op.end_ns, op.name_id, op.seq});
    for (const HostRange& r : sax.ranges()) {
      (r.kind == RangeKind::kBackward ? parts_in.backward_ranges : parts_in.optimizer_ranges)
          .push_back({r.tid, r.start_ns, r.end_ns, r.seq, r.accumulate_grad});
    }
    parts_in.python = std::move(sax.python());
    parts_in.module_names = std::move(sax.module_names());
    parts_in.flows = std::move(sax.flows());
    parts_in.ops = &parts_ops;
    parts_in.op_names = &sax.op_names();
  }
  parts_in.selected_rows = static_cast<int64_t>(stat_rows.size());
  parts_in.python_events = sax.python_events();

  // The [memory] events: timeline, peak and the allocations alive at it, which the attribution
  // places with the rule it places launches by (trace_memory.hpp).
  std::vector<detail::PartsPoint> mem_points;
  std::vector<detail::MemoryAlive> mem_alive;
  std::vector<detail::PointPlace> mem_placed;
  s.memory.skipped_events = sax.memory_skipped();
  s.memory.attribution_off = !parts_options.attribute;
  s.memory.first_skipped = sax.memory_first_skipped();
  detail::analyze_memory(sax.memory_events(), s.steps, label, s.memory, mem_points, mem_alive);
  std::vector<detail::MemEvent>().swap(sax.memory_events());
  s.parts = detail::attribute_trace_parts(parts_in, parts_options, &mem_points, &mem_placed);
  detail::attribute_memory(
      s.memory, mem_alive, s.parts.module_events ? &mem_placed : nullptr,
      parts_options.attribute ? "the trace holds no module events (record with with_stack=True)"
                              : "the phase × part attribution was turned off (--parts off)");
  return result;
}

// A reader of one trace: the rows, launches and host ops grow through detail::room_for_one (an
// allocation that fails names its bytes); any smaller one that fails names how far it had read.
TraceResult read_from(ByteSource& src, const std::string& label, const KernelTableOptions& options,
                      const TracePartsOptions& parts_options,
                      std::size_t chunk = JsonTokenizer::kDefaultChunk) {
  CountingSource counted(src);
  return detail::reading(
      label, [&] { return counted.delivered(); },
      [&] { return read_counted(src, counted, label, options, parts_options, chunk); });
}

bool has_suffix(const std::string& s, const char* suf) { return detail::ends_with(s, suf); }

}  // namespace

TraceResult read_trace_file(const std::string& path, const KernelTableOptions& options,
                            const TracePartsOptions& parts) {
  FileSource src(path);
  return read_from(src, path, options, parts);
}

TraceResult read_trace_buffer(std::string_view bytes, const std::string& label,
                              const KernelTableOptions& options, const TracePartsOptions& parts) {
  BufferSource src(bytes, label);
  return read_from(src, label, options, parts);
}

namespace detail {
SyncKind sync_kind_of(const std::string& name) {
  if (name == "Context Sync") return SyncKind::kContext;
  if (name == "Stream Sync") return SyncKind::kStream;
  if (name == "Event Sync") return SyncKind::kEvent;
  if (name == "Stream Wait Event") return SyncKind::kStreamWaitEvent;
  return SyncKind::kOther;
}
const char* to_string(SyncKind k) {
  switch (k) {
    case SyncKind::kContext:
      return "context";
    case SyncKind::kStream:
      return "stream";
    case SyncKind::kEvent:
      return "event";
    case SyncKind::kStreamWaitEvent:
      return "stream_wait_event";
    case SyncKind::kOther:
      break;
  }
  return "other";
}

TraceResult read_trace_buffer_in_chunks(std::string_view bytes, const std::string& label,
                                        std::size_t chunk, const KernelTableOptions& options) {
  BufferSource src(bytes, label);
  return read_from(src, label, options, TracePartsOptions{}, chunk);
}
}  // namespace detail

std::vector<RankTrace> read_trace_directory(const std::string& dir,
                                            const KernelTableOptions& options,
                                            const TracePartsOptions& parts) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) fail("cannot open trace directory '{}': {}", dir, std::strerror(errno));
  std::vector<std::string> files;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    if (has_suffix(name, ".json") || has_suffix(name, ".json.gz"))
      files.push_back(dir + "/" + name);
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  if (files.empty()) fail("trace directory '{}' holds no *.json or *.json.gz file", dir);
  // Every entry named like a trace is one: a FIFO, a device, a directory or a broken symbolic
  // link is refused, named, before any file is opened (opening a FIFO would block), rather than
  // left out of the ranks without a word.
  for (const std::string& f : files) {
    struct stat st {};
    if (::lstat(f.c_str(), &st) != 0) {
      fail("trace directory '{}': cannot read entry '{}': {}", dir, f, std::strerror(errno));
    }
    const bool link = S_ISLNK(st.st_mode);
    if (link && ::stat(f.c_str(), &st) != 0) {
      const int err = errno;
      fail("trace directory '{}': entry '{}' is a symbolic link {}: remove it or read the traces "
           "one by one",
           dir, f,
           err == ELOOP    ? "in a loop"
           : err == ENOENT ? "to nothing (dangling)"
                           : std::string("that cannot be followed: ") + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                         : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                      : "not a regular file";
      fail("trace directory '{}': entry '{}' is {}{}, not a trace file: remove it or read the "
           "traces one by one",
           dir, f, link ? "a symbolic link to " : "", kind);
    }
  }
  std::vector<RankTrace> out;
  for (const std::string& f : files) {
    RankTrace t;
    t.path = f;
    t.result = read_trace_file(f, options, parts);
    out.push_back(std::move(t));
  }
  bool all_ranked = true;
  std::set<int64_t> ranks;
  for (const RankTrace& t : out) {
    if (t.result.summary.rank < 0 || !ranks.insert(t.result.summary.rank).second)
      all_ranked = false;
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].rank = all_ranked ? out[i].result.summary.rank : static_cast<int64_t>(i);
  }
  std::sort(out.begin(), out.end(),
            [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace tprobe::core
