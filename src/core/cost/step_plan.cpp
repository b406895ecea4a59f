// The measured step's memory lower bound before it runs (step_plan.hpp says what it counts).
#include "tprobe/core/cost/step_plan.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
#include "tprobe/core/base/table.hpp"

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
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur <= static_cast<rlim_t>(std::numeric_limits<int64_t>::max())) {
    take_lower(limit, static_cast<int64_t>(rl.rlim_cur), "the process's RLIMIT_AS");
  }
  return limit;
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
      "not run: it needs at least {} ({} of weights and adapters, {} of {} layer inputs, and {} "
      "[{}] {} = {}), above {} ({})",
      format_bytes(total), format_bytes(static_cast<double>(weights_bytes)),
      format_bytes(plan.layer_inputs_bytes), plan.layers, plan.largest.what,
      fmt::join(plan.largest.shape, ", "), dtype, format_bytes(plan.largest.bytes), limit.what,
      format_bytes(static_cast<double>(limit.bytes)));
}

}  // namespace tprobe::core
