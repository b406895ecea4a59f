// The memory replay (core/trace/step_memory): hand-worked histories, the raw file's round trip
// and its refusals, and the negative control (no scopes: the bytes stay untagged).
#include "tprobe/core/trace/attribute/step_memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

StepTag tag(StepPhase ph, StepPart pa, int32_t layer = -1,
            std::optional<LayerType> kind = std::nullopt) {
  return StepTag{ph, pa, layer, kind};
}

LaunchContext scope(int64_t id) {
  LaunchContext c;
  c.tag = id;
  return c;
}
LaunchContext node(uint64_t thread, int64_t seq) {
  LaunchContext c;
  c.node = true;
  c.node_thread = thread;
  c.node_seq = seq;
  return c;
}

// A step in miniature. Resident 1000 bytes (600 weights, 100 LoRA, 300 inputs and workspace).
//   0  forward layer 0 other      +200 (the checkpointed input of layer 1; alive to the end)
//   1  loss head                  +500
//   2  loss head                  -500
//   3  recompute layer 0 experts  +300
//   4  backward node made by tag 3's scope (experts, layer 0)  +50  (a LoRA grad, kept)
//   5  no context                 +25
//      -> peak here: 1000 + 200 + 300 + 50 + 25 = 1575
//   6  recompute frees            -300
//   7  a resident block freed     -100 (allocated before the window)
//   8  backward node with no forward op  +40
RawMemory mini(bool with_totals) {
  RawMemory r;
  r.device = with_totals ? "cuda:0" : "cpu";
  r.totals_known = with_totals;
  r.start_allocated = 1000;
  r.start_reserved = 4096;
  r.tags = {tag(StepPhase::kForward, StepPart::kOther, 0, LayerType::kSliding),
            tag(StepPhase::kLoss, StepPart::kLossHead),
            tag(StepPhase::kRecompute, StepPart::kExperts, 0, LayerType::kSliding)};
  r.forward_ops = {{7, 11, 3}};
  auto ev = [&](int64_t t, uint64_t ptr, int64_t bytes, LaunchContext c, int64_t total) {
    MemoryEvent e;
    e.t_ns = t;
    e.ptr = ptr;
    e.bytes = bytes;
    e.context = c;
    e.total_allocated = with_totals ? total : -1;
    e.total_reserved = with_totals ? 4096 : -1;
    r.events.push_back(e);
  };
  ev(10, 0xa0, 200, scope(1), 1200);
  ev(20, 0xb0, 500, scope(2), 1700);
  ev(30, 0xb0, -500, scope(2), 1200);
  ev(40, 0xc0, 300, scope(3), 1500);
  ev(50, 0xd0, 50, node(7, 11), 1550);
  ev(60, 0xe0, 25, LaunchContext{}, 1575);
  ev(70, 0xc0, -300, scope(3), 1275);
  ev(80, 0xf0, -100, LaunchContext{}, 1175);
  ev(90, 0x100, 40, node(7, 99), 1215);
  return r;
}

MemoryFacts mini_facts();

RawMemory with_facts(RawMemory r, const MemoryFacts& f) {
  r.facts = f;
  return r;
}

MemoryFacts mini_facts() {
  MemoryFacts f;
  f.weights_bytes = 600;
  f.lora_parameter_bytes = 100;
  f.lora_parameters = 25;
  f.lora_grad_ptrs = {0xd0};
  return f;
}

int64_t item(const StepMemory& m, const std::string& key) {
  for (const auto& it : m.items) {
    if (it.key == key) return it.bytes;
  }
  ADD_FAILURE() << "no item " << key;
  return -1;
}

