// Builds, writes and reads back the versioned evidence envelope.
#include "tprobe/core/base/evidence.hpp"

#include <ctime>

#include <fmt/format.h>

#include "base/decoded_file.hpp"
#include "base/strict_json.hpp"
#include "tprobe/config.hpp"
#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return "ok";
    case Outcome::kNo: return "no";
    case Outcome::kInterrupted: return "interrupted";
  }
  return "?";
}

const char* to_string(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "?";
}

std::string utc_timestamp_now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     static_cast<int>(ms));
}

Evidence::Evidence(std::string probe, std::vector<std::string> argv)
    : probe_(std::move(probe)),
      argv_(std::move(argv)),
      started_at_(utc_timestamp_now()),
      start_(std::chrono::steady_clock::now()) {}

void Evidence::diagnose(Severity severity, std::string code, std::string message) {
  diagnostics_.push_back({severity, std::move(code), std::move(message)});
}

Json Evidence::to_json() const {
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  Json doc;
  doc["schema"] = {{"name", "tprobe." + probe_}, {"version", kEvidenceSchemaVersion}};
  doc["tool"] = {{"name", "tprobe"}, {"version", TPROBE_VERSION}, {"git_sha", TPROBE_GIT_SHA}};
  doc["invocation"] = {{"probe", probe_},
                       {"argv", argv_},
                       {"options", options_},
                       {"started_at", started_at_},
                       {"wall_time_s", wall}};
  doc["environment"] = environment_;
  Json diags = Json::array();
  for (const auto& d : diagnostics_) {
    diags.push_back({{"severity", to_string(d.severity)}, {"code", d.code}, {"message", d.message}});
  }
  doc["status"] = {{"outcome", to_string(outcome_)}, {"diagnostics", std::move(diags)}};
  doc["results"] = results_;
  return doc;
}

void Evidence::write(const std::string& path) const {
  // replace: a string that is not UTF-8 (it should have been refused where it was read) must not
  // make the write throw after the tables have been printed. Indented (2 spaces) up to 256 KiB of
  // compact JSON, compact past it: indentation costs about 2.5x, and a large document (a huge
  // trace's kernels evidence) is read by tools, not by eye (docs/evidence.md).
  constexpr std::size_t kIndentedMaxBytes = std::size_t{256} << 10;
  const Json doc = to_json();
  std::string text = doc.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() <= kIndentedMaxBytes) {
    text = doc.dump(2, ' ', false, Json::error_handler_t::replace);
  }
  write_file_atomic(path, text + "\n");
}

Json read_evidence_file(const std::string& path, const std::string& expected_probe) {
  // Plain or gzipped, by content (an evidence file kept as .json.gz reads as it is).
  Json doc = detail::parse_json_strict(detail::read_decoded_file(path, "an evidence file"),
                                       "evidence file '" + path + "'");
  const std::string want = "tprobe." + expected_probe;
  // PyTorch's execution trace also starts with "schema" (a version string) and holds a graph.
  if (doc.is_object() && doc.contains("schema") && doc["schema"].is_string() &&
      doc.contains("nodes")) {
    fail("'{}' is a PyTorch execution trace (ExecutionTraceObserver's graph of 'nodes', schema "
         "'{}'), not tprobe evidence or a Chrome trace; record the step with torch.profiler "
         "(Kineto)",
         path, detail::printable(doc["schema"].get<std::string>(), 40));
  }
  if (!doc.is_object() || !doc.contains("schema") || !doc["schema"].is_object() ||
      !doc["schema"].contains("name") || !doc["schema"]["name"].is_string()) {
    fail("'{}' is not a tprobe evidence file (no schema.name)", path);
  }
  const auto name = doc["schema"]["name"].get<std::string>();
  if (!expected_probe.empty() && name != want) {
    fail("'{}' holds '{}' evidence, expected '{}'", path, name, want);
  }
  if (!doc["schema"].contains("version") || !doc["schema"]["version"].is_number_integer() ||
      doc["schema"]["version"].get<int>() != kEvidenceSchemaVersion) {
    fail("'{}': unsupported evidence schema version (this tprobe reads version {})", path,
         kEvidenceSchemaVersion);
  }
  if (!doc.contains("results") || !doc["results"].is_object()) {
    fail("'{}': evidence file has no results object", path);
  }
  return doc;
}

const Json& evidence_results(const Json& doc) {
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_object()) {
    fail("evidence document has no results object");
  }
  return doc["results"];
}

}  // namespace tprobe::core
