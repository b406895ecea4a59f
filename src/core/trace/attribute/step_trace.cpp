// The step vocabulary, the raw trace format (tprobe.raw_trace v2) and the attribution of device
// records to phase, part and layer through launch contexts and autograd's sequence numbers.
#include "tprobe/core/trace/attribute/step_trace.hpp"

#include "trace/attribute/detail/step_trace_internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>
#include <utility>

#include "base/decoded_file.hpp"
#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"

namespace tprobe::core {

namespace {

constexpr std::array<const char*, 5> kPhaseNames = {"forward", "loss", "recompute", "backward",
                                                    "optimizer"};
constexpr std::array<const char*, 9> kPartNames = {
    "embedding", "attention_proj", "attention_core", "dense_mlp",     "router",
    "experts",   "loss_head",      "other",          "shared_experts"};

template <typename Enum, size_t N>
std::optional<Enum> parse_name(std::string_view text, const std::array<const char*, N>& names) {
  for (size_t i = 0; i < N; ++i) {
    if (text == names[i]) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(StepPhase phase) { return kPhaseNames.at(static_cast<size_t>(phase)); }
const char* to_string(StepPart part) { return kPartNames.at(static_cast<size_t>(part)); }
std::optional<StepPhase> parse_step_phase(std::string_view text) {
  return parse_name<StepPhase>(text, kPhaseNames);
}
std::optional<StepPart> parse_step_part(std::string_view text) {
  return parse_name<StepPart>(text, kPartNames);
}

int phase_rank(std::string_view phase) {
  if (auto p = parse_step_phase(phase)) return static_cast<int>(*p);
  return 100;  // untagged last
}
int part_rank(std::string_view part) {
  if (auto p = parse_step_part(part)) {
    const auto& order = all_step_parts();
    return static_cast<int>(std::find(order.begin(), order.end(), *p) - order.begin());
  }
  return 100;
}
int layer_kind_rank(std::string_view kind) {
  std::optional<LayerType> type;
  return parse_layer_kind(kind, type) ? layer_kind_rank(type) : 100;
}
int layer_kind_rank(std::optional<LayerType> type) {
  if (!type) return 2;
  return *type == LayerType::kSliding ? 0 : 1;
}

const std::vector<StepPhase>& all_step_phases() {
  static const std::vector<StepPhase> v = {StepPhase::kForward, StepPhase::kLoss,
                                           StepPhase::kRecompute, StepPhase::kBackward,
                                           StepPhase::kOptimizer};
  return v;
}
const std::vector<StepPart>& all_step_parts() {
  static const std::vector<StepPart> v = {
      StepPart::kEmbedding, StepPart::kAttentionProj, StepPart::kAttentionCore,
      StepPart::kDenseMlp,  StepPart::kRouter,        StepPart::kExperts,
      StepPart::kSharedExperts, StepPart::kLossHead,  StepPart::kOther};
  return v;
}

bool StepTag::operator<(const StepTag& o) const {
  return std::tie(phase, part, layer, layer_kind) <
         std::tie(o.phase, o.part, o.layer, o.layer_kind);
}

StepTag backward_of(const StepTag& made_by) {
  StepTag t = made_by;
  t.phase = made_by.phase == StepPhase::kLoss ? StepPhase::kLoss : StepPhase::kBackward;
  return t;
}

// ---- raw trace --------------------------------------------------------------------------------

Json to_json(const RawTrace& t) {
  Json out;
  out["schema"] = {{"name", "tprobe.raw_trace"}, {"version", 2}};
  out["dropped_records"] = t.dropped_records;
  out["records"] = Json::array();
  for (const auto& r : t.records) {
    out["records"].push_back({{"kind", to_string(r.kind)},
                              {"name", r.name},
                              {"start_ns", r.start_ns},
                              {"end_ns", r.end_ns},
                              {"device", r.device},
                              {"stream", r.stream},
                              {"correlation_id", r.correlation_id},
                              {"grid", r.grid},
                              {"block", r.block},
                              {"registers_per_thread", r.registers_per_thread},
                              {"shared_memory_bytes", r.shared_memory_bytes},
                              {"bytes", r.bytes}});
  }
  out["tags"] = detail::tags_json(t.tags);
  out["launches"] = Json::array();
  for (const auto& [corr, c] : t.launches) {
    Json l = c.node ? Json{{"correlation_id", corr},
                           {"node_thread", c.node_thread},
                           {"node_seq", c.node_seq}}
                    : Json{{"correlation_id", corr}, {"tag", c.tag}};
    if (c.host_start_ns >= 0) {
      l["host_start_ns"] = c.host_start_ns;
      l["host_end_ns"] = c.host_end_ns;
      l["host_thread"] = c.host_thread;
    }
    out["launches"].push_back(std::move(l));
  }
  out["forward_ops"] = detail::forward_ops_json(t.forward_ops);
  return out;
}

namespace detail {

Json tags_json(const std::vector<StepTag>& tags) {
  Json out = Json::array();
  for (size_t i = 0; i < tags.size(); ++i) {
    const StepTag& g = tags[i];
    out.push_back({{"id", static_cast<int64_t>(i + 1)},
                   {"phase", to_string(g.phase)},
                   {"part", to_string(g.part)},
                   {"layer", g.layer},
                   {"layer_kind", layer_kind_name(g.layer_kind)}});
  }
  return out;
}

Json forward_ops_json(const std::vector<ForwardLink>& ops) {
  Json out = Json::array();
  for (const auto& f : ops) out.push_back({f.thread, f.seq, f.tag});
  return out;
}

}  // namespace detail

namespace {

int64_t get_int(const Json& obj, const char* key, const std::string& where, int64_t lo,
                int64_t hi) {
  auto it = obj.find(key);
  if (it == obj.end()) fail("{}: '{}' is missing", where, key);
  if (!it->is_number_integer()) fail("{}: '{}' must be an integer", where, key);
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail("{}: '{}' is outside {}..{}", where, key, lo, hi);
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) fail("{}: '{}' = {} is outside {}..{}", where, key, v, lo, hi);
  return v;
}

uint64_t get_uint(const Json& v, const std::string& where) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() &&
                                 v.get<int64_t>() < 0))
    fail("{}: must be a non-negative integer", where);
  return v.get<uint64_t>();
}

std::array<int32_t, 3> get_dim3(const Json& obj, const char* key, const std::string& where) {
  std::array<int32_t, 3> out{{0, 0, 0}};
  auto it = obj.find(key);
  if (it == obj.end()) return out;
  if (!it->is_array() || it->size() != 3)
    fail("{}: '{}' must be an array of 3 integers", where, key);
  for (size_t i = 0; i < 3; ++i) {
    const Json& v = (*it)[i];
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0) ||
        (v.is_number_unsigned() && v.get<uint64_t>() > INT32_MAX)) {
      fail("{}: '{}'[{}] must be a non-negative 32-bit integer", where, key, i);
    }
    out[i] = static_cast<int32_t>(v.get<int64_t>());
  }
  return out;
}

