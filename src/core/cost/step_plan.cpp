// The measured step's memory lower bound before it runs (step_plan.hpp says what it counts).
#include "tprobe/core/cost/step_plan.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"

namespace tprobe::core {
namespace {

double product(const std::vector<int64_t>& shape) {
  double n = 1;
  for (int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

PlannedTensor tensor(std::string what, std::vector<int64_t> shape, int64_t element_bytes) {
  PlannedTensor t;
  t.what = std::move(what);
  t.bytes = product(shape) * static_cast<double>(element_bytes);
  t.shape = std::move(shape);
  t.element_bytes = element_bytes;
  return t;
}

}  // namespace

StepPlan plan_step(const ModelConfig& c, const StepPlanRequest& q) {
  StepPlan plan;
  const int64_t b = std::max<int64_t>(q.batch, 1), s = std::max<int64_t>(q.width, 1);
  // Rows that a packing path runs as their real tokens: its attention works per row on the
  // longest one.
  const AttentionPathInfo& info = attention_info(q.attn);
  const bool packs = info.packs_padding && (q.cuda || !info.packs_requires.cuda_device) &&
                     !q.lengths.empty();
  int64_t longest = s;
  if (packs) longest = *std::max_element(q.lengths.begin(), q.lengths.end());
  longest = std::clamp<int64_t>(longest, 1, s);
  const int64_t rows = packs ? 1 : b;
  const int64_t heads = c.num_attention_heads;
  const int64_t acc = std::max<int64_t>(4, q.dtype_bytes);  // fp32 softmax (fp64 stays fp64)

  plan.layers = c.num_layers;
  plan.layer_inputs_bytes = static_cast<double>(c.num_layers) * static_cast<double>(b) *
                            static_cast<double>(s) * static_cast<double>(c.hidden_size) *
                            static_cast<double>(q.dtype_bytes);

  std::vector<PlannedTensor> candidates;
  for (LayerType type : {LayerType::kSliding, LayerType::kFull}) {
    if (c.count_layers(type) == 0) continue;
    const bool sliding = type == LayerType::kSliding && c.sliding_window > 0;
    const std::string kind = layer_kind_name(type);
    const int64_t keys_window = sliding ? std::min(longest, c.sliding_window + kBlockwiseBlock - 1)
                                        : longest;
    const auto block_row = [&] {
      return tensor("the blockwise attention's fp32 scores of one block row of a " + kind +
                        " layer",
                    {rows, heads, std::min(kBlockwiseBlock, longest), keys_window}, acc);
    };
    const auto mask = [&] {
      return tensor("the bool attention mask of a " + kind + " layer",
                    {q.mask_per_row ? b : 1, 1, s, s}, 1);
    };
    // The largest tensor the path's way of computing a layer holds (the registry's mask plan).
    switch (info.mask) {
      case MaskPlanKind::kEager:
        candidates.push_back(
            tensor("the eager attention's fp32 probabilities of a " + kind + " layer",
                   {b, heads, s, s}, acc));
        break;
      case MaskPlanKind::kHfSdpa:
      case MaskPlanKind::kSdpa:
        // HF materialises a mask on sliding layers once the sequence reaches the window.
        if (sliding && s >= c.sliding_window) candidates.push_back(mask());
        break;
      case MaskPlanKind::kMasked:
        candidates.push_back(mask());
        break;
      case MaskPlanKind::kFlashVarlen:
        // Gemma-4's full layers (head_dim 512) are past flash: the blockwise GEMMs.
        if (type == LayerType::kFull) candidates.push_back(block_row());
        break;
      case MaskPlanKind::kBlockwise:
        candidates.push_back(block_row());
        break;
    }
  }
  // The loss head's fp32 logits over the tokens that carry a label (at least B·(S − 1)).
  const int64_t targets = std::max<int64_t>(1, b * (s - 1));
  if (q.naive_ce) {
    candidates.push_back(
        tensor("the loss head's fp32 logits (naive cross-entropy)", {targets, c.vocab_size}, acc));
  } else {
    candidates.push_back(tensor("one chunk of the loss head's fp32 logits",
                                {std::min(targets, std::max<int64_t>(q.ce_chunk, 1)), c.vocab_size},
                                acc));
  }
  plan.largest = *std::max_element(
      candidates.begin(), candidates.end(),
      [](const PlannedTensor& x, const PlannedTensor& y) { return x.bytes < y.bytes; });
  plan.activation_floor_bytes = plan.layer_inputs_bytes + plan.largest.bytes;
  return plan;
}

namespace {

// A positive integer at the start of `text` (a cgroup file: a number or "max"), or 0.
int64_t leading_count(const std::string& text) {
  int64_t v = 0;
  std::size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return 0;
    v = v * 10 + (text[i] - '0');
  }
  return i > 0 ? v : 0;
}

void take_lower(MemoryLimit& limit, int64_t bytes, const char* what) {
  if (bytes > 0 && (limit.bytes == 0 || bytes < limit.bytes)) {
    limit.bytes = bytes;
    limit.what = what;
  }
}

}  // namespace

MemoryLimit host_memory_limit() {
  MemoryLimit limit;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0 && pages <= std::numeric_limits<int64_t>::max() / page) {
    take_lower(limit, static_cast<int64_t>(pages) * page, "the host's physical memory");
  }
  // cgroup v2 (a container's limit); "max" or an absent file: no limit there.
  try {
    const std::string max = read_input_file("/sys/fs/cgroup/memory.max", "cgroup limit", 64);
    take_lower(limit, leading_count(max), "the cgroup's memory.max");
  } catch (const Error&) {
  }
  // What the kernel can give now without swapping out (a point past it would be killed or swap).
  try {
    const std::string meminfo = read_input_file("/proc/meminfo", "memory info", 1 << 16);
    const std::size_t at = meminfo.find("MemAvailable:");
    if (at != std::string::npos) {
      std::size_t i = at + 13;
      while (i < meminfo.size() && meminfo[i] == ' ') ++i;
      const int64_t kib = leading_count(meminfo.substr(i, 24));
      if (kib > 0 && kib <= std::numeric_limits<int64_t>::max() / 1024) {
        take_lower(limit, kib * 1024, "the host's available memory (MemAvailable)");
      }
    }
  } catch (const Error&) {
  }
  for (const auto& [resource, what] :
       {std::pair{RLIMIT_AS, "the process's RLIMIT_AS"},
        std::pair{RLIMIT_DATA, "the process's RLIMIT_DATA"}}) {
    struct rlimit rl {};
    if (::getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur <= static_cast<rlim_t>(std::numeric_limits<int64_t>::max())) {
      take_lower(limit, static_cast<int64_t>(rl.rlim_cur), what);
    }
  }
  if (const char* v = std::getenv("TPROBE_FAULT_MEMORY_LIMIT"); v != nullptr) {
    take_lower(limit, leading_count(v), "the injected limit (TPROBE_FAULT_MEMORY_LIMIT)");
  }
  return limit;
}

ModelPlan plan_model(const ModelConfig& c, const ModelPlanRequest& q) {
  ModelPlan plan;
  double elements = 0;
  for (const TextTensor& t : text_tensor_layout(c, "")) {
    if (t.role == TensorRole::kLmHead) continue;  // the engine ties the head to the embedding
    elements += product(t.meta.shape);
  }
  plan.weights_bytes = elements * static_cast<double>(q.dtype_bytes);
  if (q.lora_targets.empty()) return plan;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    for (const LinearModule& m : layer_linear_modules(c, i)) {
      if (std::find(q.lora_targets.begin(), q.lora_targets.end(), m.target) ==
          q.lora_targets.end()) {
        continue;
      }
      plan.lora_modules += 1;
      plan.lora_parameters += static_cast<double>(q.lora_rank) *
                              (static_cast<double>(m.in_features) + static_cast<double>(m.out_features));
    }
  }
  plan.adapter_bytes = plan.lora_parameters * static_cast<double>(q.lora_dtype_bytes);
  plan.adapter_grad_bytes = plan.adapter_bytes;
  return plan;
}

