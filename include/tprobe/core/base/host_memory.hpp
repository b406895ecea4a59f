// The process's anonymous resident memory (RssAnon in /proc/self/status: heap, pinned staging,
// everything but mapped file pages), read now or sampled in the background for a peak.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>
#include <thread>

namespace tprobe::core {

// RssAnon from a /proc/<pid>/status text, in bytes; nullopt when the line is absent or malformed.
std::optional<int64_t> parse_rss_anon(std::string_view status_text);
// This process's, now; nullopt where /proc is unreadable.
std::optional<int64_t> rss_anon_bytes();

// Samples rss_anon_bytes() every `period_ms` on its own thread from construction to peak(), and
// once more at each end.
class RssAnonPeak {
 public:
  explicit RssAnonPeak(int period_ms = 5);
  ~RssAnonPeak();
  RssAnonPeak(const RssAnonPeak&) = delete;
  RssAnonPeak& operator=(const RssAnonPeak&) = delete;
  // Stops the sampling; the largest value seen, nullopt when none could be read.
  std::optional<int64_t> peak();

 private:
  void note();
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> peak_{-1};
  int period_ms_;
  std::thread thread_;
};

}  // namespace tprobe::core
