// Autograd links for the step tracer (docs/profile.md, "Attribution"; autograd_links.cpp).
#pragma once

#include <cstdint>

#include "tprobe/core/trace/attribute/step_trace.hpp"

namespace tprobe::model {

// Autograd links for the step tracer (docs/profile.md, "Attribution"): while one of these lives
// and `observer` wants links, RecordFunction callbacks report every forward op's sequence number
// (observer->forward_op) and every backward node's start and end (node_enter / node_leave), on
// the thread that runs them. One at a time per process.
class AutogradLinks {
 public:
  explicit AutogradLinks(core::StepObserver* observer);
  ~AutogradLinks();
  AutogradLinks(const AutogradLinks&) = delete;
  AutogradLinks& operator=(const AutogradLinks&) = delete;

 private:
  uint64_t handle_ = 0;
  bool installed_ = false;
};
// Before a custom autograd Function's apply (its node is made without a dispatcher op, so no
// forward op records its sequence number): records the number the node will get under the
// calling thread's innermost scope. Nothing unless an AutogradLinks is installed and grad mode
// is on.
void note_custom_node();

}  // namespace tprobe::model
