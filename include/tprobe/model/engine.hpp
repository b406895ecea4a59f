// The engine's entry points: what src/model defines, for the module's function table
// (torch_module.cpp) and the model tests. Their signatures are torch-free, over engine's request
// and result types; they are declared here, with the engine that defines them, and engine's
// headers hold only those types and the function table (the analyses and views over them are
// src/runs'; docs/ARCHITECTURE.md, "libtorch on demand").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/environment.hpp"
#include "tprobe/core/step/attention_path.hpp"
#include "tprobe/engine/mask_check_request.hpp"
#include "tprobe/engine/parity_request.hpp"
#include "tprobe/engine/profile_request.hpp"
#include "tprobe/engine/step_spec.hpp"

namespace tprobe::model {

// The request and result types the entry points take (engine's).
using engine::BackwardParity;
using engine::DeviceMemory;
using engine::MaskBackendsOptions;
using engine::MaskBackendsResult;
using engine::MaskCheckOptions;
using engine::MaskCheckResult;
using engine::ParityOptions;
using engine::ParityResult;
using engine::PointResult;
using engine::ProfileReport;
using engine::ProfileRequest;
using engine::StepReport;
using engine::StepSpec;
using engine::VerdictRule;

// ---- the environment (runtime_info.cpp) -------------------------------------------------------

// Sets torch_version, torch_cuda_build, cuda_usable (with a reason when not), device facts,
// CUDA runtime/driver versions and the SDPA backend list. Never throws for a missing GPU.
void describe_torch(core::Environment& env);
// Device 0's memory now (runtime_info.cpp): `unavailable` says why not on a CPU-only build or
// where no CUDA device is visible.
DeviceMemory device_memory();

// ---- one or more training steps (step_runner.cpp) and the sweep over them (profile.cpp) -------

// Throws tprobe::Error (UsageError for bad options) when the model cannot be built; a failing
// point (OOM included) is a result and the sweep goes on. `on_point` is called as each point
// finishes.
StepReport run_steps(const StepSpec& spec,
                     const std::function<void(const PointResult&)>& on_point = {});

// One large bf16 GEMM (n×n by n×n, `repeats` times after a warm-up) on the CUDA device, timed with
// events: the peak the MFUs are measured against. Throws when there is no CUDA device.
double measure_gemm_tflops(int64_t n = 8192, int repeats = 20);

// The byte count in a CUDA OOM message ("Tried to allocate 2.00 GiB"), when present.
std::optional<int64_t> parse_oom_bytes(const std::string& message);

// An allocator's refusal in tprobe's words, with the bytes asked when the message gives them
// ("out of memory: the CPU allocator refused 40.00 GiB (42949672960 bytes asked)"), for a
// libtorch message from the CPU allocator ("DefaultCPUAllocator: not enough memory") or the CUDA
// one ("CUDA out of memory"); nullopt for any other message.
std::optional<std::string> allocator_refusal(const std::string& message);

// Throws tprobe::Error/UsageError for what run_steps throws; every point failure is a result.
ProfileReport run_profile(const ProfileRequest& request,
                          const std::function<void(const PointResult&)>& on_point = {});

// ---- parity (parity.cpp) ----------------------------------------------------------------------

// baseline_rel_l2: HF's own bf16 error against the same fp32 reference, if the reference has it.
VerdictRule verdict_rule(const std::string& dtype, std::optional<double> baseline_rel_l2);

// Reference names to try, in order, for HF's own bf16 run of attention path `attn`: the same
// path ("eager", "sdpa"; flash-window has no HF twin and uses sdpa's), then sdpa, then eager.
// The logits are stem + "_hf_bf16_" + path; gradients "<name>.grad_hf_bf16_" + path.
std::vector<std::string> baseline_candidates(core::AttentionPath attn);

// Fills the aggregate fields of `b` (modules, worst module, global error, zero lists) from its
// tensors, then the verdict: fp32 every tensor and the global error
// ≤ 1e-4 and |Δ loss| ≤ 1e-4·|loss|; bf16 global and worst-module error within the rule's bound
// against HF's (relative rule) or global ≤ 5e-2 (fallback); any one-sided zero fails.
void judge_backward(BackwardParity& b, const std::string& dtype);

// Real tokens per row of a right-padded attention_mask [batch, seq] of 0/1 (any numeric dtype
// read as double): every row must be ones then zeros, with at least one 1. `where` names the
// file in errors. Empty when nothing is masked. Throws Error for another shape, a value other
// than 0 or 1, a 1 after a 0 (left padding or a hole), or a row with no real token.
std::vector<int64_t> lengths_from_attention_mask(const std::vector<double>& mask, int64_t batch,
                                                 int64_t seq, const std::string& where);
// The labels Hugging Face's causal-LM loss needs for tprobe's loss: labels[b][s] = input_ids[b][s]
// at real positions, -100 at padded ones; labels[:, 0] is never a target and is not checked.
// Throws Error naming the first position that differs (e.g. a prompt masked with -100).
void check_labels(const std::vector<double>& labels, const std::vector<int64_t>& input_ids,
                  const std::vector<int64_t>& lengths, int64_t batch, int64_t seq,
                  const std::string& where);

ParityResult run_parity(const ParityOptions& options);

// ---- the mask on the device (mask_check.cpp, mask_backends.cpp) -------------------------------

// Builds the engine's mask for each layer type at the width and lengths, and verifies it on the
// device, vectorised. Throws tprobe::Error for bad options or an unusable device.
MaskCheckResult run_mask_check(const MaskCheckOptions& options);

// Tries every SDPA backend pinned alone, plus tprobe's windowed flash path, for each shape, K/V
// layout and mask case. Never throws for a refusal (that is a row); `supported` is false with a
// reason on CPU builds or without a CUDA device.
MaskBackendsResult run_mask_backends(const MaskBackendsOptions& options);

}  // namespace tprobe::model
