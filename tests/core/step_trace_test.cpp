// The step vocabulary, the raw trace (v2) reader and writer, attribution through launch contexts
// and autograd links — with the negative control the attribution must pass: a trace whose backward
// records lack their links is untagged, never given to a part — and the phase × part breakdown.
#include "tprobe/core/trace/attribute/step_trace.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

std::string fixture() { return std::string(TPROBE_FIXTURES_DIR) + "/raw_trace_small.json"; }

TEST(StepVocabulary, NamesRoundTrip) {
  for (StepPhase p : {StepPhase::kForward, StepPhase::kLoss, StepPhase::kRecompute,
                      StepPhase::kBackward, StepPhase::kOptimizer})
    EXPECT_EQ(parse_step_phase(to_string(p)), p);
  for (StepPart p : all_step_parts()) EXPECT_EQ(parse_step_part(to_string(p)), p);
  // One enum of layer types, two spellings: the trace's words and HF's config names, each with
  // its inverse, and nothing else parsed.
  for (std::optional<LayerType> t : {std::optional<LayerType>(), std::optional(LayerType::kSliding),
                                     std::optional(LayerType::kFull)}) {
    std::optional<LayerType> back = LayerType::kSliding;
    EXPECT_TRUE(parse_layer_kind(layer_kind_name(t), back)) << layer_kind_name(t);
    EXPECT_EQ(back, t) << layer_kind_name(t);
  }
  EXPECT_STREQ(layer_kind_name(LayerType::kSliding), "sliding");
  EXPECT_STREQ(layer_kind_name(LayerType::kFull), "full");
  EXPECT_STREQ(layer_kind_name(std::nullopt), "-");
  for (LayerType t : {LayerType::kSliding, LayerType::kFull}) {
    LayerType back = t == LayerType::kFull ? LayerType::kSliding : LayerType::kFull;
    EXPECT_TRUE(parse_layer_type(to_string(t), back));
    EXPECT_EQ(back, t);
  }
  std::optional<LayerType> unchanged = LayerType::kFull;
  EXPECT_FALSE(parse_layer_kind("sliding_attention", unchanged));
  EXPECT_FALSE(parse_layer_kind("global", unchanged));
  EXPECT_EQ(unchanged, LayerType::kFull);
  LayerType hf = LayerType::kFull;
  EXPECT_FALSE(parse_layer_type("sliding", hf));
  // One display order: sliding, full, then "-", then any other word.
  EXPECT_LT(layer_kind_rank("sliding"), layer_kind_rank("full"));
  EXPECT_LT(layer_kind_rank("full"), layer_kind_rank("-"));
  EXPECT_LT(layer_kind_rank("-"), layer_kind_rank("untagged"));
  EXPECT_EQ(layer_kind_rank(std::nullopt), layer_kind_rank("-"));
  EXPECT_EQ(layer_kind_rank(LayerType::kFull), layer_kind_rank("full"));
  EXPECT_FALSE(parse_step_part("sliding_attention"));  // the old, layer-typed vocabulary
  EXPECT_FALSE(parse_step_phase("untagged"));
}

TEST(StepVocabulary, BackwardOfKeepsPartAndLayer) {
  const StepTag r{StepPhase::kRecompute, StepPart::kExperts, 7, LayerType::kFull};
  const StepTag b = backward_of(r);
  EXPECT_EQ(b.phase, StepPhase::kBackward);
  EXPECT_EQ(b.part, StepPart::kExperts);
  EXPECT_EQ(b.layer, 7);
  EXPECT_EQ(b.layer_kind, LayerType::kFull);
  EXPECT_EQ(backward_of({StepPhase::kLoss, StepPart::kLossHead, -1, std::nullopt}).phase,
            StepPhase::kLoss);
}

