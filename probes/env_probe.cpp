// `tprobe env`: the environment block every evidence file carries, on its own.
#include "probes/probe.hpp"

namespace tprobe::probes {
namespace {

// No options and no analysis: the report is the environment the driver collected.
core::Outcome run(RunContext& ctx) {
  ctx.out << core::environment_table(ctx.environment).render();
  ctx.evidence.results() = core::to_json(ctx.environment);
  return core::Outcome::kOk;
}

}  // namespace

void register_env(CLI::App& app, ProbeSet& set) {
  CLI::App* cmd = app.add_subcommand(
      "env", "Report tool, libtorch, CUDA device, CUPTI and SDPA backend facts");
  set.add(cmd, run, Needs::kTorchIfAvailable);
}

// The environment block's section is core's (core/report/section.hpp): every evidence file has one.
ProbeInfo env_probe() {
  return {"env", register_env, "Environment", core::environment_section, {{"env", {"env"}}}};
}

}  // namespace tprobe::probes
