// The probe registry: every probe file's ProbeInfo, in the order of TPROBE_PROBES
// (probes/CMakeLists.txt), which generates probe_list.inc, one TPROBE_PROBE(<file>) line each.
#include "probes/probe.hpp"

namespace tprobe::probes {

#define TPROBE_PROBE(file) ProbeInfo file##_probe();
#include "probes/probe_list.inc"
#undef TPROBE_PROBE

const std::vector<ProbeInfo>& all_probes() {
  static const std::vector<ProbeInfo> kProbes = {
#define TPROBE_PROBE(file) file##_probe(),
#include "probes/probe_list.inc"
#undef TPROBE_PROBE
  };
  return kProbes;
}

void register_all(CLI::App& app, ProbeSet& set) {
  for (const ProbeInfo& p : all_probes()) p.register_probe(app, set);
  check_integer_options(app);
}

std::vector<core::ReportProbe> report_probes() {
  std::vector<core::ReportProbe> out;
  for (const ProbeInfo& p : all_probes()) {
    if (p.report_section) out.push_back({p.name, p.report_title, p.report_section});
  }
  return out;
}

}  // namespace tprobe::probes
