// Checkpoint loading into a Gemma4Model, and PEFT adapter files.
#include "tprobe/model/loader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "tprobe/core/adapter/lora_adapter.hpp"
#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"

namespace tprobe::model {

using torch::Tensor;

namespace {

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

}  // namespace

Tensor read_tensor(const core::SafetensorsFile& file, const std::string& name,
                   c10::optional<torch::Dtype> dtype, const torch::Device& device) {
  const core::TensorInfo& info = file.tensor(name);
  const std::string where = fmt::format("{}: tensor '{}'", file.path(), name);
  // Read into a CPU tensor of the file's dtype (pread: a file that shrinks or changes meanwhile is
  // an Error, never a SIGBUS), then moved to the device and dtype asked for. On the CPU in the
  // file's dtype, to() returns this tensor itself: one host copy, never two.
  Tensor host = torch::empty(info.shape, torch::TensorOptions().dtype(to_torch(info.dtype, where)));
  file.read_into(name, host.data_ptr(), static_cast<std::size_t>(host.nbytes()));
  return host.to(device, dtype.value_or(host.scalar_type()));
}

namespace {

// One read of the pipeline: `bytes` of `file`'s data section from `offset` into `slot`'s bytes
// from `at`.
struct Piece {
  const core::SafetensorsFile* file = nullptr;
  uint64_t offset = 0;
  int64_t bytes = 0;
  Tensor* slot = nullptr;
  int64_t at = 0;
};

// Readers fill staging buffers in parallel; the calling thread copies each filled one into its
// parameter and hands the buffer back. A reader's failure stops the others and is rethrown here.
void run_pieces(const std::vector<Piece>& pieces, const LoadPlan& plan, bool pinned) {
  if (pieces.empty()) return;
  const auto readers = static_cast<std::size_t>(std::max<int64_t>(1, plan.readers));
  const std::size_t buffers = 2 * readers;
  std::vector<Tensor> staging;
  for (std::size_t i = 0; i < buffers; ++i) {
    staging.push_back(torch::empty(
        {plan.chunk_bytes}, torch::TensorOptions().dtype(torch::kByte).pinned_memory(pinned)));
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::size_t> free_buffers;
  for (std::size_t i = 0; i < buffers; ++i) free_buffers.push_back(i);
  std::map<std::size_t, std::size_t> ready;  // piece -> buffer
  std::size_t next_piece = 0;
  std::exception_ptr failure;
  bool stop = false;
  auto reader = [&] {
    for (;;) {
      std::size_t piece = 0, buffer = 0;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || next_piece >= pieces.size() || !free_buffers.empty(); });
        if (stop || next_piece >= pieces.size()) return;
        piece = next_piece++;
        buffer = free_buffers.back();
        free_buffers.pop_back();
      }
      try {
        const Piece& p = pieces[piece];
        p.file->read_data(p.offset, staging[buffer].data_ptr(), static_cast<std::size_t>(p.bytes));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
        stop = true;
        cv.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      ready.emplace(piece, buffer);
      cv.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < readers; ++i) threads.emplace_back(reader);
  auto finish = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
  };
  try {
    // In piece order, so that each parameter's bytes arrive whole before the next one's.
    for (std::size_t piece = 0; piece < pieces.size(); ++piece) {
      std::size_t buffer = 0;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return failure || ready.count(piece) > 0; });
        if (failure) break;
        buffer = ready[piece];
        ready.erase(piece);
      }
      const Piece& p = pieces[piece];
      Tensor dst = p.slot->view({-1}).view(torch::kByte).narrow(0, p.at, p.bytes);
      dst.copy_(staging[buffer].narrow(0, 0, p.bytes));  // from pinned memory: DMA, then back
      std::lock_guard<std::mutex> lock(mu);
      free_buffers.push_back(buffer);
      cv.notify_all();
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

Gemma4Model load_model(const core::Checkpoint& ckpt, const ModelOptions& options,
                       const LoadPlan& plan, core::LoadFigures* figures) {
  const std::string& prefix = ckpt.text_prefix();
  auto disagreements = core::cross_check(ckpt.config(), ckpt.tensors(), prefix);
  if (!disagreements.empty()) {
    // One line: the first disagreement, and how many more (tprobe inspect lists them all).
    const core::Disagreement& d = disagreements.front();
    fail("{}: checkpoint disagrees with its config.json: {}: {}{}", ckpt.dir(), d.tensor,
         d.message,
         disagreements.size() > 1
             ? fmt::format(" (and {} more; tprobe inspect --checkpoint lists them)",
                           disagreements.size() - 1)
             : "");
  }
  if (plan.chunk_bytes < 1 || plan.readers < 1) fail("load plan: chunks and readers must be >= 1");
  Gemma4Model model = Gemma4Model::empty(ckpt.config(), options);
  torch::NoGradGuard no_grad;
  std::vector<Piece> pieces;
  int64_t bytes = 0;
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
    const core::SafetensorsFile& file = ckpt.file_of(full);
    bytes += static_cast<int64_t>(info->nbytes());
    if (to_torch(info->dtype, full) != slot->scalar_type() || !slot->is_contiguous()) {
      // Another dtype: read whole, converted on the way (the CPU tests' fp32 runs of bf16 files).
      slot->copy_(read_tensor(file, full, slot->scalar_type(), slot->device()));
      continue;
    }
    for (int64_t at = 0; at < static_cast<int64_t>(info->nbytes()); at += plan.chunk_bytes) {
      const int64_t n = std::min<int64_t>(plan.chunk_bytes, static_cast<int64_t>(info->nbytes()) - at);
      pieces.push_back({&file, info->begin + static_cast<uint64_t>(at), n, slot, at});
    }
  }
  // File order: one sequential sweep per shard (what a cold page cache reads fastest).
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return a.file != b.file ? a.file->path() < b.file->path() : a.offset < b.offset;
  });
  const bool pinned = options.device.is_cuda();
  run_pieces(pieces, plan, pinned);
  if (figures) {
    figures->method = fmt::format(
        "{} reader threads, pread in chunks of at most {} MiB into {} staging buffers{}, each "
        "copied into the parameter already on the {} (file order)",
        plan.readers, plan.chunk_bytes >> 20, 2 * plan.readers, pinned ? " (pinned)" : "",
        options.device.is_cuda() ? "device" : "host");
    figures->readers = plan.readers;
    figures->bytes = bytes;
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
  core::write_safetensors(dir + "/" + core::kAdapterWeightsName, out, {{"format", "pt"}});
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
  core::write_file_atomic(dir + "/" + core::kAdapterConfigName, cfg.dump(2) + "\n");
}

