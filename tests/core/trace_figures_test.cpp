// The third round of `kernels`' figures on hand-made traces whose every number is worked out by
// hand below: device time per stream (busy, overlap between streams), the user's ranges (nesting,
// autograd's rows borrowed from the training loop's thread, rows outside, Kineto's agreement, the
// negative control without the loop's ranges), repeated kernel sequences (non-overlapping counts,
// runs broken by a copy and by another launching thread, the maximal sequence), the two time
// series (bucket maxima, time-weighted means, bytes spread over a copy's time); each read back
// from its evidence JSON equal, and broken evidence refused naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"
#include "tprobe/core/trace/stats/kernel_sequences.hpp"
#include "tprobe/core/trace/stats/kernel_table_report.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"
#include "tprobe/core/trace/stats/trace_stats_report.hpp"

namespace tprobe::core {
namespace {

// Events in µs, as Kineto writes them; a launch on `tid` at `at` and its row on `stream`.
struct Trace {
  Json events = Json::array();
  int64_t corr = 0;

  void row(int tid, double at, int64_t stream, double ts, double dur, const std::string& name,
           const char* cat = "kernel", int64_t bytes = -1, double call = 0.5) {
    const int64_t c = ++corr;
    if (tid >= 0) {
      events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"},
                        {"pid", 1}, {"tid", tid}, {"ts", at}, {"dur", call},
                        {"args", {{"correlation", c}}}});
    }
    Json args = {{"correlation", c}, {"device", 0}, {"stream", stream}};
    if (bytes >= 0) args["bytes"] = bytes;
    events.push_back({{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 0}, {"tid", stream},
                      {"ts", ts}, {"dur", dur}, {"args", args}});
  }
  void range(int tid, const std::string& name, double ts, double end, int64_t ext) {
    events.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", name}, {"pid", 1},
                      {"tid", tid}, {"ts", ts}, {"dur", end - ts},
                      {"args", {{"External id", ext}}}});
  }
  void device_range(int64_t stream, const std::string& name, double ts, double end, int64_t ext) {
    events.push_back({{"ph", "X"}, {"cat", "gpu_user_annotation"}, {"name", name}, {"pid", 0},
                      {"tid", stream}, {"ts", ts}, {"dur", end - ts},
                      {"args", {{"External id", ext}}}});
  }
  TraceSummary read() const {
    return read_trace_buffer(Json{{"traceEvents", events}}.dump(), "hand").summary;
  }
};

TEST(TraceStreams, BusyTimeAndTheOverlapBetweenStreamsByHand) {
  Trace t;
  t.row(1, 0, 7, 10, 10, "a");                        // stream 7: 10..20
  t.row(1, 1, 7, 30, 10, "b");                        //           30..40
  t.row(1, 2, 9, 15, 20, "Memcpy HtoD", "gpu_memcpy", 4000);  // stream 9: 15..35
  t.row(1, 3, 9, 50, 5, "Memset", "gpu_memset", 16);  //           50..55
  const TraceSummary s = t.read();
  ASSERT_EQ(s.stats.streams.size(), 2u);
  const StreamRow& a = s.stats.streams[0];
  const StreamRow& b = s.stats.streams[1];
  EXPECT_EQ(a.stream, 7);
  EXPECT_EQ(a.kernels, 2);
  EXPECT_EQ(a.kernel_ns, 20000);
  EXPECT_EQ(a.busy_ns, 20000);
  EXPECT_EQ(a.concurrent_ns, 10000);  // 15..20 and 30..35
  EXPECT_EQ(b.memcpys, 1);
  EXPECT_EQ(b.memsets, 1);
  EXPECT_EQ(b.sum_ns, 25000);
  EXPECT_EQ(b.busy_ns, 25000);
  EXPECT_EQ(b.concurrent_ns, 10000);
  EXPECT_DOUBLE_EQ(a.sum_share_ratio, 20.0 / 45.0);
  EXPECT_DOUBLE_EQ(b.busy_span_ratio, 25.0 / 45.0);  // span 10..55
  EXPECT_EQ(a.first_start_ns, 10000);
  EXPECT_EQ(b.last_end_ns, 55000);
  // The evidence reads back equal; a broken one names its field.
  const Json j = to_json(s.stats)["streams"];
  std::vector<StreamRow> back = streams_from_json(j, "e.json results.trace.streams");
  TraceStats st;
  st.streams = back;
  EXPECT_EQ(to_json(st)["streams"], j);
  Json bad = j;
  bad[1]["busy_ns"] = "x";
  try {
    streams_from_json(bad, "e.json results.trace.streams");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("streams[1]: field 'busy_ns' must be an integer"),
              std::string::npos)
        << e.what();
  }
}

