// Phase × part × layer of a user's trace (trace_parts.hpp): a hand-made Kineto trace with module
// events, fwdbwd flows, the autograd engine's glue in evaluate_function ranges (matched by
// sequence number) and AccumulateGrad, a reentrant-checkpoint recompute on autograd's thread, the
// loss and the optimizer, whose every row's place is worked out by hand below; the negative
// controls (flows removed: the backward rows come out untagged; sequence numbers that do not
// match, or none: the glue stays untagged); no module events; broken inputs.
#include "tprobe/core/trace/compare/part_diff.hpp"
#include "tprobe/core/trace/attribute/trace_parts.hpp"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"

namespace tprobe::core {
namespace {

constexpr int kMain = 1, kAutograd = 2;

struct Builder {
  Json events = Json::array();
  int64_t corr = 0;

  void module(int tid, const std::string& name, double ts, double end) {
    events.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", "nn.Module: " + name},
                      {"pid", 1}, {"tid", tid}, {"ts", ts}, {"dur", end - ts}});
  }
  void py(int tid, const std::string& name, double ts, double end) {
    events.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", name}, {"pid", 1},
                      {"tid", tid}, {"ts", ts}, {"dur", end - ts}});
  }
  // seq >= 0: the op's "Sequence number" argument (an autograd node's, or its forward op's).
  void op(int tid, const std::string& name, double ts, double end, int64_t seq = -1) {
    Json e = {{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 1}, {"tid", tid},
              {"ts", ts}, {"dur", end - ts}};
    if (seq >= 0) e["args"] = {{"Sequence number", seq}};
    events.push_back(e);
  }
  void flow(bool start, int64_t id, int tid, double ts) {
    Json f = {{"ph", start ? "s" : "f"}, {"id", id}, {"pid", 1}, {"tid", tid}, {"ts", ts},
              {"cat", "fwdbwd"}, {"name", "fwdbwd"}};
    if (!start) f["bp"] = "e";
    events.push_back(f);
  }
  // A launch on `tid` at `ts` and its kernel: correlation c, device time c µs (exact ns).
  int64_t launch(int tid, double ts, const char* cat = "kernel") {
    const int64_t c = ++corr;
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"},
                      {"pid", 1}, {"tid", tid}, {"ts", ts}, {"dur", 0.5},
                      {"args", {{"correlation", c}}}});
    events.push_back({{"ph", "X"}, {"cat", cat}, {"name", fmt::format("k{}", c)}, {"pid", 0},
                      {"tid", 7}, {"ts", 10000 + 100 * c}, {"dur", c},
                      {"args", {{"correlation", c}, {"device", 0}, {"stream", 7}}}});
    return c;
  }
  std::string text() const { return Json{{"traceEvents", events}}.dump(); }
};

using Cell = std::tuple<std::string, std::string, std::string>;  // phase, layer kind, part

// The trace, and by hand the cell each correlation's row belongs to.
struct Fixture {
  Builder b;
  std::map<int64_t, Cell> cell;
  std::map<int64_t, int32_t> layer;
};