const Json& get_array(const Json& doc, const char* key, const std::string& where) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_array()) fail("{}: '{}' must be an array", where, key);
  return *it;
}

std::string get_string(const Json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) fail("{}: '{}' must be a string", where, key);
  return it->get<std::string>();
}

KernelRecord parse_record(const Json& j, const std::string& where) {
  if (!j.is_object()) fail("{}: not an object", where);
  KernelRecord r;
  const std::string k = get_string(j, "kind", where);
  if (k == "kernel")
    r.kind = ActivityKind::kKernel;
  else if (k == "memcpy")
    r.kind = ActivityKind::kMemcpy;
  else if (k == "memset")
    r.kind = ActivityKind::kMemset;
  else
    fail("{}: 'kind' = \"{}\" (expected kernel, memcpy or memset)", where, k);
  r.name = get_string(j, "name", where);
  r.start_ns = get_int(j, "start_ns", where, INT64_MIN / 2, INT64_MAX / 2);
  r.end_ns = get_int(j, "end_ns", where, INT64_MIN / 2, INT64_MAX / 2);
  if (r.end_ns < r.start_ns) fail("{}: end_ns {} is before start_ns {}", where, r.end_ns, r.start_ns);
  r.device = static_cast<int32_t>(get_int(j, "device", where, 0, 1024));
  r.stream = get_int(j, "stream", where, 0, INT64_MAX);
  r.correlation_id = get_int(j, "correlation_id", where, 0, INT64_MAX);
  r.grid = get_dim3(j, "grid", where);
  r.block = get_dim3(j, "block", where);
  if (j.contains("registers_per_thread"))
    r.registers_per_thread =
        static_cast<int32_t>(get_int(j, "registers_per_thread", where, 0, 65536));
  if (j.contains("shared_memory_bytes"))
    r.shared_memory_bytes = get_int(j, "shared_memory_bytes", where, 0, INT64_MAX);
  if (j.contains("bytes")) r.bytes = get_int(j, "bytes", where, 0, INT64_MAX);
  return r;
}

}  // namespace

