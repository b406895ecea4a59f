// The reader entry points the libFuzzer targets drive, shared with the corpus regression test so
// a crashing input found by a fuzzer is replayed by ordinary CI builds through the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tprobe::fuzz {

// Feeds one input to one reader. A tprobe::Error is the expected answer to bad bytes and is
// swallowed; anything else (another exception type, a sanitizer report, an invariant broken on
// an accepted input) escapes or aborts: that is a finding.
using EntryFn = void (*)(const uint8_t* data, std::size_t size);

struct Entry {
  const char* name;  // also the corpus folder: tests/fuzz/corpus/<name>/
  EntryFn run;
};

// safetensors: 8-byte prefix + header through parse_safetensors_header and SafetensorsFile::open.
void safetensors(const uint8_t* data, std::size_t size);
// config_json: the strict JSON parser and parse_config_json; accepted configs must round-trip.
void config_json(const uint8_t* data, std::size_t size);
// lengths: first byte picks the format (auto/jsonl/csv/text) and whether the rest is gzipped.
void lengths(const uint8_t* data, std::size_t size);
// order_file: the input as a bucket --emit-order file through read_order_file; an accepted order
// lists every record once, in micro-batches of 1 .. micro_batch records with widths >= 1.
void order_file(const uint8_t* data, std::size_t size);
// evidence: first byte picks the reader: envelope, widths (padding/bucket), profile points,
// scaling-fit coefficients (bucket --cost-from), points CSV.
void evidence(const uint8_t* data, std::size_t size);

// trace: first byte picks a buffer, a plain file or a gzipped file for read_trace_*; accepted
// traces must keep the table's identities (totals >= 0, union busy <= sum of kernel time).
void trace(const uint8_t* data, std::size_t size);
// adapter: the first two bytes split the rest into adapter_config.json and
// adapter_model.safetensors for read_lora_adapter.
void adapter(const uint8_t* data, std::size_t size);
// adapter_config: byte 0 even: the rest as adapter_config.json text through
// parse_adapter_config, an accepted target_modules string then compiled and matched against
// module names; odd: the rest split at the first '\n' into a target_modules pattern and one module
// name (at most 1 KiB) for TargetPattern directly.
void adapter_config(const uint8_t* data, std::size_t size);
// report: the input as the one evidence file of a folder, through collect_evidence,
// build_report and both renderers (which promise never to throw on content).
void report(const uint8_t* data, std::size_t size);

const std::vector<Entry>& entries();

// Writes `size` bytes to a per-process scratch file and returns its path (same path every call
// with the same `name`).
std::string scratch_file(const std::string& name, const uint8_t* data, std::size_t size);

}  // namespace tprobe::fuzz
