// The replay of one recorded step's allocator events (step_memory.hpp): peak, alive-at-peak cells,
// budget items and the timeline; and the tprobe.raw_memory file.
#include "tprobe/core/trace/attribute/step_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "base/decoded_file.hpp"
#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "trace/attribute/detail/step_trace_internal.hpp"

namespace tprobe::core {

int64_t adamw_state_bytes(int64_t parameters) { return parameters * 2 * 4; }

// ---- the file ---------------------------------------------------------------------------------

Json to_json(const RawMemory& raw) {
  Json out;
  out["schema"] = {{"name", "tprobe.raw_memory"}, {"version", 1}};
  out["device"] = raw.device;
  out["totals_known"] = raw.totals_known;
  out["start_allocated"] = raw.start_allocated;
  out["start_reserved"] = raw.start_reserved;
  out["dropped_events"] = raw.dropped_events;
  out["tags"] = detail::tags_json(raw.tags);
  out["forward_ops"] = detail::forward_ops_json(raw.forward_ops);
  out["facts"] = evidence::to_json(raw.facts);
  // One array per event, the context as [tag] or [node_thread, node_seq] (none: []): a step's
  // history is tens of thousands of events, and objects would triple the file.
  Json events = Json::array();
  for (const MemoryEvent& e : raw.events) {
    Json ctx = Json::array();
    if (e.context.node) {
      ctx = {e.context.node_thread, e.context.node_seq};
    } else if (e.context.tag > 0) {
      ctx = {e.context.tag};
    }
    events.push_back({e.t_ns, e.ptr, e.bytes, e.total_allocated, e.total_reserved, ctx});
  }
  out["events"] = std::move(events);
  return out;
}

namespace {

int64_t element_int(const Json& v, const std::string& where, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) fail("{}: must be an integer", where);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail("{}: is outside {}..{}", where, lo, hi);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) fail("{}: {} is outside {}..{}", where, x, lo, hi);
  return x;
}

}  // namespace

RawMemory parse_raw_memory(std::string_view text, const std::string& path) {
  Json doc = detail::parse_json_strict(text, path);
  if (!doc.is_object()) fail("{}: not a JSON object", path);
  auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_object() || !schema->contains("name") ||
      !(*schema)["name"].is_string() || (*schema)["name"] != "tprobe.raw_memory")
    fail("{}: schema.name must be \"tprobe.raw_memory\"", path);
  if (detail::json_int(*schema, "version", path + " schema", 0, 1000) != 1)
    fail("{}: schema.version must be 1", path);
  RawMemory m;
  auto dev = doc.find("device");
  if (dev == doc.end() || !dev->is_string()) fail("{}: 'device' must be a string", path);
  m.device = dev->get<std::string>();
  auto known = doc.find("totals_known");
  if (known == doc.end() || !known->is_boolean()) fail("{}: 'totals_known' must be true or false", path);
  m.totals_known = known->get<bool>();
  m.start_allocated = detail::json_int(doc, "start_allocated", path, 0, kMaxMemoryBytes);
  m.start_reserved = detail::json_int(doc, "start_reserved", path, 0, kMaxMemoryBytes);
  m.dropped_events = detail::json_int(doc, "dropped_events", path, 0, INT64_MAX);
  auto tags = doc.find("tags");
  if (tags == doc.end() || !tags->is_array()) fail("{}: 'tags' must be an array", path);
  m.tags = detail::parse_tags(*tags, path);
  const auto ntags = static_cast<int64_t>(m.tags.size());
  auto fwd = doc.find("forward_ops");
  if (fwd == doc.end() || !fwd->is_array()) fail("{}: 'forward_ops' must be an array", path);
  m.forward_ops = detail::parse_forward_ops(*fwd, path, ntags);
  m.facts = evidence::from_json<MemoryFacts>(json_read::field(doc, "facts", path), path + " facts");
  auto events = doc.find("events");
  if (events == doc.end() || !events->is_array()) fail("{}: 'events' must be an array", path);
  m.events.reserve(events->size());
  for (size_t i = 0; i < events->size(); ++i) {
    const std::string where = fmt::format("{}: events[{}]", path, i);
    const Json& j = (*events)[i];
    if (!j.is_array() || j.size() != 6)
      fail("{}: must be [t_ns, ptr, bytes, total_allocated, total_reserved, context]", where);
    MemoryEvent e;
    e.t_ns = element_int(j[0], where + " t_ns", 0, INT64_MAX / 2);
    e.ptr = detail::json_uint(j[1], where + " ptr");
    e.bytes = element_int(j[2], where + " bytes", -kMaxMemoryBytes, kMaxMemoryBytes);
    if (e.bytes == 0) fail("{}: bytes must not be 0", where);
    e.total_allocated = element_int(j[3], where + " total_allocated", -1, kMaxMemoryBytes);
    e.total_reserved = element_int(j[4], where + " total_reserved", -1, kMaxMemoryBytes);
    const Json& c = j[5];
    if (!c.is_array() || c.size() > 2) fail("{}: context must be [], [tag] or [thread, seq]", where);
    if (c.size() == 1) {
      e.context.tag = element_int(c[0], where + " tag", 1, ntags);
    } else if (c.size() == 2) {
      e.context.node = true;
      e.context.node_thread = detail::json_uint(c[0], where + " node thread");
      e.context.node_seq = element_int(c[1], where + " node seq", 0, INT64_MAX);
    }
    m.events.push_back(e);
  }
  return m;
}

