// `tprobe parity`'s computation: tprobe's forward on a Hugging Face reference's input_ids against
// HF's logits and loss, or (backward) its loss and LoRA gradients against HF + PEFT's.
#include "tprobe/engine/parity_request.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/cost/step_plan.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/io/safetensors.hpp"
#include "tprobe/core/step/knobs.hpp"
#include "tprobe/model/loader.hpp"
#include "tprobe/model/engine.hpp"

namespace tprobe::model {

// The engine works in engine's request and result types.
using namespace engine;

using torch::Tensor;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kGradSuffix = ".grad";
// PEFT's save names: "base_model.model." + the checkpoint's text prefix + the module path.
// The multimodal prefix first: the text-only one is a prefix of it.
constexpr const char* kPeftTextPrefixes[] = {"base_model.model.model.language_model.",
                                             "base_model.model.model."};

bool starts_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

double rel(double diff, double ref) {
  if (ref > 0) return diff / ref;
  return diff > 0 ? kInf : 0.0;
}

LogitsError logits_error(const Tensor& got, const Tensor& want) {
  LogitsError e;
  Tensor diff = got - want;
  e.max_abs_error = diff.abs().max().item<double>();
  e.rel_l2_error = diff.norm().item<double>() / std::max(want.norm().item<double>(), 1e-300);
  Tensor per_pos = (diff.norm(2, -1) / want.norm(2, -1).clamp_min(1e-300)).reshape({-1});
  Tensor sorted = std::get<0>(per_pos.sort());
  const int64_t n = sorted.size(0);
  e.position_rel_l2_median = sorted[(n - 1) / 2].item<double>();
  e.position_rel_l2_p99 =
      sorted[std::min<int64_t>(n - 1, static_cast<int64_t>(0.99 * static_cast<double>(n)))]
          .item<double>();
  e.argmax_agreement_ratio =
      got.argmax(-1).eq(want.argmax(-1)).to(torch::kDouble).mean().item<double>();
  return e;
}

Tensor read_shaped(const core::SafetensorsFile& ref, const std::string& key,
                   const std::vector<int64_t>& shape) {
  Tensor t = read_tensor(ref, key, torch::kDouble, torch::kCPU);
  if (t.sizes().vec() != shape) {
    fail("{}: '{}' has shape [{}], expected [{}]", ref.path(), key,
         fmt::join(t.sizes().vec(), ", "), fmt::join(shape, ", "));
  }
  return t;
}

double read_scalar(const core::SafetensorsFile& ref, const std::string& key) {
  Tensor t = read_tensor(ref, key, torch::kDouble, torch::kCPU);
  if (t.numel() != 1) fail("{}: '{}' has {} elements, expected 1", ref.path(), key, t.numel());
  const double v = t.reshape({-1})[0].item<double>();
  if (!std::isfinite(v)) fail("{}: '{}' is {}: a reference must be finite", ref.path(), key, v);
  return v;
}

// A reference tensor with a NaN or Inf is a broken reference (exit 1), not a parity failure.
void check_finite(const core::SafetensorsFile& ref, const std::string& key, const Tensor& t) {
  const Tensor bad = torch::logical_not(torch::isfinite(t));
  const int64_t n = bad.sum().item<int64_t>();
  if (n == 0) return;
  const int64_t first = bad.reshape({-1}).nonzero()[0][0].item<int64_t>();
  fail("{}: '{}' holds {} non-finite values (the first at flat index {}): a reference must be "
       "finite",
       ref.path(), key, n, first);
}

// Every token id a whole number in [0, vocab), or the Error naming the first that is not: its
// [row][position] and value. Float ids (a reference saved as F32) are accepted when whole; a
// fractional, non-finite, negative or too large one is refused, never truncated or wrapped.
void check_token_ids(const std::string& path, const Tensor& ids, int64_t vocab) {
  Tensor bad;
  if (ids.is_floating_point()) {
    const Tensor d = ids.to(torch::kDouble);
    bad = torch::logical_not(torch::isfinite(d)) | (d != torch::floor(d)) | (d < 0) |
          (d >= static_cast<double>(vocab));
  } else {
    bad = (ids < 0) | (ids >= vocab);
  }
  const Tensor flat = bad.contiguous().reshape({-1});
  if (!flat.any().item<bool>()) return;
  const int64_t first = flat.nonzero()[0][0].item<int64_t>();
  const int64_t seq = ids.size(1);
  const Tensor values = ids.contiguous().reshape({-1});
  // In the file's precision: F32's 2.7 is "2.7", not the double 2.700000047683716.
  const std::string value =
      !ids.is_floating_point()           ? fmt::format("{}", values[first].item<int64_t>())
      : ids.scalar_type() == torch::kDouble ? fmt::format("{}", values[first].item<double>())
                                          : fmt::format("{}", values[first].item<float>());
  const int64_t count = flat.sum().item<int64_t>();
  fail("{}: input_ids[{}][{}] is {}: a token id must be a whole number in [0, {}) (the "
       "checkpoint's vocab_size){}",
       path, first / seq, first % seq, value, vocab,
       count > 1 ? fmt::format(" ({} ids are not)", count) : std::string());
}

// The module of a LoRA tensor name and whether it is A: "layers.0.self_attn.q_proj".
std::pair<std::string, bool> module_of(const std::string& name) {
  for (const char* part : {".lora_A.", ".lora_B."}) {
    auto at = name.find(part);
    if (at != std::string::npos) return {name.substr(0, at), part[6] == 'A'};
  }
  return {name, true};
}

std::vector<double> values_of(const Tensor& t) {
  Tensor c = t.to(torch::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

void check_same_shape(const core::SafetensorsFile& ref, const std::string& key, const Tensor& t,
                      const Tensor& ids) {
  if (t.sizes() != ids.sizes()) {
    fail("{}: '{}' has shape [{}], input_ids [{}]", ref.path(), key,
         fmt::join(t.sizes().vec(), ", "), fmt::join(ids.sizes().vec(), ", "));
  }
}

// Per-row lengths from the reference's attention_mask (right padding only), and its labels, if
// it has them, checked against what tprobe's loss uses.
std::vector<int64_t> reference_lengths(const core::SafetensorsFile& ref, const Tensor& ids) {
  const int64_t batch = ids.size(0), seq = ids.size(1);
  std::vector<int64_t> lengths;
  if (ref.find("attention_mask")) {
    Tensor mask = read_tensor(ref, "attention_mask", torch::kDouble, torch::kCPU);
    check_same_shape(ref, "attention_mask", mask, ids);
    lengths =
        lengths_from_attention_mask(values_of(mask), batch, seq, ref.path() + ": attention_mask");
  }
  if (ref.find("labels")) {
    Tensor labels = read_tensor(ref, "labels", torch::kDouble, torch::kCPU);
    check_same_shape(ref, "labels", labels, ids);
    Tensor c = ids.contiguous();
    check_labels(values_of(labels),
                 std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()),
                 lengths, batch, seq, ref.path() + ": labels");
  }
  return lengths;
}

BackwardParity backward_parity(Gemma4Model& model, const core::SafetensorsFile& ref,
                               const Tensor& ids, const std::vector<int64_t>& lengths,
                               const ParityOptions& o, ForwardRecord* rec) {
  BackwardParity b;
  b.gradient_checkpointing = o.gradient_checkpointing;
  b.input_grads = o.input_grads;
  // The reference's LoRA gradients by PEFT-relative name.
  std::map<std::string, std::string> ref_keys;
  for (const auto& t : ref.tensors()) {
    if (!ends_with(t.name, kGradSuffix)) continue;
    for (const char* prefix : kPeftTextPrefixes) {
      if (!starts_with(t.name, prefix)) continue;
      if (!b.reference_prefix.empty() && b.reference_prefix != prefix) {
        fail("{}: gradients under two prefixes ('{}' and '{}')", ref.path(), b.reference_prefix,
             prefix);
      }
      b.reference_prefix = prefix;
      const size_t n = std::string(prefix).size();
      ref_keys[t.name.substr(n, t.name.size() - n - std::string(kGradSuffix).size())] = t.name;
      break;
    }
  }
  if (ref_keys.empty()) {
    fail(
        "{}: no LoRA gradients (PEFT parameter name + '.grad', e.g. "
        "'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight.grad')",
        ref.path());
  }
  // HF's own bf16 gradients beside the reference ones.
  const std::string& probe_key = ref_keys.begin()->second;
  if (!o.grad_baseline_suffix.empty()) {
    if (!ref.find(probe_key + o.grad_baseline_suffix))
      fail("{}: no tensor '{}'", ref.path(), probe_key + o.grad_baseline_suffix);
    b.baseline_suffix = o.grad_baseline_suffix;
  } else if (o.dtype == "bf16") {
    for (const std::string& path : baseline_candidates(o.attn)) {
      if (ref.find(probe_key + "_hf_bf16_" + path)) {
        b.baseline_suffix = "_hf_bf16_" + path;
        break;
      }
    }
  }

  load_adapter(model, o.adapter_dir);
  const torch::Device device = model.embed_tokens().device();
  const Tensor ids_device = ids.to(device);
  cuda_synchronize();
  auto t0 = std::chrono::steady_clock::now();
  LossResult loss = model.loss(ids_device, rec, lengths);
  b.loss_requires_grad = loss.loss.requires_grad();
  // Without a path to any adapter (the trap) the loss does not require grad, as in HF: there is
  // nothing to back-propagate and every gradient stays undefined (= zero).
  if (b.loss_requires_grad) loss.loss.backward();
  cuda_synchronize();
  b.forward_backward_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  b.loss = loss.loss.item<double>();
  if (!ref.find(o.loss_key))
    fail("{}: no tensor '{}' (the reference loss)", ref.path(), o.loss_key);
  b.reference_loss = read_scalar(ref, o.loss_key);
  b.loss_abs_diff = std::abs(b.loss - b.reference_loss);
  if (!b.baseline_suffix.empty() && ref.find("loss" + b.baseline_suffix)) {
    b.baseline_loss_abs_diff =
        std::abs(read_scalar(ref, "loss" + b.baseline_suffix) - b.reference_loss);
  }

  for (auto& [name, param] : model.lora_parameters()) {
    auto it = ref_keys.find(name);
    if (it == ref_keys.end()) {
      fail("{}: gradient '{}{}{}' is missing (the adapter has this tensor)", ref.path(),
           b.reference_prefix, name, kGradSuffix);
    }
    const std::vector<int64_t> shape = param->sizes().vec();
    Tensor want = read_shaped(ref, it->second, shape);
    Tensor got = param->grad().defined() ? param->grad().to(torch::kCPU, torch::kDouble)
                                         : torch::zeros_like(want);
    GradTensorError e;
    e.name = name;
    e.reference_norm = want.norm().item<double>();
    e.tprobe_norm = got.norm().item<double>();
    e.diff_norm = (got - want).norm().item<double>();
    e.rel_l2_error = rel(e.diff_norm, e.reference_norm);
    e.zero_reference = e.reference_norm == 0;
    e.zero_tprobe = e.tprobe_norm == 0;
    if (!b.baseline_suffix.empty()) {
      Tensor base = read_shaped(ref, it->second + b.baseline_suffix, shape);
      e.baseline_diff_norm = (base - want).norm().item<double>();
      e.baseline_rel_l2 = rel(*e.baseline_diff_norm, e.reference_norm);
    }
    b.tensors.push_back(e);
    ref_keys.erase(it);
  }
  for (const auto& [name, key] : ref_keys) {  // LoRA tensors HF has and tprobe's model does not
    GradTensorError e;
    e.name = name;
    e.in_tprobe = false;
    e.reference_norm = read_tensor(ref, key, torch::kDouble, torch::kCPU).norm().item<double>();
    e.diff_norm = e.reference_norm;
    e.rel_l2_error = rel(e.diff_norm, e.reference_norm);
    e.zero_reference = e.reference_norm == 0;
    e.zero_tprobe = true;
    b.tensors.push_back(e);
  }
  judge_backward(b, o.dtype);
  return b;
}

}  // namespace

std::vector<int64_t> lengths_from_attention_mask(const std::vector<double>& mask, int64_t batch,
                                                 int64_t seq, const std::string& where) {
  if (batch < 1 || seq < 1 || static_cast<int64_t>(mask.size()) != batch * seq)
    fail("{}: {} values for a [{}, {}] batch", where, mask.size(), batch, seq);
  std::vector<int64_t> lengths(static_cast<size_t>(batch));
  bool masked = false;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t first_zero = -1;
    for (int64_t s = 0; s < seq; ++s) {
      const double v = mask[static_cast<size_t>(b * seq + s)];
      if (v != 0 && v != 1)
        fail("{}: [{}][{}] is {}; an attention mask holds 0 (padding) or 1 (real token)", where, b,
             s, v);
      if (v == 0 && first_zero < 0) first_zero = s;
      if (v == 1 && first_zero >= 0) {
        fail(
            "{}: row {} has a 1 at position {} after a 0 at position {}: not right padding (left "
            "padding and holes are not supported)",
            where, b, s, first_zero);
      }
    }
    if (first_zero == 0) fail("{}: row {} has no real token (all 0)", where, b);
    lengths[static_cast<size_t>(b)] = first_zero < 0 ? seq : first_zero;
    masked = masked || first_zero >= 0;
  }
  if (!masked) lengths.clear();
  return lengths;
}