// The training loop on thread 1 (ProfilerStep#1 there), autograd's worker on thread 2.
Trace ranges_trace(bool loop_ranges) {
  Trace t;
  t.range(1, "ProfilerStep#1", 0, 1000, 1);
  if (loop_ranges) {
    t.range(1, "train_step", 10, 900, 2);
    t.range(1, "forward", 20, 300, 3);
    t.range(1, "backward", 400, 800, 4);
  }
  t.row(1, 30, 7, 100, 1, "f1");    // forward
  t.row(1, 40, 7, 110, 2, "f2");    // forward
  t.row(1, 350, 7, 360, 3, "s1");   // train_step itself
  t.row(2, 500, 7, 510, 4, "b1");   // autograd's thread: borrows backward
  t.row(2, 950, 7, 960, 5, "b2");   // autograd's thread after train_step: outside
  t.row(-1, 0, 7, 970, 6, "orphan");  // no launch: outside
  t.row(1, 5, 7, 980, 7, "pre");    // before train_step: outside
  t.device_range(7, "forward", 100, 101, 3);  // Kineto agrees on f1...
  t.device_range(7, "backward", 109, 113, 4);  // ...and disagrees on f2
  return t;
}

TEST(UserRanges, NestedRangesBorrowedRowsAndTheOutsideByHand) {
  const UserRanges u = ranges_trace(true).read().user_ranges;
  ASSERT_TRUE(u.available);
  EXPECT_EQ(u.ranges, 3);
  EXPECT_EQ(u.main_tid, 1);
  ASSERT_EQ(u.rows.size(), 3u);
  EXPECT_EQ(u.rows[0].parent, -1);
  EXPECT_EQ(u.rows[1].parent, 0);
  EXPECT_EQ(u.rows[2].parent, 0);
  EXPECT_EQ(u.rows[1].name, "forward");
  EXPECT_EQ(u.rows[0].name, "train_step");
  EXPECT_EQ(u.rows[2].name, "backward");
  EXPECT_EQ(u.rows[0].kernel_ns, 3000);
  EXPECT_EQ(u.rows[0].inclusive_ns, 3000 + 3000 + 4000);
  EXPECT_EQ(u.rows[1].kernel_ns, 3000);
  EXPECT_EQ(u.rows[1].rows, 2);
  EXPECT_EQ(u.rows[1].depth, 1);
  EXPECT_EQ(u.rows[2].kernel_ns, 4000);
  EXPECT_EQ(u.rows[2].borrowed_rows, 1);
  EXPECT_EQ(u.rows[0].host_ns, 890000);
  EXPECT_EQ(u.outside_rows, 3);
  EXPECT_EQ(u.outside_kernel_ns, 5000 + 6000 + 7000);
  EXPECT_EQ(u.total_ns, 28000);
  EXPECT_EQ(u.kineto_checked, 2);
  EXPECT_EQ(u.kineto_same, 1);
  const Json j = to_json(u);
  EXPECT_EQ(to_json(user_ranges_from_json(j, "e.json")), j);
  Json bad = j;
  bad["rows"][1]["depth"] = -1;
  EXPECT_THROW(user_ranges_from_json(bad, "e.json"), Error);
  bad = j;
  bad["kineto_same"] = 9;  // more than checked
  EXPECT_THROW(user_ranges_from_json(bad, "e.json"), Error);
  // The tree is checked: a parent after its row, a depth its parent does not give.
  bad = j;
  bad["rows"][1]["parent"] = 2;
  EXPECT_THROW(user_ranges_from_json(bad, "e.json"), Error);
  bad = j;
  bad["rows"][2]["depth"] = 2;
  EXPECT_THROW(user_ranges_from_json(bad, "e.json"), Error);
  bad = j;
  bad["rows"][0]["path"] = "train_step";  // the old per-row path is not what is read
  bad["rows"][0].erase("parent");
  EXPECT_THROW(user_ranges_from_json(bad, "e.json"), Error);
  bad = j;  // the outside's share is its time over total_ns, not any number
  bad["outside"]["share_ratio"] = 0.5;
  try {
    user_ranges_from_json(bad, "e.json");
    ADD_FAILURE() << "a wrong outside share was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("e.json.outside"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(user_range_tables(u).empty());
  // docs/kernels.md lists every field as core/evidence/user_ranges.hpp declares it.
  std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/kernels.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const evidence::FieldDoc& d : evidence::field_docs<UserRanges>("trace.user_ranges."))
    EXPECT_NE(doc.find(evidence::field_rows({d})), std::string::npos) << d.path;
}

