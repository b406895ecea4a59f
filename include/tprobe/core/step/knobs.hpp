// The knob registry: every knob of a step (StepConfig) in one table — its name in the evidence, its
// command-line flag, its values (each with what it needs: a libtorch version, a CUDA build, a CUDA
// device, a half dtype), its default, and the lever it is (what it moves, how a Hugging Face + PEFT
// user pulls it). Every probe's options, the levers' candidates, the engine's checks and the
// evidence's spelling are derived from it; the attention knob's values are the attention registry's
// (core/step/attention_path.hpp), whose entries also carry the FLOP and mask rules. Adding a knob
// is one entry here, its StepConfig field, and the engine code that honours it
// (tests/core/knobs_test.cpp, "A hypothetical knob").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprobe/core/step/step_config.hpp"

namespace tprobe::core {

enum class Knob {
  kAttn,
  kNorm,
  kLoraDtype,
  kMoe,
  kCheckpointing,
  kCe,
  kAttentionMask,
  kOptimizer,
  kRouting,
  kBatch
};

// One value of a knob.
struct KnobValue {
  const char* name = "";     // as the flag takes it and the evidence writes it
  const char* summary = "";  // the help's words
  Requirement needs;      // what running it needs (the engine refuses it otherwise, saying why)
  bool engine = true;        // the engine runs it (false: a FLOP rule only, e.g. sdpa-masked)
  // Offered as a lever's alternative (`levers`), on any device or on `lever_device` only.
  bool lever = true;
  const char* lever_device = "";  // "", "cpu" or "cuda"
  // A parametric family's instance ("zipf:1.2" for "zipf:S"), for the tests and the help; "" for
  // a plain value.
  const char* example = "";
};

struct KnobInfo {
  Knob id = Knob::kAttn;
  const char* key = "";      // the evidence's key and StepConfig's field: "attn", "lora_dtype"
  const char* flag = "";     // the command-line option: "--attn", "--lora-dtype"
  const char* summary = "";  // the help's first words
  std::vector<KnobValue> values;  // in the enum's order; empty: an integer (batch)
  // A value may carry a parameter after a colon (routing's zipf:S): the values' names are the
  // families ("zipf:S"), set_knob checks the spelling, and the option takes any it accepts.
  bool parametric = false;
  // The default's value name, or "" when the engine resolves it (auto_summary says how).
  const char* default_value = "";
  const char* auto_summary = "";
  // What evidence written before the knob existed ran, where that is not the default (the
  // optimizer: those steps ran none); "": the default.
  const char* absent_value = "";
  // Old spellings still read ("on" for reentrant): {alias, value}.
  std::vector<std::pair<const char*, const char*>> aliases;
  // The lever (`levers`): its name ("" when the knob is none), what it moves in the step, and how
  // a Hugging Face + PEFT user pulls it in their own stack.
  const char* lever = "";
  const char* moves = "";
  const char* in_hf_stack = "";
};

// In Knob's order.
const std::vector<KnobInfo>& knob_registry();
const KnobInfo& knob_info(Knob k);

// A knob's value in `c` by name ("" for a default left to the engine; batch as a number).
std::string knob_value(const StepConfig& c, Knob k);
// Sets a knob from a name (or an alias); throws UsageError naming the flag and the known values.
void set_knob(StepConfig& c, Knob k, std::string_view value);
// The names a flag accepts (aliases included when `with_aliases`), optionally only the values the
// engine runs.
std::vector<std::string> knob_value_names(Knob k, bool engine_only, bool with_aliases = false);
// "--attn: Attention path: eager (…); sdpa (…). Default: …" for --help.
std::string knob_help(Knob k, bool engine_only);

// Why a value cannot run on `facts`, or nullopt when it can (its Requirement against the engine's
// facts: "flash-window needs a CUDA build of libtorch >= 2.5 (this is 1.13.0, CPU)").
std::optional<std::string> unavailable(Knob k, std::string_view value, const EngineFacts& facts);
// The first value of `c` that cannot run on `facts` (a UsageError's message), or nullopt.
std::optional<std::string> config_refusal(const StepConfig& c, const EngineFacts& facts);

// "--attn flash-window --norm fused": the knobs of `c` that differ from `base`, as options ("" when
// none differ).
std::string config_difference(const StepConfig& c, const StepConfig& base);

// The faithful baseline: what a default transformers 5.17 + PEFT 0.21 LoRA run of the same shapes
// computes — sdpa (left to the engine: eager where the linked libtorch has no SDPA), the LoRA factors in fp32 (PEFT's autocast_adapter_dtype), transformers' RMSNorm
// formula, its default experts implementation (left to the engine: grouped_mm where it runs, else
// the loop), per-layer reentrant checkpointing with input grads, the sequence-chunked CE of the
// comparison harness (benchmarks/hf_lora_step.py), and Trainer's AdamW (optim="adamw_torch"). `profile`'s defaults and `levers`' baseline.
StepConfig hf_peft_baseline(int64_t batch = 2);
const char* hf_peft_baseline_name();  // one line naming what it reproduces

// The widths a sweep measures when none are given, by device (one definition: profile, levers and
// the suite's plans read it).
enum class WidthsUse { kProfile, kLevers };
std::vector<int64_t> default_widths(const std::string& device, WidthsUse use);
std::string default_widths_help(WidthsUse use);  // "2048,4096,… on cuda, 32,64,… on cpu"

}  // namespace tprobe::core
