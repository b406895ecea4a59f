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
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/input_file.hpp"
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

// What an input folder holds, by identity: every file reached from it (device + inode, through
// every link), every folder a link inside it points to (resolved), and the path of every link in
// it. A Hugging Face cache snapshot is a folder of links into `blobs/`: the blob is the input as
// much as the link is. Bounded: at most 100,000 entries and 16 levels per input (a larger tree is
// not searched past that; the prefix check still protects its own folder).
struct Reached {
  std::string role, path;  // the input that reaches it
  std::string entry;       // the path inside the input that reaches it
};

struct Protected {
  std::map<std::pair<dev_t, ino_t>, Reached> files;
  std::vector<std::pair<std::string, Reached>> folders;  // resolved folder (no trailing '/')
  std::set<std::pair<dev_t, ino_t>> walked;             // folders already walked (link cycles)
  long budget = 100000;
};

void walk_input(const std::string& root, const std::string& role, const std::string& input,
                int depth, Protected& p) {
  if (depth > 16) return;
  struct stat rs {};
  if (::stat(root.c_str(), &rs) != 0 || !p.walked.insert({rs.st_dev, rs.st_ino}).second) return;
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return;
  std::vector<std::string> subfolders;
  while (p.budget > 0) {
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    --p.budget;
    const std::string full = root + "/" + n;
    struct stat ls {}, st {};
    if (::lstat(full.c_str(), &ls) != 0) continue;
    if (::stat(full.c_str(), &st) != 0) continue;  // a dangling link reaches nothing
    if (S_ISDIR(st.st_mode)) {
      if (S_ISLNK(ls.st_mode)) {
        std::string target;
        if (real(full, target)) p.folders.push_back({target, {role, input, full}});
      }
      subfolders.push_back(full);
    } else {
      p.files.emplace(std::make_pair(st.st_dev, st.st_ino), Reached{role, input, full});
    }
  }
  ::closedir(d);
  for (const std::string& sub : subfolders) walk_input(sub, role, input, depth + 1, p);
}

// "d/link" -> realpath("d") + "/link": the path itself, its last component not followed (the
// link an output would replace, where resolve() names the file it points to).
std::string resolve_link_itself(const std::string& path) {
  const auto [dir, base] = split(path);
  if (base.empty() || base == "." || base == "..") return OutputGuard::resolve(path);
  const std::string folder = OutputGuard::resolve(dir);
  return folder == "/" ? "/" + base : folder + "/" + base;
}

bool under(const std::string& path, const std::string& folder) {
  const std::string f = folder == "/" ? "/" : folder + "/";
  return path.compare(0, f.size(), f) == 0;
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
  // Every input by identity, walked once: the files it reaches and the folders its links name.
  Protected prot;
  for (const Entry& x : entries_) {
    if (x.kind != Entry::Kind::kInput && x.kind != Entry::Kind::kInputFile) continue;
    struct stat st {};
    if (::stat(x.path.c_str(), &st) != 0) continue;
    if (x.kind == Entry::Kind::kInput && S_ISDIR(st.st_mode)) {
      prot.folders.push_back({x.resolved, {x.role, x.path, x.path}});
      walk_input(x.resolved, x.role, x.path, 0, prot);
    } else {
      prot.files.emplace(std::make_pair(st.st_dev, st.st_ino), Reached{x.role, x.path, x.path});
    }
  }
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& o = entries_[i];
    if (o.kind != Entry::Kind::kOutput && o.kind != Entry::Kind::kReserved) continue;
    // Against every output declared before it.
    for (std::size_t j = 0; j < i; ++j) {
      const Entry& x = entries_[j];
      if (x.kind != Entry::Kind::kOutput && x.kind != Entry::Kind::kReserved) continue;
      if (o.resolved == x.resolved || same_inode(o.path, x.path)) {
        fail_usage("{} and {} name the same file {}: give each output its own path", x.role,
                   o.role, shown(o.path));
      }
    }
    // Against every input: the path itself (a link is replaced, not written through), the file
    // it reaches, and every file and linked folder an input folder reaches.
    const std::string itself = resolve_link_itself(o.path);
    for (const Entry& x : entries_) {
      if (x.kind != Entry::Kind::kInput && x.kind != Entry::Kind::kInputFile) continue;
      if (o.resolved == x.resolved || itself == x.resolved ||
          itself == resolve_link_itself(x.path)) {
        fail_usage("{} {} is the input {} {}: an output never replaces an input; give it its own "
                   "path",
                   o.role, shown(o.path), x.role, shown(x.path));
      }
    }
    for (const auto& [folder, by] : prot.folders) {
      if (!under(itself, folder) && !under(o.resolved, folder)) continue;
      if (by.entry == by.path) {
        fail_usage("{} {} lies inside the input folder {} {}: an output never replaces an "
                   "input; write it elsewhere",
                   o.role, shown(o.path), by.role, shown(by.path));
      }
      fail_usage("{} {} lies inside {}, which the input folder {} {} links to from {}: an output "
                 "never replaces an input; write it elsewhere",
                 o.role, shown(o.path), shown(folder), by.role, shown(by.path), shown(by.entry));
    }
    struct stat st {}, ls {};
    if (::stat(o.path.c_str(), &st) != 0) continue;  // a new file (or a dangling link)
    const auto hit = prot.files.find({st.st_dev, st.st_ino});
    if (hit == prot.files.end()) continue;
    const Reached& by = hit->second;
    const bool link = ::lstat(o.path.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode);
    if (by.entry == by.path) {
      fail_usage("{} {} is {} the input {} {}: an output never replaces an input; give it its own "
                 "path",
                 o.role, shown(o.path), link ? "a link to" : "a hard link to", by.role,
                 shown(by.path));
    }
    fail_usage("{} {} is {} {}, a file of the input folder {} {}: an output never replaces an "
               "input; give it its own path",
               o.role, shown(o.path),
               link ? "a link to the same file as" : st.st_nlink > 1 ? "a hard link to" : "the file behind",
               shown(by.entry), by.role, shown(by.path));
  }
  for (const Entry& o : entries_) {
    if (o.kind != Entry::Kind::kOutput && o.kind != Entry::Kind::kReserved) continue;
    const auto [dir, base] = split(o.path);
    if (base.empty() || base == "." || base == "..") {
      fail_usage("{} {}: not a file name", o.role, shown(o.path));
    }
    // A reserved file's folder is made by the run (the suite's --out); its target is still judged.
    if (o.kind == Entry::Kind::kOutput && !is_directory(dir)) {
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