void check_labels(const std::vector<double>& labels, const std::vector<int64_t>& input_ids,
                  const std::vector<int64_t>& lengths, int64_t batch, int64_t seq,
                  const std::string& where) {
  const size_t n = static_cast<size_t>(batch * seq);
  if (batch < 1 || seq < 1 || labels.size() != n || input_ids.size() != n)
    fail("{}: {} labels and {} input_ids for a [{}, {}] batch", where, labels.size(),
         input_ids.size(), batch, seq);
  if (!lengths.empty() && static_cast<int64_t>(lengths.size()) != batch)
    fail("{}: {} row lengths for a batch of {}", where, lengths.size(), batch);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lengths.empty() ? seq : lengths[static_cast<size_t>(b)];
    for (int64_t s = 1; s < seq; ++s) {  // HF shifts: labels[:, 0] is never a target
      const size_t i = static_cast<size_t>(b * seq + s);
      const double want = s < len ? static_cast<double>(input_ids[i]) : -100.0;
      if (labels[i] != want) {
        fail(
            "{}: [{}][{}] is {}, expected {} ({}); tprobe's loss takes labels = input_ids with "
            "-100 at padded positions only",
            where, b, s, labels[i], want, s < len ? "input_ids there" : "a padded position");
      }
    }
  }
}

