// One measured LoRA step's configuration, typed: the knobs a user turns (attention path, norm,
// LoRA dtype, experts, checkpointing, cross-entropy form, the attention_mask handed in, the
// optimizer, the MoE routing, rows per micro-batch). Every probe, the levers, the engine's checks, the FLOP rules and the evidence
// read it; the knob registry (core/step/knobs.hpp) holds each knob's name, flag, values and what
// each value needs, so a knob is spelled in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/step/attention_path.hpp"
#include "tprobe/core/step/routing.hpp"

namespace tprobe::core {

// RMSNorm: transformers' formula op by op (fp32 cast, pow, mean, rsqrt, weight, cast back) or
// libtorch's at::rms_norm (one kernel each way on CUDA).
enum class NormKind { kHf, kFused };
// The LoRA factors' dtype under a bf16 model: fp32 (PEFT's autocast_adapter_dtype default) or the
// model's.
enum class LoraDtype { kFp32, kModel };
// How the MoE experts are computed: transformers 5.17's grouped_mm experts op for op
// (kHfGroupedMm), tprobe's permutation with one grouped GEMM per projection (kGroupedMm) or a
// GEMM per expert (kLoop). The grouped GEMMs need at::_grouped_mm (CUDA, libtorch >= 2.8).
enum class MoeDispatch { kHfGroupedMm, kGroupedMm, kLoop };
// Gradient checkpointing as requested: off, reentrant (use_reentrant=True) or non-reentrant
// (use_reentrant=False, transformers 5.17's default). The engine runs both by one mechanism
// (docs/profile.md).
enum class Checkpointing { kReentrant, kNonReentrant, kOff };
// The cross-entropy's form (docs/profile.md, "Memory"): the HF harness's per-chunk checkpoint,
// tprobe's one node over the chunks with an in-place backward, or the whole logits at once.
enum class CeForm { kChunkCheckpoint, kChunked, kNaive };
// The attention_mask the Hugging Face step is handed: none, or an all-ones [B, S] (a collator's
// on unpadded rows): same values, masks held at [B, 1, S, S] instead of [1, 1, S, S].
enum class AttentionMask { kNone, kOnes };
// The optimizer each step ends with: none (forward + backward only), or AdamW on the LoRA
// parameters as PEFT + Trainer run it (optim="adamw_torch": moments in the adapters' dtype, fp32
// for fp32 adapters, allocated at the first step; the gradients set to none after each step).
enum class OptimizerKind { kNone, kAdamw };

struct StepConfig {
  // nullopt: the default the engine resolves (core::resolve_defaults): sdpa where the linked
  // libtorch has it, else eager; transformers' default experts (hf_grouped_mm where it runs,
  // else loop).
  std::optional<AttentionPath> attn;
  NormKind norm = NormKind::kHf;
  LoraDtype lora_dtype = LoraDtype::kFp32;
  std::optional<MoeDispatch> moe;
  Checkpointing checkpointing = Checkpointing::kReentrant;
  CeForm ce = CeForm::kChunkCheckpoint;
  AttentionMask attention_mask = AttentionMask::kNone;
  OptimizerKind optimizer = OptimizerKind::kAdamw;
  Routing routing;    // the router's own top-k, or a forced assignment (core/step/routing.hpp)
  int64_t batch = 2;  // rows per micro-batch

  bool operator==(const StepConfig& o) const;
  bool operator!=(const StepConfig& o) const { return !(*this == o); }
};

const char* to_string(NormKind v);       // "hf", "fused"
const char* to_string(LoraDtype v);      // "fp32", "model"
const char* to_string(MoeDispatch v);    // "hf_grouped_mm", "grouped_mm", "loop"
const char* to_string(Checkpointing v);  // "reentrant", "non-reentrant", "off"
const char* to_string(CeForm v);         // "chunk-checkpoint", "chunked", "naive"
const char* to_string(AttentionMask v);  // "none", "ones"
const char* to_string(OptimizerKind v);  // "none", "adamw"

// What the engine can run, as it says of itself: the facts every value's requirement is held
// against (core::Requirement).
struct EngineFacts {
  int torch_major = 0, torch_minor = 0;
  bool cuda_build = false;      // libtorch was built with CUDA
  std::string device = "cpu";   // cpu | cuda: where the step runs
  std::string dtype = "bf16";   // bf16 | fp32 | fp64: the model's compute dtype
  std::string torch_version;    // as libtorch spells it, for messages
};

// The defaults left open (attn, moe) chosen for `facts`, each choice that is not the usual one
// said in `notes` (codes attn_default_eager, moe_default_loop).
StepConfig resolve_defaults(StepConfig config, const EngineFacts& facts,
                            std::vector<Diagnostic>* notes = nullptr);

// The evidence's spelling: {"attn": "sdpa" | null, "norm": "hf", ...} (null: left to the engine).
Json to_json(const StepConfig& c);
StepConfig step_config_from_json(const Json& j, const std::string& where);

}  // namespace tprobe::core
