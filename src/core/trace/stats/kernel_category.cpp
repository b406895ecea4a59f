// Kernel names for people: demangling, shortening, families, the category table, architecture.
#include "tprobe/core/trace/stats/kernel_category.hpp"

#include <cxxabi.h>
#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace tprobe::core {
namespace {

std::string lower(const std::string& s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// A plausible SM number (5.0 .. 13.x written as 50 .. 139).
bool plausible_sm(int v) { return v >= 50 && v <= 139; }

// Reads 2 or 3 digits at text[pos] followed by a non-digit (or the end). -1 otherwise.
int read_sm_digits(const std::string& text, std::size_t pos) {
  std::size_t end = pos;
  while (end < text.size() && is_digit(text[end]) && end - pos < 4) ++end;
  const std::size_t n = end - pos;
  if (n < 2 || n > 3 || (end < text.size() && is_digit(text[end]))) return -1;
  return std::atoi(text.substr(pos, n).c_str());
}

void strip_prefix(std::string& s, const std::string& p) {
  if (s.compare(0, p.size(), p) == 0) s.erase(0, p.size());
}

// Removes every occurrence of `what`.
void erase_all(std::string& s, const std::string& what) {
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at)) {
    s.erase(at, what.size());
  }
}

// At most max_chars bytes, cut at a UTF-8 boundary with room for the ellipsis (3 bytes).
std::string cut_utf8(const std::string& s, std::size_t max_chars) {
  if (s.size() <= max_chars) return s;
  std::size_t cut = max_chars > 3 ? max_chars - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "…";
}

// Whether a name is a C++ signature (templates, namespaces) rather than a plain kernel or
// activity name such as "nvjet_tst_128x256_..." or "Memcpy DtoD (Device -> Device)".
bool is_signature(const std::string& name) {
  return name.find("::") != std::string::npos || name.find('<') != std::string::npos;
}

// The name without a leading return type ("void "), as a person reads a kernel name.
std::string without_return_type(const std::string& name) {
  std::string s = name;
  strip_prefix(s, "void ");
  return s;
}

}  // namespace