// sequence: the evaluate_function ranges and node ops carry their "Sequence number" (as torch
// writes them); false: the negative control for the glue and AccumulateGrad rules.
Fixture make(bool flows, bool modules, bool sequence = true) {
  Fixture f;
  Builder& b = f.b;
  auto M = [&](int tid, const std::string& n, double s, double e) {
    if (modules) b.module(tid, n, s, e);
  };
  auto P = [&](int tid, const std::string& n, double s, double e) {
    if (modules) b.py(tid, n, s, e);
  };
  auto F = [&](bool s, int64_t id, int tid, double ts) {
    if (flows) b.flow(s, id, tid, ts);
  };
  auto at = [&](int64_t c, const char* phase, const char* kind, const char* part, int32_t l = -1) {
    f.cell[c] = {phase, kind, part};
    f.layer[c] = l;
  };
  // Forward on the main thread.
  M(kMain, "Gemma4ForCausalLM_0", 0, 1000);
  M(kMain, "Gemma4TextModel_0", 10, 800);
  M(kMain, "Gemma4TextScaledWordEmbedding_0", 20, 40);
  at(b.launch(kMain, 25), "forward", "-", "embedding");
  at(b.launch(kMain, 26, "gpu_memcpy"), "forward", "-", "embedding");
  P(kMain, "transformers/masking_utils.py(10): create_causal_mask", 45, 55);
  at(b.launch(kMain, 50), "forward", "-", "attention_core");
  b.op(kMain, "CheckpointFunction", 99, 401);
  F(true, 4, kMain, 99);
  // Layer 0 is instance _7, layer 1 instance _2: the order of first calls, not the counter.
  M(kMain, "Gemma4TextDecoderLayer_7", 100, 400);
  M(kMain, "Gemma4TextRMSNorm_0", 105, 110);
  at(b.launch(kMain, 107), "forward", "sliding", "attention_proj", 0);
  b.op(kMain, "aten::pow", 108, 109);
  F(true, 7, kMain, 108);
  M(kMain, "Gemma4TextAttention_0", 120, 200);
  M(kMain, "Linear_0", 125, 135);
  b.op(kMain, "aten::view", 126, 127);
  F(true, 8, kMain, 126);
  at(b.launch(kMain, 130), "forward", "sliding", "attention_proj", 0);
  b.op(kMain, "aten::mm", 131, 134);
  F(true, 1, kMain, 131);
  at(b.launch(kMain, 140), "forward", "sliding", "attention_proj", 0);  // RoPE
  P(kMain, "transformers/integrations/sdpa_attention.py(20): sdpa_attention_forward", 150, 180);
  at(b.launch(kMain, 160), "forward", "sliding", "attention_core", 0);
  b.op(kMain, "aten::scaled_dot_product_attention", 185, 195);
  b.op(kMain, "aten::_scaled_dot_product_efficient_attention", 186, 194);
  F(true, 2, kMain, 186);
  at(b.launch(kMain, 190), "forward", "sliding", "attention_core", 0);
  M(kMain, "Gemma4TextRMSNorm_1", 205, 210);
  at(b.launch(kMain, 207), "forward", "sliding", "attention_proj", 0);
  M(kMain, "Gemma4TextRMSNorm_2", 215, 220);
  at(b.launch(kMain, 217), "forward", "sliding", "dense_mlp", 0);
  M(kMain, "Gemma4TextMLP_0", 225, 250);
  at(b.launch(kMain, 230), "forward", "sliding", "dense_mlp", 0);
  M(kMain, "Gemma4TextRMSNorm_3", 255, 260);
  at(b.launch(kMain, 257), "forward", "sliding", "dense_mlp", 0);
  M(kMain, "Gemma4TextRouter_0", 265, 280);
  at(b.launch(kMain, 270), "forward", "sliding", "router", 0);
  M(kMain, "Gemma4TextRMSNorm_4", 285, 290);
  at(b.launch(kMain, 287), "forward", "sliding", "experts", 0);
  M(kMain, "Gemma4TextExperts_0", 300, 350);
  at(b.launch(kMain, 320), "forward", "sliding", "experts", 0);
  M(kMain, "Gemma4TextRMSNorm_5", 355, 360);
  at(b.launch(kMain, 357), "forward", "sliding", "experts", 0);
  M(kMain, "Gemma4TextRMSNorm_6", 365, 370);
  at(b.launch(kMain, 367), "forward", "sliding", "other", 0);  // the closing norm
  at(b.launch(kMain, 380), "forward", "sliding", "other", 0);  // residual add
  M(kMain, "Gemma4TextDecoderLayer_2", 500, 700);
  M(kMain, "Gemma4TextAttention_1", 510, 600);
  M(kMain, "Linear_1", 520, 530);
  at(b.launch(kMain, 525), "forward", "full", "attention_proj", 1);
  M(kMain, "Gemma4TextRMSNorm_9", 750, 760);
  at(b.launch(kMain, 755), "forward", "-", "other");  // the final norm
  M(kMain, "Linear_5", 820, 850);
  at(b.launch(kMain, 830), "loss", "-", "loss_head");  // lm_head
  P(kMain, "transformers/loss/loss_utils.py(30): ForCausalLMLoss", 860, 900);
  b.op(kMain, "aten::nll_loss", 875, 880);
  F(true, 3, kMain, 875);
  at(b.launch(kMain, 870), "loss", "-", "loss_head");
  at(b.launch(kMain, 1100), "untagged", "-", "untagged");  // user code outside every module
  // Backward on autograd's thread.
  b.op(kAutograd, "autograd::engine::evaluate_function: MmBackward0", 2000, 2100);
  b.op(kAutograd, "MmBackward0", 2005, 2095);
  F(false, 1, kAutograd, 2005);
  at(b.launch(kAutograd, 2050), flows ? "backward" : "untagged", flows ? "sliding" : "-",
     flows ? "attention_proj" : "untagged", flows ? 0 : -1);
  b.op(kAutograd, "autograd::engine::evaluate_function: SdpaBackward0", 2200, 2300);
  b.op(kAutograd, "SdpaBackward0", 2201, 2299);
  F(false, 2, kAutograd, 2201);
  at(b.launch(kAutograd, 2250), flows ? "backward" : "untagged", flows ? "sliding" : "-",
     flows ? "attention_core" : "untagged", flows ? 0 : -1);
  b.op(kAutograd, "autograd::engine::evaluate_function: NllLossBackward0", 2400, 2450);
  b.op(kAutograd, "NllLossBackward0", 2401, 2449);
  F(false, 3, kAutograd, 2401);
  at(b.launch(kAutograd, 2420), flows ? "loss" : "untagged", "-", flows ? "loss_head" : "untagged");
  b.op(kAutograd, "autograd::engine::evaluate_function: MulBackward0", 2500, 2550);
  at(b.launch(kAutograd, 2520), "untagged", "-", "untagged");  // no flow at all
  b.op(kAutograd, "autograd::engine::evaluate_function: AddBackward0", 2600, 2650);
  b.op(kAutograd, "AddBackward0", 2601, 2649);
  F(false, 6, kAutograd, 2601);  // an end whose start is missing
  at(b.launch(kAutograd, 2620), "untagged", "-", "untagged");
  // The engine's glue: inside `evaluate_function: PowBackward0` but after its node op (an
  // aten::add_ accumulating the gradient), through the node op with the range's sequence number.
  const int64_t seq = sequence ? 41 : -1;
  b.op(kAutograd, "autograd::engine::evaluate_function: PowBackward0", 2700, 2800, seq);
  b.op(kAutograd, "PowBackward0", 2701, 2750, seq);
  F(false, 7, kAutograd, 2701);
  at(b.launch(kAutograd, 2720), flows ? "backward" : "untagged", flows ? "sliding" : "-",
     flows ? "attention_proj" : "untagged", flows ? 0 : -1);
  b.op(kAutograd, "aten::add_", 2770, 2790);
  const bool glue = flows && sequence;
  at(b.launch(kAutograd, 2780), glue ? "backward" : "untagged", glue ? "sliding" : "-",
     glue ? "attention_proj" : "untagged", glue ? 0 : -1);
  // A range whose number is not its node op's: the glue is not guessed.
  b.op(kAutograd, "autograd::engine::evaluate_function: ViewBackward0", 2850, 2950, seq);
  b.op(kAutograd, "ViewBackward0", 2851, 2900, sequence ? 42 : -1);
  F(false, 8, kAutograd, 2851);
  at(b.launch(kAutograd, 2870), flows ? "backward" : "untagged", flows ? "sliding" : "-",
     flows ? "attention_proj" : "untagged", flows ? 0 : -1);
  b.op(kAutograd, "aten::sum", 2910, 2940);
  at(b.launch(kAutograd, 2930), "untagged", "-", "untagged");
  // Reentrant checkpointing: the layer's forward again inside the checkpoint's backward op.
  b.op(kAutograd, "autograd::engine::evaluate_function: CheckpointFunctionBackward", 3000, 4000);
  b.op(kAutograd, "CheckpointFunctionBackward", 3001, 3999);
  F(false, 4, kAutograd, 3001);
  // AccumulateGrad after a range with no flow (ViewBackward0's): the flow of the enclosing
  // backward op names the checkpoint call, and the decoder layer it recomputes gives the layer.
  b.op(kAutograd, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 3010,
       3040);
  at(b.launch(kAutograd, 3020), flows ? "backward" : "untagged", flows ? "sliding" : "-",
     flows ? "other" : "untagged", flows ? 0 : -1);
  at(b.launch(kAutograd, 3050), flows ? "backward" : "untagged", "-",
     flows ? "other" : "untagged");  // checkpoint glue: the op that made the node is in the model
  M(kAutograd, "Gemma4TextDecoderLayer_7", 3100, 3500);
  M(kAutograd, "Gemma4TextAttention_0", 3150, 3300);
  M(kAutograd, "Linear_0", 3160, 3170);
  b.op(kAutograd, "aten::mm", 3161, 3164);
  F(true, 5, kAutograd, 3161);
  at(b.launch(kAutograd, 3165), "recompute", "sliding", "attention_proj", 0);
  at(b.launch(kAutograd, 3400), "recompute", "sliding", "other", 0);
  b.op(kAutograd, "autograd::engine::evaluate_function: MmBackward0", 3600, 3700,
       sequence ? 43 : -1);
  b.op(kAutograd, "MmBackward0", 3601, 3699, sequence ? 43 : -1);
  F(false, 5, kAutograd, 3601);
  at(b.launch(kAutograd, 3650), flows ? "backward" : "untagged", flows ? "sliding" : "-",
     flows ? "attention_proj" : "untagged", flows ? 0 : -1);
  // AccumulateGrad (a LoRA factor's .grad written) right after the node that made its gradient:
  // that node's flow, so the q_proj's backward. Without the sequence numbers MmBackward0's range
  // has no flow, and the enclosing checkpoint op's gives the layer's backward `other`.
  b.op(kAutograd, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 3750,
       3800);
  at(b.launch(kAutograd, 3760), flows ? "backward" : "untagged", flows ? "sliding" : "-",
     !flows ? "untagged" : sequence ? "attention_proj" : "other", flows ? 0 : -1);
  // The optimizer, and a device row no launch event names.
  b.events.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "Optimizer.step#AdamW.step"},
                      {"pid", 1}, {"tid", kMain}, {"ts", 5000}, {"dur", 100}});
  at(b.launch(kMain, 5050), "optimizer", "-", "other");
  b.events.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "orphan"}, {"pid", 0}, {"tid", 7},
                      {"ts", 20000}, {"dur", 0.077},
                      {"args", {{"correlation", 999}, {"device", 0}, {"stream", 7}}}});
  return f;
}

