// What every subcommand shares: how it registers with the CLI and how its run is driven.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "tprobe/core/base/environment.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/output_guard.hpp"
#include "tprobe/core/report/section.hpp"
#include "tprobe/core/step/knobs.hpp"

namespace tprobe::runs {
struct ProfileOptions;
}  // namespace tprobe::runs

namespace tprobe::probes {

// Handed to a probe's run: it fills evidence.results(), prints its tables to `out`, and returns
// the outcome (kNo maps to exit code 3).
// A probe writes each declared output to `files.staged(path)`; the driver commits them all, with
// the evidence, when the run succeeded (core/base/output_guard.hpp).
struct RunContext {
  core::Evidence& evidence;
  core::Environment& environment;
  std::ostream& out;
  core::OutputGuard& files;
};

using RunFn = std::function<core::Outcome(RunContext&)>;

// What a probe needs loaded before it runs. kCore probes never load libtorch; kTorch probes load
// the torch module first (an error if it cannot be loaded); kTorchIfAvailable (env) records why
// it could not be loaded instead of failing.
enum class Needs { kCore, kTorch, kTorchIfAvailable };

// The files a probe reads and writes beside --json, for the output guard: checked before anything
// runs (an output that is an input, lies in an input folder or names another output is refused).
struct ProbeFiles {
  // Options (a positional's name too) whose values are paths the probe reads; a directory
  // protects every file under it. Defaults count when the option was not given.
  std::vector<std::string> inputs;
  // Options whose values are files the probe writes, each through RunContext::files.staged().
  std::vector<std::string> outputs;
  // Paths known only from the values (a default output, a folder's files), declared to the guard
  // after the options above.
  std::function<void(core::OutputGuard&)> declare;
};

struct Probe {
  CLI::App* command = nullptr;
  RunFn run;
  Needs needs = Needs::kCore;
  ProbeFiles files;
  std::string json_path;  // --json PATH, added to every probe
};

class ProbeSet {
 public:
  // Adds --json to `command` and remembers how to run it and which files it reads and writes;
  // every path option `files` names (and --json) refuses an empty value (non_empty_path).
  void add(CLI::App* command, RunFn run, Needs needs = Needs::kCore, ProbeFiles files = {});
  // `old`, an old spelling of `command`'s option `replacement`, kept for one release: hidden from
  // --help; when it is given, the run prints "deprecated: <note>" to stderr and records the note
  // as a warning (code "deprecated_option") in the evidence; both given is a usage error. `note`
  // says what to write instead.
  void deprecated(CLI::App* command, CLI::Option* old, const CLI::Option* replacement,
                  std::string note);
  // Runs whichever subcommand was parsed; returns the process exit code.
  int run_parsed(const std::vector<std::string>& argv, std::ostream& out) const;