// Order matters: the first match wins, so the specific families come before the generic words
// that also appear inside their names (a cuDNN sdpa kernel's name contains "gemm"-like tile
// words; a cuBLAS split-K kernel contains "reduce"; a copy is launched through elementwise_kernel).
const std::vector<CategoryRule>& category_rules() {
  static const std::vector<CategoryRule> rules = {
      {KernelCategory::kCommunication, "nccl", "NCCL collectives (ncclDevKernel_AllReduce_...)"},
      {KernelCategory::kAttention, "flash",
       "flash attention (pytorch_flash::flash_fwd_kernel, "
       "cuDNN sm90_flash_*)"},
      {KernelCategory::kAttention, "fmha",
       "memory-efficient / cutlass attention "
       "(fmha_cutlassF/B_*_sm80)"},
      {KernelCategory::kAttention, "attention", "efficient_attention / attention_kernel_*"},
      {KernelCategory::kAttention, "sdpa", "cuDNN fused SDPA (cudnn_generated_fort_native_sdpa_*)"},
      {KernelCategory::kAttention, "dot_do_o", "cuDNN SDPA backward's rowsum(dO*O) "
                                               "(cudnn::fusion::compute_dot_do_o_specialized)"},
      {KernelCategory::kAttention, "convert_dq", "cuDNN SDPA backward's dQ conversion "
                                                 "(cudnn::fusion::convert_dq_to_16bits)"},
      {KernelCategory::kGroupedGemm, "groupproblemshape",
       "cutlass grouped GEMM (torch._grouped_mm)"},
      {KernelCategory::kGroupedGemm, "grouped", "grouped GEMM kernels (MoE experts)"},
      {KernelCategory::kGroupedGemm, "ptrarray", "cutlass pointer-array (grouped) GEMM"},
      {KernelCategory::kDenseGemm, "gemm", "GEMM kernels (cutlass, cuBLAS, xmma)"},
      {KernelCategory::kDenseGemm, "cublas", "cuBLAS/cuBLASLt helpers (splitKreduce_kernel, ...)"},
      {KernelCategory::kDenseGemm, "nvjet", "cuBLAS nvjet GEMM kernels (Hopper/Blackwell)"},
      {KernelCategory::kDenseGemm, "xmma", "xmma GEMM kernels"},
      {KernelCategory::kDenseGemm, "cutlass",
       "other cutlass kernels (device_kernel<GemmUniversal>)"},
      {KernelCategory::kDenseGemm, "gemv", "matrix-vector kernels"},
      {KernelCategory::kDenseGemm, "triton_tem", "Triton template kernels (mm autotune)"},
      {KernelCategory::kElementwise, "triton_poi",
       "Triton pointwise kernels (before 'norm': a fused norm's pointwise part is pointwise)"},
      {KernelCategory::kElementwise, "distribution",
       "random fills (distribution_elementwise_*); "
       "before 'norm' so 'normal' is not a norm"},
      {KernelCategory::kReduction, "triton_red", "Triton reduction kernels"},
      {KernelCategory::kReduction, "triton_per", "Triton persistent reduction kernels"},
      {KernelCategory::kReduction, "softmax", "softmax / log_softmax (cunn_SoftMaxForward, ...)"},
      {KernelCategory::kReduction, "norm", "layer/RMS/group norms (vectorized_layer_norm_kernel)"},
      {KernelCategory::kReduction, "nll_loss", "cross-entropy's NLL forward/backward"},
      {KernelCategory::kReduction, "cross_entropy", "fused cross-entropy kernels"},
      {KernelCategory::kReduction, "reduce", "reductions (reduce_kernel<..., ReduceOp<...>>)"},
      {KernelCategory::kReduction, "sort", "sort / radix sort (topk routing, argsort)"},
      {KernelCategory::kReduction, "topk", "top-k (MoE router)"},
      {KernelCategory::kReduction, "scan", "cumulative sums (cub scan, histogram offsets)"},
      {KernelCategory::kReduction, "histogram", "histograms (expert counts)"},
      {KernelCategory::kCopyCast, "copy",
       "copies and dtype casts (direct_copy_kernel_cuda, "
       "CatArrayBatchedCopy)"},
      {KernelCategory::kCopyCast, "transpose", "transposes"},
      {KernelCategory::kCopyCast, "permute", "permutes (fbgemm_gpu::permute_*_kernel)"},
      {KernelCategory::kElementwise, "embedding",
       "embedding lookups and their backward (fbgemm_gpu's split_embedding_*)"},
      {KernelCategory::kElementwise, "elementwise",
       "TensorIterator kernels "
       "(vectorized_elementwise_kernel, ...)"},
      {KernelCategory::kElementwise, "foreach", "foreach / optimizer kernels"},
      {KernelCategory::kElementwise, "multi_tensor_apply", "fused optimizer kernels"},
      {KernelCategory::kElementwise, "fill", "fills (FillFunctor)"},
      {KernelCategory::kElementwise, "index", "index / index_put / gather-like kernels"},
      {KernelCategory::kElementwise, "gather", "gather"},
      {KernelCategory::kElementwise, "scatter", "scatter / scatter_add"},
      {KernelCategory::kElementwise, "where", "where / masked_fill"},
      {KernelCategory::kElementwise, "unrolled", "unrolled_elementwise_kernel"},
  };
  return rules;
}

namespace {

// The name outside its template arguments and parameter list ("at::native::reduce_kernel" of
// "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<…>>(…)"): the kernel's own name.
std::string own_name(const std::string& lowered) {
  std::string out;
  int depth = 0;
  for (char c : lowered) {
    if (c == '<' || c == '(') {
      ++depth;
    } else if (c == '>' || c == ')') {
      if (depth > 0) --depth;
    } else if (depth == 0) {
      out += c;
    }
  }
  strip_prefix(out, "void ");
  return out;
}

// Kernels whose own name says only how they launch: what they compute is their first template
// argument (cutlass's device_kernel<GemmUniversal<…>>, TensorIterator's
// elementwise_kernel<…direct_copy_kernel_cuda…>, reduce_kernel<…ReduceOp<…NormTwoOps…>>).
bool is_launcher(const std::string& own) {
  const std::size_t colon = own.rfind("::");
  const std::string last = colon == std::string::npos ? own : own.substr(colon + 2);
  for (const char* l : {"device_kernel", "kernel", "kernel2", "elementwise_kernel",
                        "vectorized_elementwise_kernel", "unrolled_elementwise_kernel",
                        "reduce_kernel"}) {
    if (last == l) return true;
  }
  return false;
}

}  // namespace