TracePartsOptions two_layers() {
  TracePartsOptions o;
  o.layer_types = {LayerType::kSliding, LayerType::kFull};
  o.model = "test config";
  return o;
}

// The expected rows, summed from the hand placements (kernel rows: c µs each; memcpy apart).
std::map<Cell, int64_t> expected_cells(const Fixture& f, bool memcpy) {
  std::map<Cell, int64_t> out;
  for (const auto& [c, cell] : f.cell) {
    if ((c == 2) != memcpy) continue;  // correlation 2 is the memcpy
    out[cell] += c * 1000;
  }
  if (!memcpy) out[{"untagged", "-", "untagged"}] += 77;  // the orphan
  return out;
}

std::map<Cell, int64_t> actual_cells(const StepBreakdown& b, bool memcpy) {
  std::map<Cell, int64_t> out;
  for (const PartRow& r : b.rows) {
    const int64_t v = memcpy ? r.memcpy_memset_ns : r.kernel_ns;
    if (v != 0) out[{r.phase, r.layer_kind, r.part}] += v;
  }
  return out;
}

TEST(TraceParts, EveryRowGoesWhereTheHandWorkedPlacementSays) {
  Fixture f = make(true, true);
  TraceResult r = read_trace_buffer(f.b.text(), "parts", {}, two_layers());
  const TraceParts& p = r.summary.parts;
  ASSERT_TRUE(p.module_events);
  EXPECT_EQ(actual_cells(p.breakdown, false), expected_cells(f, false));
  EXPECT_EQ(actual_cells(p.breakdown, true), expected_cells(f, true));
  // Rows add up to the table exactly.
  EXPECT_EQ(p.breakdown.kernel_ns + p.breakdown.memcpy_memset_ns, r.table.totals.sum_ns);
  EXPECT_EQ(p.counts.rows, r.table.totals.events);
  EXPECT_EQ(p.counts.attributed + p.counts.untagged, p.counts.rows);
  EXPECT_EQ(p.counts.untagged, 5);
  EXPECT_EQ(p.counts.untagged_no_launch, 1);
  EXPECT_EQ(p.counts.untagged_no_module, 1);
  EXPECT_EQ(p.counts.untagged_unlinked, 3);  // 2520, 2620, 2930
  EXPECT_EQ(p.counts.untagged_no_part, 0);
  EXPECT_EQ(p.counts.outside_model, 0);  // 1100: no op holds the launch
  EXPECT_EQ(p.counts.linked, 10);
  EXPECT_EQ(p.counts.linked_enclosing, 1);   // 3020
  EXPECT_EQ(p.counts.linked_evaluate, 1);    // 2780
  EXPECT_EQ(p.counts.linked_accumulate, 1);  // 3760
  EXPECT_EQ(p.fwdbwd_links, 7);
  EXPECT_EQ(p.fwdbwd_unpaired, 1);
  EXPECT_EQ(p.backward_ops_linked, 7);
  ASSERT_EQ(p.decoder_layers.size(), 2u);
  EXPECT_EQ(p.decoder_layers[0], "Gemma4TextDecoderLayer_7");
  EXPECT_EQ(p.decoder_layers[1], "Gemma4TextDecoderLayer_2");
  // Per layer: layer 0 forward, summed from the hand placements.
  int64_t l0_forward = 0;
  for (const auto& [c, cell] : f.cell) {
    if (f.layer[c] == 0 && std::get<0>(cell) == "forward") l0_forward += c * 1000;
  }
  ASSERT_EQ(p.breakdown.layers.size(), 2u);
  int64_t got = 0;
  for (const auto& [part, ns] : p.breakdown.layers[0].kernel_ns.at("forward")) got += ns;
  EXPECT_EQ(got, l0_forward);
  EXPECT_EQ(p.breakdown.layers[1].layer_kind, "full");
  // The evidence keys.
  const Json j = to_json(p);
  EXPECT_TRUE(j["by_phase_part"].is_array());
  EXPECT_TRUE(j["by_layer"].is_array());
  EXPECT_EQ(j["attribution"]["linked_rows"], 10);
  EXPECT_EQ(j["attribution"]["linked_enclosing_rows"], 1);
  EXPECT_EQ(j["attribution"]["linked_evaluate_rows"], 1);
  EXPECT_EQ(j["attribution"]["linked_accumulate_rows"], 1);
  EXPECT_FALSE(trace_parts_tables(p).empty());
}

