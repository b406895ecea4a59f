// Checkpoint loading, PEFT adapter files and the parity computation (one libtorch TU for all
// three: each such file costs ~20 s of CI compile time).
#include "tprobe/model/loader.hpp"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "tprobe/core/atomic_file.hpp"
#include "tprobe/core/error.hpp"
#include "tprobe/core/evidence.hpp"
#include "tprobe/core/gemma4_tensors.hpp"
#include "tprobe/model/parity.hpp"

namespace tprobe::model {

using torch::Tensor;

namespace {

constexpr const char* kAdapterWeights = "adapter_model.safetensors";
constexpr const char* kAdapterConfig = "adapter_config.json";
constexpr const char* kPeftPrefix = "base_model.model.";

torch::Dtype to_torch(core::DType d, const std::string& where) {
  switch (d) {
    case core::DType::kBF16:
      return torch::kBFloat16;
    case core::DType::kF16:
      return torch::kHalf;
    case core::DType::kF32:
      return torch::kFloat;
    case core::DType::kF64:
      return torch::kDouble;
    case core::DType::kI64:
      return torch::kLong;
    case core::DType::kI32:
      return torch::kInt;
    default:
      fail("{}: dtype {} cannot be loaded", where, core::to_string(d));
  }
}

core::DType from_torch(torch::Dtype d, const std::string& where) {
  switch (d) {
    case torch::kBFloat16:
      return core::DType::kBF16;
    case torch::kHalf:
      return core::DType::kF16;
    case torch::kFloat:
      return core::DType::kF32;
    case torch::kDouble:
      return core::DType::kF64;
    default:
      fail("{}: dtype {} cannot be saved", where, std::string(c10::toString(d)));
  }
}

core::Json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return core::Json::parse(ss.str());
  } catch (const std::exception& e) {
    fail("{}: not valid JSON: {}", path, e.what());
  }
}

}  // namespace

Tensor read_tensor(const core::SafetensorsFile& file, const std::string& name,
                   c10::optional<torch::Dtype> dtype, const torch::Device& device) {
  const core::TensorInfo& info = file.tensor(name);
  const std::string where = fmt::format("{}: tensor '{}'", file.path(), name);
  core::ByteSpan bytes = file.data(name);
  // from_blob over the read-only mapping; clone() copies before anything could write.
  Tensor view = torch::from_blob(const_cast<std::byte*>(bytes.data), info.shape,
                                 torch::TensorOptions().dtype(to_torch(info.dtype, where)));
  Tensor out =
      view.to(device, dtype.value_or(view.scalar_type()), /*non_blocking=*/false, /*copy=*/true);
  return out;
}

Gemma4Model load_model(const core::Checkpoint& ckpt, const ModelOptions& options) {
  const std::string& prefix = ckpt.text_prefix();
  auto disagreements = core::cross_check(ckpt.config(), ckpt.tensors(), prefix);
  if (!disagreements.empty()) {
    std::string msg;
    for (size_t i = 0; i < disagreements.size() && i < 5; ++i) {
      msg += "\n  " + disagreements[i].tensor + ": " + disagreements[i].message;
    }
    fail("{}: checkpoint disagrees with its config.json ({} problems):{}", ckpt.dir(),
         disagreements.size(), msg);
  }
  Gemma4Model model = Gemma4Model::empty(ckpt.config(), options);
  torch::NoGradGuard no_grad;
  for (auto& [name, slot] : model.parameters()) {
    const std::string full = prefix + name;
    const core::TensorInfo* info = ckpt.find(full);
    if (!info) fail("{}: tensor '{}' is missing", ckpt.dir(), full);
    if (info->shape != slot->sizes().vec()) {
      fail("{}: tensor '{}' has shape [{}], the config implies [{}]", ckpt.dir(), full,
           fmt::join(info->shape, ", "), fmt::join(slot->sizes().vec(), ", "));
    }
    if (!core::dtype_is_supported(info->dtype)) {
      fail("{}: tensor '{}' has dtype {}; expected BF16, F16 or F32", ckpt.dir(), full,
           core::to_string(info->dtype));
    }
    *slot = read_tensor(ckpt.file_of(full), full, options.dtype, options.device);
  }
  return model;
}

