// The evidence envelope: keys, outcome, diagnostics, round trip, and the reader's checks.
#include "tprobe/core/base/evidence.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"

namespace tprobe::core {
namespace {

TEST(Evidence, EnvelopeHasEveryTopLevelKeyInOrder) {
  Evidence ev("padding", {"tprobe", "padding", "--batch", "2"});
  ev.options()["micro_batch"] = 2;
  ev.results()["waste_ratio"] = 0.25;
  ev.diagnose(Severity::kWarning, "noop_sweep", "nothing varied");
  ev.set_outcome(Outcome::kNo);
  Json doc = ev.to_json();
  std::vector<std::string> keys;
  for (auto it = doc.begin(); it != doc.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"schema", "tool", "invocation", "environment", "status",
                                            "results"}));
  EXPECT_EQ(doc["schema"]["name"], "tprobe.padding");
  EXPECT_EQ(doc["schema"]["version"], kEvidenceSchemaVersion);
  EXPECT_EQ(doc["invocation"]["argv"].size(), 4u);
  EXPECT_EQ(doc["invocation"]["options"]["micro_batch"], 2);
  EXPECT_EQ(doc["status"]["outcome"], "no");
  ASSERT_EQ(doc["status"]["diagnostics"].size(), 1u);
  EXPECT_EQ(doc["status"]["diagnostics"][0]["code"], "noop_sweep");
  EXPECT_EQ(doc["status"]["diagnostics"][0]["severity"], "warning");
  EXPECT_DOUBLE_EQ(doc["results"]["waste_ratio"].get<double>(), 0.25);
  const std::string ts = doc["invocation"]["started_at"];
  ASSERT_EQ(ts.size(), 24u);
  EXPECT_EQ(ts.back(), 'Z');
  EXPECT_EQ(ts[10], 'T');
}

TEST(Evidence, WriteThenReadBack) {
  std::string dir = testing_support::temp_dir();
  Evidence ev("bucket", {"tprobe"});
  ev.results()["sweep"] = Json::array({{{"bucket", 2}}});
  ev.write(dir + "/b.json");
  Json doc = read_evidence_file(dir + "/b.json", "bucket");
  EXPECT_EQ(doc["results"]["sweep"][0]["bucket"], 2);
  EXPECT_THROW(read_evidence_file(dir + "/b.json", "padding"), Error);
}

// Indented up to 256 KiB of compact JSON, compact past it; both read back whole.
TEST(Evidence, LargeEvidenceIsWrittenCompactAndReadsBack) {
  std::string dir = testing_support::temp_dir();
  auto written = [&](const std::string& name, int64_t n) {
    Evidence ev("bucket", {"tprobe"});
    Json rows = Json::array();
    for (int64_t i = 0; i < n; ++i) rows.push_back({{"bucket", i}, {"tokens", 3 * i}});
    ev.results()["sweep"] = rows;
    ev.write(dir + "/" + name);
    std::ifstream in(dir + "/" + name, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Json doc = read_evidence_file(dir + "/" + name, "bucket");
    EXPECT_EQ(doc["results"]["sweep"], rows) << name;
    return text;
  };
  const std::string small = written("small.json", 1000);  // ~30 KB compact: indented
  EXPECT_NE(small.find("\n  \"results\""), std::string::npos);
  const std::string big = written("big.json", 60000);  // ~2 MB compact: compact
  EXPECT_EQ(std::count(big.begin(), big.end(), '\n'), 1);
  EXPECT_GT(big.size(), std::size_t{1} << 20);
}

TEST(Evidence, ReaderRejectsBrokenFiles) {
  std::string dir = testing_support::temp_dir();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  EXPECT_THROW(read_evidence_file(dir + "/absent.json", ""), Error);
  EXPECT_THROW(read_evidence_file(write("trunc.json", "{\"schema\": {\"name\""), ""), Error);
  EXPECT_THROW(read_evidence_file(write("array.json", "[1,2]"), ""), Error);
  EXPECT_THROW(read_evidence_file(write("noschema.json", "{\"results\":{}}"), ""), Error);
  EXPECT_THROW(
      read_evidence_file(
          write("v99.json", R"({"schema":{"name":"tprobe.x","version":99},"results":{}})"), "x"),
      Error);
  EXPECT_THROW(
      read_evidence_file(write("nores.json", R"({"schema":{"name":"tprobe.x","version":1}})"), "x"),
      Error);
  try {
    read_evidence_file(write("named.json", "not json"), "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("named.json"), std::string::npos);
  }
}

// A field written twice is checked by writing it again; the keys' order is not a difference (a
// file sorted by another JSON tool is the same evidence), a value is.
TEST(Evidence, CheckRewrittenIgnoresKeyOrderOnly) {
  const Json written = Json::parse(R"({"b": 1, "a": {"y": [1, 2], "x": "s"}})");
  const Json sorted = Json::parse(R"({"a": {"x": "s", "y": [1, 2]}, "b": 1})");
  EXPECT_NO_THROW(json_read::check_rewritten(sorted, written, "r"));
  const Json changed = Json::parse(R"({"a": {"x": "s", "y": [2, 1]}, "b": 1})");
  try {
    json_read::check_rewritten(changed, written, "r");
    ADD_FAILURE() << "a changed value was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("r.a.y.0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tprobe::core