void load_adapter(Gemma4Model& model, const std::string& dir) {
  // The config is parsed, and checked against the adapter's own tensors (rank, alpha, targets),
  // by the reader lora-gate uses: one adapter is refused by both probes with the same message.
  const core::LoraAdapter adapter = core::read_lora_adapter(dir);
  const core::AdapterConfig& c = adapter.config;
  const std::string cfg_path = adapter.dir + "/" + core::kAdapterConfigName;
  // What tprobe's LoRA does not compute: refused rather than give other gradients.
  if (c.use_rslora)
    fail("{}: use_rslora is true; tprobe implements plain LoRA (alpha / r scaling) only", cfg_path);
  if (c.use_dora)
    fail("{}: use_dora is true; tprobe implements plain LoRA (alpha / r scaling) only", cfg_path);
  if (c.rank_pattern || c.alpha_pattern) {
    fail("{}: {} is not empty; per-module ranks and alphas are not supported", cfg_path,
         c.rank_pattern ? "rank_pattern" : "alpha_pattern");
  }
  if (!c.target_regex.empty())
    fail("{}: target_modules must be a list (a regex string is not supported)", cfg_path);
  if (c.lora_alpha == 0.0)
    fail("{}: field 'lora_alpha' is missing: the adapter's scale is lora_alpha / r", cfg_path);
  LoraConfig lora;
  lora.rank = c.r;
  lora.alpha = c.lora_alpha;
  lora.targets = c.target_modules;
  validate_lora(lora);
  model.add_lora(lora, 0);
  // Where each stored tensor is (one file, or the index's shards).
  std::map<std::string, std::string> file_of;
  for (const core::AdapterModule& m : adapter.modules) {
    for (const auto& t : {m.a, m.b}) {
      if (t) file_of[t->name] = t->file;
    }
  }
  std::map<std::string, core::SafetensorsFile> files;
  torch::NoGradGuard no_grad;
  for (auto& [name, slot] : model.lora_parameters()) {
    std::string full;
    auto where = file_of.end();
    for (const char* p : {core::kMultimodalTextPrefix, core::kTextOnlyPrefix}) {
      full = std::string(kPeftPrefix) + p + name;
      where = file_of.find(full);
      if (where != file_of.end()) break;
    }
    if (where == file_of.end())
      fail("{}: adapter tensor '{}' is missing", adapter.dir,
           std::string(kPeftPrefix) + "model.[language_model.]" + name);
    auto file = files.find(where->second);
    if (file == files.end())
      file = files.emplace(where->second, core::SafetensorsFile::open(where->second)).first;
    const core::TensorInfo& info = file->second.tensor(full);
    if (info.shape != slot->sizes().vec()) {
      fail("{}: tensor '{}' has shape [{}], expected [{}]", where->second, full,
           fmt::join(info.shape, ", "), fmt::join(slot->sizes().vec(), ", "));
    }
    slot->copy_(read_tensor(file->second, full, slot->scalar_type(), slot->device()));
  }
}

}  // namespace tprobe::model