RawTrace parse_raw_trace(std::string_view text, const std::string& path) {
  Json doc = detail::parse_json_strict(text, path);
  if (!doc.is_object()) fail("{}: not a JSON object", path);
  auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_object() || !schema->contains("name") ||
      !(*schema)["name"].is_string() || (*schema)["name"] != "tprobe.raw_trace")
    fail("{}: schema.name must be \"tprobe.raw_trace\"", path);
  const int64_t version = get_int(*schema, "version", path + " schema", 0, 1000);
  if (version == 1)
    fail("{}: a version-1 raw trace (tags per phase and layer type, no autograd links): record it "
         "again with this tprobe (`profile --raw-trace`)",
         path);
  if (version != 2) fail("{}: schema.version must be 2", path);
  RawTrace t;
  t.dropped_records = get_int(doc, "dropped_records", path, 0, INT64_MAX);
  const Json& recs = get_array(doc, "records", path);
  t.records.reserve(recs.size());
  for (size_t i = 0; i < recs.size(); ++i)
    t.records.push_back(parse_record(recs[i], fmt::format("{}: records[{}]", path, i)));

  t.tags = detail::parse_tags(get_array(doc, "tags", path), path);
  const auto ntags = static_cast<int64_t>(t.tags.size());

  const Json& launches = get_array(doc, "launches", path);
  for (size_t i = 0; i < launches.size(); ++i) {
    const std::string where = fmt::format("{}: launches[{}]", path, i);
    const Json& j = launches[i];
    if (!j.is_object()) fail("{}: not an object", where);
    const int64_t corr = get_int(j, "correlation_id", where, 0, INT64_MAX);
    LaunchContext c;
    const bool has_tag = j.contains("tag");
    const bool has_node = j.contains("node_seq") || j.contains("node_thread");
    if (has_tag == has_node)
      fail("{}: exactly one of 'tag' or 'node_thread'+'node_seq' must be given", where);
    if (has_tag) {
      c.tag = get_int(j, "tag", where, 1, ntags);
    } else {
      c.node = true;
      if (!j.contains("node_thread")) fail("{}: 'node_thread' is missing", where);
      c.node_thread = get_uint(j["node_thread"], where + " node_thread");
      c.node_seq = get_int(j, "node_seq", where, 0, INT64_MAX);
    }
    // The launch call's times: optional (raw traces recorded before the source timed launches
    // have none), all three or none.
    const int timed = static_cast<int>(j.contains("host_start_ns")) +
                      static_cast<int>(j.contains("host_end_ns")) +
                      static_cast<int>(j.contains("host_thread"));
    if (timed != 0 && timed != 3)
      fail("{}: 'host_start_ns', 'host_end_ns' and 'host_thread' go together", where);
    if (timed == 3) {
      c.host_start_ns = get_int(j, "host_start_ns", where, 0, INT64_MAX);
      c.host_end_ns = get_int(j, "host_end_ns", where, c.host_start_ns, INT64_MAX);
      c.host_thread = get_int(j, "host_thread", where, 0, INT64_MAX);
    }
    if (!t.launches.emplace(corr, c).second)
      fail("{}: correlation_id {} appears twice", where, corr);
  }

  t.forward_ops = detail::parse_forward_ops(get_array(doc, "forward_ops", path), path, ntags);
  return t;
}

