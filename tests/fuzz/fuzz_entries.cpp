// Reader entry points for the fuzzers and the corpus regression test (see fuzz_entries.hpp).
#include "fuzz_entries.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "base/strict_json.hpp"
#include "probes/probe.hpp"
#include "probes/scaling_fit_probe.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/adapter/lora_adapter.hpp"
#include "tprobe/core/adapter/target_pattern.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/cost/scaling_fit.hpp"
#include "tprobe/core/cost/scaling_fit_report.hpp"
#include "tprobe/core/data/bucket.hpp"
#include "tprobe/core/data/bucket_report.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/gemma4/layer_kinds_json.hpp"
#include "tprobe/core/io/lengths.hpp"
#include "tprobe/core/io/order_file.hpp"
#include "tprobe/core/io/safetensors.hpp"
#include "tprobe/core/report/report.hpp"
#include "tprobe/core/trace/compare/kernels.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"

namespace tprobe::fuzz {

namespace {

// An accepted input that breaks a reader's promise: report and abort so the fuzzer keeps it.
[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TPROBE_FUZZ_SCRATCH");
    std::string d = base && *base ? base : (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    d += "/tprobe-fuzz-" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  return dir;
}

void write_all(const std::string& path, const uint8_t* data, std::size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) broken("cannot write scratch file " + path);
  if (size > 0 && std::fwrite(data, 1, size, f) != size) broken("short write to " + path);
  std::fclose(f);
}

// Runs `body`, swallowing the tprobe::Error bad input is supposed to produce.
template <typename Body>
void expect_error_or_ok(Body&& body) {
  try {
    body();
  } catch (const Error&) {
  }
}

}  // namespace

std::string scratch_file(const std::string& name, const uint8_t* data, std::size_t size) {
  std::string path = scratch_dir() + "/" + name;
  write_all(path, data, size);
  return path;
}

void safetensors(const uint8_t* data, std::size_t size) {
  if (size >= 8) {
    uint64_t declared = 0;
    for (int i = 0; i < 8; ++i) declared |= static_cast<uint64_t>(data[i]) << (8 * i);
    std::string_view header(reinterpret_cast<const char*>(data) + 8, size - 8);
    expect_error_or_ok([&] {
      // The prefix doubles as the data-section size, so offsets are checked against big and
      // small sections alike.
      core::SafetensorsHeader h =
          core::parse_safetensors_header(header, declared & 0xffffffffffULL, "fuzz");
      for (const auto& t : h.tensors) {
        if (t.end < t.begin || t.end > (declared & 0xffffffffffULL)) broken("offsets accepted");
      }
    });
  }
  const std::string path = scratch_file("model.safetensors", data, size);
  expect_error_or_ok([&] {
    core::SafetensorsFile f = core::SafetensorsFile::open(path);
    for (const auto& t : f.tensors()) {
      const std::vector<std::byte> bytes = f.read(t.name);
      if (bytes.size() != t.end - t.begin) broken("data size differs from the offsets");
      volatile uint8_t sink = 0;
      if (!bytes.empty()) {
        sink = sink + std::to_integer<uint8_t>(bytes.front()) +
               std::to_integer<uint8_t>(bytes.back());
      }
    }
  });
}

void config_json(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  core::ConfigJson parsed;
  core::Json doc;
  try {
    doc = core::detail::parse_json_strict(text, "config.json");
  } catch (const Error&) {
    return;
  }
  // `kernels --config`'s reader of any decoder's layer kinds: one kind per layer, or an error.
  try {
    const core::ConfigLayerKinds k = core::parse_layer_kinds_json(doc, "config.json");
    if (static_cast<int64_t>(k.attention.size()) != k.num_layers ||
        (!k.ffn.empty() && static_cast<int64_t>(k.ffn.size()) != k.num_layers)) {
      broken("layer kinds: not one per layer");
    }
  } catch (const Error&) {
  }
  try {
    parsed = core::parse_config_json(doc, "config.json");
  } catch (const Error&) {
    return;
  }
  // What the reader accepted, the writer must write in a form the reader accepts again.
  try {
    core::parse_config_json(core::to_config_json(parsed.config), "round-trip");
  } catch (const Error& e) {
    broken(std::string("accepted config does not round-trip: ") + e.what());
  }
}

void lengths(const uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const uint8_t selector = data[0];
  static constexpr core::LengthFormat kFormats[] = {
      core::LengthFormat::kAuto, core::LengthFormat::kJsonl, core::LengthFormat::kCsv,
      core::LengthFormat::kText};
  const core::LengthFormat format = kFormats[selector & 3];
  std::string path;
  if (selector & 4) {
    path = scratch_dir() + "/lengths.gz";
    gzFile gz = gzopen(path.c_str(), "wb");
    if (gz == nullptr) broken("cannot open " + path);
    if (size > 1 && gzwrite(gz, data + 1, static_cast<unsigned>(size - 1)) <= 0) {
      broken("gzwrite failed");
    }
    gzclose(gz);
  } else {
    path = scratch_file("lengths.txt", data + 1, size - 1);
  }
  expect_error_or_ok([&] {
    core::LengthDataset ds = core::read_lengths(path, format);
    if (ds.records() == 0) broken("a dataset with no records was accepted");
    if (ds.source.size() != ds.lengths.size()) broken("source and length columns differ");
    for (std::size_t i = 0; i < ds.records(); ++i) {
      if (ds.lengths[i] < 1 || ds.lengths[i] > core::kMaxRecordLength)
        broken("length out of range");
      if (ds.source[i] >= ds.source_names.size()) broken("source id out of range");
    }
  });
}

void order_file(const uint8_t* data, std::size_t size) {
  const std::string path = scratch_file("order.jsonl", data, size);
  expect_error_or_ok([&] {
    const core::OrderFile f = core::read_order_file(path);
    if (f.records < 1) broken("an order of no records was accepted");
    if (f.starts.size() != f.widths.size() + 1) broken("starts and widths disagree");
    if (f.records_in_order.size() != static_cast<std::size_t>(f.records)) {
      broken("an order that is not one of every record was accepted");
    }
    std::vector<bool> seen(static_cast<std::size_t>(f.records), false);
    for (uint32_t r : f.records_in_order) {
      if (r >= seen.size() || seen[r]) broken("a record out of range or twice");
      seen[r] = true;
    }
    for (std::size_t i = 0; i < f.widths.size(); ++i) {
      if (f.widths[i] < 1 || f.starts[i + 1] <= f.starts[i] ||
          f.starts[i + 1] - f.starts[i] > static_cast<uint64_t>(f.micro_batch)) {
        broken("a micro-batch out of bounds");
      }
    }
  });
}

void evidence(const uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const std::string path = scratch_file("evidence.json", data + 1, size - 1);
  expect_error_or_ok([&] {
    switch (data[0] % 5) {
      case 0:
        // The envelope, then what `kernels A B` reads of it (the kernel table and the phase ×
        // part rows with their step count).
        core::read_evidence_file(path, "");
        core::load_kernel_source(path, {}, {});
        break;
      case 1: {
        core::WidthDistribution w = core::read_width_distribution(path);
        for (const auto& wc : w.widths) {
          if (wc.width < 1 || wc.count < 1) broken("non-positive width or count accepted");
        }
        w.micro_batches();
        break;
      }
      case 2: {
        std::vector<std::string> skipped;
        probes::read_profile_points_evidence(path, &skipped);
        break;
      }
      case 3: {
        // What `bucket --scaling-fit` reads: the whole report, then its coefficients.
        core::FittedCost c = core::fitted_cost(core::read_scaling_fit_evidence(path), path);
        if (!(c.a_s_per_token >= 0) || !(c.b_s_per_token2 >= 0) || !(c.c_s >= 0)) {
          broken("negative or NaN cost coefficient accepted");
        }
        break;
      }
      default:
        core::read_points_csv(path);
        break;
    }
  });
}

void trace(const uint8_t* data, std::size_t size) {
  if (size == 0) return;
  // First byte: the rest as a file (plain, or gzipped when odd: the gzip path and its magic-byte
  // detection) or as an in-memory buffer.
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  expect_error_or_ok([&] {
    core::TraceResult r;
    if (data[0] % 3 == 0) {
      r = core::read_trace_buffer(body, "fuzz");
    } else if (data[0] % 3 == 1) {
      r = core::read_trace_file(scratch_file("trace.json", data + 1, size - 1));
    } else {
      const std::string path = scratch_dir() + "/trace.json.gz";
      gzFile gz = gzopen(path.c_str(), "wb");
      if (gz == nullptr) broken("cannot write " + path);
      if (!body.empty()) gzwrite(gz, body.data(), static_cast<unsigned>(body.size()));
      gzclose(gz);
      r = core::read_trace_file(path);
    }
    const core::BusyTotals& t = r.table.totals;
    // An accepted trace's totals obey the identities the table promises (docs/kernels.md).
    if (t.sum_ns < 0 || t.union_busy_ns < 0 || t.span_ns < 0 || t.idle_ns < 0) {
      broken("negative total accepted");
    }
    if (t.union_busy_ns > t.sum_ns) broken("union busy time above the sum of kernel time");
    // The critical path gives every nanosecond of the window once (docs/kernels.md).
    const core::CriticalPath& p = r.summary.critical_path;
    if (p.available) {
      if (p.length_ns != p.total.total_ns()) broken("critical path: kinds do not add up");
      if (p.length_ns + p.outside_path_ns != p.window_end_ns - p.window_start_ns ||
          p.outside_path_ns < 0) {
        broken("critical path: length and outside do not make the window");
      }
      core::PathShares phases;
      for (const core::PathPhase& ph : p.phases) phases.add(ph.shares);
      if (phases.total_ns() != p.length_ns) broken("critical path: phases do not add up");
    }
    // Every device row is in exactly one user range or outside them.
    const core::UserRanges& u = r.summary.user_ranges;
    int64_t placed = u.outside_kernel_ns + u.outside_memcpy_memset_ns;
    for (const core::UserRangeRow& row : u.rows) placed += row.kernel_ns + row.memcpy_memset_ns;
    if (placed != u.total_ns) broken("user ranges: rows placed twice or lost");
  });
}

void adapter(const uint8_t* data, std::size_t size) {
  if (size < 2) return;
  // First two bytes: how many of the rest are adapter_config.json; the remainder is
  // adapter_model.safetensors.
  const std::size_t split = std::min<std::size_t>(size - 2, (std::size_t{data[0]} << 8) | data[1]);
  const std::string dir = scratch_dir() + "/adapter";
  ::mkdir(dir.c_str(), 0700);
  write_all(dir + "/adapter_config.json", data + 2, split);
  write_all(dir + "/adapter_model.safetensors", data + 2 + split, size - 2 - split);
  expect_error_or_ok([&] {
    core::LoraAdapter a = core::read_lora_adapter(dir);
    for (const auto& m : a.modules) {
      for (const auto& t : {m.a, m.b}) {
        if (t && (t->nonzero < 0 || t->non_finite < 0 || !(t->norm >= 0))) {
          broken("tensor stats out of range");
        }
      }
    }
  });
}

void adapter_config(const uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  // Module names as PEFT writes them for a Gemma-4 text decoder, and one long name.
  static const std::vector<std::string> kNames = {
      "model.language_model.layers.0.self_attn.q_proj",
      "model.language_model.layers.5.self_attn.v_proj",
      "model.language_model.layers.29.mlp.down_proj",
      "base_model.model.model.language_model.layers.3.experts.gate_up_proj",
      "model.vision_tower.encoder.layers.0.attn.k_proj",
      "q_proj",
      "",
      std::string(200, 'a') + ".q_proj",
  };
  if (data[0] % 2 == 0) {
    expect_error_or_ok([&] {
      const core::AdapterConfig c = core::parse_adapter_config(std::string(rest), "fuzz.json");
      if (c.r <= 0) broken("a non-positive r accepted");
      if (c.target_regex.empty() == c.target_modules.empty()) {
        broken("target_modules accepted as neither (or both) a list and a string");
      }
      for (const auto& t : c.target_modules) {
        if (t.empty()) broken("an empty target accepted");
      }
      if (!std::is_sorted(c.target_modules.begin(), c.target_modules.end()) ||
          std::adjacent_find(c.target_modules.begin(), c.target_modules.end()) !=
              c.target_modules.end()) {
        broken("target_modules list not sorted and unique");
      }
      if (!c.target_regex.empty()) {
        // Accepted by the parser: it must compile here too, and match in linear time.
        const core::TargetPattern re(c.target_regex, "fuzz.json");
        if (re.program_size() > core::TargetPattern::kMaxProgram) broken("program over its limit");
        for (const auto& name : kNames) re.full_match(name);
      }
    });
    return;
  }
  const std::size_t nl = rest.find('\n');
  const std::string_view pattern = rest.substr(0, nl);
  std::string_view text = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  // O(|text| x program): bounded so a 64 KiB input cannot be a (linear) timeout.
  if (text.size() > 1024) text = text.substr(0, 1024);
  expect_error_or_ok([&] {
    const core::TargetPattern re(pattern, "fuzz");
    if (pattern.size() > core::TargetPattern::kMaxLength) broken("pattern over its length limit");
    const bool m = re.full_match(text);
    // A pattern with no metacharacter is a literal: it matches itself and nothing else.
    if (pattern.find_first_of(".*+?{}()[]|\\^$") == std::string_view::npos) {
      if (m != (text == pattern)) broken("a literal pattern matched another text");
      if (!re.full_match(pattern)) broken("a literal pattern did not match itself");
    }
  });
}

void report(const uint8_t* data, std::size_t size) {
  // One evidence file in a folder of its own, through the report's reader and both renderers:
  // build_report promises never to throw on content.
  const std::string dir = scratch_dir() + "/report";
  ::mkdir(dir.c_str(), 0700);
  write_all(dir + "/input.json", data, size);
  expect_error_or_ok([&] {
    const core::Report r = core::build_report(core::collect_evidence({dir}), probes::report_probes());
    if (core::render_html(r).empty() || core::render_markdown(r).empty()) {
      broken("empty report rendered");
    }
    core::to_json(r).dump();
  });
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = {
      {"safetensors", &safetensors},
      {"config_json", &config_json},
      {"lengths", &lengths},
      {"order_file", &order_file},
      {"evidence", &evidence},
      {"trace", &trace},
      {"adapter", &adapter},
      {"adapter_config", &adapter_config},
      {"report", &report},
  };
  return all;
}

}  // namespace tprobe::fuzz