// The fixture, worked by hand (its "_about" says what each launch is):
//   11 gemm       2000 ns  tag 2 forward/experts/0/sliding
//   12 flash fwd  4000 ns  tag 1 forward/attention_core/0/sliding
//   13 elementw.   500 ns  tag 4 loss/loss_head
//   14 fmha bwd  12000 ns  node (1,40) -> forward op tag 3 (recompute/attention_core/1/full)
//   15 reduce     1000 ns  node (2,41) -> recorded twice, tag 2 then tag 6: the last wins
//   16 elementw.   500 ns  no launch context
//   10 memcpy      400 ns  tag 5 forward/other;  17 memset 100 ns tag 4
//   18 gemm       1000 ns  node (1,99): no forward op made it
//   19 flash fwd  1000 ns  tag 3 recompute/attention_core/1/full
TEST(Attribution, ByScopeAndByAutogradLink) {
  RawTrace t = read_raw_trace(fixture());
  std::vector<KernelRecord> recs = t.records;
  AttributionCounts n = attribute(t, recs);
  EXPECT_EQ(n.records, 10);
  EXPECT_EQ(n.untagged, 2);
  EXPECT_EQ(n.untagged_no_context, 1);
  EXPECT_EQ(n.untagged_unlinked, 1);
  EXPECT_EQ(n.linked, 2);
  auto of = [&](int64_t corr) -> const KernelRecord& {
    for (const auto& r : recs) {
      if (r.correlation_id == corr) return r;
    }
    throw std::runtime_error("no record");
  };
  EXPECT_EQ(of(14).phase, "backward");
  EXPECT_EQ(of(14).part, "attention_core");
  EXPECT_EQ(of(14).layer, 1);
  EXPECT_EQ(of(14).layer_kind, "full");
  EXPECT_EQ(of(15).part, "experts");  // tag 6, not tag 2
  EXPECT_EQ(of(15).layer, 1);
  EXPECT_EQ(of(16).phase, "untagged");
  EXPECT_EQ(of(18).phase, "untagged");
  EXPECT_EQ(of(19).phase, "recompute");
  EXPECT_EQ(of(13).phase, "loss");
  EXPECT_EQ(of(10).part, "other");

  StepBreakdown b = break_down(recs);
  EXPECT_EQ(b.kernels, 8);
  EXPECT_EQ(b.kernel_ns, 2000 + 4000 + 500 + 12000 + 1000 + 500 + 1000 + 1000);
  EXPECT_EQ(b.memcpy_memset_ns, 500);
  EXPECT_EQ(b.span_ns, 23600 - 500);
  EXPECT_EQ(b.untagged_kernel_ns, 1500);
  // The rows add up to the total: nothing lost, nothing counted twice.
  int64_t sum = 0, kernels = 0;
  for (const auto& r : b.rows) {
    sum += r.kernel_ns;
    kernels += r.kernels;
  }
  EXPECT_EQ(sum, b.kernel_ns);
  EXPECT_EQ(kernels, b.kernels);
  // phase order forward, loss, recompute, backward; untagged last
  ASSERT_FALSE(b.rows.empty());
  EXPECT_EQ(b.rows.front().phase, "forward");
  EXPECT_EQ(b.rows.back().phase, "untagged");
  // per layer: layer 1's attention core, in the recompute and in the backward
  ASSERT_EQ(b.layers.size(), 2u);
  EXPECT_EQ(b.layers[1].layer, 1);
  EXPECT_EQ(b.layers[1].layer_kind, "full");
  EXPECT_EQ(b.layers[1].kernel_ns.at("backward").at("attention_core"), 12000);
  EXPECT_EQ(b.layers[1].kernel_ns.at("recompute").at("attention_core"), 1000);
  EXPECT_EQ(b.layers[0].kernel_ns.at("forward").at("attention_core"), 4000);
  Json j = to_json(b);
  EXPECT_DOUBLE_EQ(j["untagged_kernel_share_ratio"].get<double>(), 1500.0 / 22000.0);
}

// The negative control: the same trace without its forward links. Every record launched inside a
// backward node must come out untagged — a backward part must never be guessed.
TEST(Attribution, BackwardRecordsWithoutLinksAreUntagged) {
  RawTrace t = read_raw_trace(fixture());
  t.forward_ops.clear();
  std::vector<KernelRecord> recs = t.records;
  AttributionCounts n = attribute(t, recs);
  EXPECT_EQ(n.linked, 0);
  EXPECT_EQ(n.untagged_unlinked, 3);  // 14, 15, 18
  EXPECT_EQ(n.untagged, 4);
  for (const auto& r : recs) {
    EXPECT_NE(r.phase, "backward") << r.correlation_id;
    if (t.launches.count(r.correlation_id) && t.launches.at(r.correlation_id).node) {
      EXPECT_EQ(r.part, "untagged") << r.correlation_id;
    }
  }
  // A forward op recorded outside every scope (tag 0) links to nothing either.
  RawTrace u = read_raw_trace(fixture());
  for (auto& f : u.forward_ops) f.tag = 0;
  recs = u.records;
  EXPECT_EQ(attribute(u, recs).linked, 0);
}

