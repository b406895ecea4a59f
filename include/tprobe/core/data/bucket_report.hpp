// Views of a BucketReport: evidence JSON, the sweep table, and the chosen order as JSONL.
#pragma once

#include <cstdint>
#include <string>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/data/bucket.hpp"

namespace tprobe::core {

Json to_json(const BucketReport& report);
std::string render(const BucketReport& report);

// The chosen order as JSONL: a header line (schema, dataset, parameters, seed), then one line
// per micro-batch {"micro_batch": i, "window": i / accum, "width": w, "records": [...]}.
std::string order_jsonl(const LengthDataset& dataset, const BucketOptions& options, int64_t bucket);

}  // namespace tprobe::core
