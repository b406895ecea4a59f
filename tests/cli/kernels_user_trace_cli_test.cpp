// End-to-end: `tprobe kernels` on the traces of the step most users run, recorded on the H200 by
// benchmarks/gpu/user-traces.sh — `model(input_ids, labels).loss.backward()` under PEFT with
// use_reentrant=False and with_stack=True (hf-sdpa-stack-nonreentrant-2x256.json.gz), and the
// same step inside the user's own record_function ranges with a side-stream copy and CUDA sync
// events (hf-sdpa-ranges-nonreentrant-2x256.json.gz) — and the negative controls of the rules
// that place its rows; the critical path of both against a plain-Python computation of its
// definition (tests/support/critical_path_reference.py).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "run_tprobe.hpp"
#include "support/gzip_text.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kDir = std::string(TPROBE_FIXTURES_DIR) + "/traces";
const std::string kStack = kDir + "/hf-sdpa-stack-nonreentrant-2x256.json.gz";
const std::string kRanges = kDir + "/hf-sdpa-ranges-nonreentrant-2x256.json.gz";
const std::string kReference =
    std::string(TPROBE_SOURCE_DIR) + "/tests/support/kernels_figures_reference.py";
const std::string kCriticalPathReference =
    std::string(TPROBE_SOURCE_DIR) + "/tests/support/critical_path_reference.py";