std::string model_refusal(const ModelPlan& plan, int64_t lora_rank, const MemoryLimit& limit) {
  if (limit.bytes <= 0 || plan.total_bytes() <= static_cast<double>(limit.bytes)) return "";
  std::string adapters;
  if (plan.lora_modules > 0) {
    adapters = fmt::format(", {} of LoRA adapters ({} modules at rank {}) and {} of their gradients",
                           format_bytes(plan.adapter_bytes), plan.lora_modules, lora_rank,
                           format_bytes(plan.adapter_grad_bytes));
  }
  return fmt::format("the model needs at least {} before its first step ({} of weights{}), above {} "
                     "({}); nothing was allocated",
                     format_bytes(plan.total_bytes()), format_bytes(plan.weights_bytes), adapters,
                     limit.what, format_bytes(static_cast<double>(limit.bytes)));
}

std::string plan_refusal(const StepPlan& plan, int64_t weights_bytes, const MemoryLimit& limit) {
  if (limit.bytes <= 0) return "";
  const double total = static_cast<double>(weights_bytes) + plan.activation_floor_bytes;
  if (total <= static_cast<double>(limit.bytes)) return "";
  const char* dtype = plan.largest.element_bytes == 8   ? "fp64"
                      : plan.largest.element_bytes == 4 ? "fp32"
                      : plan.largest.element_bytes == 2 ? "bf16"
                                                        : "bool";
  return fmt::format(
      "not run: it needs at least {} ({} of weights, adapters and their gradients, {} of {} layer "
      "inputs, and {} "
      "[{}] {} = {}), above {} ({})",
      format_bytes(total), format_bytes(static_cast<double>(weights_bytes)),
      format_bytes(plan.layer_inputs_bytes), plan.layers, plan.largest.what,
      fmt::join(plan.largest.shape, ", "), dtype, format_bytes(plan.largest.bytes), limit.what,
      format_bytes(static_cast<double>(limit.bytes)));
}

