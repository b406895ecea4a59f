// The inert-adapter gate (domain item 13): does every adapted module of a LoRA adapter hold a
// trained lora_B, and does the adapter hold the modules its config and base model imply?
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/adapter/lora_adapter.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::core {

// The base model the adapter was trained on: its config and text-decoder tensors.
struct GateBase {
  ModelConfig config;
  std::vector<TensorMeta> tensors;
  std::string prefix;  // text-decoder prefix of `tensors`
  std::string source;  // "--model gemma4-tiny", "--checkpoint DIR", "adapter_config
                       // base_model_name_or_path"
};

// What a module's tensors say. learned: lora_A and lora_B both non-zero. inert: lora_B is all
// zero, so the module adds nothing. dead_a: lora_A all zero (B is then never trained either).
// negligible: A and B are non-zero, but the update PEFT adds, scaling * lora_B·lora_A, is below
// kNegligibleUpdate (its scaling, or the bound scaling * |B| * |A| on every element): a
// float32 / bf16 model cannot hold it, so the module adds nothing in effect (lora_alpha 1e-320).
// non_finite: a NaN/Inf in either. incomplete: lora_A or lora_B missing. bad_shape: A is not
// [r, in] or B not [out, r] of the base linear (or A and B disagree on r).
enum class ModuleState {
  kLearned,
  kInert,
  kDeadA,
  kNegligible,
  kNonFinite,
  kIncomplete,
  kBadShape
};

// The floor below which a module's scaling, or the bound on its update's elements, is
// negligible: float32's (and bf16's) smallest normal number, 2^-126. PEFT multiplies the update
// by the scaling in the model's dtype; below 2^-126 it is subnormal or zero there (flushed to
// zero where the hardware flushes subnormals), and a merged update whose every element is below
// it changes no float32 weight of magnitude 2^-102 or more. The gate reads no base weights, so a
// representable update that is small against them (alpha 1e-30) is not caught.
inline constexpr double kNegligibleUpdate = 0x1p-126;
const char* to_string(ModuleState state);

struct GateModule {
  std::string module;  // as in the adapter (PEFT module name)
  std::string adapter_name;
  int64_t layer = -1;
  std::optional<LayerType> layer_type;  // none: unknown, or no base to say
  std::string target;
  int64_t rank = 0;  // lora_A rows
  std::vector<int64_t> a_shape, b_shape;
  std::string dtype;  // of lora_B (lora_A's when B is missing)
  std::optional<double> a_norm, b_norm;
  double scaling = 0.0;  // what PEFT multiplies B·A by (ModuleScaling); 0 when not computed
  // scaling * |B| * |A| (Frobenius), a bound on every element of the update; absent without both
  std::optional<double> update_bound;
  bool in_text_decoder = false;
  bool expected = false;  // matched an expected module (false when no base was given)
  ModuleState state = ModuleState::kLearned;
  std::string message;  // why, for any state but learned
};

struct GateTargetRow {
  std::string target;
  int64_t expected = -1;  // -1: no base to compare with
  int64_t found = 0;
  int64_t sliding = 0, full = 0;
  int64_t inert = 0;  // lora_B all zero
  double min_b_norm = 0, max_b_norm = 0;
};

struct GateCount {
  bool checked = false;
  std::string base_source;
  std::string why_unchecked;
  int64_t expected = 0;
  int64_t found = 0;                      // text-decoder modules in the adapter
  std::vector<std::string> missing;       // expected, absent from the adapter
  std::vector<std::string> unexpected;    // in the adapter's text decoder, not expected
  std::vector<std::string> absent_notes;  // targets absent on some layers (v_proj on global layers)
  bool ok() const { return checked && missing.empty() && unexpected.empty(); }
};

// One modules_to_save entry: the whole-module copies PEFT saved for it, as PEFT names them
// ("<module>.<param>" in the saved file, "<module>.modules_to_save.<adapter>.<param>" in a
// state dict).
struct SavedModule {
  std::string name;                  // as listed in adapter_config.json
  std::vector<std::string> tensors;  // the adapter's tensors saved for it
  int64_t non_finite = 0;            // NaN / Inf elements over them
  int64_t nonzero = 0;               // non-zero elements over them
  double norm = 0.0;                 // Frobenius norm over them (finite elements)
  std::string problem;               // "" when present and finite
};

// bias "all" / "lora_only": the bias tensors the base has for it, and which the adapter holds.
struct BiasCheck {
  std::string mode = "none";
  bool checked = false;               // false: bias "none", or no base to tell which exist
  std::vector<std::string> expected;  // "layers.N.path.bias" (or the base's name outside layers)
  std::vector<std::string> missing;   // expected, not in the adapter
  std::vector<std::string> found;     // bias tensors in the adapter (its names)
  std::string note;                   // what the check found, in words
  bool ok() const { return missing.empty(); }
};

// real: every module learned. inert: every lora_B zero. partial: some learned, some not (a
// module-selection problem: which ones is the table). broken: non-finite, incomplete or mis-shaped
// tensors. empty: no lora tensors at all.
enum class GateVerdict { kReal, kInert, kPartial, kBroken, kEmpty };
const char* to_string(GateVerdict verdict);

struct LoraGateReport {
  std::string dir;
  std::vector<std::string> files;
  bool sharded = false;
  AdapterConfig config;
  std::vector<std::string> naming_forms;
  std::vector<std::string> dtypes;
  GateVerdict verdict = GateVerdict::kEmpty;
  std::string verdict_message;
  std::vector<GateModule> modules;
  std::vector<GateTargetRow> per_target;
  GateCount count;
  std::vector<std::string> outside_text;  // modules outside the text decoder (vision tower, ...)
  std::vector<TensorStats> other_tensors;
  std::vector<SavedModule> modules_to_save;  // one per config entry
  BiasCheck bias;
  std::vector<Diagnostic> diagnostics;
  // verdict real, (count unchecked or ok), every modules_to_save entry present and finite, and
  // no bias tensor missing
  bool passed() const;
  Outcome outcome = Outcome::kOk;  // kNo unless passed()
};

// Runs the gate. `base` absent: the count check is skipped (reported as such).
LoraGateReport gate_lora_adapter(const LoraAdapter& adapter, const std::optional<GateBase>& base);

// The base from a checkpoint directory, checked against its own config.json first by the check
// inspect and parity run (core::cross_check): a checkpoint that disagrees with its config is
// refused as parity refuses it (tprobe::Error, exit 1), naming the first disagreement and how
// many more, since no count can be computed from a base that contradicts itself.
GateBase gate_base_from_checkpoint(const Checkpoint& checkpoint);
// The base from an embedded model (expected tensors under the multimodal prefix).
GateBase gate_base_from_model(const std::string& name);
// The base the adapter names itself: its adapter_config.json's base_model_name_or_path when that
// is an embedded model (tprobe's own save_adapter writes it); absent otherwise.
std::optional<GateBase> gate_base_from_adapter(const LoraAdapter& adapter);

}  // namespace tprobe::core