int shell(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool have_python() { return shell("python3 -c 'import json, decimal, gzip' >/dev/null 2>&1") == 0; }

json kernels_results(const std::vector<std::string>& args) {
  const std::string path = make_temp_dir() + "/k.json";
  std::vector<std::string> all = {"kernels"};
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--json");
  all.push_back(path);
  RunResult r = run_tprobe(all);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  return json::parse(read_text(path))["results"];
}

// The text with every "Sequence number" argument taken out (`"Sequence number": N, `).
std::string without_sequence_numbers(const std::string& text) {
  static const std::string key = "\"Sequence number\": ";
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  for (std::size_t k; (k = text.find(key, at)) != std::string::npos;) {
    out.append(text, at, k - at);
    std::size_t e = k + key.size();
    while (e < text.size() && text[e] >= '0' && text[e] <= '9') ++e;
    if (e < text.size() && text[e] == ',') ++e;
    while (e < text.size() && (text[e] == ' ' || text[e] == '\n')) ++e;
    at = e;
  }
  out.append(text, at, std::string::npos);
  return out;
}

// Every row of the standard non-reentrant trace is placed (issue: 4.84 % of its kernel time sat in
// backward ops without a flow: the engine's glue around a node); the negative control strips the
// sequence numbers the rule matches by, and exactly those rows come back untagged.
TEST(KernelsCli, NonReentrantFixtureIsPlacedAndItsGlueNeedsTheSequenceNumbers) {
  const json res = kernels_results({kStack, "--model", "gemma4-tiny"});
  const json& a = res["attribution"];
  EXPECT_EQ(a["rows"], 4689);
  EXPECT_EQ(a["untagged_rows"], 0);
  EXPECT_LE(a["untagged_kernel_share_ratio"].get<double>(), 0.005);
  EXPECT_GT(a["linked_evaluate_rows"].get<int64_t>(), 0);
  double sum = 0;
  for (const json& row : res["by_phase_part"]) sum += row["kernel_s"].get<double>();
  EXPECT_NEAR(sum, a["kernel_s"].get<double>(), 1e-9);

  const std::string dir = make_temp_dir();
  {
    std::ifstream in(kStack, std::ios::binary);
    const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(dir + "/stripped.json", std::ios::binary);
    out << without_sequence_numbers(testing_support::gunzip_text(gz));
  }
  const json control = kernels_results({dir + "/stripped.json", "--model", "gemma4-tiny"});
  const json& c = control["attribution"];
  EXPECT_EQ(c["rows"], 4689);
  EXPECT_EQ(c["linked_evaluate_rows"], 0);
  EXPECT_EQ(c["untagged_unlinked_rows"], a["linked_evaluate_rows"]);
  EXPECT_GT(c["untagged_kernel_share_ratio"].get<double>(), 0.04);
}

// Per-stream time, the user ranges, the repeated kernel sequences, the two time series and the
// engine-glue rows of both fixtures against tests/support/kernels_figures_reference.py: the same
// definitions computed with json + decimal alone, every figure compared (integers exactly, the
// bandwidth's floating sums to 1e-12 relative; the checker exits 1 on any difference).
TEST(KernelsCli, ThirdRoundFiguresEqualAPlainPythonComputation) {
  if (!have_python()) GTEST_SKIP() << "python3 is not installed: the Python check is skipped";
  for (const std::string& trace : {kRanges, kStack}) {
    const std::string dir = make_temp_dir();
    RunResult r = run_tprobe({"kernels", trace, "--json", dir + "/k.json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const int rc = shell("python3 " + kReference + " " + trace + " " + dir + "/k.json > " + dir +
                         "/py.txt 2>&1");
    EXPECT_EQ(rc, 0) << trace << "\n" << read_text(dir + "/py.txt");
    EXPECT_NE(read_text(dir + "/py.txt").find("0 difference(s)"), std::string::npos);
  }
}

// What the ranges fixture holds, as the text and the evidence say it: two streams (the side-stream
// copy the compute stream waits for), the user's ranges nested with autograd's rows borrowed from
// the training loop's thread, the RMSNorm's op-by-op chain as the first fusion candidate.
TEST(KernelsCli, RangesFixtureShowsStreamsRangesSequencesAndSeries) {
  const std::string dir = make_temp_dir();
  RunResult r = run_tprobe({"kernels", kRanges, "--json", dir + "/k.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json tr = json::parse(read_text(dir + "/k.json"))["results"]["trace"];
  ASSERT_EQ(tr["streams"].size(), 2u);
  EXPECT_EQ(tr["streams"][1]["memcpys"], 2);  // the two prefetches, one per step
  int64_t streams_sum = 0;
  for (const json& s : tr["streams"]) streams_sum += s["sum_ns"].get<int64_t>();
  const json& u = tr["user_ranges"];
  EXPECT_TRUE(u["available"].get<bool>());
  int64_t ranges_sum =
      u["outside"]["kernel_ns"].get<int64_t>() + u["outside"]["memcpy_memset_ns"].get<int64_t>();
  std::map<std::string, json> by_path;
  std::vector<std::string> paths;  // a tree: each row's parent (an earlier row) and its own name
  for (const json& row : u["rows"]) {
    ranges_sum += row["kernel_ns"].get<int64_t>() + row["memcpy_memset_ns"].get<int64_t>();
    const int64_t parent = row["parent"].get<int64_t>();
    ASSERT_LT(parent, static_cast<int64_t>(paths.size()));
    paths.push_back(parent < 0 ? row["name"].get<std::string>()
                               : paths[static_cast<std::size_t>(parent)] + " > " +
                                     row["name"].get<std::string>());
    EXPECT_FALSE(row.contains("path"));
    by_path[paths.back()] = row;
  }
  EXPECT_EQ(ranges_sum, streams_sum);  // every row once
  EXPECT_EQ(ranges_sum, u["total_ns"].get<int64_t>());
  ASSERT_TRUE(by_path.count("train_step > backward > backward_call"));
  EXPECT_GT(by_path["train_step > backward > backward_call"]["borrowed_rows"].get<int64_t>(), 0);
  EXPECT_EQ(by_path["train_step"]["inclusive_ns"].get<int64_t>(),
            ranges_sum - by_path["log_loss"]["inclusive_ns"].get<int64_t>() -
                u["outside"]["kernel_ns"].get<int64_t>() -
                u["outside"]["memcpy_memset_ns"].get<int64_t>());
  EXPECT_EQ(u["kineto_same"], u["kineto_checked"]);
  const json& first = tr["kernel_sequences"]["top"][0];
  std::string chain;
  for (const json& k : first["kernels"]) chain += k.get<std::string>() + "\n";
  for (const char* op : {"pow_tensor_scalar", "MeanOps", "rsqrt_kernel_cuda", "MulFunctor"})
    EXPECT_NE(chain.find(op), std::string::npos) << op;
  EXPECT_EQ(tr["time_series"]["devices"][0]["buckets"], 400);
  for (const char* title : {"Device time per stream", "Device time by the user's own ranges",
                            "Repeated kernel sequences", "Time series"}) {
    EXPECT_NE(r.out.find(title), std::string::npos) << title;
  }
}

// Every figure of `results.trace.critical_path` against the reference's, exactly: the scalars,
// the edges and graph counts, every step, phase and host event, and the device time by kernel
// family (the reference's per-name figures added up with the kernel table's own families).
void expect_same_path(const json& results, const json& py, const std::string& what) {
  SCOPED_TRACE(what);
  const json& cp = results["trace"]["critical_path"];
  ASSERT_TRUE(cp["available"].get<bool>()) << cp["why_not"];
  ASSERT_TRUE(py["available"].get<bool>());
  int checked = 0;
  for (const auto& [key, value] : py.items()) {
    if (value.is_number() || value.is_boolean()) {
      EXPECT_EQ(cp[key], value) << key;
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
  for (const char* group : {"edges_on_path", "graph", "outside_steps"}) {
    for (const auto& [key, value] : cp[group].items()) {
      if (!value.is_number_integer()) continue;
      EXPECT_EQ(value, py[group].value(key, json(0))) << group << "." << key;
    }
  }
  for (const char* list : {"by_step", "by_phase"}) {
    ASSERT_EQ(cp[list].size(), py[list].size()) << list;
    for (std::size_t i = 0; i < py[list].size(); ++i) {
      for (const auto& [key, value] : py[list][i].items())
        EXPECT_EQ(cp[list][i][key], value) << list << "[" << i << "]." << key;
    }
  }
  ASSERT_EQ(cp["host_ops"].size(), py["host_ops"].size());
  for (std::size_t i = 0; i < py["host_ops"].size(); ++i) {
    for (const char* key : {"name", "kind", "ns", "events"})
      EXPECT_EQ(cp["host_ops"][i][key], py["host_ops"][i][key]) << "host_ops[" << i << "]." << key;
  }
  std::map<std::string, std::string> family;
  for (const json& k : results["kernel_table"]["kernels"])
    family[k["name"].get<std::string>()] = k["family"].get<std::string>();
  std::map<std::string, std::pair<int64_t, int64_t>> expected, got;
  for (const auto& [name, v] : py["device_ns_by_name"].items()) {
    auto& e = expected[family.count(name) ? family[name] : name];
    e.first += v["ns"].get<int64_t>();
    e.second += v["rows"].get<int64_t>();
  }
  for (const json& k : cp["kernels"])
    got[k["family"].get<std::string>()] = {k["ns"].get<int64_t>(), k["rows"].get<int64_t>()};
  EXPECT_EQ(got, expected);
}

json reference_path(const std::string& trace, const std::string& args) {
  const std::string dir = make_temp_dir();
  const int rc = shell("python3 " + kCriticalPathReference + " " + trace + " " + args + " > " +
                       dir + "/py.json 2> " + dir + "/py.err");
  EXPECT_EQ(rc, 0) << read_text(dir + "/py.err");
  return json::parse(read_text(dir + "/py.json"));
}

// The real H200 traces: the ranges fixture (a side-stream copy the compute stream waits for,
// stream and context syncs, cudaEventQuery, two steps) whole and one step, and the fixture
// recorded without sync events (its blocking calls' targets inferred from their names).
// (python3 tests/support/critical_path_reference.py TRACE [--step N] prints the reference's
// figures.)
TEST(KernelsCli, CriticalPathEqualsAPlainPythonComputation) {
  if (!have_python()) GTEST_SKIP() << "python3 is not installed: the Python check is skipped";
  const json whole = kernels_results({kRanges});
  expect_same_path(whole, reference_path(kRanges, ""), "ranges fixture, both steps");
  const json& cp = whole["trace"]["critical_path"];
  // The small step is launch-bound throughout: the host holds the path.
  EXPECT_EQ(cp["bound"], "host");
  EXPECT_GT(cp["host_ratio"].get<double>(), 0.99);
  EXPECT_EQ(cp["graph"]["stream_wait_events"], 2);
  EXPECT_EQ(cp["graph"]["wait_edges"], 2);
  EXPECT_EQ(cp["graph"]["event_queries"], 2);
  EXPECT_EQ(cp["graph"]["sync_edges"], 9);
  EXPECT_EQ(cp["edges_on_path"]["join"], 2);  // autograd's worker, once a step

  expect_same_path(kernels_results({kRanges, "--step", "3"}), reference_path(kRanges, "--step 3"),
                   "ranges fixture, step 3");
  const std::string plain = kDir + "/hf-sdpa-2x256.json.gz";
  const json no_syncs = kernels_results({plain});
  expect_same_path(no_syncs, reference_path(plain, ""), "fixture without sync events");
  EXPECT_GT(no_syncs["trace"]["critical_path"]["graph"]["inferred_syncs"].get<int64_t>(), 0);
}

// The report draws the critical path from the kernels evidence: host / device / delay for the
// whole path, each step and each phase, and its host-event and kernel tables; a damaged
// critical_path object is named as absent, the rest of the section is drawn.
TEST(KernelsCli, ReportDrawsTheCriticalPath) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_tprobe({"kernels", kRanges, "--json", dir + "/kernels.json"}).exit_code, 0);
  const json results = json::parse(read_text(dir + "/kernels.json"))["results"];
  ASSERT_EQ(run_tprobe({"report", dir}).exit_code, 0);
  const std::string html = read_text(dir + "/report.html");
  const std::size_t at = html.find("<figure id=\"fig-kernels-critical-path\">");
  ASSERT_NE(at, std::string::npos);
  const std::string fig = html.substr(at, html.find("</figure>", at) - at);
  EXPECT_NE(fig.find("launch-bound (host)"), std::string::npos);
  for (const char* label : {"whole path", "ProfilerStep#2", "ProfilerStep#3", "forward",
                            "backward", "results.trace.critical_path.by_phase[]"}) {
    EXPECT_NE(fig.find(label), std::string::npos) << label;
  }
  for (const char* id : {"tab-kernels-critical-path-host", "tab-kernels-critical-path-kernels"})
    EXPECT_NE(html.find(id), std::string::npos) << id;
  // The first host event of the evidence is the first row of the table.
  const std::string first = results["trace"]["critical_path"]["host_ops"][0]["name"];
  const std::size_t tab = html.find("tab-kernels-critical-path-host");
  EXPECT_NE(html.find(first.substr(0, 30), tab), std::string::npos) << first;

  json damaged = json::parse(read_text(dir + "/kernels.json"));
  damaged["results"]["trace"]["critical_path"]["length_ns"] = -5;
  const std::string bad = make_temp_dir();
  std::ofstream(bad + "/kernels.json") << damaged.dump();
  ASSERT_EQ(run_tprobe({"report", bad}).exit_code, 0);
  const std::string page = read_text(bad + "/report.html");
  EXPECT_EQ(page.find("fig-kernels-critical-path"), std::string::npos);
  EXPECT_NE(page.find("results.trace.critical_path"), std::string::npos);
  EXPECT_NE(page.find("fig-kernels-streams"), std::string::npos);  // the rest is drawn
}

}  // namespace
}  // namespace tprobe::testing
