// The output guard: every file a run writes is checked against every file it reads and every
// other file it writes before anything runs, written under a staged name, and committed (renamed
// into place) only when the whole run succeeded. docs/evidence.md, "Outputs".
#pragma once

#include <string>
#include <vector>

namespace tprobe::core {

// One run's inputs and outputs. Paths are compared resolved (the folder through realpath, so
// "./a", "d/../a" and a symlinked folder all name one file; an existing symlink as the last
// component through its target) and by device + inode where both exist (hard links).
//
// Not thread-safe; one per run. POSIX only (no std::filesystem: it runs beside libtorch).
class OutputGuard {
 public:
  OutputGuard() = default;
  ~OutputGuard();  // removes every staged file not committed
  OutputGuard(const OutputGuard&) = delete;
  OutputGuard& operator=(const OutputGuard&) = delete;

  // A path the run reads, named by `role` in messages (e.g. "--csv"). A path that does not exist
  // is skipped (its reader reports it); a directory protects every file under it.
  void input(const std::string& role, const std::string& path);
  // A path the run reads as one file even when it is a directory entry of an input folder the run
  // also writes into (the report's evidence files next to its report.html).
  void input_file(const std::string& role, const std::string& path);
  // A file this run writes through staged() and commit(). An empty path is a usage error.
  void output(const std::string& role, const std::string& path);
  // A file that another process of this run writes (the suite's children): checked like an
  // output, never staged.
  void reserved(const std::string& role, const std::string& path);

  // Throws UsageError (exit 2) naming both when an output is an input, lies under an input
  // folder, or names the same file as another output; Error (exit 1) when an output's folder does
  // not exist or is not writable, or an existing target is not a regular file (a FIFO, /dev/null,
  // a directory): such a target is never renamed over.
  void check() const;

  // Where the run writes the declared output `path`: a hidden name beside it (".NAME.tprobe-…"),
  // registered so a second signal removes it. Throws if `path` was not declared.
  std::string staged(const std::string& path) const;
  // The resolved form of `path` (for tests and messages).
  static std::string resolve(const std::string& path);

  // Renames every staged file that was written over its target, side outputs first and
  // `last_role` (the evidence) last, re-checking that each target is still a regular file or
  // absent. `only_role` non-empty: commit that role alone and drop the others.
  void commit(const std::string& last_role, const std::string& only_role = "");
  // Removes every staged file (a failed run).
  void discard() noexcept;

  struct Entry {
    std::string role;
    std::string path;      // as given
    std::string resolved;  // resolve(path)
    enum class Kind { kInput, kInputFile, kOutput, kReserved } kind;
    std::string staged;  // outputs only
    int slot = -1;       // interrupt.hpp's registry of temporaries
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

}  // namespace tprobe::core