KernelCategory categorize(ActivityKind kind, const std::string& demangled_name) {
  if (kind != ActivityKind::kKernel) return KernelCategory::kMemcpyMemset;
  std::string name = lower(demangled_name);
  // A library's name is not what a kernel computes: "fbgemm" holds "gemm", and fbgemm_gpu's
  // embedding and permute kernels carry it in their namespace and in template arguments
  // (fbgemm_gpu::FixedDivisor).
  erase_all(name, "fbgemm_gpu");
  erase_all(name, "fbgemm");
  // The rules read the kernel's own name; its template arguments only for a launcher.
  const std::string own = own_name(name);
  const std::string& matched = is_launcher(own) ? name : own;
  for (const CategoryRule& rule : category_rules()) {
    if (matched.find(rule.pattern) != std::string::npos) return rule.category;
  }
  return KernelCategory::kOther;
}

std::string demangle(const std::string& name) {
  // Itanium names start with _Z; some traces prefix nothing, some keep a leading "void ".
  if (name.size() < 3 || name.compare(0, 2, "_Z") != 0) return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !out) return name;
  return std::string(out.get());
}

std::string short_kernel_name(const std::string& demangled_name, std::size_t max_chars) {
  if (!is_signature(demangled_name)) return cut_utf8(demangled_name, max_chars);
  std::string s = without_return_type(demangled_name);
  erase_all(s, "(anonymous namespace)::");
  // Keep the first level of template arguments' first token readable; elide deeper levels.
  std::string out;
  out.reserve(s.size());
  int depth = 0;
  int paren = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    // Parameter lists "(...)" and lambda names "{lambda(int)#1}" say nothing a table needs.
    if (c == '(' || c == '{') {
      ++paren;
      continue;
    }
    if (paren > 0) {
      if (c == ')' || c == '}') --paren;
      continue;
    }
    if (c == '<') {
      ++depth;
      if (depth == 1) out += '<';
      if (depth == 2) out += "…";
      continue;
    }
    if (c == '>') {
      if (depth == 1) out += '>';
      if (depth > 0) --depth;
      continue;
    }
    if (depth <= 1) out += c;
  }
  // "Array… >" → "Array…>" (the space only separated two closing brackets), and "…::>" left
  // where a lambda name was dropped.
  for (const char* junk : {" >", "::>", "::,"}) {
    for (std::size_t at = out.find(junk); at != std::string::npos; at = out.find(junk, at)) {
      out.erase(at, junk[0] == ' ' ? 1 : 2);
    }
  }
  return cut_utf8(out, max_chars);
}