VerdictRule verdict_rule(const std::string& dtype, std::optional<double> baseline_rel_l2) {
  if (dtype != "bf16") return {"fixed_fp32", kFp32Tolerance};
  if (baseline_rel_l2 && std::isfinite(*baseline_rel_l2)) {
    return {"relative_to_hf_bf16",
            std::max(kBf16RelativeFactor * *baseline_rel_l2, kFp32Tolerance)};
  }
  return {"fixed_bf16_fallback", kBf16FallbackTolerance};
}

std::vector<std::string> baseline_candidates(core::AttentionPath attn) {
  std::vector<std::string> out{attn == core::AttentionPath::kEager ? "eager" : "sdpa"};
  for (const char* path : {"sdpa", "eager"}) {
    if (out.front() != path) out.emplace_back(path);
  }
  return out;
}

void judge_backward(BackwardParity& b, const std::string& dtype) {
  b.modules.clear();
  b.zero_one_side.clear();
  b.zero_both.clear();
  b.worst_tensor.clear();
  b.worst_tensor_rel_l2 = 0;
  double sq_diff = 0, sq_ref = 0, sq_base = 0;
  bool all_baseline = !b.tensors.empty();
  std::map<std::string, size_t> module_index;
  for (const GradTensorError& t : b.tensors) {
    if (t.zero_tprobe != t.zero_reference) {
      b.zero_one_side.push_back(t.name + (t.in_tprobe ? "" : " (no such tensor in tprobe)"));
    } else if (t.zero_tprobe && t.in_tprobe) {
      b.zero_both.push_back(t.name);
    }
    if (!t.in_tprobe) continue;  // its zero reference gradient has nothing to compare with
    sq_diff += t.diff_norm * t.diff_norm;
    sq_ref += t.reference_norm * t.reference_norm;
    if (t.baseline_diff_norm) {
      sq_base += *t.baseline_diff_norm * *t.baseline_diff_norm;
    } else {
      all_baseline = false;
    }
    if (b.worst_tensor.empty() || !(t.rel_l2_error <= b.worst_tensor_rel_l2)) {
      b.worst_tensor = t.name;
      b.worst_tensor_rel_l2 = t.rel_l2_error;
    }
    auto [module, is_a] = module_of(t.name);
    auto [it, fresh] = module_index.emplace(module, b.modules.size());
    if (fresh) b.modules.push_back({module, 0, 0, std::nullopt, std::nullopt});
    GradModuleError& m = b.modules[it->second];
    (is_a ? m.a_rel_l2 : m.b_rel_l2) = t.rel_l2_error;
    (is_a ? m.a_baseline : m.b_baseline) = t.baseline_rel_l2;
  }
  b.global_rel_l2 = sq_diff == 0 ? 0.0 : rel(std::sqrt(sq_diff), std::sqrt(sq_ref));
  b.baseline_global_rel_l2.reset();
  b.baseline_worst_module_rel_l2.reset();
  if (all_baseline)
    b.baseline_global_rel_l2 = sq_base == 0 ? 0.0 : rel(std::sqrt(sq_base), std::sqrt(sq_ref));
  b.worst_module.clear();
  b.worst_module_rel_l2 = 0;
  double base_worst = 0;
  for (const GradModuleError& m : b.modules) {
    const double worst = std::max(m.a_rel_l2, m.b_rel_l2);
    if (b.worst_module.empty() || !(worst <= b.worst_module_rel_l2)) {
      b.worst_module = m.module;
      b.worst_module_rel_l2 = std::isnan(m.a_rel_l2) || std::isnan(m.b_rel_l2)
                                  ? std::numeric_limits<double>::quiet_NaN()
                                  : worst;
    }
    base_worst = std::max({base_worst, m.a_baseline.value_or(0), m.b_baseline.value_or(0)});
  }
  if (all_baseline) b.baseline_worst_module_rel_l2 = base_worst;

  b.worst_module_tolerance.reset();
  b.worst_tensor_tolerance.reset();
  bool ok = std::isfinite(b.global_rel_l2) && b.zero_one_side.empty() && !b.modules.empty();
  if (dtype == "bf16") {
    b.verdict = verdict_rule(dtype, b.baseline_global_rel_l2);
    ok = ok && b.global_rel_l2 <= b.verdict.tolerance;
    if (b.baseline_worst_module_rel_l2) {
      b.worst_module_tolerance =
          std::max(kBf16RelativeFactor * *b.baseline_worst_module_rel_l2, kFp32Tolerance);
      ok = ok && b.worst_module_rel_l2 <= *b.worst_module_tolerance;
    }
  } else {
    b.verdict = verdict_rule(dtype, std::nullopt);
    b.worst_tensor_tolerance = kFp32Tolerance;
    ok = ok && b.global_rel_l2 <= b.verdict.tolerance && b.worst_tensor_rel_l2 <= kFp32Tolerance &&
         b.loss_abs_diff <= kFp32Tolerance * std::max(1.0, std::abs(b.reference_loss));
  }
  b.within_tolerance = ok;
}