TEST(StepMemory, PeakIsTheLargestRunningTotalAndTheLossHeadsTransientIsGoneByThen) {
  // The loss head's 500 made a higher total (1700) than the recompute's: the peak is event 1.
  StepMemory m = analyze_step_memory(with_facts(mini(true), mini_facts()));
  EXPECT_EQ(m.peak_allocated, 1700);
  EXPECT_EQ(m.peak_event, 1);
  EXPECT_EQ(m.peak_t_ns, 20);
  EXPECT_EQ(m.peak_phase, "loss");
  EXPECT_EQ(m.peak_part, "loss_head");
  EXPECT_EQ(m.end_allocated, 1215);
  EXPECT_EQ(m.total_mismatches, 0);
  EXPECT_EQ(m.reserved_at_peak, 4096);
  EXPECT_EQ(item(m, "loss_head"), 500);
  EXPECT_EQ(item(m, "forward_kept"), 200);
  EXPECT_EQ(item(m, "weights"), 600);
  EXPECT_EQ(item(m, "lora_parameters"), 100);
  EXPECT_EQ(item(m, "resident_other"), 300);
  EXPECT_EQ(item(m, "recompute"), 0);
  EXPECT_EQ(item(m, "fragmentation"), 4096 - 1700);
  EXPECT_EQ(item(m, "adamw_states"), 25 * 8);
}

