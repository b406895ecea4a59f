// The output guard: outputs checked against inputs and each other, staged, committed together.
#include "tprobe/core/base/output_guard.hpp"

#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"

namespace tprobe::core {

namespace {

using detail::printable;

std::string shown(const std::string& path) { return "'" + printable(path, 200) + "'"; }

// "a/b/c" -> {"a/b", "c"}; "c" -> {".", "c"}; "/c" -> {"/", "c"}.
std::pair<std::string, std::string> split(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

bool real(const std::string& path, std::string& out) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return false;
  out = buf;
  return true;
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Throws when `path` exists and is not a regular file (a symlink is judged by its target; a
// dangling one is replaced like an absent file).
void check_replaceable(const std::string& role, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) != 0) return;
  if (!S_ISREG(st.st_mode)) {
    fail("{} {}: the target is {}, not a regular file: refusing to replace it", role,
         shown(path), kind_of(st.st_mode));
  }
}

bool same_inode(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// Whether `target` (an existing file with more than one link) is also a file somewhere under the
// folder `root`: a hard link into an input folder names that input. Bounded: at most 100,000
// entries, 16 levels (a larger input tree is not searched past that, and says nothing).
bool linked_under(const std::string& root, const struct stat& target, int depth, long& budget) {
  if (depth > 16) return false;
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (!found && budget > 0) {
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    --budget;
    const std::string full = root + "/" + n;
    struct stat st {};
    if (::lstat(full.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      found = linked_under(full, target, depth + 1, budget);
    } else if (st.st_dev == target.st_dev && st.st_ino == target.st_ino) {
      found = true;
    }
  }
  ::closedir(d);
  return found;
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

std::string OutputGuard::resolve(const std::string& path) {
  if (path.empty()) return path;
  std::string out;
  // An existing path, symlink included, resolves fully: a link to an input is that input.
  if (exists(path) && real(path, out)) return out;
  // Otherwise its deepest existing folder through realpath, and the components below it (which
  // do not exist, so no link can redirect them) lexically: "fixtures/new/a.json" with no
  // fixtures/new yet is still inside fixtures/, however it is spelled.
  std::vector<std::string> tail;
  std::string head = path;
  for (;;) {
    auto [dir, base] = split(head);
    tail.push_back(base);
    if (dir == head) return path;  // "/" itself did not resolve
    head = dir;
    if (exists(head) && real(head, out)) break;
    if (head == "." || head == "/") return path;
  }
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    if (it->empty() || *it == ".") continue;
    if (*it == "..") {
      const auto slash = out.find_last_of('/');
      out = slash == 0 || slash == std::string::npos ? "/" : out.substr(0, slash);
      continue;
    }
    out += (out == "/" ? "" : "/") + *it;
  }
  return out;
}

OutputGuard::~OutputGuard() { discard(); }

void OutputGuard::input(const std::string& role, const std::string& path) {
  if (path.empty() || !exists(path)) return;
  entries_.push_back({role, path, resolve(path), Entry::Kind::kInput, {}, -1});
}

void OutputGuard::input_file(const std::string& role, const std::string& path) {
  if (path.empty() || !exists(path)) return;
  entries_.push_back({role, path, resolve(path), Entry::Kind::kInputFile, {}, -1});
}

void OutputGuard::output(const std::string& role, const std::string& path) {
  if (path.empty()) fail_usage("{}: the path is empty; give a file name", role);
  Entry e{role, path, resolve(path), Entry::Kind::kOutput, {}, -1};
  auto [dir, base] = split(path);
  e.staged = fmt::format("{}/.{}.tprobe-{}-{}", dir, base, static_cast<long>(::getpid()),
                         entries_.size());
  e.slot = register_temporary(e.staged);  // a second signal removes it
  entries_.push_back(std::move(e));
}

void OutputGuard::reserved(const std::string& role, const std::string& path) {
  entries_.push_back({role, path, resolve(path), Entry::Kind::kReserved, {}, -1});
}

void OutputGuard::check() const {
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& o = entries_[i];
    if (o.kind != Entry::Kind::kOutput && o.kind != Entry::Kind::kReserved) continue;
    // Against every input, and every output declared before it.
    for (std::size_t j = 0; j < entries_.size(); ++j) {
      const Entry& x = entries_[j];
      if (i == j) continue;
      const bool x_output = x.kind == Entry::Kind::kOutput || x.kind == Entry::Kind::kReserved;
      if (x_output && j > i) continue;
      const bool same = o.resolved == x.resolved || same_inode(o.path, x.path);
      if (x_output) {
        if (same) {
          fail_usage("{} and {} name the same file {}: give each output its own path", x.role,
                     o.role, shown(o.path));
        }
        continue;
      }
      if (same) {
        fail_usage("{} {} is the input {} {}: an output never replaces an input; give it its own "
                   "path",
                   o.role, shown(o.path), x.role, shown(x.path));
      }
      if (x.kind == Entry::Kind::kInput && is_dir(x.path)) {
        const std::string folder = x.resolved == "/" ? "/" : x.resolved + "/";
        if (o.resolved.compare(0, folder.size(), folder) == 0) {
          fail_usage("{} {} lies inside the input folder {} {}: an output never replaces an "
                     "input; write it elsewhere",
                     o.role, shown(o.path), x.role, shown(x.path));
        }
        struct stat st {};
        long budget = 100000;
        if (::stat(o.path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1 &&
            linked_under(x.resolved, st, 0, budget)) {
          fail_usage("{} {} is a hard link to a file inside the input folder {} {}: an output "
                     "never replaces an input; give it its own path",
                     o.role, shown(o.path), x.role, shown(x.path));
        }
      }
    }
  }
  for (const Entry& o : entries_) {
    if (o.kind != Entry::Kind::kOutput && o.kind != Entry::Kind::kReserved) continue;
    const auto [dir, base] = split(o.path);
    if (base.empty() || base == "." || base == "..") {
      fail_usage("{} {}: not a file name", o.role, shown(o.path));
    }
    // A reserved file's folder is made by the run (the suite's --out); its target is still judged.
    if (o.kind == Entry::Kind::kOutput && !is_dir(dir)) {
      fail("{} {}: the folder {} does not exist", o.role, shown(o.path), shown(dir));
    }
    if (o.kind == Entry::Kind::kOutput && ::access(dir.c_str(), W_OK | X_OK) != 0) {
      fail("{} {}: the folder {} is not writable: {}", o.role, shown(o.path), shown(dir),
           std::strerror(errno));
    }
    check_replaceable(o.role, o.path);
  }
}

std::string OutputGuard::staged(const std::string& path) const {
  for (const Entry& e : entries_) {
    if (e.kind == Entry::Kind::kOutput && e.path == path) return e.staged;
  }
  throw Error(fmt::format("internal: output {} was not declared to the output guard",
                          shown(path)));
}

void OutputGuard::commit(const std::string& last_role, const std::string& only_role) {
  std::vector<Entry*> order;
  for (Entry& e : entries_) {
    if (e.kind == Entry::Kind::kOutput && e.role != last_role) order.push_back(&e);
  }
  for (Entry& e : entries_) {
    if (e.kind == Entry::Kind::kOutput && e.role == last_role) order.push_back(&e);
  }
  std::vector<Entry*> ready;
  for (Entry* e : order) {
    if (!exists(e->staged)) continue;  // the run did not write it
    if (!only_role.empty() && e->role != only_role) continue;
    ready.push_back(e);
  }
  // Every target re-checked before the first rename, so a refusal renames nothing.
  for (Entry* e : ready) {
    try {
      check_replaceable(e->role, e->path);
    } catch (...) {
      discard();
      throw;
    }
  }
  for (Entry* e : ready) {
    if (std::rename(e->staged.c_str(), e->path.c_str()) != 0) {
      const int err = errno;
      discard();
      fail("cannot write {} (rename): {}", shown(e->path), std::strerror(err));
    }
    unregister_temporary(e->slot);
    e->slot = -1;
  }
  discard();  // whatever was dropped
}

void OutputGuard::discard() noexcept {
  for (Entry& e : entries_) {
    if (e.kind != Entry::Kind::kOutput) continue;
    if (e.slot >= 0 || exists(e.staged)) ::unlink(e.staged.c_str());
    unregister_temporary(e.slot);
    e.slot = -1;
  }
}

}  // namespace tprobe::core