// Deeply nested ranges (issue 46: each row carried its whole path, 10,000 nested ranges wrote
// 395 MB): every row holds its parent and its own name, the evidence grows linearly with the
// depth, and the table shows at most kMaxShownRanges rows with a capped indent.
TEST(UserRanges, DeepNestingIsATreeAndItsViewsAreCapped) {
  auto nested = [](int n) {
    Trace t;
    for (int i = 0; i < n; ++i) t.range(1, "r" + std::to_string(i), i, 4.0 * n - i, i + 1);
    t.row(1, n + 0.25, 7, 5.0 * n, 1, "k");  // launched in the innermost range
    // Launched after r101..r(n-1) closed: r100 [100, 4n - 100] is the innermost holding it, 300
    // levels up from the last range started (the climb the jump pointers shorten).
    if (n > 100) t.row(1, 4.0 * n - 100.5, 7, 5.0 * n + 2, 2, "late");
    return t.read().user_ranges;
  };
  const UserRanges u = nested(400);
  ASSERT_EQ(u.rows.size(), 400u);
  for (std::size_t i = 0; i < u.rows.size(); ++i) {
    EXPECT_EQ(u.rows[i].parent, static_cast<int64_t>(i) - 1);
    EXPECT_EQ(u.rows[i].depth, static_cast<int32_t>(i));
    EXPECT_EQ(u.rows[i].name, "r" + std::to_string(i));
    EXPECT_EQ(u.rows[i].inclusive_ns, i <= 100 ? 3000 : 1000) << i;
  }
  EXPECT_EQ(u.rows[399].kernel_ns, 1000);
  EXPECT_EQ(u.rows[100].kernel_ns, 2000);
  EXPECT_EQ(u.rows[101].kernel_ns, 0);
  EXPECT_EQ(u.rows[99].kernel_ns, 0);
  const Json j = to_json(u);
  EXPECT_EQ(to_json(user_ranges_from_json(j, "e.json")), j);
  // Linear: 4x the depth is about 4x the bytes (a path per row made it 16x).
  const std::size_t small = to_json(nested(100)).dump().size();
  EXPECT_LT(double(j.dump().size()), 5.0 * double(small)) << small << " " << j.dump().size();
  const std::vector<Table> tables = user_range_tables(u);
  ASSERT_EQ(tables.size(), 1u);
  const std::string text = tables[0].render();
  // kMaxShownRanges rows + the outside row, each line short: the indent is capped.
  std::size_t lines = 0, longest = 0;
  for (std::size_t at = 0, next; at < text.size(); at = next + 1) {
    next = text.find('\n', at);
    if (next == std::string::npos) next = text.size();
    ++lines;
    longest = std::max(longest, next - at);
  }
  EXPECT_LT(lines, kMaxShownRanges + 20) << text.substr(0, 2000);
  EXPECT_LT(longest, 400u) << text.substr(0, 2000);
  EXPECT_NE(text.find("[depth 59] r59"), std::string::npos) << text.substr(0, 2000);
  EXPECT_NE(text.find("60 of the 400 range paths shown"), std::string::npos);
  // The negative control: a shallow tree is shown whole, without the note.
  const std::string shallow = user_range_tables(nested(5))[0].render();
  EXPECT_EQ(shallow.find("range paths shown"), std::string::npos);
  EXPECT_NE(shallow.find("        r4"), std::string::npos) << shallow;
}

// The negative control: without the loop's ranges nothing is borrowed and every row is outside.
TEST(UserRanges, WithoutRangesEveryRowIsOutsideAndNothingIsBorrowed) {
  const UserRanges u = ranges_trace(false).read().user_ranges;
  EXPECT_FALSE(u.available);
  EXPECT_EQ(u.outside_rows, 7);
  EXPECT_EQ(u.outside_kernel_ns, u.total_ns);
  EXPECT_TRUE(u.rows.empty());
  EXPECT_TRUE(user_range_tables(u).empty());
}

// Broken range events: a user_annotation without dur is left out (health.skipped_events), as is a
// gpu_user_annotation without dur or with a negative one (its rows are then not checked against
// Kineto); a gpu_user_annotation on a device outside 0..2^31-1 is a one-line error.
TEST(UserRanges, BrokenRangeEventsAreLeftOutCountedOrRefused) {
  Trace t = ranges_trace(true);
  Json no_dur = t.events[1];  // train_step
  no_dur.erase("dur");
  t.events[1] = no_dur;
  t.events[t.events.size() - 2].erase("dur");     // the forward device range
  t.events[t.events.size() - 1]["dur"] = -4.0;    // the backward device range
  const TraceSummary s = t.read();
  EXPECT_EQ(s.health.skipped_events, 3);
  const UserRanges& u = s.user_ranges;
  ASSERT_TRUE(u.available);
  ASSERT_EQ(u.rows.size(), 2u);  // forward and backward, now at the top
  EXPECT_EQ(u.rows[0].name, "forward");
  EXPECT_EQ(u.rows[0].parent, -1);
  EXPECT_EQ(u.rows[1].name, "backward");
  EXPECT_EQ(u.rows[1].parent, -1);
  EXPECT_EQ(u.kineto_checked, 0);
  EXPECT_EQ(u.outside_kernel_ns + u.rows[0].inclusive_ns + u.rows[1].inclusive_ns, u.total_ns);

  Trace far = ranges_trace(true);
  far.events.back()["args"]["device"] = int64_t{1} << 33;
  try {
    far.read();
    ADD_FAILURE() << "a device range on device 2^33 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("('gpu_user_annotation' event 'backward') is on device "
                                         "8589934592: not a device index"),
              std::string::npos)
        << e.what();
  }
}