TEST(TraceParts, BackwardRowsWithoutTheirFwdbwdLinksAreUntagged) {
  Fixture f = make(false, true);  // the negative control
  TraceResult r = read_trace_buffer(f.b.text(), "no flows", {}, two_layers());
  const TraceParts& p = r.summary.parts;
  EXPECT_EQ(actual_cells(p.breakdown, false), expected_cells(f, false));
  EXPECT_EQ(p.counts.linked, 0);
  EXPECT_EQ(p.counts.untagged_unlinked, 13);
  EXPECT_EQ(p.counts.linked_enclosing, 0);
  for (const PartRow& row : p.breakdown.rows) EXPECT_NE(row.phase, "backward");
  EXPECT_FALSE(p.notes.empty());
}

// The negative control of the engine-glue and AccumulateGrad rules: the same trace with its flows
// but without the "Sequence number" arguments. The glue after PowBackward0 is untagged again, and
// AccumulateGrad after MmBackward0 falls back to the enclosing checkpoint op (the layer's other).
TEST(TraceParts, GlueAndAccumulateGradNeedTheSequenceNumbers) {
  Fixture f = make(true, true, false);
  TraceResult r = read_trace_buffer(f.b.text(), "no sequence numbers", {}, two_layers());
  const TraceParts& p = r.summary.parts;
  EXPECT_EQ(actual_cells(p.breakdown, false), expected_cells(f, false));
  EXPECT_EQ(p.counts.linked_evaluate, 0);
  EXPECT_EQ(p.counts.linked_accumulate, 0);
  EXPECT_EQ(p.counts.linked_enclosing, 2);   // 3020, 3760
  EXPECT_EQ(p.counts.untagged_unlinked, 4);  // 2520, 2620, 2780, 2930
}

