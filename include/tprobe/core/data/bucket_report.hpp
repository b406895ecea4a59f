// Views of a BucketReport: evidence JSON, the sweep table, and the chosen order as JSONL.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/data/bucket.hpp"
#include "tprobe/core/io/fit_points.hpp"
#include "tprobe/core/report/section.hpp"

namespace tprobe::core {

Json to_json(const BucketReport& report);
// Reads the `results` object to_json wrote: options.sweep is the sizes measured and options.seeds
// the baseline's seed count; what it does not write (the cost hint, diagnostics, the outcome,
// --bucket) keeps its default. Throws tprobe::Error naming `where` ("b.json results") and the
// field.
BucketReport bucket_report_from_json(const Json& results, const std::string& where);
std::vector<Table> bucket_tables(const BucketReport& report);  // the sweep, its notes and warnings

// The chosen order as JSONL: a header line (schema, dataset, parameters, seed), then one line
// per micro-batch {"micro_batch": i, "window": i / accum, "width": w, "records": [...]}.
std::string order_jsonl(const LengthDataset& dataset, const BucketOptions& options, int64_t bucket);

// The micro-batch widths of a padding or bucket evidence file, for scaling-fit --widths-from.
// Evidence this tprobe writes is read whole through padding_report_from_json /
// bucket_report_from_json: the widths of the order analysed (bucket: the chosen one) and its
// rows per micro-batch. Older files (no results.batch) are read by key, first found wins:
// results.micro_batch_widths, or results.width_histogram ([{width, count}], a compact form no
// probe writes), with the rows per micro-batch from invocation.options. Throws tprobe::Error
// naming the file and field.
WidthDistribution read_width_distribution(const std::string& path);

// The report's section for bucket evidence (figures, facts, tables; core/report/section.hpp).
void bucket_report_section(SectionBuilder& c);

}  // namespace tprobe::core
