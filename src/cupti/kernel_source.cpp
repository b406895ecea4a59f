// Step tags, attribution of records to phase and part, the raw trace format and its replay source
// (no <cupti.h>: all of this runs and is tested without a GPU).
#include "tprobe/cupti/kernel_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::cupti {

namespace {

constexpr int kParts = 6;   // StepPart values
constexpr int kPhases = 3;  // StepPhase values

const char* kind_name(core::ActivityKind k) {
  switch (k) {
    case core::ActivityKind::kKernel:
      return "kernel";
    case core::ActivityKind::kMemcpy:
      return "memcpy";
    case core::ActivityKind::kMemset:
      return "memset";
  }
  return "?";
}

}  // namespace

int64_t tag_id(model::StepPhase phase, model::StepPart part) {
  return 1 + static_cast<int64_t>(phase) * kParts + static_cast<int64_t>(part);
}

bool decode_tag(int64_t id, model::StepPhase* phase, model::StepPart* part) {
  if (id < 1 || id > kPhases * kParts) return false;
  *phase = static_cast<model::StepPhase>((id - 1) / kParts);
  *part = static_cast<model::StepPart>((id - 1) % kParts);
  return true;
}

int64_t attribute(std::vector<core::KernelRecord>& records,
                  const std::map<int64_t, int64_t>& external_of) {
  int64_t untagged = 0;
  for (auto& r : records) {
    model::StepPhase phase = model::StepPhase::kBackward;
    model::StepPart part = model::StepPart::kOther;
    auto it = external_of.find(r.correlation_id);
    if (it == external_of.end() || !decode_tag(it->second, &phase, &part)) {
      ++untagged;
      phase = model::StepPhase::kBackward;
      part = model::StepPart::kOther;
    }
    r.phase = model::to_string(phase);
    r.part = model::to_string(part);
  }
  return untagged;
}

std::vector<PhaseRow> phase_rows(const std::vector<core::KernelRecord>& records) {
  std::vector<PhaseRow> rows;
  for (const auto& r : records) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const PhaseRow& x) {
      return x.phase == r.phase && x.part == r.part;
    });
    if (it == rows.end()) {
      rows.push_back({r.phase, r.part, 0, 0, 0});
      it = rows.end() - 1;
    }
    if (r.kind == core::ActivityKind::kKernel) {
      it->kernels += 1;
      it->kernel_ns += r.duration_ns();
    } else {
      it->memcpy_memset_ns += r.duration_ns();
    }
  }
  auto order = [](const std::string& phase) {
    return phase == "forward" ? 0 : phase == "loss" ? 1 : 2;
  };
  std::sort(rows.begin(), rows.end(), [&](const PhaseRow& a, const PhaseRow& b) {
    if (order(a.phase) != order(b.phase)) return order(a.phase) < order(b.phase);
    return a.part < b.part;
  });
  return rows;
}

core::Json to_json(const std::vector<PhaseRow>& rows) {
  core::Json out = core::Json::array();
  int64_t total = 0;
  for (const auto& r : rows) total += r.kernel_ns;
  for (const auto& r : rows) {
    out.push_back(
        {{"phase", r.phase},
         {"part", r.part},
         {"kernels", r.kernels},
         {"kernel_s", static_cast<double>(r.kernel_ns) * 1e-9},
         {"memcpy_memset_s", static_cast<double>(r.memcpy_memset_ns) * 1e-9},
         {"kernel_share_ratio",
          total > 0 ? static_cast<double>(r.kernel_ns) / static_cast<double>(total) : 0.0}});
  }
  return out;
}