TEST(TraceParts, WithoutModuleEventsTheHintAndThePhaseSplitRemain) {
  Fixture f = make(true, false);
  TraceResult r = read_trace_buffer(f.b.text(), "no modules", {}, two_layers());
  const TraceParts& p = r.summary.parts;
  EXPECT_FALSE(p.module_events);
  EXPECT_EQ(p.counts.rows, r.table.totals.events);
  EXPECT_TRUE(p.breakdown.rows.empty());
  EXPECT_FALSE(r.table.phases.empty());
  const Json j = to_json(p);
  EXPECT_TRUE(j["by_phase_part"].is_null());
  EXPECT_NE(j["parts"]["hint"].get<std::string>().find("with_stack=True"), std::string::npos);
  const auto tables = trace_parts_tables(p);
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_NE(tables[0].render().find("with_stack=True"), std::string::npos);
}

TEST(TraceParts, LayerKindsAreUnknownWithoutAConfig) {
  Fixture f = make(true, true);
  TraceResult r = read_trace_buffer(f.b.text(), "no config");
  for (const PartRow& row : r.summary.parts.breakdown.rows) EXPECT_EQ(row.layer_kind, "-");
  EXPECT_FALSE(r.summary.parts.layer_kinds_known);
}

// Broken or odd events never crash and are left out, counted where they are events.
TEST(TraceParts, BrokenEventsAreLeftOut) {
  Fixture f = make(true, true);
  Builder& b = f.b;
  b.events.push_back({{"ph", "s"}, {"cat", "fwdbwd"}, {"pid", 1}, {"tid", 1}, {"ts", 5}});  // no id
  b.events.push_back({{"ph", "f"}, {"cat", "fwdbwd"}, {"id", 1.5}, {"tid", 1}, {"ts", 5}});
  b.events.push_back({{"ph", "s"}, {"cat", "fwdbwd"}, {"id", 77}, {"tid", 1}});  // no ts
  b.events.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", "nn.Module: X_1"},
                      {"tid", 1}, {"ts", 3}, {"dur", -1}});
  b.events.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", "nn.Module: "},
                      {"tid", 1}, {"ts", 3}, {"dur", 1}});
  b.events.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", "nn.Module: Y_2"},
                      {"tid", 1}, {"ts", 3}});  // no dur
  // Two flows whose ids are strings pair as well as integers do.
  b.events.push_back({{"ph", "s"}, {"cat", "fwdbwd"}, {"id", "a"}, {"tid", 1}, {"ts", 131}});
  b.events.push_back({{"ph", "f"}, {"cat", "fwdbwd"}, {"id", "a"}, {"tid", 2}, {"ts", 2201}});
  // A module partly overlapping another on its thread.
  b.events.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", "nn.Module: Z_0"},
                      {"tid", 1}, {"ts", 390}, {"dur", 200}});
  TraceResult r = read_trace_buffer(b.text(), "broken", {}, two_layers());
  const TraceParts& p = r.summary.parts;
  EXPECT_GE(r.summary.health.skipped_events, 4);
  EXPECT_EQ(p.fwdbwd_links, 8);  // the fixture's 7 and the string ids
  EXPECT_EQ(p.counts.attributed + p.counts.untagged, p.counts.rows);
  EXPECT_EQ(p.breakdown.kernel_ns + p.breakdown.memcpy_memset_ns, r.table.totals.sum_ns);
  // A huge dur on a module is refused as an impossible interval, not wrapped.
  Builder big;
  big.module(1, "Gemma4TextDecoderLayer_0", 0, 9.2e15);
  big.launch(1, 5);
  TraceResult rb = read_trace_buffer(big.text(), "big");
  EXPECT_FALSE(rb.summary.parts.module_events);
}

