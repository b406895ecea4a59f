// The memory step's replay as profile's evidence holds it (results.points[].memory, docs/profile.md
// "Memory"), each field declared once (core/evidence/fields.hpp); core/trace/attribute's
// analyze_step_memory fills it, the views read the typed members.
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"

namespace tprobe::core {

// Bytes alive at the peak in one phase × layer kind × part × layer cell.
struct MemoryCell {
  std::string phase, part, layer_kind;  // "untagged" phase and part for no context
  int32_t layer = -1;
  int64_t bytes = 0;
  int64_t blocks = 0;
};

// One item of the budget. The items with in_peak add up to the peak exactly; the others stand
// beside it (reserved minus allocated, AdamW's states where the step ran no optimizer).
struct MemoryItem {
  std::string key, label;
  int64_t bytes = 0;
  bool in_peak = true;
  std::string note;
};
// The items' keys a view looks up by name (inspect --measured sets its estimate beside them);
// trace/attribute's analyze_step_memory writes the items.
namespace memory_item {
inline constexpr const char kWeights[] = "weights";
inline constexpr const char kLoraParameters[] = "lora_parameters";
inline constexpr const char kLoraGradients[] = "lora_gradients";
inline constexpr const char kAdamwStates[] = "adamw_states";
inline constexpr const char kForwardKept[] = "forward_kept";
}  // namespace memory_item

// What the engine knows beside a memory window's events (the tprobe.raw_memory file's `facts`,
// trace/attribute/step_memory.hpp): the sizes of the resident set's known members and the blocks
// that hold the adapters' gradients when the step ends.
inline constexpr int64_t kMaxMemoryBytes = int64_t{1} << 52;  // 4 PiB: no device holds more
struct MemoryFacts {
  int64_t weights_bytes = 0;          // base model parameters (storage bytes)
  int64_t lora_parameter_bytes = 0;   // LoRA factors
  int64_t lora_parameters = 0;        // their count (for the optimizer's states)
  std::set<uint64_t> lora_grad_ptrs;  // data pointers of the LoRA gradients after the step
  bool checkpointing = true;          // forward tensors kept are checkpointed layer inputs
  // The step ended with an optimizer step (--optimizer adamw) that had run before the window
  // opened: its states (optimizer_state_bytes, the moments' storage) are resident, in the peak.
  // false: the step ran no optimizer, and AdamW's states are computed beside the peak.
  bool optimizer_ran = false;
  int64_t optimizer_state_bytes = 0;
};

// The parts of a timeline sample, in this order: resident (alive since before the window),
// every StepPart in all_step_parts() order, untagged.
constexpr size_t kMemorySlots = 10;
const std::array<const char*, kMemorySlots>& memory_slot_names();

struct MemorySample {
  int64_t event = 0;  // index into the events (-1: the window's start)
  int64_t t_ns = 0;
  int64_t allocated = 0;
  int64_t reserved = -1;  // -1 where unknown
  std::array<int64_t, kMemorySlots> by_slot{};
};

struct StepMemory {
  std::string device;
  bool totals_known = false;
  int64_t events = 0;
  int64_t start_allocated = 0, end_allocated = 0;
  int64_t peak_allocated = 0;
  int64_t peak_event = -1;  // -1: the peak is the window's start
  int64_t peak_t_ns = 0;
  int64_t reserved_at_peak = -1;  // -1 where unknown
  int64_t peak_reserved = -1;     // the largest reserved total over the window
  std::string peak_phase, peak_part, peak_layer_kind;  // of the allocation that made the peak
  int32_t peak_layer = -1;
  // Checks of the replay against the allocator (CUDA): events whose running total differs from
  // the allocator's own, frees of blocks allocated before the window.
  int64_t total_mismatches = 0;
  int64_t frees_of_resident = 0;
  int64_t untagged_bytes_at_peak = 0;
  std::vector<MemoryCell> alive_at_peak;  // phase order, layer kind, part, layer
  std::vector<MemoryItem> items;
  std::vector<MemorySample> timeline;  // downsampled: each bucket's largest, the peak kept
};

Json to_json(const StepMemory& m);
// Its reader: every field to_json writes (items_sum_bytes and the timeline's slot names checked
// against what to_json would write), so to_json(step_memory_from_json(to_json(m))) is to_json(m).
// Throws tprobe::Error naming `where` and the field.
StepMemory step_memory_from_json(const Json& j, const std::string& where);

namespace evidence_detail {
void read_grad_ptrs(MemoryFacts& f, const Json& v, const std::string& w, const char* key);
void read_state_bytes(MemoryFacts& f, const Json& v, const std::string& w, const char* key);
void read_by_slot(MemorySample& s, const Json& v, const std::string& w, const char* key);
void read_peak_at(StepMemory& m, const Json& v, const std::string& w, const char* key);
void read_timeline(StepMemory& m, const Json& v, const std::string& w, const char* key);
Json peak_at_json(const StepMemory& m);
Json items_sum_json(const StepMemory& m);  // null where the in-peak items overflow
Json timeline_json(const StepMemory& m);
}  // namespace evidence_detail

inline auto evidence_fields(const MemoryFacts*) {
  using evidence::custom;
  using evidence::field;
  using F = MemoryFacts;
  namespace d = evidence_detail;
  return std::make_tuple(
      field("weights_bytes", &F::weights_bytes, "B", "the base model's parameters")
          .at_least(0).at_most(kMaxMemoryBytes),
      field("lora_parameter_bytes", &F::lora_parameter_bytes, "B", "the LoRA factors")
          .at_least(0).at_most(kMaxMemoryBytes),
      field("lora_parameters", &F::lora_parameters, "", "their count")
          .at_least(0).at_most(kMaxMemoryBytes),
      custom<F>("lora_grad_ptrs", +[](const F& f) { return Json(f.lora_grad_ptrs); },
                d::read_grad_ptrs, "[integer]", "", "the LoRA gradients' blocks after the step"),
      field("checkpointing", &F::checkpointing, "", "forward tensors kept are layer inputs"),
      field("optimizer_ran", &F::optimizer_ran, "", "AdamW had run before the window"),
      custom<F>("optimizer_state_bytes", +[](const F& f) { return Json(f.optimizer_state_bytes); },
                d::read_state_bytes, "integer", "B", "its states (absent before --optimizer)")
          .absent_ok());
}

constexpr auto evidence_fields(const MemoryCell*) {
  using evidence::field;
  using C = MemoryCell;
  return std::make_tuple(field("phase", &C::phase, "", "the step's phase"),
                         field("part", &C::part, "", "the model's part"),
                         field("layer_kind", &C::layer_kind, "", "sliding, full or - (none)"),
                         field("layer", &C::layer, "", "decoder layer, -1 for none").at_least(-1),
                         field("bytes", &C::bytes, "B", "alive at the peak").at_least(0),
                         field("blocks", &C::blocks, "", "the allocator's blocks").at_least(0));
}

constexpr auto evidence_fields(const MemoryItem*) {
  using evidence::field;
  using I = MemoryItem;
  return std::make_tuple(field("key", &I::key, "", "the item's name"),
                         field("label", &I::label, "", "its words"),
                         field("bytes", &I::bytes, "B", "its size"),
                         field("in_peak", &I::in_peak, "", "part of the peak (else beside it)"),
                         field("note", &I::note, "", "what it holds"));
}

inline auto evidence_fields(const MemorySample*) {
  using evidence::custom;
  using evidence::field;
  using S = MemorySample;
  namespace d = evidence_detail;
  return std::make_tuple(
      field("event", &S::event, "", "index into the events, -1: the window's start").at_least(-1),
      field("t_ns", &S::t_ns, "ns", "from the window's start"),
      field("allocated", &S::allocated, "B", "the replay's total"),
      field("reserved", &S::reserved, "B", "the allocator's reserved total").or_null(),
      custom<S>("by_slot", +[](const S& s) { return Json(s.by_slot); }, d::read_by_slot,
                "[integer]", "B", "allocated per slot (timeline.slots)"));
}

inline auto evidence_fields(const StepMemory*) {
  using evidence::custom;
  using evidence::derived;
  using evidence::field;
  using M = StepMemory;
  namespace d = evidence_detail;
  return std::make_tuple(
      field("device", &M::device, "", "cuda:0 or cpu"),
      field("allocator_totals", &M::totals_known, "", "the events carry the allocator's totals"),
      field("events", &M::events, "", "the allocator's events replayed").at_least(0),
      field("start_allocated_bytes", &M::start_allocated, "B", "allocated when the window opened")
          .at_least(0),
      field("end_allocated_bytes", &M::end_allocated, "B", "allocated when it closed"),
      field("peak_allocated_bytes", &M::peak_allocated, "B", "the replay's peak").at_least(0),
      field("peak_event", &M::peak_event, "", "the peak's event, -1 for the start").at_least(-1),
      field("peak_t_ns", &M::peak_t_ns, "ns", "its time"),
      field("reserved_at_peak_bytes", &M::reserved_at_peak, "B", "reserved at the peak").or_null(),
      field("peak_reserved_bytes", &M::peak_reserved, "B", "the largest reserved total").or_null(),
      custom<M>("peak_at", d::peak_at_json, d::read_peak_at, "object", "",
                "phase, part, layer_kind, layer of the allocation that made the peak"),
      field("total_mismatches", &M::total_mismatches, "", "events where the replay's total differs")
          .at_least(0),
      field("frees_of_resident", &M::frees_of_resident, "", "frees of blocks older than it")
          .at_least(0),
      field("untagged_bytes_at_peak", &M::untagged_bytes_at_peak, "B", "alive at the peak, no tag")
          .at_least(0),
      field("items", &M::items, "", "the peak's budget"),
      derived<M>("items_sum_bytes", d::items_sum_json, "integer", "B", "the in-peak items' sum"),
      field("alive_at_peak", &M::alive_at_peak, "", "bytes alive at the peak by cell"),
      custom<M>("timeline", d::timeline_json, d::read_timeline, "object", "",
                "slots (resident, the parts, untagged) and samples[] (below)"));
}

}  // namespace tprobe::core
