// The views of a trace's phase x part x layer attribution (trace_parts.hpp): its evidence, the
// phase x part matrix `profile` and `kernels` print, the per-layer table and the text output.
#include "tprobe/core/trace/attribute/trace_parts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"

namespace tprobe::core {

namespace {



// At most `n` bytes of `s`, cut at a UTF-8 character boundary.
std::string clip(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

std::string span_share(int64_t ns, int64_t of) {
  return of > 0 ? format_percent(static_cast<double>(ns) / static_cast<double>(of)) : "-";
}

}  // namespace

std::string trace_parts_hint() {
  return "no module events in this trace: record it with torch.profiler.profile(..., "
         "with_stack=True) for the phase × part table (with_modules=True alone records none for "
         "an eager model); the phase split above is from the launching ops";
}

std::string trace_parts_why_none(const TraceParts& p) {
  return p.attribution_off ? "the phase × part attribution was turned off (--parts off)"
                           : trace_parts_hint();
}

Json to_json(const TraceParts& p) {
  Json out;
  const TracePartsCounts& c = p.counts;
  out["parts"] = {{"module_events", p.module_events},
                  {"recorded_tags", p.recorded_tags},
                  {"attribution_off", p.attribution_off},
                  {"python_events", p.python_events},
                  {"module_event_count", p.module_event_count},
                  {"fwdbwd_links", p.fwdbwd_links},
                  {"fwdbwd_unpaired", p.fwdbwd_unpaired},
                  {"backward_ops_linked", p.backward_ops_linked},
                  {"decoder_layers", p.decoder_layers},
                  {"model", p.model.empty() ? Json(nullptr) : Json(p.model)},
                  {"layer_kinds_known", p.layer_kinds_known},
                  {"notes", p.notes},
                  {"hint", p.has_breakdown() ? Json(nullptr) : Json(trace_parts_why_none(p))}};
  if (!p.layer_ffn.empty()) out["parts"]["layer_ffn"] = p.layer_ffn;
  out["attribution"] = {{"rows", c.rows},
                        {"attributed_rows", c.attributed},
                        {"linked_rows", c.linked},
                        {"linked_enclosing_rows", c.linked_enclosing},
                        {"linked_evaluate_rows", c.linked_evaluate},
                        {"linked_accumulate_rows", c.linked_accumulate},
                        {"untagged_rows", c.untagged},
                        {"untagged_no_launch_rows", c.untagged_no_launch},
                        {"untagged_no_module_rows", c.untagged_no_module},
                        {"untagged_unlinked_rows", c.untagged_unlinked},
                        {"untagged_no_part_rows", c.untagged_no_part},
                        {"outside_model_rows", c.outside_model},
                        {"recorded_rows", c.recorded}};
  if (!p.has_breakdown()) {
    const Json none = evidence::to_json(PartCells{});  // named: items() of a temporary would dangle
    for (const auto& [key, value] : none.items()) out[key] = value;
    out["outside_model"] = nullptr;
    return out;
  }
  Json outside = Json::array();
  for (const OutsideModelRow& o : p.outside_model) {
    outside.push_back({{"op", o.op},
                       {"phase", o.phase},
                       {"rows", o.rows},
                       {"kernels", o.kernels},
                       {"kernel_s", static_cast<double>(o.kernel_ns) * 1e-9},
                       {"memcpy_memset_s", static_cast<double>(o.memcpy_memset_ns) * 1e-9}});
  }
  out["outside_model"] = std::move(outside);
  // Written only when some row is unplaced: evidence of a trace every module of which the rules
  // know (every Gemma-4 trace) reads as it did before the key existed.
  if (!p.unplaced.empty() || c.untagged_unplaced > 0) {
    Json unplaced = Json::array();
    for (const UnplacedModuleRow& u : p.unplaced) {
      unplaced.push_back({{"module", u.module},
                          {"phase", u.phase},
                          {"rows", u.rows},
                          {"kernels", u.kernels},
                          {"kernel_s", static_cast<double>(u.kernel_ns) * 1e-9},
                          {"memcpy_memset_s", static_cast<double>(u.memcpy_memset_ns) * 1e-9}});
    }
    out["unplaced_modules"] = std::move(unplaced);
    out["attribution"]["untagged_unplaced_rows"] = c.untagged_unplaced;
    out["attribution"]["unplaced_kernel_s"] = static_cast<double>(p.unplaced_kernel_ns) * 1e-9;
  }
  out["attribution"]["outside_model_kernel_s"] = static_cast<double>(p.outside_model_kernel_ns) * 1e-9;
  out["attribution"]["outside_model_kernel_share_ratio"] =
      p.breakdown.kernel_ns > 0
          ? static_cast<double>(p.outside_model_kernel_ns) / static_cast<double>(p.breakdown.kernel_ns)
          : 0.0;
  const Json b = to_json(p.breakdown);
  const Json cells = evidence::to_json(phase_part_cells(p.breakdown));
  for (const auto& [key, value] : cells.items()) out[key] = value;
  out["attribution"]["kernels"] = p.breakdown.kernels;
  out["attribution"]["kernel_s"] = b["kernel_s"];
  out["attribution"]["kernel_ns"] = p.breakdown.kernel_ns;
  out["attribution"]["memcpy_memset_s"] = b["memcpy_memset_s"];
  out["attribution"]["span_s"] = b["span_s"];
  out["attribution"]["untagged_kernel_s"] = b["untagged_kernel_s"];
  out["attribution"]["untagged_kernel_share_ratio"] = b["untagged_kernel_share_ratio"];
  return out;
}

TraceParts trace_parts_from_json(const Json& j, const std::string& where) {
  namespace jr = json_read;
  if (!j.is_object()) fail("{} must be an object", where);
  TraceParts p;
  const std::string sw = where + ".parts";
  const Json& st = jr::object(j, "parts", where);
  p.module_events = jr::boolean(st, "module_events", sw);
  // Evidence written before tprobe's own traces carried their attribution has neither field.
  p.recorded_tags = st.contains("recorded_tags") && jr::boolean(st, "recorded_tags", sw);
  p.attribution_off = jr::boolean(st, "attribution_off", sw);
  p.python_events = jr::integer(st, "python_events", sw, 0);
  p.module_event_count = jr::integer(st, "module_event_count", sw, 0, p.python_events);
  p.fwdbwd_links = jr::integer(st, "fwdbwd_links", sw, 0);
  p.fwdbwd_unpaired = jr::integer(st, "fwdbwd_unpaired", sw, 0);
  p.backward_ops_linked = jr::integer(st, "backward_ops_linked", sw, 0);
  p.decoder_layers = jr::strings(st, "decoder_layers", sw);
  p.model = jr::nullable_string(st, "model", sw).value_or("");
  p.layer_kinds_known = jr::boolean(st, "layer_kinds_known", sw);
  p.notes = jr::strings(st, "notes", sw);
  if (st.contains("layer_ffn")) {
    p.layer_ffn = jr::strings(st, "layer_ffn", sw);
    for (const std::string& f : p.layer_ffn) {
      if (f != "moe" && f != "dense" && f != "-")
        fail("{}.layer_ffn: \"{}\" is not moe, dense or -", sw, detail::printable(f));
    }
  }
  const std::string aw = where + ".attribution";
  const Json& a = jr::object(j, "attribution", where);
  TracePartsCounts& c = p.counts;
  c.rows = jr::integer(a, "rows", aw, 0);
  c.attributed = jr::integer(a, "attributed_rows", aw, 0, c.rows);
  c.linked = jr::integer(a, "linked_rows", aw, 0, c.attributed);
  c.linked_enclosing = jr::integer(a, "linked_enclosing_rows", aw, 0, c.linked);
  c.linked_evaluate = jr::integer(a, "linked_evaluate_rows", aw, 0, c.linked);
  c.linked_accumulate = jr::integer(a, "linked_accumulate_rows", aw, 0, c.linked);
  c.untagged = jr::integer(a, "untagged_rows", aw, 0, c.rows);
  c.untagged_no_launch = jr::integer(a, "untagged_no_launch_rows", aw, 0, c.untagged);
  c.untagged_no_module = jr::integer(a, "untagged_no_module_rows", aw, 0, c.untagged);
  c.untagged_unlinked = jr::integer(a, "untagged_unlinked_rows", aw, 0, c.untagged);
  c.untagged_no_part = jr::integer(a, "untagged_no_part_rows", aw, 0, c.untagged);
  c.outside_model = jr::integer(a, "outside_model_rows", aw, 0, c.attributed);
  c.recorded = a.contains("recorded_rows") ? jr::integer(a, "recorded_rows", aw, 0, c.rows) : 0;
  if (p.has_breakdown()) {
    const Json& outside = jr::array(j, "outside_model", where);
    for (std::size_t i = 0; i < outside.size(); ++i) {
      const std::string w = jr::at(where, "outside_model", i);
      OutsideModelRow o;
      o.op = jr::string(outside[i], "op", w);
      o.phase = jr::string(outside[i], "phase", w);
      o.rows = jr::integer(outside[i], "rows", w, 0);
      o.kernels = jr::integer(outside[i], "kernels", w, 0, o.rows);
      const double k = jr::number(outside[i], "kernel_s", w);
      const double m = jr::number(outside[i], "memcpy_memset_s", w);
      if (k < 0 || m < 0) fail("{}: a negative time", w);
      o.kernel_ns = std::llround(k * 1e9);
      o.memcpy_memset_ns = std::llround(m * 1e9);
      p.outside_model.push_back(std::move(o));
    }
    if (j.contains("unplaced_modules")) {
      c.untagged_unplaced = jr::integer(a, "untagged_unplaced_rows", aw, 0, c.untagged);
      const Json& unplaced = jr::array(j, "unplaced_modules", where);
      for (std::size_t i = 0; i < unplaced.size(); ++i) {
        const std::string w = jr::at(where, "unplaced_modules", i);
        UnplacedModuleRow u;
        u.module = jr::string(unplaced[i], "module", w);
        u.phase = jr::string(unplaced[i], "phase", w);
        u.rows = jr::integer(unplaced[i], "rows", w, 0, c.untagged_unplaced);
        u.kernels = jr::integer(unplaced[i], "kernels", w, 0, u.rows);
        const double k = jr::number(unplaced[i], "kernel_s", w);
        const double m = jr::number(unplaced[i], "memcpy_memset_s", w);
        if (k < 0 || m < 0) fail("{}: a negative time", w);
        u.kernel_ns = std::llround(k * 1e9);
        u.memcpy_memset_ns = std::llround(m * 1e9);
        p.unplaced.push_back(std::move(u));
      }
      const double unplaced_s = jr::number(a, "unplaced_kernel_s", aw);
      if (unplaced_s < 0) fail("{}.unplaced_kernel_s: negative", aw);
      p.unplaced_kernel_ns = std::llround(unplaced_s * 1e9);
    }
    const double outside_s = jr::number(a, "outside_model_kernel_s", aw);
    if (outside_s < 0) fail("{}.outside_model_kernel_s: negative", aw);
    p.outside_model_kernel_ns = std::llround(outside_s * 1e9);
    // The breakdown's own fields, under the names this document gives them.
    const Json breakdown = {{"kernels", jr::field(a, "kernels", aw)},
                            {"kernel_s", jr::field(a, "kernel_s", aw)},
                            {"memcpy_memset_s", jr::field(a, "memcpy_memset_s", aw)},
                            {"span_s", jr::field(a, "span_s", aw)},
                            {"untagged_kernel_s", jr::field(a, "untagged_kernel_s", aw)},
                            {"untagged_kernel_share_ratio",
                             jr::field(a, "untagged_kernel_share_ratio", aw)},
                            {"rows", Json::array()},
                            {"layers", Json::array()}};
    p.breakdown = step_breakdown_from_json(breakdown, where, /*check_derived=*/false);
    const PartCells cells = evidence::from_json<PartCells>(j, where);
    if (!cells.by_phase_part || !cells.by_layer) fail("{}: the phase × part cells are null", where);
    p.breakdown.rows = *cells.by_phase_part;
    p.breakdown.layers = *cells.by_layer;
  }
  // The parts' keys share their object with others (kernels writes them beside the summary).
  const Json rewritten = to_json(p);
  Json read = Json::object();
  for (const auto& [key, value] : rewritten.items()) read[key] = jr::field(j, key.c_str(), where);
  jr::check_rewritten(read, rewritten, where);
  return p;
}

Table phase_part_matrix(const StepBreakdown& b, const std::string& title,
                        const std::vector<std::string>& phases, int64_t span_ns) {
  Table m(title);
  m.column("layers", Align::kLeft).column("part", Align::kLeft);
  for (const auto& ph : phases) m.column(ph);
  m.column("all phases");
  if (span_ns >= 0) m.column("of span");
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& r : b.rows) {
    std::pair<std::string, std::string> k{r.layer_kind, r.part};
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& c) {
    return std::make_pair(layer_kind_rank(a.first), part_rank(a.second)) <
           std::make_pair(layer_kind_rank(c.first), part_rank(c.second));
  });
  auto cell = [&](const std::string& kind, const std::string& part, const std::string& phase) {
    int64_t ns = 0;
    for (const auto& r : b.rows) {
      if (r.layer_kind == kind && r.part == part && r.phase == phase) ns += r.kernel_ns;
    }
    return ns;
  };
  for (const auto& [kind, part] : keys) {
    std::vector<std::string> row = {kind, part};
    int64_t all = 0;
    for (const auto& ph : phases) {
      const int64_t ns = cell(kind, part, ph);
      all += ns;
      row.push_back(ns > 0 ? format_ns(ns) : "");
    }
    row.push_back(format_ns(all));
    if (span_ns >= 0) row.push_back(span_share(all, span_ns));
    m.row(std::move(row));
  }
  m.separator();
  std::vector<std::string> total = {"all", "all"};
  for (const auto& ph : phases) {
    int64_t ns = 0;
    for (const auto& r : b.rows) {
      if (r.phase == ph) ns += r.kernel_ns;
    }
    total.push_back(ns > 0 ? format_ns(ns) : "");
  }
  total.push_back(format_ns(b.kernel_ns));
  if (span_ns >= 0) total.push_back(span_share(b.kernel_ns, span_ns));
  m.row(std::move(total));
  return m;
}