// The harness around the model: ops launched outside every module event (before the model, the
// loss math after it, loss.backward()'s seed inside torch's backward call) and the backward ops
// their fwdbwd flows name are part `other`, layer "-", listed by launching op; a launch no op
// holds, a module that names no part and a backward op without a flow stay untagged. Each row's
// place by hand (correlation c: c µs of kernel time; c = 2 is a memcpy):
//   1 forward/-/other      aten::full_like (the outermost op, not its aten::fill_)
//   2 forward/-/other      aten::copy_ (memcpy: a row, no kernel time)
//   3 forward/sliding/attention_proj, layer 0 (the model's q_proj)
//   4 forward/-/other      aten::mm after the model (the harness's lm_head matmul)
//   5 forward/-/other      aten::tanh (its softcap)
//   6 untagged, no module: no op holds the launch
//   7 backward/-/other     aten::ones_like inside torch/_tensor.py's backward (the seed gradient)
//   8 untagged, no part:   inside MyWrapper, a module that names no part
//   9 optimizer/-/other    (the Optimizer.* range: not an outside-the-model row)
//  10 backward/-/other     TanhBackward0, flow to aten::tanh outside every module
//  11 backward/-/other     MmBackward0, flow to the harness's aten::mm
//  12 backward/sliding/attention_proj, layer 0 (flow to the q_proj mm)
//  13 untagged, unlinked:  MulBackward0 without a flow
struct Harness {
  Builder b;
  std::map<int64_t, Cell> cell;
};

Harness make_harness(bool flows, bool backward_call) {
  Harness h;
  Builder& b = h.b;
  auto F = [&](bool s, int64_t id, int tid, double ts) {
    if (flows) b.flow(s, id, tid, ts);
  };
  auto at = [&](int64_t c, const char* phase, const char* kind, const char* part) {
    h.cell[c] = {phase, kind, part};
  };
  b.op(kMain, "aten::full_like", 100, 150);
  b.op(kMain, "aten::fill_", 110, 140);
  at(b.launch(kMain, 120), "forward", "-", "other");
  b.op(kMain, "aten::copy_", 160, 170);
  at(b.launch(kMain, 165, "gpu_memcpy"), "forward", "-", "other");
  b.module(kMain, "Gemma4ForCausalLM_0", 200, 1000);
  b.module(kMain, "Gemma4TextModel_0", 210, 800);
  b.module(kMain, "Gemma4TextDecoderLayer_0", 300, 600);
  b.module(kMain, "Gemma4TextAttention_0", 320, 400);
  b.module(kMain, "Linear_0", 325, 335);
  b.op(kMain, "aten::mm", 329, 334);
  F(true, 1, kMain, 329);
  at(b.launch(kMain, 330), "forward", "sliding", "attention_proj");
  b.op(kMain, "aten::mm", 1100, 1150);
  F(true, 2, kMain, 1100);
  at(b.launch(kMain, 1120), "forward", "-", "other");
  b.op(kMain, "aten::tanh", 1200, 1250);
  F(true, 3, kMain, 1200);
  at(b.launch(kMain, 1220), "forward", "-", "other");
  at(b.launch(kMain, 1300), "untagged", "-", "untagged");
  if (backward_call) {
    b.py(kMain, "torch/_tensor.py(576): backward", 1400, 3000);
    b.py(kMain, "torch/autograd/__init__.py(253): backward", 1405, 2990);
  }
  b.op(kMain, "aten::ones_like", 1410, 1430);
  b.op(kMain, "aten::fill_", 1415, 1425);
  at(b.launch(kMain, 1420), backward_call ? "backward" : "forward", "-", "other");
  b.module(kMain, "MyWrapper_0", 3100, 3200);
  b.op(kMain, "aten::add", 3110, 3120);
  at(b.launch(kMain, 3115), "untagged", "-", "untagged");
  b.events.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "Optimizer.step#AdamW.step"},
                      {"pid", 1}, {"tid", kMain}, {"ts", 5000}, {"dur", 100}});
  b.op(kMain, "aten::_foreach_add_", 5010, 5020);
  at(b.launch(kMain, 5015), "optimizer", "-", "other");
  b.op(kAutograd, "autograd::engine::evaluate_function: TanhBackward0", 2000, 2050);
  b.op(kAutograd, "TanhBackward0", 2001, 2049);
  F(false, 3, kAutograd, 2001);
  at(b.launch(kAutograd, 2020), flows ? "backward" : "untagged", "-", flows ? "other" : "untagged");
  b.op(kAutograd, "autograd::engine::evaluate_function: MmBackward0", 2100, 2150);
  b.op(kAutograd, "MmBackward0", 2101, 2149);
  F(false, 2, kAutograd, 2101);
  at(b.launch(kAutograd, 2120), flows ? "backward" : "untagged", "-", flows ? "other" : "untagged");
  b.op(kAutograd, "autograd::engine::evaluate_function: MmBackward0", 2200, 2250);
  b.op(kAutograd, "MmBackward0", 2201, 2249);
  F(false, 1, kAutograd, 2201);
  at(b.launch(kAutograd, 2220), flows ? "backward" : "untagged", flows ? "sliding" : "-",
     flows ? "attention_proj" : "untagged");
  b.op(kAutograd, "autograd::engine::evaluate_function: MulBackward0", 2300, 2350);
  at(b.launch(kAutograd, 2320), "untagged", "-", "untagged");
  return h;
}

std::map<Cell, int64_t> harness_cells(const Harness& h, bool memcpy) {
  std::map<Cell, int64_t> out;
  for (const auto& [c, cell] : h.cell) {
    if ((c == 2) == memcpy) out[cell] += c * 1000;
  }
  return out;
}

