// tprobe_cupti without a GPU: the tag table, the replay source over a recorded raw trace (the
// attribution path a GPU run takes, core::attribute) and the CUPTI source's refusal here.
#include "tprobe/cupti/kernel_source.hpp"

#include <gtest/gtest.h>

#include "tprobe/core/base/error.hpp"

namespace tprobe::cupti {
namespace {

std::string fixture() { return std::string(TPROBE_FIXTURES_DIR) + "/raw_trace_small.json"; }

TEST(TagTable, SameTagSameIdInOrder) {
  TagTable t;
  const core::StepTag a{core::StepPhase::kForward, core::StepPart::kExperts, 3,
                        core::LayerType::kSliding};
  core::StepTag b = a;
  b.layer = 4;
  EXPECT_EQ(t.intern(a), 1);
  EXPECT_EQ(t.intern(b), 2);
  EXPECT_EQ(t.intern(a), 1);
  ASSERT_EQ(t.tags().size(), 2u);
  EXPECT_EQ(t.tags()[1].layer, 4);
  t.clear();
  EXPECT_EQ(t.intern(b), 1);
}

TEST(ReplaySource, AttributesTheRecordedTrace) {
  auto src = make_replay_source(fixture());
  std::string why;
  ASSERT_TRUE(src->usable(&why));
  src->begin();
  src->enter({core::StepPhase::kForward, core::StepPart::kOther, -1, std::nullopt});
  src->leave();
  src->end();
  EXPECT_EQ(src->raw().records.size(), 10u);
  TraceCapture c = src->take();
  EXPECT_FALSE(c.refused);
  ASSERT_EQ(c.records.size(), 10u);
  EXPECT_EQ(c.dropped_records, 3);
  EXPECT_EQ(c.counts.untagged, 2);  // correlation 16 (no context) and 18 (unlinked node)
  EXPECT_EQ(c.counts.linked, 2);
  // record 3 is correlation 14: a backward node whose forward op ran in layer 1's recompute
  EXPECT_EQ(c.records[3].phase, "backward");
  EXPECT_EQ(c.records[3].part, "attention_core");
  EXPECT_EQ(c.records[3].layer, 1);
  EXPECT_EQ(c.records[0].grid[0], 64);
  EXPECT_EQ(c.records[0].shared_memory_bytes, 65536);
  // A second window replays the file again; nothing is left over after take().
  EXPECT_TRUE(src->take().records.empty());
  src->begin();
  src->end();
  EXPECT_EQ(src->take().records.size(), 10u);
}

// The raw trace recorded on the H200 (tiny model, CUDA) through the same replay seam a GPU run
// takes: every record launched inside a backward node finds the forward op that made the node.
TEST(ReplaySource, RecordedCudaTraceAttributesItsBackward) {
  auto src = make_replay_source(std::string(TPROBE_FIXTURES_DIR) + "/raw_trace_tiny_cuda.json.gz");
  src->begin();
  src->end();
  TraceCapture c = src->take();
  EXPECT_GT(c.records.size(), 4000u);
  EXPECT_GT(c.counts.linked, 1000);
  EXPECT_EQ(c.counts.untagged_unlinked, 0);
  int64_t backward = 0, recompute = 0;
  for (const auto& r : c.records) {
    backward += r.phase == "backward";
    recompute += r.phase == "recompute";
  }
  EXPECT_GT(backward, 1000);
  EXPECT_GT(recompute, 1000);
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