// A B C A B C | copy | A B C A B C (thread 1), then A B C launched by thread 2 on the same stream.
TEST(KernelSequences, CountsBreaksAndTheMaximalSequenceByHand) {
  Trace t;
  double ts = 100;
  auto k = [&](int tid, const char* n) {
    t.row(tid, ts - 50, 7, ts, 1, n, "kernel", -1, 0.25);
    ts += 3;  // 2 µs gaps
  };
  for (int i = 0; i < 2; ++i) {
    k(1, "A");
    k(1, "B");
    k(1, "C");
  }
  t.row(1, ts - 50, 7, ts, 1, "Memcpy DtoD", "gpu_memcpy", 64);
  ts += 3;
  for (int i = 0; i < 2; ++i) {
    k(1, "A");
    k(1, "B");
    k(1, "C");
  }
  k(2, "A");
  k(2, "B");
  k(2, "C");
  const KernelSequences s = t.read().kernel_sequences;
  EXPECT_EQ(s.kernels, 15);
  EXPECT_EQ(s.runs, 3);
  EXPECT_EQ(s.hash_collisions, 0);
  // A B C occurs 5 times (twice in each run of thread 1, once on thread 2); A B C A B C twice,
  // and replaces every 4- and 5-kernel window and B C A, C A B (each as often as a longer one).
  // Both leave 20 µs of idle inside; the one that recurs more often comes first.
  EXPECT_EQ(s.found, 2);
  ASSERT_EQ(s.top.size(), 2u);
  const KernelSequence& abc = s.top[0];
  EXPECT_EQ(abc.kernels, (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(abc.occurrences, 5);
  EXPECT_EQ(abc.gap_ns, 5 * 2 * 2000);
  EXPECT_EQ(abc.first_start_ns, 100000);
  const KernelSequence& twice = s.top[1];
  EXPECT_EQ(twice.kernels, (std::vector<std::string>{"A", "B", "C", "A", "B", "C"}));
  EXPECT_EQ(twice.occurrences, 2);
  EXPECT_EQ(twice.gap_ns, 2 * 5 * 2000);
  EXPECT_EQ(twice.kernel_ns, 2 * 6 * 1000);
  EXPECT_EQ(twice.launches_removed, 10);
  EXPECT_EQ(twice.launch_call_ns, 10 * 250);
  const Json j = to_json(s);
  EXPECT_EQ(to_json(kernel_sequences_from_json(j, "e.json")), j);
  // Broken copies are refused naming the sequence: a length that is not its kernels' count, a
  // negative time, another search's bounds.
  for (const auto& [key, value] : std::vector<std::pair<std::string, Json>>{
           {"length", 5}, {"gap_ns", -1}, {"kernels", "A"}}) {
    Json bad = j;
    bad["top"][0][key] = value;
    try {
      kernel_sequences_from_json(bad, "e.json");
      ADD_FAILURE() << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("e.json.top[0]"), std::string::npos) << e.what();
    }
  }
  Json other = j;
  other["max_length"] = 13;
  EXPECT_THROW(kernel_sequences_from_json(other, "e.json"), Error);
  EXPECT_FALSE(kernel_sequence_tables(s).empty());
  // docs/kernels.md lists every field as the table declares it.
  std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/kernels.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const evidence::FieldDoc& d :
       evidence::field_docs<KernelSequences>("trace.kernel_sequences."))
    EXPECT_NE(doc.find(evidence::field_rows({d})), std::string::npos) << d.path;
}

