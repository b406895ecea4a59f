// One spelling for memcpy and memset activities whatever the source: Kineto's trace writes
// "Memcpy DtoD (Device -> Device)" and "Memset (Device)", CUPTI records carry a copy-kind number.
// Tables compared side by side (`tprobe kernels A B`) key their rows by normalized_activity_name
// so the same copy from both sources is one row (docs/kernels.md, "Two tables side by side").
#pragma once

#include <string>

#include "tprobe/core/trace/record/kernel_record.hpp"

namespace tprobe::core {

// CUpti_ActivityMemcpyKind as Kineto spells it: 1 "HtoD", 2 "DtoH", 3 "HtoA", 4 "AtoH",
// 5 "AtoA", 6 "AtoD", 7 "DtoA", 8 "DtoD", 9 "HtoH", 10 "PtoP"; any other value "kind N".
std::string memcpy_kind_label(int copy_kind);

// The name tprobe gives a CUPTI memcpy record: "Memcpy " + memcpy_kind_label ("Memcpy DtoD").
std::string memcpy_activity_name(int copy_kind);

// The name tprobe gives a CUPTI memset record.
inline constexpr const char* kMemsetActivityName = "Memset";

// The name two sources agree on. memcpy: "Memcpy <kind>" from Kineto's "Memcpy DtoD (Device ->
// Device)" (the memory kinds in parentheses dropped: CUPTI's name has none), from tprobe's own
// "Memcpy DtoD" and from the "memcpy kind 8" older tprobe evidence holds; memset: "Memset";
// a kernel's name is returned unchanged (both sources demangle it the same way).
std::string normalized_activity_name(ActivityKind kind, const std::string& name);

}  // namespace tprobe::core