double ParityPlan::total_bytes() const {
  return model.total_bytes() + logits_bytes + hidden_dump_bytes +
         (step.layers > 0 ? step.activation_floor_bytes : step.largest.bytes);
}

ParityPlan plan_parity(const ModelConfig& c, const StepPlanRequest& q, bool backward,
                       bool dump_hidden) {
  ParityPlan plan;
  ModelPlanRequest m;
  m.dtype_bytes = q.dtype_bytes;
  plan.model = plan_model(c, m);
  plan.step = plan_step(c, q);
  if (!backward) plan.step.layers = 0;  // no_grad: the layers' inputs are not kept
  const double positions = static_cast<double>(std::max<int64_t>(q.batch, 1)) *
                           static_cast<double>(std::max<int64_t>(q.width, 1));
  const double logits = positions * static_cast<double>(c.vocab_size);
  plan.logits_bytes = logits * static_cast<double>(q.dtype_bytes + (backward ? 0 : 16));
  if (dump_hidden) {
    plan.hidden_dump_bytes =
        static_cast<double>(c.num_layers + 1) * positions * static_cast<double>(c.hidden_size) * 4;
  }
  return plan;
}

std::string parity_refusal(const ParityPlan& plan, const MemoryLimit& limit) {
  if (limit.bytes <= 0 || plan.total_bytes() <= static_cast<double>(limit.bytes)) return "";
  std::string dump;
  if (plan.hidden_dump_bytes > 0) {
    dump = fmt::format(", {} of hidden states to dump", format_bytes(plan.hidden_dump_bytes));
  }
  std::string layers;
  if (plan.step.layers > 0) {
    layers = fmt::format(", {} of {} layer inputs", format_bytes(plan.step.layer_inputs_bytes),
                         plan.step.layers);
  }
  return fmt::format(
      "parity needs at least {} ({} of weights, {} of logits{}{}, and {} [{}] = {}), above {} "
      "({}); nothing was loaded",
      format_bytes(plan.total_bytes()), format_bytes(plan.model.weights_bytes),
      format_bytes(plan.logits_bytes), dump, layers, plan.step.largest.what,
      fmt::join(plan.step.largest.shape, ", "), format_bytes(plan.step.largest.bytes), limit.what,
      format_bytes(static_cast<double>(limit.bytes)));
}

}  // namespace tprobe::core
