// `tprobe parity`'s computation: tprobe's forward on a Hugging Face reference's input_ids against
// HF's logits and loss.
#include "tprobe/model/parity.hpp"

#include <fmt/format.h>

#include <chrono>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/io/checkpoint.hpp"
#include "tprobe/core/io/safetensors.hpp"
#include "tprobe/model/loader.hpp"

namespace tprobe::model {

using torch::Tensor;

namespace {

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

}  // namespace

double parity_tolerance(const std::string& dtype) { return dtype == "bf16" ? 5e-2 : 1e-4; }

ParityResult run_parity(const ParityOptions& o) {
  if (o.dtype != "fp32" && o.dtype != "bf16")
    fail_usage("--dtype '{}': expected fp32 or bf16", o.dtype);
  if (o.device != "cpu" && o.device != "cuda")
    fail_usage("--device '{}': expected cpu or cuda", o.device);
  std::string why;
  if (!attn_available(o.attn, &why)) fail("attention path {}: {}", core::to_string(o.attn), why);
  if (o.moe == MoeDispatch::kGroupedMm && (!has_grouped_mm() || o.device != "cuda")) {
    fail("--moe grouped_mm needs a CUDA device and libtorch >= 2.8");
  }
  if (o.device == "cuda" && !torch::cuda::is_available())
    fail("--device cuda: no CUDA device is usable");
  core::Checkpoint ckpt = core::Checkpoint::open(o.checkpoint_dir);
  ModelOptions mo;
  mo.dtype = o.dtype == "bf16" ? torch::kBFloat16 : torch::kFloat;
  mo.device = o.device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  mo.attn = o.attn;
  mo.moe = o.moe;
  mo.ce_chunk = o.ce_chunk;
  Gemma4Model model = load_model(ckpt, mo);

  core::SafetensorsFile ref = core::SafetensorsFile::open(o.reference_path);
  Tensor ids = read_tensor(ref, "input_ids", torch::kLong, torch::kCPU);
  if (ids.dim() != 2)
    fail("{}: input_ids must be [batch, seq], has {} dims", o.reference_path, ids.dim());
  Tensor want = read_tensor(ref, o.logits_key, torch::kDouble, torch::kCPU);
  const int64_t vocab = ckpt.config().vocab_size;
  if (want.sizes().vec() != std::vector<int64_t>{ids.size(0), ids.size(1), vocab}) {
    fail("{}: '{}' has shape [{}], expected [{}, {}, {}]", o.reference_path, o.logits_key,
         fmt::join(want.sizes().vec(), ", "), ids.size(0), ids.size(1), vocab);
  }
  if (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= vocab) {
    fail("{}: input_ids outside [0, {})", o.reference_path, vocab);
  }

  ParityResult r;
  r.batch = ids.size(0);
  r.seq = ids.size(1);
  r.vocab = vocab;
  r.text_prefix = ckpt.text_prefix();
  r.tensors_loaded = static_cast<int64_t>(model.parameters().size());
  torch::NoGradGuard no_grad;
  ForwardRecord rec;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> layer_outputs;
  if (!o.dump_hidden_path.empty()) rec.layer_outputs = &layer_outputs;
  Tensor got = model.logits(ids.to(mo.device), &rec).to(torch::kCPU, torch::kDouble);
  rec.layer_outputs = nullptr;
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
  LossResult loss = model.loss(ids.to(mo.device));
  r.forward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.attn_sliding = rec.attn_sliding;
  r.attn_full = rec.attn_full;
  r.moe = rec.moe;
  r.error = logits_error(got, want);
  r.max_abs_error = r.error.max_abs_error;
  r.rel_l2_error = r.error.rel_l2_error;
  r.argmax_agreement_ratio = r.error.argmax_agreement_ratio;
  if (!o.baseline_key.empty()) {
    Tensor base = read_tensor(ref, o.baseline_key, torch::kDouble, torch::kCPU);
    if (base.sizes() != want.sizes()) {
      fail("{}: '{}' has shape [{}], '{}' has [{}]", o.reference_path, o.baseline_key,
           fmt::join(base.sizes().vec(), ", "), o.logits_key, fmt::join(want.sizes().vec(), ", "));
    }
    r.baseline = logits_error(base, want);
  }
  r.loss = loss.loss.item<double>();
  if (ref.find(o.loss_key)) {
    r.reference_loss = read_tensor(ref, o.loss_key, torch::kDouble, torch::kCPU).item<double>();
    r.loss_abs_diff = std::abs(r.loss - *r.reference_loss);
  }
  r.tolerance_rel_l2 = parity_tolerance(o.dtype);
  r.within_tolerance = std::isfinite(r.rel_l2_error) && r.rel_l2_error <= r.tolerance_rel_l2;
  return r;
}

}  // namespace tprobe::model
