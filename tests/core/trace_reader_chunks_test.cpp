// The trace reader over its streaming tokenizer: the same table and summary whatever the chunk
// size (every token split across chunk boundaries), and totals equal to sums that tprobe did not
// compute (the real H200 trace's Python sum, the synthetic generator's own sum).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/trace/stats/kernel_table_report.hpp"
#include "tprobe/core/trace/compare/kernels.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"
#include "trace/read/detail/trace_reader_internal.hpp"

namespace tprobe::core {
namespace {

const std::string kDir = std::string(TPROBE_FIXTURES_DIR) + "/traces";

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string gunzip(const std::string& gz) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
  std::string out;
  char buf[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  inflateEnd(&z);
  return out;
}

// Everything the reader produced, as the evidence would hold it.
std::string fingerprint(const TraceResult& r) {
  return to_json(r.table).dump() + "\n" + to_json(r.summary).dump();
}

// A Kineto-shaped trace with what the hot path must get right: escapes and raw UTF-8 in
// names, string pids/tids, integer and fractional times, older spellings, a duplicate key
// inside an event (the later value wins), keys the reader ignores holding nested values,
// metadata before and after the events.
std::string varied_trace() {
  return "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H\\u0032"
         "00\", \"totalGlobalMem\": 150109782016, \"computeMajor\": 9, \"computeMinor\": 0, "
         "\"numSms\": 132, \"extra\": [1, {\"a\": null}]}], \"distributedInfo\": {\"rank\": \"3\", "
         "\"world_size\": 4}, \"traceEvents\": [\n"
         "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#7\", \"pid\": 1, "
         "\"tid\": 1, \"ts\": 100, \"dur\": 900.5, \"args\": {\"External id\": 1}},\n"
         "{\"ph\": \"X\", \"cat\": \"CPU_OP\", \"name\": \"aten::mm\", \"pid\": 1, \"tid\": 1, "
         "\"ts\": 110.000, \"dur\": 20.000, \"args\": {\"External id\": 2, \"Input Dims\": "
         "[[4, 8], [8, 4]], \"flag\": true}},\n"
         "{\"ph\": \"X\", \"cat\": \"Runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, "
         "\"tid\": 1, \"ts\": 112.5, \"dur\": 3, \"args\": {\"correlation\": 50}},\n"
         "{\"ph\": \"X\", \"cat\": \"Kernel\", \"name\": \"void k<\\\"q\\\">(float\\u002a) "
         "\xc3\xa9\\u20ac\\ud83d\\ude00\", \"pid\": 0, \"tid\": \"stream 7\", \"ts\": 120.2504, "
         "\"dur\": 10.1255, \"args\": {\"External id\": 2, \"device\": 0, \"correlation\": 50, "
         "\"grid\": [1, 2, 3]}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"first\", \"name\": "
         "\"sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n\", \"pid\": 0, \"tid\": 7, \"ts\": 1e2, "
         "\"ts\": 140, \"dur\": 5.25, \"args\": {\"device\": 0, \"stream\": 7}},\n"
         "{\"ph\": \"X\", \"cat\": \"gpu_memset\", \"name\": \"Memset (Device)\", \"pid\": 0, "
         "\"tid\": 7, \"ts\": 150, \"dur\": 0.001, \"args\": {\"device\": 0, \"stream\": 7}},\n"
         "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#7\", "
         "\"pid\": 0, \"tid\": 7, \"ts\": 119, \"dur\": 200},\n"
         "{\"ph\": \"B\", \"cat\": \"cpu_op\", \"name\": \"open\", \"pid\": 1, \"tid\": 1, "
         "\"ts\": 160},\n"
         "{\"ph\": \"s\", \"id\": 50, \"pid\": 1, \"tid\": 1, \"ts\": 112.5, \"cat\": \"ac2g\"},\n"
         "{\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"\", "
         "\"tid\": \"\", \"ts\": 1100.000}\n"
         "], \"WARNING\": [\"CUPTI: a \\\"quoted\\\" warning\", {\"skip\": 1}, \"second\"], "
         "\"baseTimeNanoseconds\": 1764576000000000000, \"traceName\": \"t\"}\n";
}

TEST(TraceChunks, SameResultWhateverTheChunkSize) {
  const std::string doc = varied_trace();
  const TraceResult whole = read_trace_buffer(doc, "v.json");
  // The reading itself, checked by hand: 3 device rows (the 1e2 ts was replaced by 140, the
  // second name replaced "first"), durations 10.126 + 5.25 + 0.001 us.
  EXPECT_EQ(whole.table.totals.events, 3);
  EXPECT_EQ(whole.table.totals.sum_ns, 10126 + 5250 + 1);
  EXPECT_EQ(whole.table.totals.start_ns, 120250);
  EXPECT_EQ(whole.summary.devices.at(0).name, "NVIDIA H200");
  EXPECT_EQ(whole.summary.rank, 3);
  EXPECT_EQ(whole.summary.world_size, 4);
  EXPECT_EQ(whole.summary.base_time_ns, 1764576000000000000LL);
  EXPECT_EQ(whole.summary.categories.at("CPU_OP"), 1);
  EXPECT_EQ(whole.summary.categories.at("Kernel"), 1);
  EXPECT_EQ(whole.summary.categories.at("kernel"), 1);
  EXPECT_EQ(whole.summary.health.unmatched_begin, 1);
  ASSERT_EQ(whole.summary.health.messages.size(), 2u);
  EXPECT_EQ(whole.summary.health.messages[0], "WARNING: CUPTI: a \"quoted\" warning");
  EXPECT_EQ(whole.summary.uncompressed_bytes, static_cast<int64_t>(doc.size()));
  bool found = false;
  for (const KernelRow& k : whole.table.kernels) {
    found |= k.name == "void k<\"q\">(float*) \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  }
  EXPECT_TRUE(found);
  const std::string expect = fingerprint(whole);
  for (std::size_t chunk : {1, 2, 3, 7, 64}) {
    EXPECT_EQ(fingerprint(detail::read_trace_buffer_in_chunks(doc, "v.json", chunk)), expect)
        << "chunk " << chunk;
  }
}

TEST(TraceChunks, ErrorsDoNotDependOnTheChunkSize) {
  const std::string doc = varied_trace();
  auto error_of = [](const std::string& bytes, std::size_t chunk) -> std::string {
    try {
      detail::read_trace_buffer_in_chunks(bytes, "v.json", chunk);
    } catch (const Error& e) {
      std::string m = e.what();
      const std::size_t a = m.find(" near '");
      const std::size_t b = m.rfind("': ");
      if (a != std::string::npos && b != std::string::npos && b > a) m.erase(a, b + 1 - a);
      return m;
    }
    return "";
  };
  for (std::size_t cut : {doc.size() / 3, doc.size() / 2, doc.size() - 3}) {
    const std::string e = error_of(doc.substr(0, cut), 1 << 18);
    EXPECT_NE(e.find("truncated"), std::string::npos) << e;
    for (std::size_t chunk : {1, 2, 7, 64}) EXPECT_EQ(error_of(doc.substr(0, cut), chunk), e);
  }
  std::string bad = doc;
  bad.replace(bad.find("\"dur\": 20.000"), 13, "\"dur\": 20.0.0");
  const std::string e = error_of(bad, 1 << 18);
  EXPECT_NE(e.find("v.json: not valid JSON at byte " + std::to_string(bad.find("20.0.0") + 5)),
            std::string::npos)
      << e;
  for (std::size_t chunk : {1, 3, 64}) EXPECT_EQ(error_of(bad, chunk), e);
}

// The real trace from the H200 (tests/fixtures/traces): the device total equals, to the
// nanosecond, the sum Python took over the same file's kernel/memcpy/memset events; the same in
// chunks of 7 and 64 bytes (the file inflates to 35 MB: smaller chunks would only be slow).
TEST(TraceChunks, RealTraceTotalEqualsThePythonSumAtEveryChunkSize) {
  const nlohmann::json sums = nlohmann::json::parse(read_bytes(kDir + "/hf-sdpa-2x256.sums.json"));
  const int64_t expect_ns = std::llround(sums["file_device_sum_us"].get<double>() * 1000.0);
  const int64_t expect_rows = sums["file_device_count"].get<int64_t>();
  const std::string gz = read_bytes(kDir + "/hf-sdpa-2x256.json.gz");
  const TraceResult file = read_trace_file(kDir + "/hf-sdpa-2x256.json.gz");
  EXPECT_EQ(file.table.totals.sum_ns, expect_ns);
  EXPECT_EQ(file.table.totals.events, expect_rows);
  EXPECT_EQ(file.summary.double_count.device_rows_ns, expect_ns);
  const std::string expect = fingerprint(file);
  const std::string plain = gunzip(gz);
  for (std::size_t chunk : {7, 64, 4096}) {
    EXPECT_EQ(fingerprint(detail::read_trace_buffer_in_chunks(gz, file.summary.source, chunk)),
              expect)
        << "gzip, chunk " << chunk;
  }
  TraceResult p = detail::read_trace_buffer_in_chunks(plain, file.summary.source, 64);
  EXPECT_EQ(p.table.totals.sum_ns, expect_ns);
  EXPECT_EQ(p.table.totals.events, expect_rows);
}

// The synthetic generator (benchmarks/make_synthetic_trace.py) prints the sum of the device
// durations it wrote, in integer nanoseconds: the reader's total must be exactly that.
TEST(TraceChunks, SyntheticTraceTotalEqualsTheGeneratorsSum) {
  const nlohmann::json sums = nlohmann::json::parse(read_bytes(kDir + "/synthetic-1mb.sums.json"));
  const std::string gz = read_bytes(kDir + "/synthetic-1mb.json.gz");
  const std::string plain = gunzip(gz);
  const TraceResult r = read_trace_buffer(plain, "synthetic");
  EXPECT_EQ(r.table.totals.sum_ns, sums["device_sum_ns"].get<int64_t>());
  EXPECT_EQ(r.table.totals.events, sums["device_rows"].get<int64_t>());
  EXPECT_EQ(r.summary.categories.at("kernel"), sums["device_rows"].get<int64_t>());
  const std::string expect = fingerprint(r);
  for (std::size_t chunk : {1, 2, 3, 7, 64}) {
    EXPECT_EQ(fingerprint(detail::read_trace_buffer_in_chunks(plain, "synthetic", chunk)), expect)
        << "chunk " << chunk;
  }
  // Through gzip: the same table (the summary says gzip, so only the table is compared).
  EXPECT_EQ(to_json(detail::read_trace_buffer_in_chunks(gz, "synthetic", 3).table).dump(),
            to_json(r.table).dump());
}

// HTA's public traces and older Kineto write absolute epoch microseconds with nanosecond
// decimals ("1712195495519689.047"), no baseTimeNanoseconds. The real H200 trace shifted there
// by text (every "ts" value + kShiftNs, baseTimeNanoseconds dropped) must give the same sums,
// union, span, idle and per-kernel totals to the nanosecond, its start moved by kShiftNs.
constexpr int64_t kShiftNs = 1706938913333230492;  // first ts 5256582186458.555 -> 1712195495519689.047

// "5256582238050.273" (us, up to three decimals, no sign or exponent: what the fixture holds)
// + shift_ns, printed back as microseconds with three decimals. Plain digit arithmetic, apart
// from the reader's parser.
std::string shifted_us(const std::string& us, int64_t shift_ns) {
  const std::size_t dot = us.find('.');
  std::string frac = dot == std::string::npos ? "" : us.substr(dot + 1);
  EXPECT_LE(frac.size(), 3u) << us;
  while (frac.size() < 3) frac += '0';
  const int64_t ns = std::stoll(us.substr(0, dot)) * 1000 + std::stoll(frac) + shift_ns;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000));
  return buf;
}

std::string shift_every_ts(const std::string& plain, int64_t shift_ns) {
  std::string out;
  out.reserve(plain.size() + plain.size() / 8);
  const std::string key = "\"ts\": ";
  std::size_t at = 0, hits = 0;
  for (std::size_t k = plain.find(key); k != std::string::npos; k = plain.find(key, at)) {
    const std::size_t v = k + key.size();
    std::size_t e = v;
    while (e < plain.size() && (std::isdigit(static_cast<unsigned char>(plain[e])) || plain[e] == '.'))
      ++e;
    out.append(plain, at, v - at);
    out += shifted_us(plain.substr(v, e - v), shift_ns);
    at = e;
    ++hits;
  }
  out.append(plain, at, std::string::npos);
  EXPECT_GT(hits, 100000u);
  const std::string base = "\"baseTimeNanoseconds\"";
  const std::size_t b = out.find(base);
  EXPECT_NE(b, std::string::npos);
  out.replace(b, base.size(), "\"baseTimeNanosecondsDropped\"");
  return out;
}

TEST(TraceChunks, EpochMicrosecondTimestampsGiveTheSameTableToTheNanosecond) {
  const std::string plain = gunzip(read_bytes(kDir + "/hf-sdpa-2x256.json.gz"));
  const std::string epoch = shift_every_ts(plain, kShiftNs);
  ASSERT_NE(epoch.find("\"ts\": 1712195495519689.047"), std::string::npos);
  const TraceResult a = read_trace_buffer(plain, "real");
  const TraceResult b = read_trace_buffer(epoch, "epoch");
  EXPECT_EQ(b.summary.base_time_ns, 0);
  const BusyTotals &x = a.table.totals, &y = b.table.totals;
  EXPECT_EQ(y.events, x.events);
  EXPECT_EQ(y.sum_ns, x.sum_ns);
  EXPECT_EQ(y.union_busy_ns, x.union_busy_ns);
  EXPECT_EQ(y.span_ns, x.span_ns);
  EXPECT_EQ(y.idle_ns, x.idle_ns);
  EXPECT_EQ(y.start_ns, x.start_ns + kShiftNs);
  EXPECT_EQ(y.end_ns, x.end_ns + kShiftNs);
  EXPECT_GT(y.start_ns, int64_t{1700000000000000000});
  const Json ja = to_json(a.table), jb = to_json(b.table);
  for (const char* key : {"kernels", "categories", "phases", "architecture"}) {
    EXPECT_EQ(jb[key], ja[key]) << key;
  }
  ASSERT_EQ(b.table.steps.size(), a.table.steps.size());
  for (std::size_t i = 0; i < a.table.steps.size(); ++i) {
    EXPECT_EQ(b.table.steps[i].step, a.table.steps[i].step);
    EXPECT_EQ(b.table.steps[i].totals.sum_ns, a.table.steps[i].totals.sum_ns);
    EXPECT_EQ(b.table.steps[i].totals.span_ns, a.table.steps[i].totals.span_ns);
    EXPECT_EQ(b.table.steps[i].totals.idle_ns, a.table.steps[i].totals.idle_ns);
  }
  EXPECT_EQ(to_json(b.summary)["health"], to_json(a.summary)["health"]);
  EXPECT_EQ(to_json(b.summary)["key_averages_trap"], to_json(a.summary)["key_averages_trap"]);
}

}  // namespace
}  // namespace tprobe::core