using OutsideKey = std::tuple<std::string, std::string, int64_t, int64_t>;  // op, phase, rows, ns
std::vector<OutsideKey> outside_rows(const TraceParts& p) {
  std::vector<OutsideKey> out;
  for (const OutsideModelRow& o : p.outside_model) out.emplace_back(o.op, o.phase, o.rows, o.kernel_ns);
  return out;
}

TEST(TraceParts, HarnessRowsOutsideTheModelArePartOtherByLaunchingOp) {
  Harness h = make_harness(true, true);
  TracePartsOptions one;
  one.layer_types = {LayerType::kSliding};
  TraceResult r = read_trace_buffer(h.b.text(), "harness", {}, one);
  const TraceParts& p = r.summary.parts;
  ASSERT_TRUE(p.module_events);
  EXPECT_EQ(actual_cells(p.breakdown, false), harness_cells(h, false));
  EXPECT_EQ(actual_cells(p.breakdown, true), harness_cells(h, true));
  EXPECT_EQ(p.breakdown.kernel_ns + p.breakdown.memcpy_memset_ns, r.table.totals.sum_ns);
  const TracePartsCounts& c = p.counts;
  EXPECT_EQ(c.rows, 13);
  EXPECT_EQ(c.outside_model, 7);  // 1, 2, 4, 5, 7, 10, 11
  EXPECT_EQ(p.outside_model_kernel_ns, (1 + 4 + 5 + 7 + 10 + 11) * 1000);
  EXPECT_EQ(c.linked, 1);  // 12: 10 and 11 are outside the model, not linked into it
  EXPECT_EQ(c.untagged, 3);
  EXPECT_EQ(c.untagged_no_module, 1);  // 6
  EXPECT_EQ(c.untagged_no_part, 1);    // 8
  EXPECT_EQ(c.untagged_unlinked, 1);   // 13
  EXPECT_EQ(c.untagged_no_launch, 0);
  EXPECT_EQ(c.attributed, 10);
  // By launching op, by kernel time descending; the memcpy's op has a row and no kernel time.
  const std::vector<OutsideKey> want = {
      {"MmBackward0", "backward", 1, 11000},  {"TanhBackward0", "backward", 1, 10000},
      {"aten::ones_like", "backward", 1, 7000}, {"aten::tanh", "forward", 1, 5000},
      {"aten::mm", "forward", 1, 4000},         {"aten::full_like", "forward", 1, 1000},
      {"aten::copy_", "forward", 1, 0}};
  EXPECT_EQ(outside_rows(p), want);
  ASSERT_EQ(p.outside_model.size(), 7u);
  EXPECT_EQ(p.outside_model[6].memcpy_memset_ns, 2000);
  // The evidence and the text say it.
  const Json j = to_json(p);
  EXPECT_EQ(j["attribution"]["outside_model_rows"], 7);
  EXPECT_EQ(j["attribution"]["untagged_no_part_rows"], 1);
  EXPECT_NEAR(j["attribution"]["outside_model_kernel_s"].get<double>(), 38e-6, 1e-12);
  ASSERT_EQ(j["outside_model"].size(), 7u);
  EXPECT_EQ(j["outside_model"][0]["op"], "MmBackward0");
  EXPECT_EQ(j["outside_model"][0]["phase"], "backward");
  EXPECT_EQ(j["outside_model"][0]["rows"], 1);
  std::string text;
  for (const Table& t : trace_parts_tables(p)) text += t.render();
  EXPECT_NE(text.find("time outside the model's modules by launching op"), std::string::npos);
  EXPECT_NE(text.find("aten::ones_like"), std::string::npos);
}

// The negative controls: without the flows the harness's backward rows are not guessed (untagged,
// unlinked, as the model's own backward row); without torch's backward call the seed is forward.
TEST(TraceParts, HarnessBackwardRowsNeedTheirFlowsAndTheSeedNeedsTheBackwardCall) {
  Harness h = make_harness(false, false);
  TraceResult r = read_trace_buffer(h.b.text(), "harness, no flows", {});
  const TraceParts& p = r.summary.parts;
  std::map<Cell, int64_t> want = harness_cells(h, false);
  // no config: the model's row has no layer kind
  want[{"forward", "-", "attention_proj"}] = want[{"forward", "sliding", "attention_proj"}];
  want.erase({"forward", "sliding", "attention_proj"});
  EXPECT_EQ(actual_cells(p.breakdown, false), want);
  EXPECT_EQ(p.counts.outside_model, 5);  // 1, 2, 4, 5, 7
  EXPECT_EQ(p.counts.untagged_unlinked, 4);  // 10, 11, 12, 13
  EXPECT_EQ(p.counts.linked, 0);
  for (const OutsideModelRow& o : p.outside_model) EXPECT_EQ(o.phase, "forward") << o.op;
}

