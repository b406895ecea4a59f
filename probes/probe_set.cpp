// Drives one probe run: environment, options, run, table, atomic evidence write, exit code.
#include "probes/probe.hpp"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "probes/option_checks.hpp"
#include "tprobe/runs/profile_analysis.hpp"
#include "tprobe/engine/module_table.hpp"
#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/base/interrupt.hpp"

namespace tprobe::probes {
namespace {

// Options are recorded as the CLI resolved them (defaults included), typed where the option
// takes a number and the text converts exactly: a file named "1e5" stays a string, and a value
// outside 64 bits (which CLI11 would have refused for an integer option) is kept as its text
// rather than clamped.
bool numeric_option(const CLI::Option& opt) {
  const std::string type = opt.get_type_name();
  for (const char* prefix : {"INT", "UINT", "FLOAT", "NUMBER"}) {
    if (type.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

core::Json typed_value(const std::string& text, bool numeric) {
  if (!numeric || text.empty()) return text;
  if (text == "true") return true;
  if (text == "false") return false;
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(text.c_str(), &end, 10);
  if (errno == 0 && end && *end == '\0') return i;
  if (errno == ERANGE && text.front() != '-') {
    errno = 0;
    const unsigned long long u = std::strtoull(text.c_str(), &end, 10);
    if (errno == 0 && end && *end == '\0') return u;
  }
  errno = 0;
  const double d = std::strtod(text.c_str(), &end);
  if (errno == 0 && end && *end == '\0' && std::isfinite(d)) return d;
  return text;
}

core::Json resolved_options(const CLI::App& command) {
  core::Json out = core::Json::object();
  std::set<std::string> given;  // names recorded from a given value
  for (const CLI::Option* opt : command.get_options()) {
    std::string name = opt->get_single_name();
    if (name.empty() || name == "help") continue;
    std::vector<std::string> values = opt->results();
    // A deprecated spelling (hidden, group "") is recorded only when it was given.
    if (opt->get_group().empty() && values.empty()) continue;
    const bool numeric = numeric_option(*opt);
    // A main input has a positional and an option form under one name (`padding data.jsonl` or
    // `--dataset data.jsonl`): the form that was given is recorded.
    if (given.count(name) && values.empty()) continue;
    if (!values.empty()) given.insert(name);
    if (values.empty()) {
      if (opt->get_type_size() == 0) {  // a flag that was not given
        out[name] = false;
        continue;
      }
      std::string def = opt->get_default_str();
      if (def.size() >= 2 && def.front() == '[' && def.back() == ']') {
        // CLI11 renders a vector default as "[a,b,c]": record it as the list it is.
        core::Json list = core::Json::array();
        std::string body = def.substr(1, def.size() - 2);
        size_t start = 0;
        while (!body.empty() && start <= body.size()) {
          size_t comma = body.find(',', start);
          if (comma == std::string::npos) comma = body.size();
          list.push_back(typed_value(body.substr(start, comma - start), numeric));
          start = comma + 1;
        }
        out[name] = std::move(list);
        continue;
      }
      out[name] = def.empty() ? core::Json(nullptr) : typed_value(def, numeric);
    } else if (opt->get_type_size() == 0) {
      out[name] = true;
    } else if (values.size() == 1 && opt->get_expected_max() <= 1) {
      out[name] = typed_value(values.front(), numeric);
    } else {
      core::Json list = core::Json::array();
      for (const auto& v : values) list.push_back(typed_value(v, numeric));
      out[name] = std::move(list);
    }
  }
  return out;
}

}  // namespace

core::Environment collect_environment(Needs needs) {
  core::Environment env = core::base_environment();
  if (needs == Needs::kCore) return env;
  try {
    engine::load().describe(env);
    env.torch_loaded = true;
    env.torch_module = engine::torch_module_path();
  } catch (const Error& e) {
    if (needs == Needs::kTorch) throw;
    env.torch_not_loaded_reason = e.what();
  }
  return env;
}

void add_dataset_options(CLI::App* command, std::string& dataset, std::string& format) {
  const char* help =
      "Token lengths: a JSONL/CSV/text file (.gz too), or 'synthetic' (embedded, synthetic "
      "multi-source corpus)";
  CLI::Option* positional = command->add_option("dataset", dataset, help);
  command->add_option("--dataset", dataset, help)->capture_default_str()->excludes(positional);
  command->add_option("--format", format, "auto, jsonl, csv or text")->capture_default_str();
}

bool torch_module_loaded() { return !engine::torch_module_path().empty(); }

void add_lora_options(CLI::App* command, std::vector<std::string>& targets, int64_t& rank) {
  std::vector<std::string> known = core::linear_module_names();
  known.push_back("none");
  command->add_option("--targets", targets, "LoRA target modules (comma list, or none)")
      ->delimiter(',')
      ->check(CLI::IsMember(known))
      ->capture_default_str();
  command->add_option("--rank", rank, "LoRA rank")->check(positive_number())->capture_default_str();
}

CLI::Option* add_knob_option(CLI::App* cmd, core::Knob knob, core::StepConfig& config,
                             bool engine_only, const std::string& probe_default) {
  const core::KnobInfo& info = core::knob_info(knob);
  if (!probe_default.empty()) core::set_knob(config, knob, probe_default);
  const std::string shown =
      !probe_default.empty() ? probe_default : std::string(info.default_value);
  CLI::Option* opt = nullptr;
  if (info.values.empty()) {  // an integer knob (rows per micro-batch)
    opt = cmd->add_option_function<int64_t>(
                 info.flag,
                 [&config, knob](int64_t v) { core::set_knob(config, knob, std::to_string(v)); },
                 info.summary)
              ->check(positive_number());
  } else {
    opt = cmd->add_option_function<std::string>(
        info.flag, [&config, knob](const std::string& v) { core::set_knob(config, knob, v); },
        core::knob_help(knob, engine_only));
    if (info.parametric) {
      // zipf:S and the like: the registry's own parser is the check (its message names the flag).
      opt->check(CLI::Validator(
          [knob](std::string& v) -> std::string {
            core::StepConfig scratch;
            try {
              core::set_knob(scratch, knob, v);
            } catch (const UsageError& e) {
              return e.what();
            }
            return {};
          },
          // Not "{a,b}": that is IsMember's spelling, which the completions read as the choices.
          fmt::format("{}", fmt::join(core::knob_value_names(knob, engine_only), "|"))));
    } else {
      opt->check(CLI::IsMember(core::knob_value_names(knob, engine_only, true)));
    }
  }
  if (!shown.empty()) opt->default_str(shown);
  return opt;
}

CLI::Option* add_step_options(CLI::App* cmd, runs::ProfileOptions& o,
                              core::WidthsUse widths) {
  cmd->add_option("--checkpoint", o.checkpoint, "Checkpoint directory (config.json + safetensors)");
  cmd->add_option("--model", o.model,
                  "Embedded model shapes, random weights (without --checkpoint); default "
                  "gemma4-26b-a4b on cuda, gemma4-tiny on cpu")
      ->check(CLI::IsMember(core::embedded_model_names()));
  cmd->add_flag("--random-init", o.random_init,
                "Random weights in --model's shapes (the default without --checkpoint)");
  add_lora_options(cmd, o.targets, o.rank);
  cmd->add_option("--alpha", o.alpha, "LoRA alpha")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--ce-chunk", o.ce_chunk, "Tokens per CE chunk")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--dtype", o.dtype, "Compute dtype")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  cmd->add_option("--device", o.device, "cuda or cpu")
      ->check(CLI::IsMember({"cuda", "cpu"}))
      ->capture_default_str();
  add_knob_option(cmd, core::Knob::kBatch, o.config);
  add_knob_option(cmd, core::Knob::kOptimizer, o.config);
  cmd->add_option("--widths", o.widths,
                  "Per-row widths in tokens (default " + core::default_widths_help(widths) + ")")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cmd->add_option("--lengths", o.lengths,
                  "An extra padded point: real tokens per row (comma list, one per row), "
                  "right-padded to the widest width")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  CLI::Option* pad_fraction =
      cmd->add_option("--pad-fraction", o.pad_fraction,
                      "An extra padded point at the widest width with the last row padded by "
                      "this fraction (0.5 is the standard penalty test)");
  cmd->add_option("--warmup", o.warmup, "Untimed steps per point")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--repeats", o.repeats, "Timed steps per point")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option(
         "--peak-tflops", o.peak_tflops,
         "Peak TFLOP/s for the MFUs (default: measured with one large bf16 GEMM on the GPU)")
      ->check(positive_number())
      ->check(max_peak_tflops());
  cmd->add_option("--seed", o.seed, "Seed of the random weights and inputs")
      ->capture_default_str();
  return pad_fraction;
}

std::vector<std::string> lora_targets(const std::vector<std::string>& option) {
  if (option.size() == 1 && option[0] == "none") return {};
  return option;
}

std::string message_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' ||
                           text.back() == '\t')) {
    text.remove_suffix(1);
  }
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\r') {
      while (i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r' ||
                                     text[i + 1] == ' ' || text[i + 1] == '\t')) {
        ++i;
      }
      out += "; ";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