// One stream: a row queued 0..800 ns, another 0..400; a 4,000-byte copy from 200 to 600 ns on a
// second stream. 800 ns in 400 buckets of 2 ns.
TEST(TraceSeries, BucketMaximaMeansAndSpreadBytesByHand) {
  Trace t;
  t.row(1, 0, 7, 0.1, 0.7, "long");                                   // queued 0..800
  t.row(1, 0, 7, 0.8, 0.0, "zero");                                   // queued 0..800, 0 long
  t.row(1, 0.0, 9, 0.2, 0.4, "Memcpy HtoD", "gpu_memcpy", 4000);     // queued 0..600
  const TraceSeries ts = t.read().series;
  ASSERT_EQ(ts.devices.size(), 1u);
  const DeviceSeries& d = ts.devices[0];
  EXPECT_EQ(d.start_ns, 0);
  EXPECT_EQ(d.end_ns, 800);
  EXPECT_EQ(d.bucket_ns, 2);
  EXPECT_EQ(d.buckets, 400);
  ASSERT_EQ(d.queues.size(), 2u);
  EXPECT_EQ(d.queues[0].stream, 7);
  EXPECT_EQ(d.queues[0].max_length[0], 2);
  EXPECT_EQ(d.queues[0].max_length[399], 2);
  EXPECT_DOUBLE_EQ(d.queues[0].mean_length[100], 2.0);
  EXPECT_EQ(d.queues[1].max_length[299], 1);  // 598..600
  EXPECT_EQ(d.queues[1].max_length[300], 0);
  ASSERT_EQ(d.copies.size(), 1u);
  EXPECT_EQ(d.copies[0].rows, 1);
  EXPECT_DOUBLE_EQ(d.copies[0].bytes[99], 0.0);
  EXPECT_DOUBLE_EQ(d.copies[0].bytes[100], 20.0);  // 2 of the copy's 400 ns
  EXPECT_DOUBLE_EQ(d.copies[0].bytes_per_s[100], 20.0 * 1e9 / 2.0);
  double sum = 0;
  for (double b : d.copies[0].bytes) sum += b;
  EXPECT_NEAR(sum, 4000.0, 1e-9);
  const Json j = to_json(ts);
  EXPECT_EQ(to_json(trace_series_from_json(j, "e.json")), j);
  Json bad = j;
  bad["devices"][0]["queue_length"][0]["max_length"].erase(0);
  EXPECT_THROW(trace_series_from_json(bad, "e.json"), Error);
  bad = j;
  bad["devices"][0]["buckets"] = 401;
  EXPECT_THROW(trace_series_from_json(bad, "e.json"), Error);
  // A series one bucket short is named by its path; a span that ends before it starts too.
  for (const auto& [breakit, path] :
       std::vector<std::pair<std::function<void(Json&)>, std::string>>{
           {[](Json& x) { x["devices"][0]["copy_bandwidth"][0]["bytes"].erase(0); },
            "e.json.devices[0].copy_bandwidth[0]"},
           {[](Json& x) { x["devices"][0]["end_ns"] = -1; }, "e.json.devices[0]"}}) {
    bad = j;
    breakit(bad);
    try {
      trace_series_from_json(bad, "e.json");
      ADD_FAILURE() << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(trace_series_tables(ts).empty());
  // docs/kernels.md lists every field as core/evidence/trace_series.hpp declares it.
  std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/kernels.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const evidence::FieldDoc& f : evidence::field_docs<TraceSeries>("trace.time_series."))
    EXPECT_NE(doc.find(evidence::field_rows({f})), std::string::npos) << f.path;
}

// Past the caps (issue 46: one series per stream, 100,000 streams wrote 1.86 GB): 20 streams on
// device 0, stream s's row s + 1 µs long, all queued at 0: the 16 longest streams keep a series,
// streams 0..3 are one summed series (4 rows queued at once: length 4) with their 10 µs; 18 copy
// kinds, kind k moving k + 1 bytes: 16 kept, 2 summed; 20 devices: the 16 busiest keep series.
TEST(TraceSeries, StreamsCopyKindsAndDevicesPastTheCapsAreFoldedAndSaidSo) {
  Json events = Json::array();
  int64_t corr = 0;
  auto row = [&](int64_t device, int64_t stream, double dur, const std::string& name,
                 const char* cat, int64_t bytes) {
    const int64_t c = ++corr;
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"},
                      {"pid", 1}, {"tid", 1}, {"ts", 0}, {"dur", 0.5},
                      {"args", {{"correlation", c}}}});
    Json args = {{"correlation", c}, {"device", device}, {"stream", stream}};
    if (bytes >= 0) args["bytes"] = bytes;
    events.push_back({{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 0}, {"tid", stream},
                      {"ts", 10}, {"dur", dur}, {"args", args}});
  };
  for (int s = 0; s < 20; ++s) row(0, s, s + 1, "k", "kernel", -1);
  for (int k = 0; k < 18; ++k)
    row(0, 100, 0.001, "Memcpy kind " + std::to_string(100 + k), "gpu_memcpy", k + 1);
  for (int d = 1; d < 20; ++d) row(d, 7, d < 5 ? 0.001 : 100 + d, "k", "kernel", -1);
  const TraceSeries ts =
      read_trace_buffer(Json{{"traceEvents", events}}.dump(), "hand").summary.series;
  ASSERT_EQ(ts.devices.size(), 16u);
  EXPECT_EQ(ts.other_devices, 4);  // devices 1..4, 1 ns each
  EXPECT_EQ(ts.other_devices_ns, 4);
  const DeviceSeries& d = ts.devices[0];
  EXPECT_EQ(d.device, 0);
  ASSERT_EQ(d.queues.size(), 16u);  // streams 4..19 and the copy stream 100 (18 ns) fold too
  EXPECT_EQ(d.queues.front().stream, 4);
  EXPECT_EQ(d.queues.back().stream, 19);
  EXPECT_EQ(d.queues.back().device_ns, 20000);
  EXPECT_EQ(d.other_streams, 5);  // 0..3 and 100
  EXPECT_EQ(d.other_queue.device_ns, 10000 + 18);
  EXPECT_EQ(d.other_queue.max_length[0], 4 + 18);  // every folded row queued from 0
  ASSERT_EQ(d.copies.size(), 16u);
  EXPECT_EQ(d.copies.front().name, "Memcpy kind 102");  // kinds 100, 101 move the fewest bytes
  EXPECT_EQ(d.other_copies, 2);
  EXPECT_EQ(d.other_copy.name, "other");
  EXPECT_EQ(d.other_copy.rows, 2);
  double folded = 0;
  for (double b : d.other_copy.bytes) folded += b;
  EXPECT_NEAR(folded, 1.0 + 2.0, 1e-9);
  // The evidence says so, and reads back equal; a cap it does not hold is refused.
  const Json j = to_json(ts);
  EXPECT_EQ(j["other_devices"]["devices"], 4);
  EXPECT_EQ(j["devices"][0]["queue_length_other_streams"]["streams"], 5);
  EXPECT_EQ(j["devices"][0]["copy_bandwidth_other_kinds"]["kinds"], 2);
  EXPECT_TRUE(j["devices"][1]["queue_length_other_streams"].is_null());
  EXPECT_EQ(to_json(trace_series_from_json(j, "e.json")), j);
  Json bad = j;
  bad["max_streams"] = 17;
  EXPECT_THROW(trace_series_from_json(bad, "e.json"), Error);
  bad = j;
  bad["devices"][0]["queue_length"].push_back(j["devices"][0]["queue_length"][0]);
  EXPECT_THROW(trace_series_from_json(bad, "e.json"), Error);
  bad = j;
  bad["devices"][0]["queue_length_other_streams"]["streams"] = 0;
  EXPECT_THROW(trace_series_from_json(bad, "e.json"), Error);
  const std::string text = trace_series_tables(ts)[0].render();
  EXPECT_NE(text.find("queue length, 5 other streams (summed)"), std::string::npos) << text;
  EXPECT_NE(text.find("4 other device(s)"), std::string::npos) << text;
}

