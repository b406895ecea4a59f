// Autograd links for the step tracer (autograd_links.hpp): RecordFunction callbacks on forward
// ops and backward nodes, reported to one process-wide observer.
#include "tprobe/model/autograd_links.hpp"

#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "tprobe/core/base/error.hpp"

namespace tprobe::model {

// libtorch's dispatcher records, for an op called while grad mode is on, the sequence number the
// next autograd node of the calling thread will get (at::sequence_number::peek()); the node made
// by that op carries it, and Node::operator() runs under a BACKWARD_FUNCTION RecordFunction with
// the same number and the forward thread's id — the pairing torch.profiler's forward/backward
// links are drawn from. The callbacks are global (the autograd engine's device threads run nodes
// too) and read one process-wide observer.
namespace {

std::atomic<core::StepObserver*> g_link_observer{nullptr};

std::unique_ptr<at::ObserverContext> link_start(const at::RecordFunction& fn) {
  core::StepObserver* o = g_link_observer.load(std::memory_order_acquire);
  if (o == nullptr) return nullptr;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    // AccumulateGrad and the graph root carry no sequence number (UINT64_MAX, read as -1): they
    // stay transparent, and their launches take the enclosing entry.
    if (fn.seqNr() >= 0) o->node_enter(fn.forwardThreadId(), fn.seqNr());
  } else if (fn.seqNr() >= 0) {
    o->forward_op(fn.threadId(), fn.seqNr());
  }
  return nullptr;
}

void link_end(const at::RecordFunction& fn, at::ObserverContext*) {
  core::StepObserver* o = g_link_observer.load(std::memory_order_acquire);
  if (o == nullptr) return;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION && fn.seqNr() >= 0) o->node_leave();
}

}  // namespace

AutogradLinks::AutogradLinks(core::StepObserver* observer) {
  if (observer == nullptr || !observer->wants_links()) return;
  // TPROBE_AUTOGRAD_LINKS=off: no RecordFunction callbacks (backward launches then take only the
  // engine's scopes) — the A/B knob that isolates what the links cost a traced step.
  if (const char* e = std::getenv("TPROBE_AUTOGRAD_LINKS"); e != nullptr && std::string(e) == "off")
    return;
  core::StepObserver* expected = nullptr;
  if (!g_link_observer.compare_exchange_strong(expected, observer))
    fail("autograd links: another tracer is already installed in this process");
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(link_start, link_end)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION})
          .needsInputs(false)
          .needsOutputs(false)
          .needsIds(false));
  installed_ = true;
}

AutogradLinks::~AutogradLinks() {
  if (!installed_) return;
  at::removeCallback(handle_);
  g_link_observer.store(nullptr, std::memory_order_release);
}

void note_custom_node() {
  core::StepObserver* o = g_link_observer.load(std::memory_order_acquire);
  if (o == nullptr || !at::GradMode::is_enabled()) return;
  o->forward_op(at::RecordFunction::currentThreadId(),
                static_cast<int64_t>(at::sequence_number::peek()));
}

}  // namespace tprobe::model