void add_diagnostics(core::Evidence& evidence, const std::vector<core::Diagnostic>& diagnostics) {
  for (const auto& d : diagnostics) evidence.diagnose(d.severity, d.code, d.message);
}

void write_side_output(RunContext& ctx, const std::string& path, std::string_view contents) {
  core::write_file_atomic(ctx.files.staged(path), contents);
}

std::string side_output_path(const RunContext& ctx, const std::string& path) {
  return path.empty() ? "" : ctx.files.staged(path);
}

void ProbeSet::deprecated(CLI::App* command, CLI::Option* old, const CLI::Option* replacement,
                          std::string note) {
  old->group("");
  deprecated_.push_back({command, old, replacement, std::move(note)});
}

void ProbeSet::add(CLI::App* command, RunFn run, Needs needs, ProbeFiles files) {
  auto probe = std::make_unique<Probe>();
  probe->command = command;
  probe->run = std::move(run);
  probe->needs = needs;
  probe->files = std::move(files);
  command->add_option("--json", probe->json_path,
                      "Write the evidence file (JSON) to PATH, atomically");
  // An empty path would read as "not given" (a default output, no replay): a usage error here,
  // for every path option the probe declares.
  std::vector<std::string> paths = probe->files.inputs;
  paths.insert(paths.end(), probe->files.outputs.begin(), probe->files.outputs.end());
  paths.push_back("--json");
  for (const std::string& name : paths) {
    if (CLI::Option* opt = command->get_option_no_throw(name)) opt->check(non_empty_path());
  }
  probes_.push_back(std::move(probe));
}

