// The critical path's evidence (critical_path.hpp): its shares and the rules between its fields.
#include "tprobe/core/evidence/critical_path.hpp"

namespace tprobe::core {

// The shares' verdict and sum (critical_path.hpp): declared with their fields, so defined here.
const char* PathShares::bound() const {
  const int64_t h = host_ns(), d = device_ns, l = delay_ns();
  if (h == 0 && d == 0 && l == 0) return "none";
  if (h >= d && h >= l) return "host";
  if (d >= l) return "device";
  return "delay";
}

void PathShares::add(const PathShares& o) {
  host_event_ns += o.host_event_ns;
  runtime_ns += o.runtime_ns;
  host_untraced_ns += o.host_untraced_ns;
  device_ns += o.device_ns;
  copy_ns += o.copy_ns;
  launch_delay_ns += o.launch_delay_ns;
  queue_ns += o.queue_ns;
  wait_ns += o.wait_ns;
  sync_ns += o.sync_ns;
}

void set_path_shares(CriticalPath& p) {
  for (PathHostOp& o : p.host_ops) o.share_ratio = evidence::ratio(o.ns, p.length_ns);
  for (PathKernel& k : p.kernels) k.share_ratio = evidence::ratio(k.ns, p.length_ns);
}

void evidence_check(const PathShares& s, const std::string& where) {
  if (s.runtime_ns > s.host_event_ns)
    fail("{}: runtime_ns ({}) is above host_event_ns ({})", where, s.runtime_ns, s.host_event_ns);
  if (s.copy_ns > s.device_ns)
    fail("{}: copy_ns ({}) is above device_ns ({})", where, s.copy_ns, s.device_ns);
}

void evidence_check(const PathStep& s, const std::string& where) {
  if (s.end_ns < s.start_ns) fail("{}: end_ns is before start_ns", where);
}

void evidence_check(const CriticalPath& p, const std::string& where) {
  if (p.window_end_ns < p.window_start_ns)
    fail("{}: window_end_ns is before window_start_ns", where);
  if (!p.available) {
    if (p.why_not.empty()) fail("{}: not available, and why_not is null", where);
    return;
  }
  if (!p.why_not.empty()) fail("{}: available, and why_not is not null", where);
  if (p.last_node_ns < p.first_node_ns) fail("{}: last_node_ns is before first_node_ns", where);
  if (p.total.total_ns() != p.length_ns)
    fail("{}: length_ns is not the sum of host, device and delay", where);
  CriticalPath want = p;
  set_path_shares(want);
  for (std::size_t i = 0; i < p.host_ops.size(); ++i)
    if (p.host_ops[i].share_ratio != want.host_ops[i].share_ratio)
      fail("{}.host_ops[{}]: share_ratio is not ns over length_ns", where, i);
  for (std::size_t i = 0; i < p.kernels.size(); ++i)
    if (p.kernels[i].share_ratio != want.kernels[i].share_ratio)
      fail("{}.kernels[{}]: share_ratio is not ns over length_ns", where, i);
}

}  // namespace tprobe::core