void save_adapter(Gemma4Model& model, const std::string& dir, const std::string& text_prefix) {
  const LoraConfig& lora = model.lora();
  if (lora.targets.empty()) fail("save_adapter: the model has no LoRA adapters");
  std::vector<Tensor> host;  // keeps the bytes alive until the write
  std::vector<core::TensorToWrite> out;
  for (auto& [name, t] : model.lora_parameters()) {
    const std::string full = std::string(kPeftPrefix) + text_prefix + name;
    host.push_back(t->detach().to(torch::kCPU).contiguous());
    core::TensorToWrite w;
    w.meta.name = full;
    w.meta.dtype = from_torch(host.back().scalar_type(), full);
    w.meta.shape = host.back().sizes().vec();
    w.data = host.back().data_ptr();
    out.push_back(w);
  }
  core::write_safetensors(dir + "/" + kAdapterWeights, out, {{"format", "pt"}});
  core::Json cfg = core::Json::object();
  cfg["peft_type"] = "LORA";
  cfg["task_type"] = "CAUSAL_LM";
  cfg["r"] = lora.rank;
  cfg["lora_alpha"] = lora.alpha;
  cfg["lora_dropout"] = 0.0;
  cfg["target_modules"] = lora.targets;
  cfg["bias"] = "none";
  cfg["fan_in_fan_out"] = false;
  cfg["use_rslora"] = false;
  cfg["use_dora"] = false;
  cfg["init_lora_weights"] = true;
  cfg["inference_mode"] = true;
  cfg["modules_to_save"] = nullptr;
  cfg["base_model_name_or_path"] = model.config().name;
  core::write_file_atomic(dir + "/" + kAdapterConfig, cfg.dump(2) + "\n");
}

void load_adapter(Gemma4Model& model, const std::string& dir) {
  const std::string cfg_path = dir + "/" + kAdapterConfig;
  core::Json cfg = read_json_file(cfg_path);
  LoraConfig lora;
  try {
    if (cfg.value("peft_type", std::string()) != "LORA")
      fail("{}: peft_type is not LORA", cfg_path);
    lora.rank = cfg.at("r").get<int64_t>();
    lora.alpha = cfg.at("lora_alpha").get<double>();
    const auto& targets = cfg.at("target_modules");
    if (!targets.is_array())
      fail("{}: target_modules must be a list (a regex string is not supported)", cfg_path);
    for (const auto& t : targets) lora.targets.push_back(t.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    fail("{}: {}", cfg_path, e.what());
  }
  validate_lora(lora);
  model.add_lora(lora, 0);
  const std::string weights_path = dir + "/" + kAdapterWeights;
  core::SafetensorsFile file = core::SafetensorsFile::open(weights_path);
  torch::NoGradGuard no_grad;
  for (auto& [name, slot] : model.lora_parameters()) {
    const core::TensorInfo* info = nullptr;
    std::string full;
    for (const char* p : {core::kMultimodalTextPrefix, core::kTextOnlyPrefix}) {
      full = std::string(kPeftPrefix) + p + name;
      info = file.find(full);
      if (info) break;
    }
    if (!info)
      fail("{}: adapter tensor '{}' is missing", weights_path,
           std::string(kPeftPrefix) + "model.[language_model.]" + name);
    if (info->shape != slot->sizes().vec()) {
      fail("{}: tensor '{}' has shape [{}], expected [{}]", weights_path, full,
           fmt::join(info->shape, ", "), fmt::join(slot->sizes().vec(), ", "));
    }
    slot->copy_(read_tensor(file, full, slot->scalar_type(), slot->device()));
  }
}

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
  if (!attn_available(o.attn, &why)) fail("--attn {}: {}", to_string(o.attn), why);
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
