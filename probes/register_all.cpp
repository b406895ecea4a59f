// The list of subcommands, in the order `tprobe --help` shows them.
#include "probes/probe.hpp"

namespace tprobe::probes {

void register_all(CLI::App& app, ProbeSet& set) {
  register_suite(app, set);
  register_env(app, set);
  register_inspect(app, set);
  register_padding(app, set);
  register_bucket(app, set);
  register_scaling_fit(app, set);
  register_flops(app, set);
  register_mask(app, set);
  register_parity(app, set);
  register_kernels(app, set);
  register_lora_gate(app, set);
  register_report(app, set);
  register_profile(app, set);
}

}  // namespace tprobe::probes
