// The record room's names: activity kinds, memcpy / memset names normalised across Kineto traces
// and CUPTI records, and the runtime's synchronisation kinds.
#include "tprobe/core/trace/record/activity_name.hpp"

#include <cctype>

#include "trace/record/detail/trace_events_internal.hpp"

namespace tprobe::core {

std::string memcpy_kind_label(int copy_kind) {
  static const char* const kLabels[] = {nullptr, "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                        "AtoD",  "DtoA", "DtoD", "HtoH", "PtoP"};
  if (copy_kind >= 1 && copy_kind <= 10) return kLabels[copy_kind];
  return "kind " + std::to_string(copy_kind);
}

std::string memcpy_activity_name(int copy_kind) { return "Memcpy " + memcpy_kind_label(copy_kind); }

std::string normalized_activity_name(ActivityKind kind, const std::string& name) {
  if (kind == ActivityKind::kMemset) return kMemsetActivityName;
  if (kind != ActivityKind::kMemcpy) return name;
  // "memcpy kind 8" (tprobe before the names were normalised): the number is CUPTI's copy kind.
  static const std::string kOld = "memcpy kind ";
  if (name.compare(0, kOld.size(), kOld) == 0 && name.size() > kOld.size() &&
      name.size() <= kOld.size() + 9) {
    bool digits = true;
    for (std::size_t i = kOld.size(); i < name.size(); ++i)
      digits = digits && std::isdigit(static_cast<unsigned char>(name[i])) != 0;
    if (digits) return memcpy_activity_name(std::stoi(name.substr(kOld.size())));
  }
  // "Memcpy DtoD (Device -> Device)": the kind, without the memory kinds.
  const std::size_t paren = name.find(" (");
  return paren == std::string::npos ? name : name.substr(0, paren);
}

namespace detail {
SyncKind sync_kind_of(const std::string& name) {
  if (name == "Context Sync") return SyncKind::kContext;
  if (name == "Stream Sync") return SyncKind::kStream;
  if (name == "Event Sync") return SyncKind::kEvent;
  if (name == "Stream Wait Event") return SyncKind::kStreamWaitEvent;
  return SyncKind::kOther;
}
const char* to_string(SyncKind k) {
  switch (k) {
    case SyncKind::kContext:
      return "context";
    case SyncKind::kStream:
      return "stream";
    case SyncKind::kEvent:
      return "event";
    case SyncKind::kStreamWaitEvent:
      return "stream_wait_event";
    case SyncKind::kOther:
      break;
  }
  return "other";
}
}  // namespace detail

}  // namespace tprobe::core
