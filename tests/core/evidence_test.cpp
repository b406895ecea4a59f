// The evidence envelope: keys, outcome, diagnostics, round trip, and the reader's checks.
#include "tprobe/core/base/evidence.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"

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

}  // namespace
}  // namespace tprobe::core