core::Json to_json(const RawTrace& t) {
  core::Json out;
  out["schema"] = {{"name", "tprobe.raw_trace"}, {"version", 1}};
  out["dropped_records"] = t.dropped_records;
  out["records"] = core::Json::array();
  for (const auto& r : t.records) {
    out["records"].push_back({{"kind", kind_name(r.kind)},
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
  out["external"] = core::Json::array();
  for (const auto& [corr, ext] : t.external_of) {
    out["external"].push_back({{"correlation_id", corr}, {"external_id", ext}});
  }
  return out;
}

namespace {

int64_t get_int(const core::Json& obj, const char* key, const std::string& where, int64_t lo,
                int64_t hi) {
  auto it = obj.find(key);
  if (it == obj.end()) fail("{}: '{}' is missing", where, key);
  if (!it->is_number_integer()) fail("{}: '{}' must be an integer", where, key);
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) fail("{}: '{}' = {} is outside {}..{}", where, key, v, lo, hi);
  return v;
}

std::array<int32_t, 3> get_dim3(const core::Json& obj, const char* key, const std::string& where) {
  std::array<int32_t, 3> out{{0, 0, 0}};
  auto it = obj.find(key);
  if (it == obj.end()) return out;
  if (!it->is_array() || it->size() != 3)
    fail("{}: '{}' must be an array of 3 integers", where, key);
  for (size_t i = 0; i < 3; ++i) {
    if (!(*it)[i].is_number_integer() || (*it)[i].get<int64_t>() < 0 ||
        (*it)[i].get<int64_t>() > INT32_MAX) {
      fail("{}: '{}'[{}] must be a non-negative 32-bit integer", where, key, i);
    }
    out[i] = static_cast<int32_t>((*it)[i].get<int64_t>());
  }
  return out;
}

}  // namespace

RawTrace read_raw_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::stringstream buf;
  buf << in.rdbuf();
  core::Json doc = core::detail::parse_json_strict(buf.str(), path);
  if (!doc.is_object()) fail("{}: not a JSON object", path);
  auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_object() ||
      schema->value("name", "") != "tprobe.raw_trace")
    fail("{}: schema.name must be \"tprobe.raw_trace\"", path);
  if (get_int(*schema, "version", path + " schema", 0, 1000) != 1)
    fail("{}: schema.version must be 1", path);
  RawTrace t;
  t.dropped_records = get_int(doc, "dropped_records", path, 0, INT64_MAX);
  auto recs = doc.find("records");
  if (recs == doc.end() || !recs->is_array()) fail("{}: 'records' must be an array", path);
  for (size_t i = 0; i < recs->size(); ++i) {
    const core::Json& j = (*recs)[i];
    const std::string where = fmt::format("{}: records[{}]", path, i);
    if (!j.is_object()) fail("{}: not an object", where);
    core::KernelRecord r;
    auto kind = j.find("kind");
    if (kind == j.end() || !kind->is_string()) fail("{}: 'kind' must be a string", where);
    const std::string k = kind->get<std::string>();
    if (k == "kernel")
      r.kind = core::ActivityKind::kKernel;
    else if (k == "memcpy")
      r.kind = core::ActivityKind::kMemcpy;
    else if (k == "memset")
      r.kind = core::ActivityKind::kMemset;
    else
      fail("{}: 'kind' = \"{}\" (expected kernel, memcpy or memset)", where, k);
    auto name = j.find("name");
    if (name == j.end() || !name->is_string()) fail("{}: 'name' must be a string", where);
    r.name = name->get<std::string>();
    r.start_ns = get_int(j, "start_ns", where, 0, INT64_MAX);
    r.end_ns = get_int(j, "end_ns", where, 0, INT64_MAX);
    if (r.end_ns < r.start_ns)
      fail("{}: end_ns {} is before start_ns {}", where, r.end_ns, r.start_ns);
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
    t.records.push_back(std::move(r));
  }
  auto ext = doc.find("external");
  if (ext == doc.end() || !ext->is_array()) fail("{}: 'external' must be an array", path);
  for (size_t i = 0; i < ext->size(); ++i) {
    const std::string where = fmt::format("{}: external[{}]", path, i);
    if (!(*ext)[i].is_object()) fail("{}: not an object", where);
    const int64_t corr = get_int((*ext)[i], "correlation_id", where, 0, INT64_MAX);
    const int64_t id = get_int((*ext)[i], "external_id", where, 0, INT64_MAX);
    if (!t.external_of.emplace(corr, id).second)
      fail("{}: correlation_id {} appears twice", where, corr);
  }
  return t;
}

namespace {

class ReplaySource : public KernelSource {
 public:
  explicit ReplaySource(std::string path) : path_(std::move(path)), file_(read_raw_trace(path_)) {}
  bool usable(std::string*) const override { return true; }
  std::string name() const override { return "replay " + path_; }
  void begin() override { active_ = true; }
  void end() override {
    if (!active_) return;
    active_ = false;
    pending_.records.insert(pending_.records.end(), file_.records.begin(), file_.records.end());
    pending_.external_of.insert(file_.external_of.begin(), file_.external_of.end());
    pending_.dropped_records += file_.dropped_records;
  }
  void discard() override { pending_ = RawTrace(); }
  void enter(model::StepPhase, model::StepPart) override {}
  void leave() override {}
  const RawTrace& raw() const override { return pending_; }
  TraceCapture take() override {
    TraceCapture c;
    c.records = std::move(pending_.records);
    c.dropped_records = pending_.dropped_records;
    c.untagged_records = attribute(c.records, pending_.external_of);
    pending_ = RawTrace();
    return c;
  }

 private:
  std::string path_;
  RawTrace file_;
  RawTrace pending_;
  bool active_ = false;
};

}  // namespace

std::unique_ptr<KernelSource> make_replay_source(const std::string& path) {
  return std::make_unique<ReplaySource>(path);
}

}  // namespace tprobe::cupti
