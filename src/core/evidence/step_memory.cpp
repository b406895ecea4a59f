// The memory step's fields (step_memory.hpp): the custom ones' writers and readers.
#include "tprobe/core/evidence/step_memory.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace tprobe::core {

const std::array<const char*, kMemorySlots>& memory_slot_names() {
  static const std::array<const char*, kMemorySlots> names = {
      "resident",   "embedding", "attention_proj", "attention_core", "dense_mlp",
      "router",     "experts",   "loss_head",      "other",          "untagged"};
  return names;
}

Json to_json(const StepMemory& m) { return evidence::to_json(m); }
StepMemory step_memory_from_json(const Json& j, const std::string& where) {
  return evidence::from_json<StepMemory>(j, where);
}

namespace evidence_detail {

namespace jr = json_read;

void read_grad_ptrs(MemoryFacts& f, const Json& v, const std::string& w, const char* key) {
  const std::string at = w + "." + key;
  if (!v.is_array()) fail("{}: must be a list", at);
  for (std::size_t i = 0; i < v.size(); ++i)
    f.lora_grad_ptrs.insert(jr::element_unsigned(v[i], fmt::format("{}[{}]", at, i)));
}

// Written since --optimizer (a file from before it ran no optimizer and has none).
void read_state_bytes(MemoryFacts& f, const Json& v, const std::string& w, const char* key) {
  f.optimizer_state_bytes = jr::element_integer(v, fmt::format("{}: field '{}'", w, key), 0,
                                                kMaxMemoryBytes);
  if (f.optimizer_state_bytes > 0 && !f.optimizer_ran)
    fail("{}: '{}' is {} but 'optimizer_ran' is false", w, key, f.optimizer_state_bytes);
}

void read_by_slot(MemorySample& s, const Json& v, const std::string& w, const char* key) {
  const auto by = evidence::detail::decode<std::vector<int64_t>>(v, w + "." + key);
  if (by.size() != kMemorySlots)
    fail("{}: field '{}' has {} entries, expected {} (one per slot)", w, key, by.size(),
         kMemorySlots);
  std::copy(by.begin(), by.end(), s.by_slot.begin());
}

Json peak_at_json(const StepMemory& m) {
  return {{"phase", m.peak_phase},
          {"part", m.peak_part},
          {"layer_kind", m.peak_layer_kind},
          {"layer", m.peak_layer}};
}
void read_peak_at(StepMemory& m, const Json& v, const std::string& w, const char* key) {
  const std::string at = w + "." + key;
  if (!v.is_object()) fail("{}: must be an object", at);
  m.peak_phase = jr::string(v, "phase", at);
  m.peak_part = jr::string(v, "part", at);
  m.peak_layer_kind = jr::string(v, "layer_kind", at);
  m.peak_layer = static_cast<int32_t>(jr::integer(v, "layer", at, -1, INT32_MAX));
}

Json items_sum_json(const StepMemory& m) {
  int64_t sum = 0;
  for (const MemoryItem& it : m.items) {
    if (it.in_peak && __builtin_add_overflow(sum, it.bytes, &sum)) return nullptr;
  }
  return sum;
}

Json timeline_json(const StepMemory& m) {
  return {{"slots", Json(memory_slot_names())}, {"samples", evidence::detail::encode(m.timeline)}};
}
void read_timeline(StepMemory& m, const Json& v, const std::string& w, const char* key) {
  const std::string tl = w + "." + key;
  if (!v.is_object()) fail("{}: must be an object", tl);
  const std::vector<std::string> slots = jr::strings(v, "slots", tl);
  const auto& names = memory_slot_names();
  if (slots.size() != names.size() || !std::equal(slots.begin(), slots.end(), names.begin())) {
    fail("{}: field 'slots' is not this tprobe's {} memory slots (resident, the step's parts, "
         "untagged)", tl, names.size());
  }
  m.timeline = evidence::detail::decode<std::vector<MemorySample>>(jr::array(v, "samples", tl),
                                                                   tl + ".samples");
}

}  // namespace evidence_detail

}  // namespace tprobe::core
