// The tag table shared by the sources, and the replay source (no <cupti.h>: all of this runs and
// is tested without a GPU).
#include "tprobe/cupti/kernel_source.hpp"

#include <utility>

namespace tprobe::cupti {

int64_t TagTable::intern(const core::StepTag& tag) {
  auto it = ids_.find(tag);
  if (it != ids_.end()) return it->second;
  tags_.push_back(tag);
  const auto id = static_cast<int64_t>(tags_.size());
  ids_.emplace(tag, id);
  return id;
}

TraceCapture capture_of(core::RawTrace raw) {
  TraceCapture c;
  c.records = std::move(raw.records);
  c.dropped_records = raw.dropped_records;
  c.counts = core::attribute(raw, c.records);
  return c;
}

namespace {

class ReplaySource : public KernelSource {
 public:
  explicit ReplaySource(std::string path)
      : path_(std::move(path)), file_(core::read_raw_trace(path_)) {}
  bool usable(std::string*) const override { return true; }
  std::string name() const override { return "replay " + path_; }
  void begin() override { active_ = true; }
  void end() override {
    if (!active_) return;
    active_ = false;
    // One window holds one file's worth; a second window before take() replaces it (a replay
    // has one step's records: the ids of two copies would collide).
    pending_ = file_;
  }
  void discard() override { pending_ = core::RawTrace(); }
  void enter(const core::StepTag&) override {}
  void leave() override {}
  const core::RawTrace& raw() const override { return pending_; }
  TraceCapture take() override {
    TraceCapture c = capture_of(std::move(pending_));
    pending_ = core::RawTrace();
    return c;
  }

 private:
  std::string path_;
  core::RawTrace file_;
  core::RawTrace pending_;
  bool active_ = false;
};

}  // namespace

std::unique_ptr<KernelSource> make_replay_source(const std::string& path) {
  return std::make_unique<ReplaySource>(path);
}

}  // namespace tprobe::cupti
