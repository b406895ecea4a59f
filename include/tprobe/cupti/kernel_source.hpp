// Where device activity records come from during tprobe's own step: CUPTI on a GPU, or a replay of
// a recorded raw trace (tests; CI has no GPU). No <cupti.h> here: only cupti_source.cpp includes
// it. The raw trace, its attribution and the step vocabulary live in core (core/trace/step_trace).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tprobe/core/trace/record/kernel_record.hpp"
#include "tprobe/core/trace/attribute/step_trace.hpp"

namespace tprobe::cupti {

// What one traced window (or several) produced, after attribution.
struct TraceCapture {
  std::vector<core::KernelRecord> records;  // phase, part, layer and layer kind filled in
  core::AttributionCounts counts;
  int64_t dropped_records = 0;
  bool refused = false;               // the subscription or an enable call was refused
  std::string refusal;                // CUPTI's reason, e.g. another profiler is attached
  std::vector<std::string> problems;  // anything else worth saying (flush errors, ...)
};

// The tags of one window, interned: the same tag gets the same 1-based id (RawTrace::tags).
class TagTable {
 public:
  int64_t intern(const core::StepTag& tag);
  const std::vector<core::StepTag>& tags() const { return tags_; }
  void clear() {
    tags_.clear();
    ids_.clear();
  }

 private:
  std::vector<core::StepTag> tags_;
  std::map<core::StepTag, int64_t> ids_;
};

class KernelSource : public core::StepTracer {
 public:
  // Whether this source can record at all; when not, why.
  virtual bool usable(std::string* why) const = 0;
  virtual std::string name() const = 0;  // "cupti 13.0" / "replay PATH"
  // Everything recorded since the last take(), attributed.
  virtual TraceCapture take() = 0;
  // The same before attribution (for writing a raw trace); valid until take().
  virtual const core::RawTrace& raw() const = 0;
};

// CUPTI activity API: concurrent kernel, memcpy and memset activities, buffers of `buffer_bytes`,
// forced flush at end(); launch contexts joined by correlation id from a callback subscriber on
// the launch, copy and set APIs (the subscription fails when another profiler is attached). A
// build without CUPTI gives a source that is never usable and says why.
std::unique_ptr<KernelSource> make_cupti_source(int64_t buffer_bytes = int64_t{4} << 20);
// Plays a raw trace file back: each end() delivers the file's records, launch contexts and
// forward links once more, so tests drive the whole attribution path.
std::unique_ptr<KernelSource> make_replay_source(const std::string& path);

// Attributes a window's raw trace (core::attribute) into a capture.
TraceCapture capture_of(core::RawTrace raw);

}  // namespace tprobe::cupti