namespace detail {

std::vector<StepTag> parse_tags(const Json& tags, const std::string& path) {
  std::vector<StepTag> out;
  for (size_t i = 0; i < tags.size(); ++i) {
    const std::string where = fmt::format("{}: tags[{}]", path, i);
    const Json& j = tags[i];
    if (!j.is_object()) fail("{}: not an object", where);
    if (get_int(j, "id", where, 1, INT64_MAX) != static_cast<int64_t>(i + 1))
      fail("{}: 'id' must be {} (ids count from 1 in order)", where, i + 1);
    StepTag g;
    const std::string phase = get_string(j, "phase", where);
    const std::string part = get_string(j, "part", where);
    const std::string kind = get_string(j, "layer_kind", where);
    auto ph = parse_step_phase(phase);
    auto pa = parse_step_part(part);
    if (!ph) fail("{}: 'phase' = \"{}\" is not a step phase", where, detail::printable(phase));
    if (!pa) fail("{}: 'part' = \"{}\" is not a step part", where, detail::printable(part));
    if (!parse_layer_kind(kind, g.layer_kind))
      fail("{}: 'layer_kind' = \"{}\" is not -, sliding or full", where, detail::printable(kind));
    g.phase = *ph;
    g.part = *pa;
    g.layer = static_cast<int32_t>(get_int(j, "layer", where, -1, 1 << 20));
    out.push_back(g);
  }
  return out;
}

std::vector<ForwardLink> parse_forward_ops(const Json& fwd, const std::string& path,
                                           int64_t ntags) {
  std::vector<ForwardLink> out;
  out.reserve(fwd.size());
  for (size_t i = 0; i < fwd.size(); ++i) {
    const std::string where = fmt::format("{}: forward_ops[{}]", path, i);
    const Json& j = fwd[i];
    if (!j.is_array() || j.size() != 3)
      fail("{}: must be [thread, sequence number, tag]", where);
    ForwardLink f;
    f.thread = get_uint(j[0], where + " thread");
    if (!j[1].is_number_integer() || (!j[1].is_number_unsigned() && j[1].get<int64_t>() < 0) ||
        (j[1].is_number_unsigned() && j[1].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
      fail("{}: the sequence number must be a non-negative integer", where);
    f.seq = j[1].get<int64_t>();
    if (!j[2].is_number_integer() || (!j[2].is_number_unsigned() && j[2].get<int64_t>() < 0) ||
        (j[2].is_number_unsigned() && j[2].get<uint64_t>() > static_cast<uint64_t>(ntags)) ||
        j[2].get<int64_t>() > ntags)
      fail("{}: the tag must be 0..{} (an index into tags, 0 for none)", where, ntags);
    f.tag = j[2].get<int64_t>();
    out.push_back(f);
  }
  return out;
}

int64_t json_int(const Json& obj, const char* key, const std::string& where, int64_t lo,
                 int64_t hi) {
  return get_int(obj, key, where, lo, hi);
}

uint64_t json_uint(const Json& v, const std::string& where) { return get_uint(v, where); }

}  // namespace detail

RawTrace read_raw_trace(const std::string& path) {
  return parse_raw_trace(detail::read_decoded_file(path, "a raw trace of one step"), path);
}

// ---- attribution ------------------------------------------------------------------------------

AttributionCounts attribute(const RawTrace& trace, std::vector<KernelRecord>& records) {
  std::map<std::pair<uint64_t, int64_t>, int64_t> made_by;  // (thread, seq) -> tag id
  for (const auto& f : trace.forward_ops) made_by[{f.thread, f.seq}] = f.tag;
  AttributionCounts n;
  n.records = static_cast<int64_t>(records.size());
  for (auto& r : records) {
    std::optional<StepTag> tag;
    auto it = trace.launches.find(r.correlation_id);
    if (it != trace.launches.end() && it->second.host_start_ns >= 0) {
      r.launch_start_ns = it->second.host_start_ns;
      r.launch_end_ns = it->second.host_end_ns;
      r.launch_thread = it->second.host_thread;
    }
    if (it == trace.launches.end()) {
      ++n.untagged_no_context;
    } else if (!it->second.node) {
      tag = trace.tags.at(static_cast<size_t>(it->second.tag - 1));
    } else {
      auto m = made_by.find({it->second.node_thread, it->second.node_seq});
      if (m == made_by.end() || m->second == 0) {
        ++n.untagged_unlinked;
      } else {
        tag = backward_of(trace.tags.at(static_cast<size_t>(m->second - 1)));
        ++n.linked;
      }
    }
    if (tag) {
      r.phase = to_string(tag->phase);
      r.part = to_string(tag->part);
      r.layer = tag->layer;
      r.layer_kind = layer_kind_name(tag->layer_kind);
    } else {
      ++n.untagged;
      r.phase = "untagged";
      r.part = "untagged";
      r.layer = -1;
      r.layer_kind = "-";
    }
  }
  return n;
}

StepBreakdown break_down(const std::vector<KernelRecord>& records) {
  StepBreakdown b;
  std::map<std::tuple<std::string, std::string, std::string>, PartRow> rows;
  std::map<int32_t, LayerRow> layers;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const auto& r : records) {
    first = std::min(first, r.start_ns);
    last = std::max(last, r.end_ns);
    const std::string kind = r.layer_kind.empty() ? "-" : r.layer_kind;
    PartRow& row = rows[{r.phase, kind, r.part}];
    row.phase = r.phase;
    row.part = r.part;
    row.layer_kind = kind;
    const int64_t d = r.duration_ns();
    if (r.kind != ActivityKind::kKernel) {
      row.memcpy_memset_ns += d;
      b.memcpy_memset_ns += d;
      continue;
    }
    row.kernels += 1;
    row.kernel_ns += d;
    b.kernels += 1;
    b.kernel_ns += d;
    if (r.phase == "untagged") b.untagged_kernel_ns += d;
    if (r.layer >= 0) {
      LayerRow& l = layers[r.layer];
      l.layer = r.layer;
      l.layer_kind = kind;
      l.kernel_ns[r.phase][r.part] += d;
    }
  }
  b.span_ns = records.empty() ? 0 : last - first;
  for (auto& [key, row] : rows) b.rows.push_back(std::move(row));
  std::sort(b.rows.begin(), b.rows.end(), [](const PartRow& a, const PartRow& c) {
    return std::make_tuple(phase_rank(a.phase), layer_kind_rank(a.layer_kind), part_rank(a.part)) <
           std::make_tuple(phase_rank(c.phase), layer_kind_rank(c.layer_kind), part_rank(c.part));
  });
  for (auto& [index, l] : layers) b.layers.push_back(std::move(l));
  return b;
}

PartCells phase_part_cells(const StepBreakdown& b) {
  auto share = [](int64_t ns, int64_t of) {
    return of > 0 ? std::optional<double>(static_cast<double>(ns) / static_cast<double>(of))
                  : std::nullopt;
  };
  PartCells c{b.rows, b.layers};
  for (PartRow& r : *c.by_phase_part) {
    r.kernel_share_ratio = share(r.kernel_ns, b.kernel_ns);
    r.span_share_ratio = share(r.kernel_ns, b.span_ns);
  }
  return c;
}

Json to_json(const StepBreakdown& b) {
  using evidence_detail::seconds_json;
  Json out;
  out["kernels"] = b.kernels;
  out["kernel_s"] = seconds_json(b.kernel_ns);
  out["memcpy_memset_s"] = seconds_json(b.memcpy_memset_ns);
  out["span_s"] = seconds_json(b.span_ns);
  out["untagged_kernel_s"] = seconds_json(b.untagged_kernel_ns);
  out["untagged_kernel_share_ratio"] =
      b.kernel_ns > 0 ? Json(static_cast<double>(b.untagged_kernel_ns) / b.kernel_ns) : Json(nullptr);
  const PartCells c = phase_part_cells(b);
  out["rows"] = evidence::to_json(*c.by_phase_part);
  out["layers"] = evidence::to_json(*c.by_layer);
  return out;
}

StepBreakdown step_breakdown_from_json(const Json& j, const std::string& where,
                                      bool check_derived) {
  namespace jr = json_read;
  using evidence_detail::ns_from_seconds;
  if (!j.is_object()) fail("{} must be an object", where);
  StepBreakdown b;
  b.kernels = jr::integer(j, "kernels", where, 0);
  b.kernel_ns = ns_from_seconds(jr::field(j, "kernel_s", where), where, "kernel_s");
  b.memcpy_memset_ns = ns_from_seconds(jr::field(j, "memcpy_memset_s", where), where, "memcpy_memset_s");
  b.span_ns = ns_from_seconds(jr::field(j, "span_s", where), where, "span_s");
  b.untagged_kernel_ns =
      ns_from_seconds(jr::field(j, "untagged_kernel_s", where), where, "untagged_kernel_s");
  b.rows = evidence::from_json<std::vector<PartRow>>(jr::field(j, "rows", where), where + ".rows");
  b.layers =
      evidence::from_json<std::vector<LayerRow>>(jr::field(j, "layers", where), where + ".layers");
  if (check_derived) jr::check_rewritten(j, to_json(b), where);
  return b;
}

bool grows_quadratically(std::string_view part, std::string_view layer_kind, bool sliding_dense) {
  if (part != "attention_core") return false;
  return layer_kind == "full" || (layer_kind == "sliding" && sliding_dense);
}

}  // namespace tprobe::core