// The per-stream and per-device rows past the same caps (issue 46: 3,000 streams wrote 2.8 MB of
// rows for a 0.86 MB trace): 20 streams on device 0, stream s's row s + 1 µs long, and 19 more
// devices, device d's row 100 + d µs long for d >= 5, 1 ns for d < 5. Streams: the 16 longest
// are kept (devices 5..19's streams and device 0's stream 19), 19 + 4 folded; devices: the 16
// busiest (device 0 and 5..19), devices 1..4 folded.
TEST(TraceStats, StreamAndDeviceRowsPastTheCapsAreFoldedAndSaidSo) {
  Json events = Json::array();
  int64_t corr = 0;
  auto row = [&](int64_t device, int64_t stream, double dur) {
    const int64_t c = ++corr;
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"},
                      {"pid", 1}, {"tid", 1}, {"ts", 0}, {"dur", 0.5},
                      {"args", {{"correlation", c}}}});
    events.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"pid", device},
                      {"tid", stream}, {"ts", 10}, {"dur", dur},
                      {"args", {{"correlation", c}, {"device", device}, {"stream", stream}}}});
  };
  for (int s = 0; s < 20; ++s) row(0, s, s + 1);
  for (int d = 1; d < 20; ++d) row(d, 7, d < 5 ? 0.001 : 100 + d);
  const TraceResult res = read_trace_buffer(Json{{"traceEvents", events}}.dump(), "hand");
  const TraceStats& st = res.summary.stats;
  ASSERT_EQ(st.streams.size(), 16u);
  EXPECT_EQ(st.streams.front().device, 0);
  EXPECT_EQ(st.streams.front().stream, 19);  // 20 µs, the 16th longest
  EXPECT_EQ(st.streams[1].device, 5);
  EXPECT_EQ(st.streams.back().device, 19);
  EXPECT_EQ(st.other_streams.streams, 19 + 4);  // device 0's streams 0..18, devices 1..4
  EXPECT_EQ(st.other_streams.rows, 23);
  EXPECT_EQ(st.other_streams.sum_ns, 190000 + 4);  // 1 + ... + 19 µs and 4 x 1 ns
  EXPECT_EQ(st.queues.size(), 16u);
  EXPECT_EQ(st.other_queues.queues, 23);
  EXPECT_EQ(st.other_queues.rows, 23);
  ASSERT_EQ(st.idle.size(), 16u);
  EXPECT_EQ(st.idle.front().device, 0);
  EXPECT_EQ(st.idle[1].device, 5);
  EXPECT_EQ(st.other_idle.devices, 4);
  const KernelTable& t = res.table;
  ASSERT_EQ(t.devices.size(), 16u);
  EXPECT_EQ(t.devices[1].device, 5);
  EXPECT_EQ(t.other_devices, 4);
  EXPECT_EQ(t.other_device.totals.events, 4);
  EXPECT_EQ(t.other_device.totals.sum_ns, 4);
  // The totals still count every device.
  EXPECT_EQ(t.totals.events, 39);
  // The evidence says so and reads back equal.
  const Json j = to_json(st);
  EXPECT_EQ(j["other_streams"]["streams"], 23);
  EXPECT_EQ(j["other_queue_length"]["queues"], 23);
  EXPECT_EQ(j["other_idle_split"]["devices"], 4);
  EXPECT_EQ(to_json(trace_stats_from_json(j, "e.json")), j);
  const Json tj = to_json(t);
  EXPECT_EQ(tj["other_devices"]["devices"], 4);
  EXPECT_EQ(to_json(kernel_table_from_json(tj, "e.json")), tj);
  Json bad = j;
  bad["other_streams"]["streams"] = 0;
  EXPECT_THROW(trace_stats_from_json(bad, "e.json"), Error);
  bad = j;
  bad["other_idle_split"]["idle_ns"] = -1;
  EXPECT_THROW(trace_stats_from_json(bad, "e.json"), Error);
  bad = tj;
  bad["other_devices"]["devices"] = 0;
  EXPECT_THROW(kernel_table_from_json(bad, "e.json"), Error);
  // The printed tables name what was folded.
  std::string text;
  for (const Table& x : trace_stats_tables(st, 0)) text += x.render();
  EXPECT_NE(text.find("23 more streams folded"), std::string::npos) << text;
  EXPECT_NE(text.find("4 more devices folded"), std::string::npos) << text;
  text.clear();
  for (const Table& x : kernel_table_tables(t, 0)) text += x.render();
  EXPECT_NE(text.find("4 more are folded"), std::string::npos) << text;
}