Table layer_matrix(const StepBreakdown& b, const std::string& title,
                   const std::vector<std::string>& phases) {
  Table t(title);
  t.column("layer").column("kind", Align::kLeft);
  for (const auto& ph : phases) t.column(ph);
  t.column("all phases");
  for (const LayerRow& l : b.layers) {
    std::vector<std::string> row = {std::to_string(l.layer), l.layer_kind};
    int64_t all = 0;
    for (const auto& ph : phases) {
      int64_t ns = 0;
      auto it = l.kernel_ns.find(ph);
      if (it != l.kernel_ns.end()) {
        for (const auto& [part, v] : it->second) ns += v;
      }
      all += ns;
      row.push_back(ns > 0 ? format_ns(ns) : "");
    }
    row.push_back(format_ns(all));
    t.row(std::move(row));
  }
  return t;
}

std::vector<Table> trace_parts_tables(const TraceParts& p, const std::string& title_prefix) {
  std::vector<Table> out;
  if (!p.has_breakdown()) {
    Table t(title_prefix + "Parts");
    t.column(trace_parts_why_none(p), Align::kLeft);
    out.push_back(t);
    return out;
  }
  const std::vector<std::string> phases = {"forward",  "loss",      "recompute",
                                           "backward", "optimizer", "untagged"};
  const StepBreakdown& b = p.breakdown;
  Table m = phase_part_matrix(
      b,
      fmt::format("{}where the trace's device time went, by phase and part (kernel time over the "
                  "selected steps; share of the device span {})",
                  title_prefix, format_ns(b.span_ns)),
      phases, b.span_ns);
  const TracePartsCounts& c = p.counts;
  auto share = [&](int64_t ns) {
    return b.kernel_ns > 0 ? format_percent(double(ns) / double(b.kernel_ns)) : std::string("-");
  };
  m.note(fmt::format(
      "{} of {} device rows placed ({} backward rows through a fwdbwd flow, {} of them through "
      "the flow of an enclosing backward op, {} through the node op of their evaluate_function "
      "range, {} in AccumulateGrad through the node evaluated before it; {} launched by ops "
      "outside the model's modules, "
      "part other: {} kernel time ({}), by op below); untagged {}: no launch {}, outside every "
      "module and op {}, backward op without a flow {}, in modules that name no part {}; "
      "untagged kernel time {} ({})",
      format_count(c.attributed), format_count(c.rows), format_count(c.linked),
      format_count(c.linked_enclosing), format_count(c.linked_evaluate),
      format_count(c.linked_accumulate), format_count(c.outside_model),
      format_ns(p.outside_model_kernel_ns), share(p.outside_model_kernel_ns), format_count(c.untagged),
      c.untagged_no_launch, c.untagged_no_module, c.untagged_unlinked, c.untagged_no_part,
      format_ns(b.untagged_kernel_ns), share(b.untagged_kernel_ns)));
  m.note(fmt::format(
      "{} module events, {} decoder layer(s){}; forward and recompute rows by their launching op's "
      "enclosing modules, backward rows by the module of the forward op their fwdbwd flow names "
      "(docs/kernels.md, \"Parts\"); memcpy/memset rows are counted in the evidence "
      "(memcpy_memset_s), not in these kernel times ({})",
      format_count(p.module_event_count), p.decoder_layers.size(),
      p.model.empty() ? "" : ", layer kinds from " + p.model, format_ns(b.memcpy_memset_ns)));
  if (c.untagged_unplaced > 0) {
    m.note(fmt::format("of the untagged: {} row(s) inside a decoder layer's module no rule "
                       "places, kernel time {} ({}), by module below",
                       format_count(c.untagged_unplaced), format_ns(p.unplaced_kernel_ns),
                       share(p.unplaced_kernel_ns)));
  }
  for (const std::string& n : p.notes) m.note(n);
  out.push_back(m);
  // One row per (name, phase): the unplaced modules and the ops outside the model alike.
  auto by_name = [&](const std::string& title, const char* what, const auto& rows,
                     auto name_of) {
    Table t(title_prefix + title);
    t.column(what, Align::kLeft)
        .column("phase", Align::kLeft)
        .column("rows")
        .column("kernel time")
        .column("of kernel time");
    for (const auto& r : rows) {
      t.row({clip(name_of(r), 80), r.phase, format_count(r.rows), format_ns(r.kernel_ns),
             share(r.kernel_ns)});
    }
    return t;
  };
  if (!p.unplaced.empty()) {
    Table u = by_name("unplaced: modules inside the decoder layers no rule places (in the table "
                      "above as untagged)",
                      "module", p.unplaced, [](const UnplacedModuleRow& r) { return r.module; });
    u.note("docs/kernels.md, \"Parts\": a layer's child or an MoE block's child of a class no "
           "rule names; its time is listed here, never given to a neighbouring part");
    out.push_back(u);
  }
  if (!p.outside_model.empty()) {
    Table o = by_name("time outside the model's modules by launching op (in the table above as "
                      "part other, layers -)",
                      "op", p.outside_model, [](const OutsideModelRow& r) { return r.op; });
    o.separator();
    o.row({"all", "", format_count(c.outside_model), format_ns(p.outside_model_kernel_ns),
           share(p.outside_model_kernel_ns)});
    o.note("forward side: the outermost cpu_op holding the launch (phase backward inside torch's "
           "own backward call); backward side: the backward op whose fwdbwd flow names a forward "
           "op outside every module");
    out.push_back(o);
  }
  if (!b.layers.empty()) {
    out.push_back(layer_matrix(b, title_prefix + "kernel time per decoder layer (parts summed)",
                               {"forward", "recompute", "backward"}));
  }
  return out;
}

}  // namespace tprobe::core
