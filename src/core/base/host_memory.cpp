#include "tprobe/core/base/host_memory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace tprobe::core {

std::optional<int64_t> parse_rss_anon(std::string_view text) {
  constexpr std::string_view kKey = "RssAnon:";
  std::size_t at = 0;
  for (;;) {
    const std::size_t line = text.find(kKey, at);
    if (line == std::string_view::npos) return std::nullopt;
    if (line == 0 || text[line - 1] == '\n') {
      at = line + kKey.size();
      break;
    }
    at = line + 1;
  }
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
  int64_t kib = 0;
  std::size_t digits = 0;
  while (at < text.size() && text[at] >= '0' && text[at] <= '9' && digits < 15) {
    kib = kib * 10 + (text[at] - '0');
    ++at;
    ++digits;
  }
  if (digits == 0 || text.substr(at, 3) != " kB") return std::nullopt;
  return kib * 1024;
}

std::optional<int64_t> rss_anon_bytes() {
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > (1 << 16)) break;
  }
  ::close(fd);
  return parse_rss_anon(text);
}

RssAnonPeak::RssAnonPeak(int period_ms) : period_ms_(period_ms) {
  note();
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      note();
      std::this_thread::sleep_for(std::chrono::milliseconds(period_ms_));
    }
  });
}

RssAnonPeak::~RssAnonPeak() { peak(); }

void RssAnonPeak::note() {
  if (const auto v = rss_anon_bytes()) {
    int64_t seen = peak_.load();
    while (*v > seen && !peak_.compare_exchange_weak(seen, *v)) {
    }
  }
}

std::optional<int64_t> RssAnonPeak::peak() {
  if (thread_.joinable()) {
    stop_.store(true);
    thread_.join();
    note();
  }
  const int64_t p = peak_.load();
  if (p < 0) return std::nullopt;
  return p;
}

}  // namespace tprobe::core