// A raw trace recorded on the H200 (benchmarks/gpu/record-fixtures.sh: the tiny model's CUDA
// step, bf16, sdpa, 2x64, checkpointing), replayed here without a GPU.
TEST(Attribution, RecordedCudaStepOfTheTinyModel) {
  RawTrace t = read_raw_trace(std::string(TPROBE_FIXTURES_DIR) + "/raw_trace_tiny_cuda.json.gz");
  ASSERT_GT(t.records.size(), 4000u);
  // Independently of attribute(): how many records were launched inside a backward node.
  int64_t in_node = 0;
  for (const auto& r : t.records) {
    auto it = t.launches.find(r.correlation_id);
    in_node += it != t.launches.end() && it->second.node;
  }
  ASSERT_GT(in_node, 1000);
  std::vector<KernelRecord> recs = t.records;
  AttributionCounts n = attribute(t, recs);
  EXPECT_EQ(n.linked + n.untagged_unlinked, in_node);
  EXPECT_EQ(n.untagged_unlinked, 0);
  StepBreakdown b = break_down(recs);
  EXPECT_LT(static_cast<double>(b.untagged_kernel_ns), 0.01 * static_cast<double>(b.kernel_ns));
  int64_t sum = 0;
  std::map<std::pair<std::string, std::string>, int64_t> fwd, rec, bwd;
  for (const auto& r : b.rows) {
    sum += r.kernel_ns;
    auto& m = r.phase == "forward" ? fwd : r.phase == "recompute" ? rec : bwd;
    if (r.phase == "forward" || r.phase == "recompute" || r.phase == "backward")
      m[{r.layer_kind, r.part}] += r.kernel_ns;
  }
  EXPECT_EQ(sum, b.kernel_ns);
  // The recompute is the forward again: row by row within 10 % where the row is 20 us or more.
  int compared = 0;
  for (const auto& [key, ns] : fwd) {
    if (key.first == "-" || ns < 20000) continue;
    ++compared;
    EXPECT_NEAR(static_cast<double>(rec[key]), static_cast<double>(ns), 0.10 * ns)
        << key.first << "/" << key.second;
  }
  EXPECT_GE(compared, 8);
  // The backward of the experts is neither empty nor the forward under another name.
  for (const char* kind : {"sliding", "full"}) {
    const std::pair<std::string, std::string> key{kind, "experts"};
    EXPECT_GT(bwd[key], 0) << kind;
    EXPECT_NE(bwd[key], fwd[key]) << kind;
  }
  // The negative control on the real trace: without the links, every record launched inside a
  // node is untagged.
  t.forward_ops.clear();
  recs = t.records;
  n = attribute(t, recs);
  EXPECT_EQ(n.linked, 0);
  EXPECT_EQ(n.untagged_unlinked, in_node);
  for (const auto& r : recs) {
    auto it = t.launches.find(r.correlation_id);
    if (it != t.launches.end() && it->second.node) {
      EXPECT_EQ(r.phase, "untagged") << r.name;
    }
  }
}

TEST(RawTraceFile, WriteReadRoundTrip) {
  RawTrace t = read_raw_trace(fixture());
  RawTrace u = parse_raw_trace(to_json(t).dump(), "round trip");
  ASSERT_EQ(u.records.size(), t.records.size());
  ASSERT_EQ(u.tags.size(), t.tags.size());
  for (size_t i = 0; i < t.tags.size(); ++i) EXPECT_EQ(u.tags[i], t.tags[i]);
  ASSERT_EQ(u.launches.size(), t.launches.size());
  EXPECT_EQ(u.launches.at(14).node_seq, 40);
  EXPECT_EQ(u.launches.at(12).tag, 1);
  ASSERT_EQ(u.forward_ops.size(), 4u);
  EXPECT_EQ(u.forward_ops[2].tag, 6);
  EXPECT_EQ(u.records[1].name, t.records[1].name);
  EXPECT_EQ(u.records[6].bytes, 65536);
}