RawMemory read_raw_memory(const std::string& path) {
  return parse_raw_memory(detail::read_decoded_file(path, "a raw memory history of one step"),
                          path);
}

// ---- the replay -------------------------------------------------------------------------------

namespace {

constexpr size_t kResidentSlot = 0, kUntaggedSlot = kMemorySlots - 1;

// The engine's parts in enum order; shared_experts (a user's trace only) has no slot here: the
// engine never allocates under it.
size_t slot_of(StepPart part) {
  return part == StepPart::kSharedExperts ? kUntaggedSlot : 1 + static_cast<size_t>(part);
}

struct Alive {
  int64_t bytes = 0;
  int64_t event = 0;
  std::optional<StepTag> tag;
};

}  // namespace

// Size: two passes over one event list (the peak, then what is alive at it) and its budget.
StepMemory analyze_step_memory(const RawMemory& raw, size_t max_samples) {
  const MemoryFacts& facts = raw.facts;
  if (raw.dropped_events > 0)
    fail("the memory history dropped {} events: the replay would be wrong, so there is none",
         raw.dropped_events);
  if (max_samples < 2) max_samples = 2;
  StepMemory m;
  m.device = raw.device;
  m.totals_known = raw.totals_known;
  m.events = static_cast<int64_t>(raw.events.size());
  m.start_allocated = raw.start_allocated;

  std::map<std::pair<uint64_t, int64_t>, int64_t> made_by;  // (thread, seq) -> tag id
  for (const auto& f : raw.forward_ops) made_by[{f.thread, f.seq}] = f.tag;
  auto tag_of = [&](const LaunchContext& c) -> std::optional<StepTag> {
    if (!c.node) {
      if (c.tag <= 0) return std::nullopt;
      return raw.tags.at(static_cast<size_t>(c.tag - 1));
    }
    auto it = made_by.find({c.node_thread, c.node_seq});
    if (it == made_by.end() || it->second == 0) return std::nullopt;
    return backward_of(raw.tags.at(static_cast<size_t>(it->second - 1)));
  };

  // First pass: the running total, its peak, and the timeline.
  std::unordered_map<uint64_t, Alive> live;
  live.reserve(raw.events.size() / 2 + 1);
  std::array<int64_t, kMemorySlots> slots{};
  slots[kResidentSlot] = raw.start_allocated;
  int64_t cur = raw.start_allocated;
  int64_t reserved = raw.totals_known ? raw.start_reserved : -1;
  m.peak_allocated = cur;
  m.peak_reserved = reserved;
  m.reserved_at_peak = reserved;
  const size_t n = raw.events.size();
  const size_t per_bucket = std::max<size_t>(1, (n + max_samples - 2) / (max_samples - 1));
  MemorySample bucket_best;
  bool bucket_open = false;
  m.timeline.push_back({-1, 0, cur, reserved, slots});
  std::vector<std::optional<StepTag>> event_tags(n);
  for (size_t i = 0; i < n; ++i) {
    const MemoryEvent& e = raw.events[i];
    cur += e.bytes;
    if (e.bytes > 0) {
      event_tags[i] = tag_of(e.context);
      const size_t slot = event_tags[i] ? slot_of(event_tags[i]->part) : kUntaggedSlot;
      if (!live.emplace(e.ptr, Alive{e.bytes, static_cast<int64_t>(i), event_tags[i]}).second)
        fail("memory event {}: block {:#x} allocated twice without a free in between", i, e.ptr);
      slots[slot] += e.bytes;
    } else {
      auto it = live.find(e.ptr);
      if (it == live.end()) {
        ++m.frees_of_resident;
        slots[kResidentSlot] += e.bytes;
      } else {
        if (it->second.bytes != -e.bytes)
          fail("memory event {}: block {:#x} freed with {} bytes, allocated with {}", i, e.ptr,
               -e.bytes, it->second.bytes);
        const size_t slot = it->second.tag ? slot_of(it->second.tag->part) : kUntaggedSlot;
        slots[slot] += e.bytes;
        live.erase(it);
      }
    }
    if (raw.totals_known) {
      if (e.total_allocated >= 0 && e.total_allocated != cur) ++m.total_mismatches;
      if (e.total_reserved >= 0) reserved = e.total_reserved;
      m.peak_reserved = std::max(m.peak_reserved, reserved);
    }
    if (cur > m.peak_allocated) {
      m.peak_allocated = cur;
      m.peak_event = static_cast<int64_t>(i);
      m.peak_t_ns = e.t_ns;
      m.reserved_at_peak = reserved;
    }
    const MemorySample here{static_cast<int64_t>(i), e.t_ns, cur, reserved, slots};
    if (!bucket_open || here.allocated > bucket_best.allocated) bucket_best = here;
    bucket_open = true;
    if ((i + 1) % per_bucket == 0 || i + 1 == n) {
      m.timeline.push_back(bucket_best);
      bucket_open = false;
    }
  }
  m.end_allocated = cur;

  // Second pass: what is alive at the peak (allocated at or before it, not freed by then).
  std::unordered_map<uint64_t, Alive> at_peak;
  int64_t resident_at_peak = raw.start_allocated;
  for (int64_t i = 0; i <= m.peak_event; ++i) {
    const MemoryEvent& e = raw.events[static_cast<size_t>(i)];
    if (e.bytes > 0) {
      at_peak[e.ptr] = Alive{e.bytes, i, event_tags[static_cast<size_t>(i)]};
    } else if (at_peak.erase(e.ptr) == 0) {
      resident_at_peak += e.bytes;
    }
  }
  if (m.peak_event >= 0) {
    const auto& t = event_tags[static_cast<size_t>(m.peak_event)];
    m.peak_phase = t ? to_string(t->phase) : "untagged";
    m.peak_part = t ? to_string(t->part) : "untagged";
    m.peak_layer_kind = layer_kind_name(t ? t->layer_kind : std::nullopt);
    m.peak_layer = t ? t->layer : -1;
  } else {
    m.peak_phase = "before the step";
  }
  // Blocks alive at the peak that still hold a LoRA gradient when the step ends: allocated at or
  // before the peak and never freed in the window.
  std::set<int64_t> grad_events;
  for (const auto& [ptr, a] : live) {
    if (facts.lora_grad_ptrs.count(ptr) && a.event <= m.peak_event) grad_events.insert(a.event);
  }

  std::map<std::tuple<int, int, int, int32_t>, MemoryCell> cells;
  int64_t by_phase[5] = {0, 0, 0, 0, 0};
  int64_t grads = 0, untagged = 0;
  for (const auto& [ptr, a] : at_peak) {
    MemoryCell c;
    if (a.tag) {
      c.phase = to_string(a.tag->phase);
      c.part = to_string(a.tag->part);
      c.layer_kind = layer_kind_name(a.tag->layer_kind);
      c.layer = a.tag->layer;
    } else {
      c.phase = c.part = "untagged";
      c.layer_kind = "-";
    }
    auto key = std::make_tuple(phase_rank(c.phase), layer_kind_rank(c.layer_kind), part_rank(c.part),
                               c.layer);
    MemoryCell& cell = cells.emplace(key, c).first->second;
    cell.bytes += a.bytes;
    cell.blocks += 1;
    if (grad_events.count(a.event)) {
      grads += a.bytes;
    } else if (!a.tag) {
      untagged += a.bytes;
    } else {
      by_phase[static_cast<int>(a.tag->phase)] += a.bytes;
    }
  }
  for (auto& [k, c] : cells) m.alive_at_peak.push_back(std::move(c));
  m.untagged_bytes_at_peak = untagged;

  // The budget. The resident set is split into what the engine can name (weights, adapters, the
  // optimizer's states from its earlier steps) and the rest (inputs, the BLAS workspace, caches
  // the warm-up made); every other item is a phase's allocations alive at the peak.
  const int64_t weights = std::min(facts.weights_bytes, std::max<int64_t>(resident_at_peak, 0));
  const int64_t lora =
      std::min(facts.lora_parameter_bytes, std::max<int64_t>(resident_at_peak - weights, 0));
  const int64_t states =
      facts.optimizer_ran
          ? std::min(facts.optimizer_state_bytes,
                     std::max<int64_t>(resident_at_peak - weights - lora, 0))
          : 0;
  auto add = [&](std::string key, std::string label, int64_t bytes, std::string note,
                 bool in_peak = true) {
    m.items.push_back({std::move(key), std::move(label), bytes, in_peak, std::move(note)});
  };
  const bool cuda = raw.totals_known;
  add(memory_item::kWeights, "weights (frozen base)", weights, "the base model's parameters");
  add(memory_item::kLoraParameters, "LoRA parameters", lora, "the adapters' factors");
  if (facts.optimizer_ran) {
    add(memory_item::kAdamwStates, "AdamW m and v (optimizer states)", states,
        "AdamW's two moments per LoRA parameter (fp32 adapters: 8 B each), allocated at the "
        "optimizer's first step and resident since");
  }
  add("resident_other", "workspace and inputs (resident before the step)",
      resident_at_peak - weights - lora - states,
      cuda ? "allocated before the step and alive at its peak: the input ids, the BLAS workspace, "
             "caches the warm-up made"
           : "on the CPU the allocator reports only what it allocated while recording: the "
             "resident set is the parameters' and the optimizer states' own bytes");
  add(memory_item::kLoraGradients, "LoRA gradients", grads, "blocks that hold an adapter's .grad when the step ends");
  add(memory_item::kForwardKept,
      facts.checkpointing ? "checkpointed layer inputs (forward)" : "autograd's saved tensors (forward)",
      by_phase[static_cast<int>(StepPhase::kForward)],
      facts.checkpointing ? "forward allocations alive at the peak: each checkpointed layer's input "
                            "and the tensors the loss head saves"
                          : "forward allocations alive at the peak: what autograd saved for the "
                            "backward");
  add("loss_head", "loss head transient", by_phase[static_cast<int>(StepPhase::kLoss)],
      "the softcapped cross-entropy's own allocations, forward and backward");
  add("recompute", "recompute working set", by_phase[static_cast<int>(StepPhase::kRecompute)],
      "the recomputed layer's tensors (saved for its backward) alive at the peak");
  add("backward", "backward gradients in flight", by_phase[static_cast<int>(StepPhase::kBackward)],
      "activation gradients and the backward's temporaries alive at the peak");
  add("optimizer", "optimizer step", by_phase[static_cast<int>(StepPhase::kOptimizer)],
      "allocations of the optimizer's own phase");
  add("untagged", "untagged", untagged,
      "allocations made outside every engine scope and backward node: not given to a part");
  if (cuda && m.reserved_at_peak >= 0) {
    add("fragmentation", "reserved minus allocated (at the peak)",
        m.reserved_at_peak - m.peak_allocated,
        "cached blocks the allocator holds but no tensor uses: fragmentation and the cache",
        false);
  }
  if (!facts.optimizer_ran) {
    add(memory_item::kAdamwStates, "AdamW m and v (not run by the step)", adamw_state_bytes(facts.lora_parameters),
        "two fp32 moments per LoRA parameter, computed: the measured step ran no optimizer "
        "(--optimizer none)", false);
  }
  return m;
}

}  // namespace tprobe::core
