// tprobe_cupti without a GPU: step tags, attribution of records to phase and part, the raw trace
// reader (and its refusals of broken files) and the replay source.
#include "tprobe/cupti/kernel_source.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::cupti {
namespace {

using model::StepPart;
using model::StepPhase;

std::string fixture() { return std::string(TPROBE_FIXTURES_DIR) + "/raw_trace_small.json"; }

TEST(StepTags, RoundTripEveryPhaseAndPart) {
  std::set<int64_t> ids;
  for (auto phase : {StepPhase::kForward, StepPhase::kBackward, StepPhase::kLoss}) {
    for (auto part : {StepPart::kOther, StepPart::kSlidingAttention, StepPart::kFullAttention,
                      StepPart::kDenseMlp, StepPart::kExperts, StepPart::kLossHead}) {
      const int64_t id = tag_id(phase, part);
      EXPECT_TRUE(ids.insert(id).second) << id;
      StepPhase ph;
      StepPart pa;
      ASSERT_TRUE(decode_tag(id, &ph, &pa));
      EXPECT_EQ(ph, phase);
      EXPECT_EQ(pa, part);
    }
  }
  StepPhase ph;
  StepPart pa;
  EXPECT_FALSE(decode_tag(0, &ph, &pa));
  EXPECT_FALSE(decode_tag(19, &ph, &pa));
  EXPECT_EQ(tag_id(StepPhase::kForward, StepPart::kOther), 1);
  EXPECT_EQ(tag_id(StepPhase::kLoss, StepPart::kLossHead), 18);
}

TEST(ReplaySource, AttributesTheRecordedTrace) {
  auto src = make_replay_source(fixture());
  std::string why;
  ASSERT_TRUE(src->usable(&why));
  src->begin();
  src->enter(StepPhase::kForward, StepPart::kOther);
  src->leave();
  src->end();
  TraceCapture c = src->take();
  EXPECT_FALSE(c.refused);
  ASSERT_EQ(c.records.size(), 8u);
  EXPECT_EQ(c.dropped_records, 3);
  EXPECT_EQ(c.untagged_records, 1);  // correlation 16
  EXPECT_EQ(c.records[1].phase, "forward");
  EXPECT_EQ(c.records[1].part, "sliding_attention");
  EXPECT_EQ(c.records[3].phase, "backward");
  EXPECT_EQ(c.records[3].part, "full_attention");
  EXPECT_EQ(c.records[5].phase, "backward");  // untagged: the autograd engine's own launch
  EXPECT_EQ(c.records[5].part, "other");
  EXPECT_EQ(c.records[0].grid[0], 64);
  EXPECT_EQ(c.records[0].shared_memory_bytes, 65536);

  std::vector<PhaseRow> rows = phase_rows(c.records);
  // forward rows first, then loss, then backward; parts alphabetical within a phase
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].phase + "/" + rows[0].part, "forward/experts");
  EXPECT_EQ(rows[0].kernel_ns, 500);
  EXPECT_EQ(rows[1].phase + "/" + rows[1].part, "forward/other");
  EXPECT_EQ(rows[1].kernels, 0);
  EXPECT_EQ(rows[1].memcpy_memset_ns, 400);
  EXPECT_EQ(rows[2].phase + "/" + rows[2].part, "forward/sliding_attention");
  EXPECT_EQ(rows[2].kernels, 2);
  EXPECT_EQ(rows[2].kernel_ns, 6000);
  EXPECT_EQ(rows[3].phase + "/" + rows[3].part, "loss/loss_head");
  EXPECT_EQ(rows[3].memcpy_memset_ns, 100);
  EXPECT_EQ(rows[4].phase + "/" + rows[4].part, "backward/full_attention");
  EXPECT_EQ(rows[4].kernel_ns, 12000);
  EXPECT_EQ(rows[5].phase + "/" + rows[5].part, "backward/other");
  core::Json j = to_json(rows);
  EXPECT_DOUBLE_EQ(j[4]["kernel_share_ratio"].get<double>(), 12000.0 / 20000.0);

  // A second window replays the file again; nothing is left over after take().
  EXPECT_TRUE(src->take().records.empty());
  src->begin();
  src->end();
  EXPECT_EQ(src->take().records.size(), 8u);
}

TEST(RawTrace, WriteReadRoundTrip) {
  RawTrace t = read_raw_trace(fixture());
  const std::string path = testing_support::temp_dir() + "/raw_trace_roundtrip.json";
  {
    std::ofstream out(path);
    out << to_json(t).dump();
  }
  RawTrace u = read_raw_trace(path);
  ASSERT_EQ(u.records.size(), t.records.size());
  EXPECT_EQ(u.external_of, t.external_of);
  EXPECT_EQ(u.records[1].name, t.records[1].name);
  EXPECT_EQ(u.records[6].bytes, 65536);
}

TEST(RawTrace, BrokenFilesNameTheField) {
  const std::string path = testing_support::temp_dir() + "/raw_trace_broken.json";
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    {
      std::ofstream out(path);
      out << text;
    }
    try {
      read_raw_trace(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::string head = R"({"schema": {"name": "tprobe.raw_trace", "version": 1}, )";
  expect_error("{", "not valid JSON");
  expect_error("[]", "not a JSON object");
  expect_error(R"({"schema": {"name": "x", "version": 1}})", "schema.name");
  expect_error(head + R"("dropped_records": -1, "records": [], "external": []})",
               "dropped_records");
  expect_error(head + R"("dropped_records": 0, "records": {}, "external": []})", "'records'");
  expect_error(head + R"("dropped_records": 0, "records": [{"kind": "nccl"}], "external": []})",
               "records[0]: 'kind'");
  expect_error(head + R"("dropped_records": 0, "records": [{"kind": "kernel", "name": "k",
      "start_ns": 5, "end_ns": 4, "device": 0, "stream": 0, "correlation_id": 1}], "external": []})",
               "before start_ns");
  expect_error(head + R"("dropped_records": 0, "records": [{"kind": "kernel", "name": "k",
      "start_ns": 1, "end_ns": 4, "device": 0, "stream": 0, "correlation_id": 1, "grid": [1, 2]}],
      "external": []})",
               "'grid'");
  expect_error(head + R"("dropped_records": 0, "records": [], "external": [
      {"correlation_id": 1, "external_id": 2}, {"correlation_id": 1, "external_id": 3}]})",
               "appears twice");
  expect_error(head + R"("dropped_records": 0, "records": [], "external": [], "external": []})",
               "appears twice");
  EXPECT_THROW(read_raw_trace("/nonexistent/raw.json"), Error);
}

TEST(CuptiSource, ReportsWhyWhenItCannotTrace) {
  // Here (no GPU) the CUPTI source either is not built or finds no device to trace; either way
  // take() after a window must not pass off an empty table silently.
  auto src = make_cupti_source();
  std::string why;
  if (!src->usable(&why)) {
    EXPECT_FALSE(why.empty());
    TraceCapture c = src->take();
    EXPECT_TRUE(c.refused);
    EXPECT_FALSE(c.refusal.empty());
  } else {
    SUCCEED() << "CUPTI loads here; its tracing is exercised on the GPU host";
  }
}

}  // namespace
}  // namespace tprobe::cupti