// Size: the comparison in the order it runs (inputs, load, forward, loss, backward), in one
// libtorch translation unit.
ParityResult run_parity(const ParityOptions& o) {
  if (o.dtype != "fp32" && o.dtype != "bf16")
    fail_usage("dtype '{}': expected fp32 or bf16", o.dtype);
  if (o.device != "cpu" && o.device != "cuda")
    fail_usage("device '{}': expected cpu or cuda", o.device);
  if (o.backward && o.adapter_dir.empty())
    fail_usage("backward parity needs a PEFT adapter directory");
  if (o.backward && !o.dump_hidden_path.empty())
    fail_usage("the hidden-state dump is a forward diagnostic; it does not combine with backward parity");
  if ((o.gradient_checkpointing || !o.input_grads) && !o.backward)
    fail_usage("gradient checkpointing and input grads only matter for backward parity");
  // The attention path and the experts against what this engine is (the knob registry).
  const core::EngineFacts facts = engine_facts(o.device, o.dtype);
  if (auto why = core::unavailable(core::Knob::kAttn, core::to_string(o.attn), facts)) fail("{}", *why);
  if (auto why = core::unavailable(core::Knob::kMoe, core::to_string(o.moe), facts)) fail("{}", *why);
  if (o.device == "cuda" && !torch::cuda::is_available())
    fail("device cuda: no CUDA device is usable");
  core::Checkpoint ckpt = core::Checkpoint::open(o.checkpoint_dir);
  ModelOptions mo;
  mo.dtype = o.dtype == "bf16" ? torch::kBFloat16 : torch::kFloat;
  mo.device = o.device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  mo.attn = o.attn;
  mo.moe = o.moe;
  mo.ce_chunk = o.ce_chunk;
  mo.gradient_checkpointing = o.gradient_checkpointing;
  mo.input_requires_grad = o.input_grads;

  // The reference's inputs first: a broken one is refused before the model is loaded.
  core::SafetensorsFile ref = core::SafetensorsFile::open(o.reference_path);
  // In the file's own dtype: a float id is checked before it becomes an integer (a cast would
  // truncate 1.5 to 1 and take NaN to anything).
  const Tensor raw_ids = read_tensor(ref, "input_ids", c10::nullopt, torch::kCPU);
  if (raw_ids.dim() != 2)
    fail("{}: input_ids must be [batch, seq], has {} dims", o.reference_path, raw_ids.dim());
  if (raw_ids.size(0) < 1 || raw_ids.size(1) < 2)
    fail("{}: input_ids is [{}, {}]; parity needs at least one row of two tokens", o.reference_path,
         raw_ids.size(0), raw_ids.size(1));
  const int64_t vocab = ckpt.config().vocab_size;
  check_token_ids(o.reference_path, raw_ids, vocab);
  Tensor ids = raw_ids.to(torch::kLong);
  const std::vector<int64_t> lengths = reference_lengths(ref, ids);
  {
    // The certain bytes first (core/cost/step_plan.hpp): a reference the machine cannot hold is
    // refused in tprobe's words before the model is loaded, never the allocator's text.
    core::StepPlanRequest q;
    q.batch = ids.size(0);
    q.width = ids.size(1);
    q.lengths = lengths;
    q.attn = o.attn;
    q.cuda = o.device == "cuda";
    q.ce_chunk = o.ce_chunk;
    q.dtype_bytes = static_cast<int64_t>(c10::elementSize(mo.dtype));
    q.mask_per_row = !lengths.empty();
    core::MemoryLimit limit = core::host_memory_limit();
    if (q.cuda) {
      limit.bytes = cuda_total_memory_bytes();
      limit.what = "the device's memory";
    }
    const core::ParityPlan plan =
        core::plan_parity(ckpt.config(), q, o.backward, !o.dump_hidden_path.empty());
    if (std::string why = core::parity_refusal(plan, limit); !why.empty()) fail("{}", why);
  }
  Gemma4Model model = load_model(ckpt, mo);
  ParityResult r;
  r.batch = ids.size(0);
  r.seq = ids.size(1);
  r.vocab = vocab;
  r.text_prefix = ckpt.text_prefix();
  r.tensors_loaded = static_cast<int64_t>(model.parameters().size());
  r.row_lengths = lengths;
  if (o.backward) {
    r.logits_compared = false;
    ForwardRecord rec;
    r.backward = backward_parity(model, ref, ids, lengths, o, &rec);
    const BackwardParity& b = *r.backward;
    r.loss = b.loss;
    r.reference_loss = b.reference_loss;
    r.loss_abs_diff = b.loss_abs_diff;
    r.verdict_rule = b.verdict.rule;
    r.tolerance_rel_l2 = b.verdict.tolerance;
    r.within_tolerance = b.within_tolerance;
    r.attn_sliding = rec.attn_sliding;
    r.attn_full = rec.attn_full;
    r.moe = rec.moe;
    return r;
  }

  Tensor want = read_tensor(ref, o.logits_key, torch::kDouble, torch::kCPU);
  if (want.sizes().vec() != std::vector<int64_t>{ids.size(0), ids.size(1), vocab}) {
    fail("{}: '{}' has shape [{}], expected [{}, {}, {}]", o.reference_path, o.logits_key,
         fmt::join(want.sizes().vec(), ", "), ids.size(0), ids.size(1), vocab);
  }
  check_finite(ref, o.logits_key, want);
  std::optional<double> reference_loss;
  if (ref.find(o.loss_key)) reference_loss = read_scalar(ref, o.loss_key);
  if (!o.adapter_dir.empty()) load_adapter(model, o.adapter_dir);
  torch::NoGradGuard no_grad;
  ForwardRecord rec;
  std::vector<Tensor> layer_outputs;
  if (!o.dump_hidden_path.empty()) rec.layer_outputs = &layer_outputs;
  const Tensor ids_device = ids.to(mo.device);
  // forward_s times the logits forward alone; the dump and the loss's forward come after.
  cuda_synchronize();
  auto t0 = std::chrono::steady_clock::now();
  Tensor got_device = model.logits(ids_device, &rec, lengths);
  cuda_synchronize();
  r.forward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rec.layer_outputs = nullptr;
  Tensor got = got_device.to(torch::kCPU, torch::kDouble);
  got_device = Tensor();
  if (!o.dump_hidden_path.empty()) {
    std::vector<Tensor> host;
    std::vector<core::TensorToWrite> out;
    host.reserve(layer_outputs.size());
    for (size_t i = 0; i < layer_outputs.size(); ++i) {
      host.push_back(layer_outputs[i].to(torch::kCPU, torch::kFloat).contiguous());
      out.push_back({{fmt::format("hidden_{}", i), core::DType::kF32, host.back().sizes().vec()},
                     host.back().data_ptr()});
    }
    core::write_safetensors(o.dump_hidden_path, out);
  }
  auto t1 = std::chrono::steady_clock::now();
  LossResult loss = model.loss(ids_device, nullptr, lengths);
  cuda_synchronize();
  r.loss_forward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  // Padded positions carry no meaning (HF's nor tprobe's): compare the real ones only.
  const Tensor full_want = want;
  Tensor real;  // [B, S] bool, defined when padded
  if (!lengths.empty()) {
    Tensor len = torch::tensor(lengths, torch::TensorOptions().dtype(torch::kLong)).unsqueeze(1);
    real =
        torch::arange(ids.size(1), torch::TensorOptions().dtype(torch::kLong)).unsqueeze(0).lt(len);
    got = got.index({real});  // [N, V]
    want = want.index({real});
  }
  r.positions_compared = got.numel() / std::max<int64_t>(vocab, 1);
  r.attn_sliding = rec.attn_sliding;
  r.attn_full = rec.attn_full;
  r.moe = rec.moe;
  r.error = logits_error(got, want);
  r.max_abs_error = r.error.max_abs_error;
  r.rel_l2_error = r.error.rel_l2_error;
  r.argmax_agreement_ratio = r.error.argmax_agreement_ratio;
  // HF's own bf16 run of the same logits: named, or for bf16 found by the attention path.
  r.baseline_key = o.baseline_key;
  if (r.baseline_key.empty() && o.dtype == "bf16") {
    for (const std::string& path : baseline_candidates(o.attn)) {
      const std::string key = o.logits_key + "_hf_bf16_" + path;
      if (ref.find(key)) {
        r.baseline_key = key;
        break;
      }
    }
  }
  if (!r.baseline_key.empty()) {
    Tensor base = read_tensor(ref, r.baseline_key, torch::kDouble, torch::kCPU);
    if (base.sizes() != full_want.sizes()) {
      fail("{}: '{}' has shape [{}], '{}' has [{}]", o.reference_path, r.baseline_key,
           fmt::join(base.sizes().vec(), ", "), o.logits_key,
           fmt::join(full_want.sizes().vec(), ", "));
    }
    check_finite(ref, r.baseline_key, base);
    if (real.defined()) base = base.index({real});
    r.baseline = logits_error(base, want);
  }
  r.loss = loss.loss.item<double>();
  if (reference_loss) {
    r.reference_loss = reference_loss;
    r.loss_abs_diff = std::abs(r.loss - *r.reference_loss);
  }
  const VerdictRule rule = verdict_rule(
      o.dtype, r.baseline ? std::optional<double>(r.baseline->rel_l2_error) : std::nullopt);
  r.verdict_rule = rule.rule;
  r.tolerance_rel_l2 = rule.tolerance;
  r.within_tolerance = std::isfinite(r.rel_l2_error) && r.rel_l2_error <= r.tolerance_rel_l2;
  return r;
}

}  // namespace tprobe::model