TEST(StepMemory, ItemsAddUpToThePeakAndCellsToWhatTheStepAllocated) {
  RawMemory r = mini(true);
  r.events[1].bytes = 100;  // a smaller loss head: the peak moves to the recompute (event 5)
  r.events[2].bytes = -100;
  for (size_t i = 1; i < r.events.size(); ++i) r.events[i].total_allocated = -1;
  StepMemory m = analyze_step_memory(with_facts(r, mini_facts()));
  EXPECT_EQ(m.peak_event, 5);
  EXPECT_EQ(m.peak_allocated, 1575);
  EXPECT_EQ(m.peak_phase, "untagged");
  int64_t sum = 0;
  for (const auto& it : m.items) {
    if (it.in_peak) sum += it.bytes;
  }
  EXPECT_EQ(sum, m.peak_allocated);
  EXPECT_EQ(item(m, "recompute"), 300);
  EXPECT_EQ(item(m, "lora_gradients"), 50);  // the node's block holds a .grad at the end
  EXPECT_EQ(item(m, "backward"), 0);
  EXPECT_EQ(item(m, "untagged"), 25);
  int64_t cells = 0;
  for (const auto& c : m.alive_at_peak) cells += c.bytes;
  EXPECT_EQ(cells, 200 + 300 + 50 + 25);
  // The backward node's block takes the recompute scope's part and layer, phase backward.
  bool found = false;
  for (const auto& c : m.alive_at_peak) {
    if (c.phase == "backward") {
      found = true;
      EXPECT_EQ(c.part, "experts");
      EXPECT_EQ(c.layer, 0);
      EXPECT_EQ(c.layer_kind, "sliding");
      EXPECT_EQ(c.bytes, 50);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(m.frees_of_resident, 1);
}

TEST(StepMemory, WithoutScopesEveryByteStaysUntaggedNeverGuessed) {
  // The negative control: the same history with every context removed.
  RawMemory r = mini(true);
  for (auto& e : r.events) e.context = LaunchContext{};
  r.forward_ops.clear();
  StepMemory m = analyze_step_memory(with_facts(r, MemoryFacts{}));
  for (const auto& c : m.alive_at_peak) {
    EXPECT_EQ(c.phase, "untagged");
    EXPECT_EQ(c.part, "untagged");
  }
  EXPECT_EQ(item(m, "loss_head"), 0);
  EXPECT_EQ(item(m, "forward_kept"), 0);
  EXPECT_EQ(item(m, "untagged"), 700);  // 200 + 500 alive at the peak (event 1)
  // With no facts the whole resident set is "workspace and inputs".
  EXPECT_EQ(item(m, "resident_other"), 1000);
}

TEST(StepMemory, ANodeWithoutItsForwardOpIsUntagged) {
  RawMemory r = mini(false);
  StepMemory m = analyze_step_memory(with_facts(r, mini_facts()));
  // Event 8 (node 7/99) is after the peak; move the peak past it with a large last allocation.
  MemoryEvent big;
  big.t_ns = 100;
  big.ptr = 0x200;
  big.bytes = 10000;
  big.context = node(7, 99);
  r.events.push_back(big);
  m = analyze_step_memory(with_facts(r, mini_facts()));
  EXPECT_EQ(m.peak_event, 9);
  EXPECT_EQ(m.peak_phase, "untagged");
  EXPECT_EQ(item(m, "untagged"), 25 + 40 + 10000);
  EXPECT_EQ(m.total_mismatches, 0);  // no totals on the CPU: nothing to check
  EXPECT_FALSE(m.totals_known);
}

TEST(StepMemory, TheReplayFollowsTheAllocatorsTotalAndCountsWhereItDoesNot) {
  RawMemory r = mini(true);
  r.events[3].total_allocated += 512;  // the allocator said otherwise once
  StepMemory m = analyze_step_memory(with_facts(r, mini_facts()));
  EXPECT_EQ(m.total_mismatches, 1);
}

TEST(StepMemory, TimelineKeepsThePeakAndEachBucketsLargest) {
  RawMemory r = mini(true);
  StepMemory m = analyze_step_memory(with_facts(r, mini_facts()), 4);  // 9 events, buckets of 3
  ASSERT_EQ(m.timeline.size(), 4u);  // the start + 3 buckets
  EXPECT_EQ(m.timeline[0].event, -1);
  EXPECT_EQ(m.timeline[0].allocated, 1000);
  EXPECT_EQ(m.timeline[1].allocated, 1700);  // events 0..2: the peak
  EXPECT_EQ(m.timeline[1].event, 1);
  EXPECT_EQ(m.timeline[2].allocated, 1575);  // events 3..5
  EXPECT_EQ(m.timeline[3].allocated, 1275);  // events 6..8
  for (const auto& s : m.timeline) {
    EXPECT_EQ(std::accumulate(s.by_slot.begin(), s.by_slot.end(), int64_t{0}), s.allocated);
  }
  // At the peak: resident 1000, other 200 (layer 0's forward), loss_head 500.
  const auto& p = m.timeline[1].by_slot;
  EXPECT_EQ(p[0], 1000);
  EXPECT_EQ(p[8], 200);
  EXPECT_EQ(p[7], 500);
}

TEST(StepMemory, RawFileRoundTripsAndTheReplayIsTheSame) {
  RawMemory r = with_facts(mini(true), mini_facts());
  const std::string text = to_json(r).dump();
  RawMemory back = parse_raw_memory(text, "mem.json");
  ASSERT_EQ(back.events.size(), r.events.size());
  EXPECT_EQ(to_json(back).dump(), text);
  EXPECT_EQ(to_json(analyze_step_memory(with_facts(back, mini_facts()))).dump(),
            to_json(analyze_step_memory(with_facts(r, mini_facts()))).dump());
}

TEST(StepMemory, BrokenFilesAreRefusedOnOneLine) {
  const std::string good = to_json(with_facts(mini(true), mini_facts())).dump();
  auto refuse = [](const std::string& text, const std::string& expected) {
    try {
      parse_raw_memory(text, "mem.json");
      ADD_FAILURE() << "accepted: " << text.substr(0, 200);
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find(expected), std::string::npos) << what;
      EXPECT_NE(what.find("mem.json"), std::string::npos) << what;
    }
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  refuse("", "");
  refuse("[]", "not a JSON object");
  refuse(replaced("tprobe.raw_memory", "tprobe.raw_trace"), "schema.name");
  refuse(replaced("\"version\":1", "\"version\":2"), "schema.version");
  refuse(replaced("\"device\":\"cuda:0\"", "\"device\":3"), "'device'");
  refuse(replaced("\"totals_known\":true", "\"totals_known\":1"), "totals_known");
  refuse(replaced("\"start_allocated\":1000", "\"start_allocated\":-5"), "start_allocated");
  refuse(replaced("[10,160,200,1200,4096,[1]]", "[10,160,200,1200,4096,[9]]"), "tag");
  refuse(replaced("[10,160,200,1200,4096,[1]]", "[10,160,0,1200,4096,[1]]"), "bytes must not be 0");
  refuse(replaced("[10,160,200,1200,4096,[1]]", "[10,160,200,1200,4096]"), "must be [t_ns");
  refuse(replaced("[10,160,200,1200,4096,[1]]", "[10,160,\"200\",1200,4096,[1]]"), "bytes");
  refuse(replaced("[10,160,200,1200,4096,[1]]", "[10,-160,200,1200,4096,[1]]"), "ptr");
  refuse(replaced("[10,160,200,1200,4096,[1]]", "[10,160,99999999999999999999,1200,4096,[1]]"),
         "bytes");
  refuse(replaced("[10,160,200,1200,4096,[1]]", "[10,160,200,1200,4096,[1,2,3]]"), "context");
  refuse(replaced("\"events\":[", "\"events\":{\"a\":1},\"x\":["), "");
  refuse(replaced("\"checkpointing\":true", "\"checkpointing\":\"yes\""), "checkpointing");
  refuse(replaced("\"lora_grad_ptrs\":[208]", "\"lora_grad_ptrs\":[-1]"), "lora_grad_ptrs");
  // The optimizer's states: a size, and only where the optimizer ran.
  refuse(replaced("\"optimizer_state_bytes\":0", "\"optimizer_state_bytes\":-8"),
         "optimizer_state_bytes");
  refuse(replaced("\"optimizer_state_bytes\":0", "\"optimizer_state_bytes\":\"8\""),
         "optimizer_state_bytes");
  refuse(replaced("\"optimizer_state_bytes\":0", "\"optimizer_state_bytes\":200"),
         "'optimizer_ran' is false");
  // Negative control: the same states with the optimizer run are read; and a file written before
  // the field existed (no optimizer then) reads as no states.
  RawMemory ran = parse_raw_memory(
      replaced("\"optimizer_ran\":false,\"optimizer_state_bytes\":0",
               "\"optimizer_ran\":true,\"optimizer_state_bytes\":200"),
      "mem.json");
  EXPECT_TRUE(ran.facts.optimizer_ran);
  EXPECT_EQ(ran.facts.optimizer_state_bytes, 200);
  const RawMemory older = parse_raw_memory(replaced(",\"optimizer_state_bytes\":0", ""), "mem.json");
  EXPECT_FALSE(older.facts.optimizer_ran);
  EXPECT_EQ(older.facts.optimizer_state_bytes, 0);
}

// A step that ends with AdamW (--optimizer adamw), measured after the optimizer's first step: its
// two moments per LoRA parameter are resident when the window opens, so they are an item in the
// peak, carved from the resident set like the weights; the in-peak items still add up to the
// peak, and nothing stands beside it for them. The same history without the optimizer (its
// states not resident) puts them beside the peak, computed.
TEST(StepMemory, AdamWStatesAreInThePeakWhenTheOptimizerRan) {
  MemoryFacts f = mini_facts();
  const int64_t states = adamw_state_bytes(f.lora_parameters);  // 25 parameters: 200 B
  EXPECT_EQ(states, 200);
  RawMemory with_states = mini(true);
  with_states.start_allocated += states;  // resident since the optimizer's first step
  for (MemoryEvent& e : with_states.events) e.total_allocated += states;
  f.optimizer_ran = true;
  f.optimizer_state_bytes = states;
  const StepMemory m = analyze_step_memory(with_facts(with_states, f));
  const StepMemory none = analyze_step_memory(with_facts(mini(true), mini_facts()));
  EXPECT_EQ(m.total_mismatches, 0);
  EXPECT_EQ(m.peak_allocated, none.peak_allocated + states);
  int sum = 0, entries = 0;
  for (const MemoryItem& it : m.items) {
    if (it.in_peak) sum += static_cast<int>(it.bytes);
    if (it.key != "adamw_states") continue;
    ++entries;
    EXPECT_TRUE(it.in_peak);
    EXPECT_EQ(it.bytes, states);
  }
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(sum, m.peak_allocated);
  EXPECT_EQ(item(m, "resident_other"), item(none, "resident_other"));  // 300: not the states
  EXPECT_EQ(item(m, "weights"), 600);
  for (const MemoryItem& it : none.items) {
    if (it.key == "adamw_states") {
      EXPECT_FALSE(it.in_peak);
    }
  }
  // The states are never more than the resident set holds beyond the weights and adapters.
  f.optimizer_state_bytes = 1 << 20;
  const StepMemory capped = analyze_step_memory(with_facts(with_states, f));
  EXPECT_EQ(item(capped, "adamw_states"), 300 + states);
  EXPECT_EQ(item(capped, "resident_other"), 0);
}

TEST(StepMemory, AReplayThatCannotBeRightIsRefused) {
  RawMemory r = mini(true);
  r.dropped_events = 3;
  EXPECT_THROW(analyze_step_memory(with_facts(r, MemoryFacts{})), Error);
  r = mini(true);
  r.events[3].ptr = 0xa0;  // allocated twice without a free
  EXPECT_THROW(analyze_step_memory(with_facts(r, MemoryFacts{})), Error);
  r = mini(true);
  r.events[2].bytes = -400;  // freed with another size than allocated
  EXPECT_THROW(analyze_step_memory(with_facts(r, MemoryFacts{})), Error);
}

}  // namespace
}  // namespace tprobe::core

