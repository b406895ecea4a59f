// Opening and reading the files a run is given, so that no input can hold a signal off: a FIFO
// without a writer, a stalled pipe or a character device is opened without waiting and read in
// poll() slices of 100 ms, and every read first checks for SIGINT/SIGTERM. docs/evidence.md,
// "Signals".
#pragma once

#include <cstddef>
#include <string>

namespace tprobe::core {

// Whether `path` names a directory / a regular file (stat(2), links followed); false when it
// cannot be stat'ed. Not std::filesystem: the GPU host's libtorch interposes it.
bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);

// The bound on a small JSON input read whole (a config, an index, an adapter's config).
inline constexpr std::size_t kMaxSmallInputBytes = std::size_t{64} << 20;

// Opens `path` for reading (O_CLOEXEC) without waiting for a FIFO's writer (O_NONBLOCK). A regular
// file or a directory is switched back to blocking reads; anything else stays non-blocking and
// read_input() waits for it in poll(). Returns the descriptor, or -1 with errno set.
int open_input(const std::string& path);

// Up to `size` bytes of `fd` into `buf`; 0 only at the end (a FIFO's writer has closed). On a
// descriptor that can wait (not a regular file) throws Interrupted once SIGINT or SIGTERM has
// arrived — checked before every read and after every 100 ms of waiting; a regular file is read
// whatever the flag (streaming readers check it themselves: io/decoded_file). Error naming `path`
// on a read error.
std::size_t read_input(int fd, char* buf, std::size_t size, const std::string& path);

// The whole file as bytes (plain; no decoding), at most `max_bytes`: beyond it, or a directory, is
// an Error naming `what` and the path. Out of memory is "out of memory reading WHAT 'PATH' (N bytes
// asked)", never std::bad_alloc.
std::string read_input_file(const std::string& path, const char* what,
                            std::size_t max_bytes = std::size_t{1} << 30);

}  // namespace tprobe::core