namespace {

bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool ends_with_text(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() > n && s.compare(s.size() - n, n, suffix) == 0;
}

// The operation a TensorIterator launcher's template arguments name: the first identifier that
// says one ("MulFunctor", "CUDAFunctorOnSelf_add", "rsqrt_kernel_cuda",
// "pow_tensor_scalar_kernel_impl", "MeanOps"), lower-cased without its suffix; "" when none does.
std::string iterator_operation(const std::string& args) {
  for (std::size_t i = 0; i < args.size();) {
    if (!is_ident_char(args[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < args.size() && is_ident_char(args[j])) ++j;
    std::string id = args.substr(i, j - i);
    i = j;
    std::string op;
    if (id.rfind("CUDAFunctor", 0) == 0) {
      const std::size_t u = id.rfind('_');
      op = u != std::string::npos ? id.substr(u + 1) : "";
    } else if (ends_with_text(id, "_kernel_cuda")) {
      op = id.substr(0, id.size() - 12);
    } else if (ends_with_text(id, "_kernel_impl")) {
      op = id.substr(0, id.size() - 12);
    } else if (ends_with_text(id, "Functor") && id != "BinaryFunctor" && id != "AUnaryFunctor" &&
               id != "BUnaryFunctor" && id != "UnaryFunctor") {
      op = id.substr(0, id.size() - 7);
    } else if (ends_with_text(id, "Ops")) {
      op = id.substr(0, id.size() - 3);
    }
    if (op.empty()) continue;
    for (char& c : op) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return op;
  }
  return "";
}

}  // namespace

std::string kernel_label(const std::string& demangled_name, std::size_t max_chars) {
  const std::string family = kernel_family(demangled_name);
  const bool reduce = ends_with_text(family, "reduce_kernel") || family == "reduce_kernel";
  const bool elementwise = family.find("elementwise_kernel") != std::string::npos;
  if (reduce || elementwise) {
    const std::size_t lt = demangled_name.find('<');
    const std::string op =
        lt == std::string::npos ? "" : iterator_operation(demangled_name.substr(lt + 1));
    if (!op.empty()) {
      return cut_utf8(fmt::format("{}({})", reduce ? "reduce" : "elementwise", op), max_chars);
    }
  }
  return short_kernel_name(demangled_name, max_chars);
}

std::string kernel_family(const std::string& demangled_name) {
  if (!is_signature(demangled_name)) return demangled_name;
  std::string s = without_return_type(demangled_name);
  erase_all(s, "(anonymous namespace)::");
  std::string out;
  int depth = 0;
  for (char c : s) {
    if (c == '<' || c == '(' || c == '[') {
      ++depth;
      continue;
    }
    if (c == '>' || c == ')' || c == ']') {
      if (depth > 0) --depth;
      continue;
    }
    if (depth == 0) out += c;
  }
  // Trailing spaces or "::" left where template arguments were.
  while (!out.empty() && (out.back() == ' ' || out.back() == ':')) out.pop_back();
  // Kernels named with tile sizes (cuBLAS/xmma/cutlass
  // "sm90_xmma_gemm_bf16bf16_..._128x128x64_...") keep their name: the tile is part of what moved.
  // An empty result keeps the original.
  return out.empty() ? demangled_name : out;
}

KernelArchitecture kernel_architecture(const std::string& demangled_name) {
  const std::string s = lower(demangled_name);
  // "sm90", "sm_90", "Sm80" not preceded by a letter (so "ssm"/"rsm" words do not count).
  for (std::size_t at = s.find("sm"); at != std::string::npos; at = s.find("sm", at + 1)) {
    // Inside a word only at a CamelCase boundary ("MainloopSm90..."), never "rmsnorm"/"ssm".
    if (at > 0 && is_alpha(s[at - 1]) && demangled_name[at] != 'S') continue;
    std::size_t digits = at + 2;
    if (digits < s.size() && s[digits] == '_') ++digits;
    const int v = read_sm_digits(s, digits);
    if (plausible_sm(v)) return {v, demangled_name.substr(at, digits - at + (v >= 100 ? 3 : 2))};
  }
  // cutlass profiler names: "cutlass_80_tensorop_...", "cutlass_75_...".
  for (std::size_t at = s.find("cutlass_"); at != std::string::npos;
       at = s.find("cutlass_", at + 1)) {
    const int v = read_sm_digits(s, at + 8);
    if (plausible_sm(v)) return {v, demangled_name.substr(at, 8 + (v >= 100 ? 3 : 2))};
  }
  // cuBLAS generation prefixes.
  static const struct {
    const char* word;
    int sm;
  } generations[] = {{"maxwell_", 50}, {"pascal_", 60}, {"volta_", 70},     {"turing_", 75},
                     {"ampere_", 80},  {"hopper_", 90}, {"blackwell_", 100}};
  for (const auto& g : generations) {
    const std::size_t at = s.find(g.word);
    if (at != std::string::npos && (at == 0 || !is_alpha(s[at - 1]))) {
      return {g.sm, demangled_name.substr(at, std::string(g.word).size())};
    }
  }
  return {};
}

std::string sm_label(int32_t sm) { return sm > 0 ? "sm_" + std::to_string(sm) : "unknown"; }

}  // namespace tprobe::core