void check_integer_options(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* opt : sub->get_options()) {
      if (opt->get_type_size() == 0) continue;  // a flag
      const std::string type = opt->get_type_name();
      if (type.rfind("UINT", 0) == 0) {
        opt->check(checked_integer(false));
      } else if (type.rfind("INT", 0) == 0) {
        opt->check(checked_integer(true));
      }
    }
    check_integer_options(*sub);
  }
}

namespace {

// The values of option `name` as paths: what was given, else a scalar default.
std::vector<std::string> option_paths(const CLI::App& command, const std::string& name) {
  const CLI::Option* opt = command.get_option_no_throw(name);
  if (opt == nullptr) throw Error("internal: probe declares unknown option " + name);
  if (opt->count() > 0) return opt->results();
  const std::string def = opt->get_default_str();
  if (def.empty() || def.front() == '[') return {};
  return {def};
}

// Every file of the run declared to the guard: inputs, then side outputs, then the evidence.
// Checked before anything runs.
void declare_files(const Probe& probe, core::OutputGuard& guard) {
  const CLI::App& command = *probe.command;
  for (const std::string& name : probe.files.inputs) {
    const std::string role = name.rfind("--", 0) == 0 ? name : "<" + name + ">";
    for (const std::string& path : option_paths(command, name)) guard.input(role, path);
  }
  for (const std::string& name : probe.files.outputs) {
    const CLI::Option* opt = command.get_option_no_throw(name);
    if (opt == nullptr || opt->count() == 0) continue;
    for (const std::string& path : opt->results()) guard.output(name, path);
  }
  if (probe.files.declare) probe.files.declare(guard);
  if (command.get_option("--json")->count() > 0) guard.output("--json", probe.json_path);
  // Files tprobe does not own, whatever the probe reads: the running executable and the torch
  // module it loads (docs/evidence.md, "Outputs").
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) guard.input_file("the running tprobe executable", std::string(self, static_cast<size_t>(n)));
  for (const std::string& module : engine::torch_module_candidates()) {
    guard.input_file("tprobe's torch module", module);
  }
  guard.check();
}

// The run's input paths, for a message: " (reading A, B)", "" when it reads none.
std::string inputs_of(const Probe& probe) {
  std::vector<std::string> paths;
  for (const std::string& name : probe.files.inputs) {
    for (const std::string& path : option_paths(*probe.command, name)) paths.push_back(path);
  }
  if (paths.empty()) return "";
  if (paths.size() > 3) {
    paths.resize(3);
    paths.back() = "...";
  }
  return fmt::format(" (reading {})", fmt::join(paths, ", "));
}

std::string one_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  for (char& ch : line) {
    if (ch < 0x20 || ch >= 0x7f) ch = '?';
  }
  return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

// An exception that is not a tprobe::Error escaped the probe: turned into one line naming its
// inputs (main's prefix names the probe). nlohmann's "[json.exception.type_error.302] " tag, a
// bare "std::bad_alloc" and library-internal texts (vector::_M_range_check ...) never reach the
// user.
[[noreturn]] void fail_plainly(const Probe& probe) {
  const std::string reading = inputs_of(probe);
  try {
    throw;
  } catch (const std::bad_alloc&) {
    fail("out of memory{}", reading);
  } catch (const nlohmann::json::exception& e) {
    fail("a JSON value is not what it should be{}: {}", reading,
         one_line(core::json_error_text(e.what())));
  } catch (const std::logic_error&) {
    // out_of_range, length_error, invalid_argument: their texts name library internals.
    fail("an input is outside what tprobe can represent (a size or index out of range){}",
         reading);
  } catch (const std::exception& e) {
    fail("{}{}", one_line(e.what()), reading);
  }
}

}  // namespace