// The statistics' fields are declared once (core/evidence/trace_stats.hpp): docs/kernels.md lists
// every one as the table gives it; a hand-made TraceStats reads back as written; and each rule
// between an object's fields refuses a broken copy naming the object's path.
TEST(TraceStatsFields, DocsListRoundTripAndTheRulesBetweenFields) {
  std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/kernels.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  for (const auto& docs : {evidence::field_docs<TraceStats>("trace."),
                           evidence::field_docs<OtherIdle>("trace.other_idle_split.")}) {
    for (const evidence::FieldDoc& d : docs) {
      const std::string row = evidence::field_rows({d});
      EXPECT_NE(doc.find(row), std::string::npos) << "docs/kernels.md lacks the row:\n" << row;
    }
  }
  TraceStats st;
  st.streams.push_back({0, 7, 3, 2, 1, 0, 500, 40, 0, 540, 520, 100, 10, 900, 1.0, 0.6});
  st.idle.push_back({0, 300, 2, 100, 150, 50, 1});
  st.launch.kernels = 2;
  st.launch.with_launch = 2;
  st.launch.launch_call = {2, 10, 4, 4, 6, 6, 6, 5.0};
  st.launch.per_kernel.push_back({"gemm", 2, 10, 30, 1, 500});
  st.queues.push_back({0, 7, 2, 1, 5, 905, 2, 0.9, {100, 600, 200}});
  st.copies.push_back({"Memcpy HtoD", ActivityKind::kMemcpy, 1, 1, 4096, 40, 1.024e11});
  st.host_ops.ops = 3;
  st.host_ops.top_level_ops = 2;
  st.host_ops.by_name.push_back({"aten::mm", 2, 2, 2, 500});
  st.other_idle = {1, 10, 1, 10, 0, 0, 1};
  const Json j = to_json(st);
  EXPECT_DOUBLE_EQ(j["idle_split"][0]["kernel_wait_ratio"].get<double>(), 0.5);
  EXPECT_FALSE(j.contains("other_streams"));  // nothing folded: absent
  EXPECT_EQ(j["other_idle_split"]["devices"], 1);
  EXPECT_EQ(to_json(trace_stats_from_json(j, "e.json")), j);
  // Each broken copy: the path it must name.
  const std::vector<std::pair<std::function<void(Json&)>, std::string>> broken = {
      {[](Json& x) { x["idle_split"][0]["host_wait_ns"] = 400; }, "e.json.idle_split[0]"},
      {[](Json& x) { x["idle_split"][0]["unlaunched_ns"] = 40; }, "e.json.idle_split[0]"},
      {[](Json& x) { x["idle_split"][0]["host_wait_ratio"] = 0.5; }, "e.json.idle_split[0]"},
      {[](Json& x) { x["launches"]["with_launch"] = 3; }, "e.json.launches"},
      {[](Json& x) { x["launches"]["launch_call"]["p90_ns"] = 3; }, "e.json.launches.launch_call"},
      {[](Json& x) { x["launches"]["per_kernel"][0]["shorter_than_launch"] = 3; },
       "e.json.launches.per_kernel[0]"},
      {[](Json& x) { x["queue_length"][0]["time_at_length_ns"][1] = 601; },
       "e.json.queue_length[0]"},
      {[](Json& x) { x["queue_length"][0]["max_length"] = 3; }, "e.json.queue_length[0]"},
      {[](Json& x) { x["copies"][0]["kind"] = "kernel"; }, "e.json.copies[0]"},
      {[](Json& x) { x["copies"][0]["rows_with_bytes"] = 2; }, "e.json.copies[0]"},
      {[](Json& x) { x["host_ops"]["top_level_ops"] = 4; }, "e.json.host_ops"},
      {[](Json& x) { x["host_ops"]["by_name"][0]["top_level_calls"] = 3; },
       "e.json.host_ops.by_name[0]"},
      {[](Json& x) { x["streams"][0]["concurrent_ns"] = 521; }, "e.json.streams[0]"},
      {[](Json& x) { x["streams"][0].erase("busy_ns"); }, "e.json.streams[0]"},
      {[](Json& x) { x["other_idle_split"]["devices"] = 0; }, "e.json.other_idle_split"},
      {[](Json& x) { x["other_idle_split"]["gaps"] = 0; }, "e.json.other_idle_split"},
  };
  for (const auto& [breakit, path] : broken) {
    Json bad = j;
    breakit(bad);
    try {
      trace_stats_from_json(bad, "e.json");
      ADD_FAILURE() << "read: " << bad.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// A trace's own facts are declared once (core/evidence/trace_facts.hpp): docs/kernels.md lists
// every field, a hand-made TraceFacts reads back as written, and broken copies are refused naming
// their path.
TEST(TraceFactsFields, DocsListRoundTripAndBrokenCopies) {
  std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/kernels.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const evidence::FieldDoc& d : evidence::field_docs<TraceFacts>("trace."))
    EXPECT_NE(doc.find(evidence::field_rows({d})), std::string::npos) << d.path;
  TraceFacts f;
  f.source = "t.json";
  f.events = 10;
  f.categories = {{"kernel", 4}, {"cpu_op", 6}};
  f.devices.push_back({0, "NVIDIA H100 80GB HBM3", 9, 0, 85017493504, 132});
  f.steps.push_back({3, 1000, 5000});
  f.health.messages = {"a warning"};
  const Json j = evidence::to_json(f);
  EXPECT_EQ(j["profiler_steps"][0]["duration_ns"], 4000);
  EXPECT_EQ(evidence::to_json(evidence::from_json<TraceFacts>(j, "e.json")), j);
  const std::vector<std::pair<std::function<void(Json&)>, std::string>> broken = {
      {[](Json& x) { x["categories"]["kernel"] = 11; }, "e.json.categories"},
      {[](Json& x) { x["profiler_steps"][0]["end_ns"] = 999; }, "e.json.profiler_steps[0]"},
      {[](Json& x) { x["profiler_steps"][0]["duration_ns"] = 1; }, "e.json.profiler_steps[0]"},
      {[](Json& x) { x["device_properties"][0]["compute_major"] = 100; },
       "e.json.device_properties[0]"},
      {[](Json& x) { x["rank"] = -2; }, "field 'rank'"},
      {[](Json& x) { x["health"].erase("messages"); }, "e.json.health"},
  };
  for (const auto& [breakit, path] : broken) {
    Json bad = j;
    breakit(bad);
    try {
      evidence::from_json<TraceFacts>(bad, "e.json");
      ADD_FAILURE() << "read: " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST(KernelLabel, TensorIteratorLaunchersByTheirOperation) {
  EXPECT_EQ(kernel_label("void at::native::elementwise_kernel<128, 2, "
                         "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, "
                         "float, float, at::native::binary_internal::MulFunctor<float> > >("
                         "at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, "
                         "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>"
                         "(int, at::native::gpu_kernel_impl_nocast<>)"),
            "elementwise(mul)");
  EXPECT_EQ(kernel_label("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
                         "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, "
                         "4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, "
                         "float, float>, unsigned int, float, 4, 4>)"),
            "reduce(mean)");
  EXPECT_EQ(kernel_label("void at::native::vectorized_elementwise_kernel<4, "
                         "at::native::rsqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::"
                         "operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int)"),
            "elementwise(rsqrt)");
  EXPECT_EQ(kernel_label("void at::native::vectorized_elementwise_kernel<4, "
                         "at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul> >(int, "
                         "at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)"),
            "elementwise(add)");
  // Anything else: its short name.
  EXPECT_EQ(kernel_label("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN"),
            short_kernel_name("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", 40));
  EXPECT_EQ(kernel_label("void at::native::elementwise_kernel<128, 2, foo>(int)"),
            short_kernel_name("void at::native::elementwise_kernel<128, 2, foo>(int)", 40));
}

}  // namespace
}  // namespace tprobe::core
