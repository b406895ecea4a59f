// The kernel table's evidence (kernel_table.hpp, device_activity.hpp): the names of the kinds and
// categories, and the custom fields' writers and readers.
#include "tprobe/core/evidence/kernel_table.hpp"

#include "tprobe/core/base/json_read.hpp"

namespace tprobe::core {

const char* to_string(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::kKernel:
      return "kernel";
    case ActivityKind::kMemcpy:
      return "memcpy";
    case ActivityKind::kMemset:
      return "memset";
  }
  return "kernel";
}

const char* to_string(KernelCategory category) {
  switch (category) {
    case KernelCategory::kAttention:
      return "attention";
    case KernelCategory::kDenseGemm:
      return "dense_gemm";
    case KernelCategory::kGroupedGemm:
      return "grouped_gemm";
    case KernelCategory::kElementwise:
      return "elementwise";
    case KernelCategory::kReduction:
      return "reduction_norm_loss";
    case KernelCategory::kCopyCast:
      return "copy_cast";
    case KernelCategory::kMemcpyMemset:
      return "memcpy_memset";
    case KernelCategory::kCommunication:
      return "communication";
    case KernelCategory::kOther:
      return "other";
  }
  return "other";
}

const std::vector<KernelCategory>& all_kernel_categories() {
  static const std::vector<KernelCategory> all = {
      KernelCategory::kAttention,    KernelCategory::kDenseGemm,     KernelCategory::kGroupedGemm,
      KernelCategory::kElementwise,  KernelCategory::kReduction,     KernelCategory::kCopyCast,
      KernelCategory::kMemcpyMemset, KernelCategory::kCommunication, KernelCategory::kOther};
  return all;
}

std::optional<KernelCategory> parse_kernel_category(const std::string& text) {
  for (KernelCategory c : all_kernel_categories()) {
    if (text == to_string(c)) return c;
  }
  return std::nullopt;
}

namespace evidence_detail {

namespace jr = json_read;

Json category_json(KernelCategory c) { return to_string(c); }
KernelCategory category_from(const Json& v, const std::string& w, const char* key) {
  const std::optional<KernelCategory> c =
      v.is_string() ? parse_kernel_category(v.get<std::string>()) : std::nullopt;
  if (!c) fail("{}: field '{}' is {}, not a kernel category", w, key, v.dump());
  return *c;
}
std::string phase_name(const std::string& phase) { return phase.empty() ? "unknown" : phase; }

void read_table_version(KernelTable& t, const Json& v, const std::string& w, const char* key) {
  if (!v.is_number_integer() || (v != kKernelTableSchemaVersion && v != 1))
    fail("{}: kernel_table {} {} (this tprobe reads 1 to {})", w, key, v.dump(),
         kKernelTableSchemaVersion);
  t.schema_version = v.get<int32_t>();
}

Json selection_json(const KernelTable& t) {
  return {{"steps_present", t.steps_present},
          {"steps_selected", t.steps_selected},
          {"skip_first", t.options.skip_first},
          {"steps", t.options.steps},
          {"device", t.options.device}};
}
void read_selection(KernelTable& t, const Json& v, const std::string& w, const char* key) {
  const std::string at = w + "." + key;
  if (!v.is_object()) fail("{}: must be an object", at);
  t.steps_present = jr::integers(v, "steps_present", at);
  t.steps_selected = jr::integers(v, "steps_selected", at);
  t.options.skip_first = jr::integer(v, "skip_first", at);
  t.options.device = static_cast<int32_t>(jr::integer(v, "device", at, INT32_MIN, INT32_MAX));
  // --step as given, so that the table read writes the selection it was read from.
  if (jr::optional(v, "steps")) t.options.steps = jr::integers(v, "steps", at);
}

// The devices past kMaxDeviceRows: a device row with their count as "devices" for "device".
Json other_devices_json(const KernelTable& t) {
  if (t.other_devices <= 0) return nullptr;
  Json row = evidence::to_json(t.other_device.totals);
  row["devices"] = t.other_devices;
  const Json overlap = evidence::to_json(static_cast<const OverlapFigures&>(t.other_device));
  for (const auto& [k, x] : overlap.items()) row[k] = x;
  return row;
}
void read_other_devices(KernelTable& t, const Json& v, const std::string& w, const char* key) {
  const std::string at = w + "." + key;
  t.other_device.totals = evidence::from_json<BusyTotals>(v, at);
  static_cast<OverlapFigures&>(t.other_device) = evidence::from_json<OverlapFigures>(v, at);
  t.other_device.device = -1;
  t.other_devices = jr::integer(v, "devices", at, 1);
}

void read_kernels(KernelTable& t, const Json& v, const std::string& w, const char* key) {
  const std::string at = w + "." + key;
  if (t.schema_version != 1) {
    t.kernels = evidence::detail::decode<std::vector<KernelRow>>(v, at);
    return;
  }
  // Version 1 wrote the lower median as median_ns: read under its own name.
  if (!v.is_array()) fail("{}: must be a list", at);
  Json renamed = v;
  for (Json& k : renamed) {
    if (!k.is_object() || !k.contains("median_ns")) continue;
    k["lower_median_ns"] = k["median_ns"];
    k.erase("median_ns");
  }
  t.kernels = evidence::detail::decode<std::vector<KernelRow>>(renamed, at);
}

void read_phase_ns(KernelRow& k, const Json& v, const std::string& w, const char* key) {
  const auto by = evidence::detail::decode<std::map<std::string, int64_t>>(v, w + "." + key);
  for (const auto& [phase, ns] : by) k.phase_ns[phase == "unknown" ? "" : phase] = ns;
}

}  // namespace evidence_detail

}  // namespace tprobe::core
