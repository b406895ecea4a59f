// `tprobe kernels`: the device-only kernel table of a torch.profiler trace (or two, compared).
#include "tprobe/core/trace/kernels.hpp"

#include "probes/probe.hpp"

namespace tprobe::probes {
namespace {

struct KernelsArgs {
  std::vector<std::string> inputs;
  core::KernelTableOptions table;
  int top = 25;
};

}  // namespace

void register_kernels(CLI::App& app, ProbeSet& set) {
  auto args = std::make_shared<KernelsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "kernels",
      "Device-only kernel table of a torch.profiler trace (.json/.json.gz), a directory of "
      "per-rank traces, or A B compared");
  cmd->add_option("inputs", args->inputs,
                  "A trace or tprobe evidence file; a directory of per-rank traces; or two inputs "
                  "A B to compare")
      ->required()
      ->expected(1, 2);
  cmd->add_option("--step", args->table.steps,
                  "Only these profiler steps (N of ProfilerStep#N; comma list)")
      ->delimiter(',');
  cmd->add_option("--skip-first", args->table.skip_first,
                  "Leave out the first K profiler steps present (warm-up)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--device", args->table.device, "Only this device (-1: all)")
      ->check(CLI::Range(-1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--top", args->top, "Kernels listed in the table (0: all; the evidence has all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  set.add(cmd, [args](RunContext& ctx) {
    core::KernelsRequest request{args->inputs, args->table};
    const core::KernelsReport report = core::analyze_kernels(request);
    for (const auto& table : core::kernels_tables(report, args->top)) {
      ctx.out << table.render() << "\n";
    }
    for (const auto& d : report.diagnostics) ctx.evidence.diagnose(d.severity, d.code, d.message);
    ctx.evidence.results() = core::to_json(report);
    return core::Outcome::kOk;
  }, Needs::kCore, {{"inputs"}, {}, {}});
}

}  // namespace tprobe::probes
