// The evidence envelope: one self-describing JSON document per probe run (docs/evidence.md).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tprobe::core {

using Json = nlohmann::ordered_json;

inline constexpr int kEvidenceSchemaVersion = 1;

// ok: the probe ran and the evidence supports the claim; no: it ran and the evidence says no
// (exit 3); interrupted: SIGINT/SIGTERM stopped it and the results hold what was measured before
// (exit 130/143). Errors never produce an evidence file, so there is no "error" outcome.
enum class Outcome { kOk, kNo, kInterrupted };

enum class Severity { kInfo, kWarning, kError };

const char* to_string(Outcome outcome);
const char* to_string(Severity severity);

struct Diagnostic {
  Severity severity;
  std::string code;     // stable, snake_case, for CI to match on (e.g. "noop_sweep")
  std::string message;  // one sentence for a person
};

class Evidence {
 public:
  Evidence(std::string probe, std::vector<std::string> argv);

  const std::string& probe() const { return probe_; }
  Json& options() { return options_; }
  Json& environment() { return environment_; }
  Json& results() { return results_; }
  const Json& results() const { return results_; }

  void diagnose(Severity severity, std::string code, std::string message);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

  void set_outcome(Outcome outcome) { outcome_ = outcome; }
  Outcome outcome() const { return outcome_; }

  // The whole envelope; wall_time_s is measured up to this call.
  Json to_json() const;
  // Writes to_json() atomically (temporary file + rename).
  void write(const std::string& path) const;

 private:
  std::string probe_;
  std::vector<std::string> argv_;
  std::string started_at_;
  std::chrono::steady_clock::time_point start_;
  Json options_ = Json::object();
  Json environment_ = Json::object();
  Json results_ = Json::object();
  std::vector<Diagnostic> diagnostics_;
  Outcome outcome_ = Outcome::kOk;
};

// UTC time as ISO 8601 with milliseconds, e.g. "2026-11-29T14:37:25.123Z".
// A value, or JSON null where there is none (an unmeasured figure).
template <typename T>
Json json_or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

std::string utc_timestamp_now();

// nlohmann's exception text without its "[json.exception.parse_error.101] " tag and its
// "parse error " lead: "at line 2, column 5: syntax error while parsing ..." or, for a type
// error, what is wrong in words.
std::string json_error_text(std::string_view what);

// Reads an evidence file written by another probe run (e.g. scaling-fit reading profile output),
// checking the schema name prefix and version. Throws tprobe::Error naming the file.
Json read_evidence_file(const std::string& path, const std::string& expected_probe);
// The results object of a document read_evidence_file returned, to hand whole to its probe's
// from_json reader (scripts/check-evidence-reads.py: nothing else reads results by key).
const Json& evidence_results(const Json& doc);

}  // namespace tprobe::core
