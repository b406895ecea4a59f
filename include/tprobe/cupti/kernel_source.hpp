// Where device activity records come from during tprobe's own step: CUPTI on a GPU, or a replay of
// a recorded raw trace (tests; CI has no GPU). No <cupti.h> here: only cupti_source.cpp includes
// it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/trace/kernel_record.hpp"
#include "tprobe/model/step_observer.hpp"

namespace tprobe::cupti {

// What a source delivers: activity records with CUPTI's correlation ids, and the external
// correlation id (a step tag, below) that was on top of the launching thread's stack for each
// correlation id that had one.
struct RawTrace {
  std::vector<core::KernelRecord> records;
  std::map<int64_t, int64_t> external_of;  // correlation id -> tag id
  int64_t dropped_records = 0;             // CUPTI's count of records it could not store
};

// What one traced window (or several) produced, after attribution.
struct TraceCapture {
  std::vector<core::KernelRecord> records;  // phase and part filled in
  int64_t dropped_records = 0;
  int64_t untagged_records = 0;  // no external id: attributed to backward/other (see attribute)
  bool refused = false;          // the subscription or an enable call was refused
  std::string refusal;           // CUPTI's reason, e.g. another profiler is attached
  std::vector<std::string> problems;  // anything else worth saying (flush errors, ...)
};

// Step tags as external correlation ids: one id per (phase, part), 1-based.
int64_t tag_id(model::StepPhase phase, model::StepPart part);
// False for an id that no tag_id() makes.
bool decode_tag(int64_t id, model::StepPhase* phase, model::StepPart* part);

// Fills each record's phase and part from external_of. Every forward and loss launch happens
// inside a tagged scope on the calling thread; the autograd engine's own launches outside a layer
// (embedding and norm gradients, the graph's glue) carry no tag and are attributed to
// backward / other. Returns how many records had no tag.
int64_t attribute(std::vector<core::KernelRecord>& records,
                  const std::map<int64_t, int64_t>& external_of);

// Device time by phase and part: kernels only (memcpy/memset counted separately), sum of
// durations (overlapping kernels on different streams both count).
struct PhaseRow {
  std::string phase, part;
  int64_t kernels = 0;
  int64_t kernel_ns = 0;
  int64_t memcpy_memset_ns = 0;
};
std::vector<PhaseRow> phase_rows(const std::vector<core::KernelRecord>& records);
core::Json to_json(const std::vector<PhaseRow>& rows);

// The raw trace file format (schema tprobe.raw_trace, version 1): what the CUPTI source saw,
// before attribution, so that a GPU run can be replayed without a GPU. Readers are
// bounds-checked and throw tprobe::Error naming the file and field.
core::Json to_json(const RawTrace& trace);
RawTrace read_raw_trace(const std::string& path);

class KernelSource : public model::StepTracer {
 public:
  // Whether this source can record at all; when not, why.
  virtual bool usable(std::string* why) const = 0;
  virtual std::string name() const = 0;  // "cupti 13.0" / "replay PATH"
  // Everything recorded since the last take(), attributed.
  virtual TraceCapture take() = 0;
  // The same before attribution (for writing a raw trace); valid until take().
  virtual const RawTrace& raw() const = 0;
};

// CUPTI activity API: concurrent kernel, memcpy and memset activities, buffers of `buffer_bytes`,
// forced flush at end(); step tags joined by correlation id from a callback subscriber on the
// launch, copy and set APIs (the subscription fails when another profiler is attached). A build
// without CUPTI gives a source that is never usable and says why.
std::unique_ptr<KernelSource> make_cupti_source(int64_t buffer_bytes = int64_t{4} << 20);
// Plays a raw trace file back: each end() delivers the file's records once more (with tags and
// dropped count as recorded), so tests drive the whole attribution path.
std::unique_ptr<KernelSource> make_replay_source(const std::string& path);

}  // namespace tprobe::cupti