namespace tprobe::core {
namespace {

// A history recorded on the H200 (benchmarks/gpu/memory-faithful.sh: the tiny model on CUDA,
// `profile --raw-memory`), replayed here without a GPU: the replay must follow the caching
// allocator's own total at every event, its items must add up to its peak, and the peak must be
// the largest total the allocator itself reported.
TEST(StepMemory, ARecordedCudaHistoryReplaysToTheAllocatorsOwnTotals) {
  const RawMemory raw =
      read_raw_memory(std::string(TPROBE_FIXTURES_DIR) + "/raw-memory-tiny-cuda.json");
  ASSERT_TRUE(raw.totals_known);
  ASSERT_GT(raw.events.size(), 1000u);
  int64_t largest = raw.start_allocated;
  for (const auto& e : raw.events) largest = std::max(largest, e.total_allocated);
  const StepMemory m = analyze_step_memory(raw);
  EXPECT_EQ(m.total_mismatches, 0);
  EXPECT_EQ(m.peak_allocated, largest);
  int64_t sum = 0;
  for (const auto& it : m.items) {
    if (it.in_peak) sum += it.bytes;
    EXPECT_GE(it.bytes, 0) << it.key;
  }
  EXPECT_EQ(sum, m.peak_allocated);
  // Every block of the step alive at the peak carries a scope or a linked node.
  EXPECT_EQ(m.untagged_bytes_at_peak, 0);
  int64_t cells = 0;
  for (const auto& c : m.alive_at_peak) cells += c.bytes;
  EXPECT_GT(cells, 0);

  // The negative control on the real history: without the scopes and the links, nothing that
  // was a part stays one.
  RawMemory stripped = raw;
  for (auto& e : stripped.events) e.context = LaunchContext{};
  stripped.forward_ops.clear();
  const StepMemory u = analyze_step_memory(stripped);
  EXPECT_EQ(u.peak_allocated, m.peak_allocated);
  EXPECT_EQ(u.untagged_bytes_at_peak + [&] {
    for (const auto& it : u.items) {
      if (it.key == "lora_gradients") return it.bytes;
    }
    return int64_t{0};
  }(), cells);
  for (const auto& c : u.alive_at_peak) EXPECT_EQ(c.part, "untagged");
}

}  // namespace
}  // namespace tprobe::core