int ProbeSet::run_parsed(const std::vector<std::string>& argv, std::ostream& out) const {
  for (const auto& probe : probes_) {
    if (!probe->command->parsed()) continue;
    // (Not CLI11's excludes: that would print the hidden spelling's name in --help.)
    for (const Deprecated& d : deprecated_) {
      if (d.command == probe->command && d.option->count() > 0 && d.replacement->count() > 0) {
        fail_usage("--{} is the old spelling of --{}: give one of them",
                   d.option->get_single_name(), d.replacement->get_single_name());
      }
    }
    core::OutputGuard files;
    declare_files(*probe, files);
    core::Evidence evidence(probe->command->get_name(), argv);
    evidence.options() = resolved_options(*probe->command);
    // A value given through an old spelling is the new spelling's value too (docs/evidence.md).
    for (const Deprecated& d : deprecated_) {
      if (d.command != probe->command || d.option->count() == 0) continue;
      core::Json& o = evidence.options();
      o[d.replacement->get_single_name()] = o[d.option->get_single_name()];
    }
    core::Environment env = collect_environment(probe->needs);
    RunContext ctx{evidence, env, out, files};
    for (const Deprecated& d : deprecated_) {
      if (d.command != probe->command || d.option->count() == 0) continue;
      std::cerr << "deprecated: " << d.note << "\n";
      evidence.diagnose(core::Severity::kWarning, "deprecated_option", d.note);
    }
    // SIGINT/SIGTERM from here on: long loops stop at their next poll point and what they
    // measured is written with outcome "interrupted"; a second signal ends the process at once,
    // removing unfinished temporary and staged files (core/base/interrupt.hpp).
    core::install_interrupt_handlers();  // idempotent; main() installs them first
    core::Outcome outcome = core::Outcome::kOk;
    try {
      // A signal while the environment was collected: nothing is measured, the evidence says so.
      if (!core::interrupt_requested()) outcome = probe->run(ctx);
    } catch (const core::Interrupted&) {
      // A poll point that could not return partial results: the evidence says so, with
      // whatever the probe had put in results before.
    } catch (const Error&) {
      // After a signal, any failure is the signal's doing (a read cut short, a loop stopped
      // with too little to check): the run is interrupted, never a usage or input error.
      if (!core::interrupt_requested()) throw;
    } catch (const std::exception&) {
      if (!core::interrupt_requested()) fail_plainly(*probe);
    }
    const bool interrupted = core::interrupt_requested();
    if (interrupted) {
      outcome = core::Outcome::kInterrupted;
      evidence.diagnose(core::Severity::kError, "interrupted",
                        fmt::format("stopped by {}: the results hold only what was measured "
                                    "before the signal",
                                    core::interrupt_signal() == SIGTERM ? "SIGTERM" : "SIGINT"));
      if (!probe->files.outputs.empty()) {
        evidence.diagnose(core::Severity::kWarning, "side_outputs_not_written",
                          "an interrupted run writes its evidence only: no side output (order, "
                          "dump, trace) of a partial run is left");
      }
    }
    evidence.set_outcome(outcome);
    evidence.environment() = core::to_json(env);  // after run: probes record attn resolution
    for (const auto& d : evidence.diagnostics()) {
      if (d.severity != core::Severity::kInfo) {
        out << core::to_string(d.severity) << ": " << d.message << "\n";
      }
    }
    const bool json = probe->command->get_option("--json")->count() > 0;
    // What was printed must have reached standard output (a full disk, /dev/full): else the run
    // failed, and its outputs are not committed.
    out.flush();
    if (!out) {
      const int err = errno;
      fail("cannot write to standard output: {}; no output was written",
           err != 0 ? std::strerror(err) : "write failed");
    }
    if (json) evidence.write(files.staged(probe->json_path));
    // Every output of the run at once, the evidence last; an interrupted run keeps the evidence
    // alone. An exception above leaves none (the guard's destructor removes the staged files).
    files.commit("--json", interrupted ? "--json" : "");
    if (outcome == core::Outcome::kInterrupted) return core::interrupted_exit_code();
    return static_cast<int>(outcome == core::Outcome::kOk ? ExitCode::kOk : ExitCode::kEvidenceNo);
  }
  throw UsageError("no subcommand given: run 'tprobe --help' for the list");
}

}  // namespace tprobe::probes