// The committed HF + PEFT tiny step recorded with with_stack (hf-sdpa-stack-2x256.json.gz). An
// independent Python reading of the file (every kernel/memcpy/memset row whose launch lies outside
// every module event and Optimizer.* range: the outermost cpu_op holding it and whether torch's
// backward call does; every row in a flow-bound backward op whose flow starts outside every
// module) finds one row: loss.backward()'s seed, aten::ones_like, 0.768 µs, in
// torch/_tensor.py's backward.
TEST(TraceParts, TheRealStackFixturesOnlyHarnessRowIsTheBackwardSeed) {
  const TraceResult r = read_trace_file(
      std::string(TPROBE_FIXTURES_DIR) + "/traces/hf-sdpa-stack-2x256.json.gz", {}, {});
  const TraceParts& p = r.summary.parts;
  ASSERT_TRUE(p.module_events);
  const std::vector<OutsideKey> want = {{"aten::ones_like", "backward", 1, 768}};
  EXPECT_EQ(outside_rows(p), want);
  EXPECT_EQ(p.counts.outside_model, 1);
  EXPECT_EQ(p.counts.attributed + p.counts.untagged, p.counts.rows);
  EXPECT_EQ(p.breakdown.kernel_ns + p.breakdown.memcpy_memset_ns, r.table.totals.sum_ns);
  EXPECT_LT(p.breakdown.untagged_kernel_ns * 1000, p.breakdown.kernel_ns);  // under 0.1 %
  // The same reading finds no launch outside every module that no op holds.
  EXPECT_EQ(p.counts.untagged_no_module, 0);
  EXPECT_EQ(p.counts.untagged_no_launch, 0);
}

TEST(PartDiff, EvidenceRowsAreBoundsCheckedAndComparedPerStep) {
  Json results = {{"points", Json::array({{{"batch", 2}, {"width", 256},
                                           {"kernel_trace",
                                            {{"by_phase_part",
                                              Json::array({{{"phase", "forward"},
                                                            {"layer_kind", "sliding"},
                                                            {"part", "experts"},
                                                            {"kernels", 3},
                                                            {"kernel_s", 0.002},
                                                            {"memcpy_memset_s", 0}}})}}}}})},
                  {"kernel_table_point", {{"batch", 2}, {"width", 256}}}};
  PartSide b = part_side_from_evidence(results, "profile", "p.json");
  ASSERT_TRUE(b.available);
  EXPECT_EQ(b.origin, "profile evidence, point 2x256");
  EXPECT_EQ(b.kernel_ns, 2000000);
  Fixture f = make(true, true);
  TraceResult r = read_trace_buffer(f.b.text(), "parts", {}, two_layers());
  PartSide a = part_side_from_trace(r.summary.parts, 2, "a.json");
  PartDiff d = diff_parts(a, b);
  ASSERT_TRUE(d.available);
  int64_t a_sum = 0;
  bool found = false;
  for (const PartDiffRow& row : d.rows) {
    a_sum += row.a_ns;
    if (row.phase == "forward" && row.layer_kind == "sliding" && row.part == "experts") {
      found = true;
      EXPECT_EQ(row.b_ns, 2000000);
      EXPECT_EQ(row.a_ns, (14 + 15 + 16) * 1000 / 2);  // three rows, two steps
    }
  }
  EXPECT_TRUE(found);
  EXPECT_FALSE(part_diff_tables(d).empty());
  EXPECT_TRUE(to_json(d)["rows"].is_array());

  auto bad = [&](Json row) {  // a whole row (the table's fields) but for its one defect
    if (!row.contains("kernels")) row["kernels"] = 1;
    if (!row.contains("memcpy_memset_s")) row["memcpy_memset_s"] = 0;
    Json res = {{"by_phase_part", Json::array({row})}};
    EXPECT_THROW(part_side_from_evidence(res, "kernels", "bad.json"), Error) << row.dump();
  };
  bad({{"phase", "sideways"}, {"layer_kind", "-"}, {"part", "experts"}, {"kernel_s", 1}});
  bad({{"phase", "forward"}, {"layer_kind", "-"}, {"part", "lm"}, {"kernel_s", 1}});
  bad({{"phase", "forward"}, {"layer_kind", "-"}, {"part", "experts"}, {"kernel_s", -1}});
  bad({{"phase", "forward"}, {"layer_kind", "-"}, {"part", "experts"}, {"kernel_s", "1"}});
  bad({{"phase", "forward"}, {"layer_kind", "-"}, {"part", "experts"}});
  bad({{"phase", "forward"}, {"layer_kind", "-"}, {"part", "experts"}, {"kernel_s", 1},
       {"kernels", -2}});
  bad({{"phase", "forward"}, {"layer_kind", 3}, {"part", "experts"}, {"kernel_s", 1}});
  EXPECT_THROW(part_side_from_evidence(Json{{"by_phase_part", 5}}, "kernels", "x"), Error);
  // A side without rows says why, and the diff says so too.
  PartSide none = part_side_from_evidence(Json::object(), "kernels", "empty.json");
  EXPECT_FALSE(none.available);
  EXPECT_FALSE(diff_parts(a, none).available);
}

}  // namespace
}  // namespace tprobe::core
