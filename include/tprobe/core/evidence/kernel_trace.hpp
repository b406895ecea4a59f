// The kernels command's evidence rows (docs/kernels.md), each field declared once
// (core/evidence/fields.hpp): device time's sum, union and span (a kernel table's totals and rows,
// a diff's sides, a rank's row), the phase × part cells and their per-layer cells of a traced step
// (by_phase_part, by_layer: `kernels` results, profile's kernel_trace), and the key_averages()
// trap. core/trace's rooms fill these structs and write and read them through the tables.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"

namespace tprobe::core {

// Sum, union and span of a set of device intervals. union_busy_ns merges overlapping intervals
// across streams; idle_ns = span_ns - union_busy_ns. sum_ns >= union_busy_ns always; sum_ns >
// union_busy_ns means streams overlapped (or one stream's records overlap: trace health).
struct BusyFigures {
  int64_t events = 0;
  int64_t sum_ns = 0;
  int64_t union_busy_ns = 0;
  int64_t span_ns = 0;
  int64_t idle_ns = 0;
};
// ... with the span's ends (a diff's sides and a rank's row keep the figures alone).
struct BusyTotals : BusyFigures {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// A device's communication beside its compute (kernel_table.devices[], other_devices).
struct OverlapFigures {
  int64_t communication_ns = 0;        // sum of kCommunication time
  int64_t compute_union_ns = 0;        // union of everything except communication
  int64_t communication_union_ns = 0;  // union of communication
  int64_t overlap_ns = 0;              // time both were busy: compute ∩ communication
};

// One rank of a multi-rank job (results.rank_summary[]).
struct RankRow : BusyFigures {
  int64_t rank = -1;
  std::string path;
  int64_t communication_ns = 0;          // sum of communication kernel time
  int64_t communication_union_ns = 0;    // busy time with communication running
  int64_t compute_union_ns = 0;          // busy time with anything else running
  int64_t overlap_ns = 0;                // both at once
  int64_t exposed_communication_ns = 0;  // communication with no compute beside it
  double communication_share_ratio = 0;  // communication_ns / sum_ns
  double overlap_ratio = 0;              // overlap_ns / communication_union_ns
};

// Device time of one traced step by phase × layer kind × part, and per layer.
struct PartRow {
  std::string phase, part, layer_kind;
  int64_t kernels = 0;
  int64_t kernel_ns = 0;
  int64_t memcpy_memset_ns = 0;
  // Of the step's kernel time and of its span; null where that is 0. Set by the writer
  // (phase_part_cells), read as written.
  std::optional<double> kernel_share_ratio, span_share_ratio;
};
struct LayerRow {
  int32_t layer = 0;
  std::string layer_kind;
  std::map<std::string, std::map<std::string, int64_t>> kernel_ns;  // phase -> part -> ns
};
// The cells as results hold them: both null where the trace has no phase × part breakdown.
struct PartCells {
  std::optional<std::vector<PartRow>> by_phase_part;
  std::optional<std::vector<LayerRow>> by_layer;
};

// The key_averages() trap (results.trace.key_averages_trap): what summing every row's self device
// time reports, against the device rows' real total.
struct DoubleCount {
  int64_t device_rows_ns = 0;      // kernel/memcpy/memset rows: the real total
  int64_t host_attributed_ns = 0;  // the same rows again, through their launching host op
  int64_t annotation_ns = 0;       // gpu_user_annotation rows in the selected steps
  int64_t annotations = 0;
  std::vector<std::string> annotation_names;  // distinct, in file order (first 8)
  int64_t linked_rows = 0;    // device rows whose External id names a host op
  int64_t unlinked_rows = 0;  // no External id, or no host op with it
  int64_t flows = 0;          // ac2g flow events seen
  // Kernels counted twice: the op + kernel part of the trap (about 2x when every row is linked).
  int64_t op_and_kernel_ns() const { return device_rows_ns + host_attributed_ns; }
  int64_t key_averages_style_ns() const { return op_and_kernel_ns() + annotation_ns; }
  double ratio() const {  // key_averages-style / real total
    return device_rows_ns > 0 ? double(key_averages_style_ns()) / double(device_rows_ns) : 0.0;
  }
  double op_and_kernel_ratio() const {
    return device_rows_ns > 0 ? double(op_and_kernel_ns()) / double(device_rows_ns) : 0.0;
  }
};

namespace evidence_detail {
// Integer nanoseconds written as seconds; read back from a finite number in 0..1e6 s.
Json seconds_json(int64_t ns);
int64_t ns_from_seconds(const Json& v, const std::string& where, const char* key);
void read_layer_seconds(LayerRow& l, const Json& v, const std::string& w, const char* key);
}  // namespace evidence_detail

constexpr auto evidence_fields(const BusyFigures*) {
  using evidence::field;
  using B = BusyFigures;
  return std::make_tuple(
      field("events", &B::events, "", "device rows (kernel, memcpy, memset)").at_least(0),
      field("sum_ns", &B::sum_ns, "ns", "their durations added up, every stream").at_least(0),
      field("union_busy_ns", &B::union_busy_ns, "ns", "intervals merged across streams")
          .at_least(0),
      field("span_ns", &B::span_ns, "ns", "first start to last end").at_least(0),
      field("idle_ns", &B::idle_ns, "ns", "span less union busy"));
}
constexpr auto evidence_fields(const BusyTotals*) {
  using evidence::field;
  return std::tuple_cat(evidence_fields(static_cast<const BusyFigures*>(nullptr)),
                        std::make_tuple(field("start_ns", &BusyTotals::start_ns, "ns", "first start"),
                                        field("end_ns", &BusyTotals::end_ns, "ns", "last end")));
}
constexpr auto evidence_fields(const OverlapFigures*) {
  using evidence::field;
  using O = OverlapFigures;
  return std::make_tuple(
      field("communication_ns", &O::communication_ns, "ns", "communication kernels' time"),
      field("compute_union_ns", &O::compute_union_ns, "ns", "busy with anything else"),
      field("communication_union_ns", &O::communication_union_ns, "ns", "busy communicating"),
      field("overlap_ns", &O::overlap_ns, "ns", "both at once"));
}
constexpr auto evidence_fields(const RankRow*) {
  using evidence::field;
  using R = RankRow;
  return std::tuple_cat(
      std::make_tuple(field("rank", &R::rank, "", "the trace's rank").at_least(0),
                      field("path", &R::path, "", "its file")),
      evidence_fields(static_cast<const BusyFigures*>(nullptr)),
      std::make_tuple(
          field("communication_ns", &R::communication_ns, "ns", "communication kernels' time")
              .at_least(0),
          field("communication_share_ratio", &R::communication_share_ratio, "",
                "communication_ns / sum_ns"),
          field("communication_union_ns", &R::communication_union_ns, "ns", "busy communicating")
              .at_least(0),
          field("compute_union_ns", &R::compute_union_ns, "ns", "busy with anything else")
              .at_least(0),
          field("overlap_ns", &R::overlap_ns, "ns", "both at once").at_least(0),
          field("overlap_ratio", &R::overlap_ratio, "", "overlap_ns / communication_union_ns"),
          field("exposed_communication_ns", &R::exposed_communication_ns, "ns",
                "communication with no compute beside it")));
}

inline auto evidence_fields(const PartRow*) {
  using evidence::custom;
  using evidence::field;
  using P = PartRow;
  namespace d = evidence_detail;
  return std::make_tuple(
      field("phase", &P::phase, "", "the step's phase (untagged: none)"),
      field("layer_kind", &P::layer_kind, "", "sliding, full or - (outside the layers)"),
      field("part", &P::part, "", "the model's part (untagged: none)"),
      field("kernels", &P::kernels, "", "device rows").at_least(0),
      custom<P>("kernel_s", +[](const P& r) { return d::seconds_json(r.kernel_ns); },
                +[](P& r, const Json& v, const std::string& w, const char* k) {
                  r.kernel_ns = d::ns_from_seconds(v, w, k);
                },
                "number", "s", "kernel time (overlapping streams both count)"),
      custom<P>("memcpy_memset_s", +[](const P& r) { return d::seconds_json(r.memcpy_memset_ns); },
                +[](P& r, const Json& v, const std::string& w, const char* k) {
                  r.memcpy_memset_ns = d::ns_from_seconds(v, w, k);
                },
                "number", "s", "memcpy and memset time"),
      field("kernel_share_ratio", &P::kernel_share_ratio, "", "of the step's kernel time"),
      field("span_share_ratio", &P::span_share_ratio, "", "of the step's span"));
}
inline auto evidence_fields(const LayerRow*) {
  using evidence::custom;
  using evidence::field;
  using L = LayerRow;
  return std::make_tuple(
      field("layer", &L::layer, "", "the decoder layer").at_least(0),
      field("layer_kind", &L::layer_kind, "", "sliding or full"),
      custom<L>("kernel_s", +[](const L& l) {
                  Json phases = Json::object();
                  for (const auto& [phase, parts] : l.kernel_ns) {
                    Json& p = phases[phase] = Json::object();
                    for (const auto& [part, ns] : parts) p[part] = evidence_detail::seconds_json(ns);
                  }
                  return phases;
                },
                evidence_detail::read_layer_seconds, "object", "s",
                "kernel time by phase, then part"));
}
constexpr auto evidence_fields(const PartCells*) {
  using evidence::field;
  return std::make_tuple(
      field("by_phase_part", &PartCells::by_phase_part, "",
            "device time by phase × layer kind × part; null without module events"),
      field("by_layer", &PartCells::by_layer, "", "per decoder layer; null likewise"));
}

inline auto evidence_fields(const DoubleCount*) {
  using evidence::derived;
  using evidence::field;
  using D = DoubleCount;
  return std::make_tuple(
      derived<D>("what", +[](const D&) {
                   return Json("NOT a total: what summing every key_averages() row's self device "
                               "time reports");
                 },
                 "string", "", "a reminder"),
      field("device_rows_ns", &D::device_rows_ns, "ns", "kernel, memcpy, memset rows: the total")
          .at_least(0),
      field("host_attributed_ns", &D::host_attributed_ns, "ns",
            "the same rows again, in the host op that launched each")
          .at_least(0),
      field("gpu_user_annotation_ns", &D::annotation_ns, "ns", "gpu_user_annotation rows")
          .at_least(0),
      field("gpu_user_annotations", &D::annotations, "", "their count").at_least(0),
      field("gpu_user_annotation_names", &D::annotation_names, "", "their names (first 8)"),
      derived<D>("op_and_kernel_ns", +[](const D& d) { return Json(d.op_and_kernel_ns()); },
                 "integer", "ns", "each kernel counted twice"),
      derived<D>("op_and_kernel_ratio", +[](const D& d) { return Json(d.op_and_kernel_ratio()); },
                 "number", "", "over device_rows_ns"),
      derived<D>("key_averages_style_ns",
                 +[](const D& d) { return Json(d.key_averages_style_ns()); }, "integer", "ns",
                 "the sum of every key_averages() row's self device time"),
      derived<D>("double_count_ratio", +[](const D& d) { return Json(d.ratio()); }, "number", "",
                 "over device_rows_ns"),
      field("linked_rows", &D::linked_rows, "", "device rows with a host op's External id")
          .at_least(0),
      field("unlinked_rows", &D::unlinked_rows, "", "without").at_least(0),
      field("ac2g_flows", &D::flows, "", "ac2g flow events").at_least(0));
}

}  // namespace tprobe::core
