// Names of device kernels for people: demangling, shortening, families, the category table and
// the architecture a kernel was built for (docs/kernels.md lists the rules and why each exists).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/evidence/kernel_table.hpp"
#include "tprobe/core/trace/record/kernel_record.hpp"

namespace tprobe::core {

// One row of the name-matching table. `pattern` is matched case-insensitively as a substring of
// the demangled name; rules are tried in order and the first match wins.
struct CategoryRule {
  KernelCategory category;
  const char* pattern;
  const char* why;  // the kernel family this rule exists for (docs/kernels.md)
};
const std::vector<CategoryRule>& category_rules();

// The category of an activity: memcpy/memset by kind, kernels by category_rules().
KernelCategory categorize(ActivityKind kind, const std::string& demangled_name);

// abi::__cxa_demangle for "_Z..." names (also when a "void " or other prefix is absent); other
// names are returned unchanged. Never throws.
std::string demangle(const std::string& name);

// The name a person scans in a table: no return type, no `(anonymous namespace)::`, template
// arguments elided to `<…>` past the first level, cut to at most max_chars (UTF-8 safe, "…").
std::string short_kernel_name(const std::string& demangled_name, std::size_t max_chars = 80);

// What a kernel computes, in a few words, for tables that list kernels side by side: a
// TensorIterator launcher (elementwise_kernel, vectorized_/unrolled_elementwise_kernel,
// reduce_kernel), whose own name says only how it runs, is labelled by the operation its template
// arguments name — "elementwise(mul)" for a BinaryFunctor<…MulFunctor…>, "elementwise(rsqrt)"
// for rsqrt_kernel_cuda's lambda, "reduce(mean)" for ReduceOp<…MeanOps…>; any other kernel by
// short_kernel_name cut to max_chars.
std::string kernel_label(const std::string& demangled_name, std::size_t max_chars = 40);

// A kernel family: the demangled name without template arguments and parameter lists, so that
// the same kernel instantiated for two shapes compares as one row in `tprobe kernels A B`.
std::string kernel_family(const std::string& demangled_name);

// The SM generation a kernel was built for, read from its name where the name says:
// "sm90_xmma_…" -> 90, "cutlass_80_…" / "cutlass::arch::Sm80" -> 80, "ampere_…" -> 80,
// "hopper" -> 90, "blackwell" -> 100, "volta" -> 70, "turing" -> 75. 0 when the name is silent
// (KernelArchitecture: core/evidence/kernel_table.hpp).
KernelArchitecture kernel_architecture(const std::string& demangled_name);
// "sm_90" style label; "unknown" for 0.
std::string sm_label(int32_t sm);

}  // namespace tprobe::core