 private:
  struct Deprecated {
    CLI::App* command;
    CLI::Option* option;
    const CLI::Option* replacement;
    std::string note;
  };
  std::vector<std::unique_ptr<Probe>> probes_;
  std::vector<Deprecated> deprecated_;
};

// The one way a probe hands an analysis' diagnostics to the envelope (in order).
void add_diagnostics(core::Evidence& evidence, const std::vector<core::Diagnostic>& diagnostics);

// Side outputs: the files a run writes beside --json. Each is declared in the probe's ProbeFiles
// (its option in `outputs`, or through `declare`), and these two are the only ways one is
// written: under the output guard's staged name, committed with the evidence when the run
// succeeds, removed when it fails; an interrupted run keeps none (core/base/output_guard.hpp).
// write_side_output writes `contents` (atomically) for the probe; side_output_path is the staged
// name the engine writes to itself ("" when `path` is empty: the output was not asked for).
void write_side_output(RunContext& ctx, const std::string& path, std::string_view contents);
std::string side_output_path(const RunContext& ctx, const std::string& path);

// --dataset and --format, shared by the probes that read a length dataset.
void add_dataset_options(CLI::App* command, std::string& dataset, std::string& format);

// True once a probe has loaded the libtorch module in this process (main() then ends the process
// without libtorch's teardown).
bool torch_module_loaded();

// The LoRA options of the probes that build or count adapters: --targets (a comma list of the
// model's linear modules, or none) and --rank. `lora_targets()` turns the list into the analysis'
// form (none -> empty).
void add_lora_options(CLI::App* command, std::vector<std::string>& targets, int64_t& rank);
std::vector<std::string> lora_targets(const std::vector<std::string>& option);

// A knob of the registry (core/step/knobs.hpp) as an option of `cmd`: its flag, its values (the
// old spellings too) and its help come from the registry entry, and the value lands in `config`
// as it is parsed (set_knob). `engine_only`: only the values the engine runs (`flops` takes every
// attention path that has a FLOP rule). `probe_default`: this probe's default where it is not the
// registry's (written into `config` now and shown in --help); "" keeps the registry's.
CLI::Option* add_knob_option(CLI::App* cmd, core::Knob knob, core::StepConfig& config,
                             bool engine_only = true, const std::string& probe_default = {});

// The measured step's shape and measurement options that `profile` and `levers` share: the model
// (--checkpoint, --model, --random-init), LoRA (--targets, --rank, --alpha), --ce-chunk, --dtype,
// --device, --batch and --optimizer (the registry's knobs), --widths (the default for `widths`, said in the help),
// --lengths, --pad-fraction, --warmup, --repeats, --peak-tflops, --seed. Returns the --pad-fraction
// option: its count() says whether it was given.
CLI::Option* add_step_options(CLI::App* command, runs::ProfileOptions& options,
                              core::WidthsUse widths);

// One step of the main job (`tprobe suite`): a child run of this binary writing <name>.json.
// {out} and {fixtures} are replaced in the arguments; `needs` is a fixture path the step skips
// without (relative to the fixtures folder). expect_no: exit 3 is the point of the step.
// `cuda_args`: the step's arguments when the suite runs on a CUDA device (empty: `args` on
// every device); suite_plan() (probes/suite_plan.hpp) picks one of the two.
struct SuiteStep {
  SuiteStep(std::string name_, std::vector<std::string> args_, std::string needs_ = "",
            bool expect_no_ = false, std::string why_ = "",
            std::vector<std::string> cuda_args_ = {})
      : name(std::move(name_)),
        args(std::move(args_)),
        needs(std::move(needs_)),
        expect_no(expect_no_),
        why(std::move(why_)),
        cuda_args(std::move(cuda_args_)) {}
  std::string name;
  std::vector<std::string> args;
  std::string needs;
  bool expect_no = false;
  std::string why;
  std::vector<std::string> cuda_args;
};

using RegisterFn = void (*)(CLI::App& app, ProbeSet& set);

// What the probe registry holds of one probe. Each probes/<file>.cpp defines
// `ProbeInfo <file>_probe()`; the list of files, in order, is TPROBE_PROBES in
// probes/CMakeLists.txt, the one hand-kept list of probes.
struct ProbeInfo {
  ProbeInfo(std::string name_, RegisterFn register_probe_, std::string report_title_ = "",
            core::SectionFn report_section_ = nullptr, std::vector<SuiteStep> suite_steps_ = {})
      : name(std::move(name_)),
        register_probe(register_probe_),
        report_title(std::move(report_title_)),
        report_section(report_section_),
        suite_steps(std::move(suite_steps_)) {}
  std::string name;  // the subcommand, and schema.name "tprobe.<name>" of its evidence
  RegisterFn register_probe;
  std::string report_title;        // the report section's heading
  core::SectionFn report_section;  // null: the report's generic section
  std::vector<SuiteStep> suite_steps;  // its runs in the main job (none: not run there)
};

// Every probe, in the registry's order: `tprobe --help`, the main job and the report's sections.
const std::vector<ProbeInfo>& all_probes();
// Registers every probe's subcommand, in that order, then check_integer_options(app).
void register_all(CLI::App& app, ProbeSet& set);
// Every integer option of every subcommand of `app` gets option_checks.hpp's checked_integer
// (signed or unsigned by CLI11's type name INT / UINT): the one place integers are checked.
void check_integer_options(CLI::App& app);
// The probes the report draws sections for, in that order.
std::vector<core::ReportProbe> report_probes();

// `text` as one line of a message: each line break (and the indentation after it) becomes "; ",
// any other control byte \xNN, trailing blanks dropped. main() prints every error through it.
std::string message_line(std::string_view text);

// The environment block: core facts, plus the libtorch / CUDA / CUPTI facts when `needs` asks for
// the torch module.
core::Environment collect_environment(Needs needs);

}  // namespace tprobe::probes
