// The cost probes' points and the raw memory file's facts declared in core/evidence
// (cost_points.hpp, step_memory.hpp): each table writes the keys its hand-written writer wrote, in
// the same order, reads back what it wrote, refuses a missing or mistyped field with one line
// naming the object and the field, and docs/profile.md and docs/levers.md hold its field list.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/error_of.hpp"
#include "tprobe/core/evidence/cost_points.hpp"
#include "tprobe/core/evidence/step_memory.hpp"

namespace tprobe::core {
namespace {

using testing_support::error_of;
using testing_support::names;

std::vector<std::string> keys(const Json& j) {
  std::vector<std::string> out;
  for (const auto& [k, v] : j.items()) out.push_back(k);
  return out;
}

// Written, read back (as the object and through its text, as a file is read), written again.
template <typename S>
void expect_round_trip(const S& s) {
  const Json j = evidence::to_json(s);
  EXPECT_EQ(evidence::to_json(evidence::from_json<S>(j, "x")), j);
  EXPECT_EQ(evidence::to_json(evidence::from_json<S>(Json::parse(j.dump()), "x")), j);
}

// `j` with `key` removed, or set to `value`: the reader's one-line error.
template <typename S>
std::string broken(Json j, const char* key, const Json* value = nullptr) {
  if (value) {
    j[key] = *value;
  } else {
    j.erase(key);
  }
  const std::string e = error_of([&] { evidence::from_json<S>(j, "p.json results.x"); });
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_TRUE(names(e, "p.json results.x"));
  return e;
}

TEST(CostPointsFields, MemoryFitPointKeepsItsKeysAndRefusesBrokenOnes) {
  MemoryFitPoint p{2, 4096, 30'000'000'000, 31'000'000'000, false};
  const Json j = evidence::to_json(p);
  EXPECT_EQ(keys(j), (std::vector<std::string>{"batch", "width", "peak_allocated_bytes",
                                               "peak_reserved_bytes", "oom"}));
  EXPECT_EQ(j["peak_reserved_bytes"], 31'000'000'000);
  expect_round_trip(p);
  p.oom = true;
  p.batch = kMaxMemoryFitBatch;  // the bound itself is a shape the model accepts
  expect_round_trip(p);
  EXPECT_TRUE(names(broken<MemoryFitPoint>(j, "oom"), "missing field 'oom'"));
  const Json text = "2", past = kMaxMemoryFitBatch + 1, zero = 0, negative = -1;
  EXPECT_TRUE(names(broken<MemoryFitPoint>(j, "batch", &text), "field 'batch'"));
  EXPECT_TRUE(names(broken<MemoryFitPoint>(j, "batch", &past), "field 'batch'"));
  EXPECT_TRUE(names(broken<MemoryFitPoint>(j, "width", &zero), "field 'width'"));
  EXPECT_TRUE(names(broken<MemoryFitPoint>(j, "peak_allocated_bytes", &negative),
                    "field 'peak_allocated_bytes'"));
}

TEST(CostPointsFields, EdgeSearchProbeKeepsItsKeysAndRefusesBrokenOnes) {
  EdgeSearchProbe p;
  p.batch = 2;
  p.width = 8192;
  p.outcome = "oom";
  p.steps = 3;
  p.peak_reserved_bytes = 77'000'000'000;
  p.wall_s = 4.25;
  p.message = "CUDA out of memory";
  const Json j = evidence::to_json(p);
  EXPECT_EQ(keys(j), (std::vector<std::string>{"batch", "width", "outcome", "steps",
                                               "peak_allocated_bytes", "peak_reserved_bytes",
                                               "wall_s", "message"}));
  EXPECT_TRUE(j["peak_allocated_bytes"].is_null());  // not measured: null, the key still there
  expect_round_trip(p);
  EXPECT_TRUE(names(broken<EdgeSearchProbe>(j, "wall_s"), "missing field 'wall_s'"));
  const Json text = "3", many = 1001, negative = -5;
  EXPECT_TRUE(names(broken<EdgeSearchProbe>(j, "steps", &text), "field 'steps'"));
  EXPECT_TRUE(names(broken<EdgeSearchProbe>(j, "steps", &many), "field 'steps'"));
  EXPECT_TRUE(names(broken<EdgeSearchProbe>(j, "peak_reserved_bytes", &negative),
                    "field 'peak_reserved_bytes'"));
}

TEST(CostPointsFields, LeverEdgeProbeAndFiguresKeepTheirKeysAndRefuseBrokenOnes) {
  EdgeProbe e;
  e.batch = 4;
  e.outcome = "ok";
  e.peak_allocated_bytes = 50'000'000'000;
  e.peak_reserved_bytes = 52'000'000'000;
  e.uncapped = true;
  const Json je = evidence::to_json(e);
  EXPECT_EQ(keys(je), (std::vector<std::string>{"batch", "outcome", "peak_allocated_bytes",
                                                "peak_reserved_bytes", "message", "uncapped"}));
  expect_round_trip(e);
  const Json one = 1;
  EXPECT_TRUE(names(broken<EdgeProbe>(je, "uncapped", &one), "field 'uncapped'"));
  EXPECT_TRUE(names(broken<EdgeProbe>(je, "outcome"), "missing field 'outcome'"));

  LeverFigures f;
  f.samples_s = {1.0, 1.25, 1.5};
  f.median_s = 1.25;
  f.min_s = 1.0;
  f.max_s = 1.5;
  f.peak_allocated_bytes = 20'000'000'000;
  f.performed_mfu_ratio = 0.31;
  const Json jf = evidence::to_json(f);
  EXPECT_EQ(keys(jf), (std::vector<std::string>{"samples_s", "median_s", "min_s", "max_s",
                                                "peak_allocated_bytes", "peak_reserved_bytes",
                                                "performed_mfu_ratio"}));
  expect_round_trip(f);
  expect_round_trip(LeverFigures{});  // a row that did not run: no samples, every figure null
  const Json texts = Json::array({"1.0"});
  EXPECT_TRUE(names(broken<LeverFigures>(jf, "samples_s"), "missing field 'samples_s'"));
  EXPECT_TRUE(names(broken<LeverFigures>(jf, "samples_s", &texts), "samples_s[0]"));
}

TEST(CostPointsFields, RawMemoryFactsKeepTheirKeysAndRefuseBrokenOnes) {
  MemoryFacts f;
  f.weights_bytes = 1000;
  f.lora_parameter_bytes = 100;
  f.lora_parameters = 25;
  f.lora_grad_ptrs = {208, uint64_t{1} << 63};  // an address past INT64_MAX
  f.optimizer_ran = true;
  f.optimizer_state_bytes = 200;
  const Json j = evidence::to_json(f);
  EXPECT_EQ(keys(j), (std::vector<std::string>{"weights_bytes", "lora_parameter_bytes",
                                               "lora_parameters", "lora_grad_ptrs",
                                               "checkpointing", "optimizer_ran",
                                               "optimizer_state_bytes"}));
  expect_round_trip(f);
  // A file from before --optimizer has no optimizer_state_bytes: read as 0.
  Json older = j;
  older.erase("optimizer_state_bytes");
  older["optimizer_ran"] = false;
  EXPECT_EQ(evidence::from_json<MemoryFacts>(older, "m").optimizer_state_bytes, 0);
  EXPECT_TRUE(names(broken<MemoryFacts>(j, "lora_parameters"), "missing field 'lora_parameters'"));
  const Json huge = kMaxMemoryBytes + 1, ptrs = Json::array({-1}), no = false;
  EXPECT_TRUE(names(broken<MemoryFacts>(j, "weights_bytes", &huge), "field 'weights_bytes'"));
  EXPECT_TRUE(names(broken<MemoryFacts>(j, "lora_grad_ptrs", &ptrs), "lora_grad_ptrs[0]"));
  EXPECT_TRUE(names(broken<MemoryFacts>(j, "optimizer_ran", &no), "'optimizer_ran' is false"));
}

TEST(CostPointsFields, TheDocsListTheTables) {
  auto read = [](const char* page) {
    std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/" + page);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string profile = read("profile.md"), levers = read("levers.md");
  ASSERT_FALSE(profile.empty() || levers.empty());
  const std::vector<std::pair<const std::string*, std::vector<evidence::FieldDoc>>> lists = {
      {&profile, evidence::field_docs<MemoryFitPoint>("memory_fit.fit.fitted[].")},
      {&profile, evidence::field_docs<EdgeSearchProbe>("memory_fit.budgets[].searches[].probes[].")},
      {&profile, evidence::field_docs<MemoryFacts>("facts.")},
      {&levers, evidence::field_docs<EdgeProbe>("memory_edge.rows[].probes[].")},
      {&levers, evidence::field_docs<LeverFigures>("rows[].")}};
  for (const auto& [doc, docs] : lists) {
    for (const evidence::FieldDoc& d : docs) {
      const std::string row = evidence::field_rows({d});
      EXPECT_NE(doc->find(row), std::string::npos) << "the docs lack the row:\n" << row;
    }
  }
}

}  // namespace
}  // namespace tprobe::core