TEST(RawTraceFile, BrokenFilesNameTheField) {
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    try {
      parse_raw_trace(text, "raw.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::string head = R"({"schema": {"name": "tprobe.raw_trace", "version": 2}, )";
  const std::string empty = R"("tags": [], "launches": [], "forward_ops": [])";
  const std::string kernel = R"({"kind": "kernel", "name": "k", "start_ns": 1, "end_ns": 4,
      "device": 0, "stream": 0, "correlation_id": 1})";
  const std::string one_tag =
      R"("tags": [{"id": 1, "phase": "forward", "part": "experts", "layer": 0,
                   "layer_kind": "sliding"}])";
  expect_error("{", "not valid JSON");
  expect_error("[]", "not a JSON object");
  expect_error(R"({"schema": {"name": "x", "version": 2}})", "schema.name");
  expect_error(R"({"schema": {"name": "tprobe.raw_trace", "version": 1}})", "record it again");
  expect_error(R"({"schema": {"name": "tprobe.raw_trace", "version": 3}})", "version must be 2");
  expect_error(head + R"("dropped_records": -1, "records": [], )" + empty + "}", "dropped_records");
  expect_error(head + R"("dropped_records": 0, "records": {}, )" + empty + "}", "'records'");
  expect_error(head + R"("dropped_records": 0, "records": [{"kind": "nccl"}], )" + empty + "}",
               "records[0]: 'kind'");
  expect_error(head + R"("dropped_records": 0, "records": [{"kind": "kernel", "name": "k",
      "start_ns": 5, "end_ns": 4, "device": 0, "stream": 0, "correlation_id": 1}], )" +
                   empty + "}",
               "before start_ns");
  expect_error(head + R"("dropped_records": 0, "records": [{"kind": "kernel", "name": "k",
      "start_ns": 1, "end_ns": 4, "device": 0, "stream": 0, "correlation_id": 1,
      "grid": [1, 2]}], )" + empty + "}",
               "'grid'");
  expect_error(head + R"("dropped_records": 0, "records": [)" + kernel + "], " +
                   R"("tags": [{"id": 2, "phase": "forward", "part": "experts", "layer": 0,
                   "layer_kind": "sliding"}], "launches": [], "forward_ops": []})",
               "'id' must be 1");
  expect_error(head + R"("dropped_records": 0, "records": [], "tags": [{"id": 1,
      "phase": "sideways", "part": "experts", "layer": 0, "layer_kind": "sliding"}],
      "launches": [], "forward_ops": []})",
               "not a step phase");
  expect_error(head + R"("dropped_records": 0, "records": [], "tags": [{"id": 1,
      "phase": "forward", "part": "sliding_attention", "layer": 0, "layer_kind": "sliding"}],
      "launches": [], "forward_ops": []})",
               "not a step part");
  expect_error(head + R"("dropped_records": 0, "records": [], )" + one_tag +
                   R"(, "launches": [{"correlation_id": 1, "tag": 2}], "forward_ops": []})",
               "'tag' = 2 is outside 1..1");
  expect_error(head + R"("dropped_records": 0, "records": [], )" + one_tag +
                   R"(, "launches": [{"correlation_id": 1, "tag": 1, "node_seq": 3}],
                   "forward_ops": []})",
               "exactly one of");
  expect_error(head + R"("dropped_records": 0, "records": [], )" + one_tag +
                   R"(, "launches": [{"correlation_id": 1, "tag": 1},
                   {"correlation_id": 1, "tag": 1}], "forward_ops": []})",
               "appears twice");
  expect_error(head + R"("dropped_records": 0, "records": [], )" + one_tag +
                   R"(, "launches": [{"correlation_id": 1, "node_thread": -1, "node_seq": 3}],
                   "forward_ops": []})",
               "node_thread");
  expect_error(head + R"("dropped_records": 0, "records": [], )" + one_tag +
                   R"(, "launches": [], "forward_ops": [[1, 2]]})",
               "[thread, sequence number, tag]");
  expect_error(head + R"("dropped_records": 0, "records": [], )" + one_tag +
                   R"(, "launches": [], "forward_ops": [[1, 2, 5]]})",
               "the tag must be 0..1");
  expect_error(head + R"("dropped_records": 0, "records": [], )" + one_tag +
                   R"(, "launches": [], "forward_ops": [[1, -2, 1]]})",
               "sequence number must be");
  expect_error(head + R"("dropped_records": 0, "records": [], )" + empty + R"(, "tags": []})",
               "appears twice");
  EXPECT_THROW(read_raw_trace("/nonexistent/raw.json"), Error);
}

TEST(Quadratic, PartsThatGrowWithTheSquareOfTheWidth) {
  EXPECT_TRUE(grows_quadratically("attention_core", "full", false));
  EXPECT_TRUE(grows_quadratically("attention_core", "sliding", true));
  EXPECT_FALSE(grows_quadratically("attention_core", "sliding", false));  // windowed flash
  EXPECT_FALSE(grows_quadratically("experts", "full", true));
  EXPECT_FALSE(grows_quadratically("attention_proj", "full", true));
}

}  // namespace
}  // namespace tprobe::core
