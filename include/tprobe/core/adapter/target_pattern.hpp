// PEFT's string form of target_modules (re.fullmatch against each module name), matched in
// linear time: a small Thompson-NFA / Pike-VM engine for the regex subset adapter configs use.
// Anything outside the subset is refused with a message saying what and where — never handed to a
// backtracking engine (std::regex recursed to SIGSEGV on 20,000 nested groups and ran for minutes
// on `.*(.*)*(.*)*…X`, issue 23).
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tprobe::core {

// The subset (docs/lora-gate.md): literals; `.`; `*`, `+`, `?` and their lazy forms (the same under
// full-match semantics); `{m}`, `{m,}`, `{m,n}` with m, n <= kMaxRepeat; `|`; groups `( )` and
// `(?: )`; classes `[abc]`, `[a-z]`, `[^…]`; escapes `\.` `\\` and the like, `\d \w \s \D \W \S`;
// `^` and `$` (true only at the start / the end). Refused: backreferences, lookaround, named
// groups, inline flags, `\b`-style assertions, nesting deeper than kMaxDepth, patterns longer
// than kMaxLength or compiling to more than kMaxProgram instructions.
class TargetPattern {
 public:
  static constexpr std::size_t kMaxLength = 4096;
  static constexpr int kMaxDepth = 32;
  static constexpr int kMaxRepeat = 64;
  static constexpr std::size_t kMaxProgram = 20000;

  // Throws tprobe::Error naming `where`, the offset and what is not supported.
  TargetPattern(std::string_view pattern, const std::string& where);

  // True when the whole of `text` matches (Python's re.fullmatch). O(|text| * program size).
  bool full_match(std::string_view text) const;

  std::size_t program_size() const { return program_.size(); }

  struct Inst {
    enum class Op : uint8_t { kChar, kSplit, kJmp, kBegin, kEnd, kMatch } op;
    int x = 0, y = 0;   // kSplit: both; kJmp: x
    int set = -1;       // kChar: index into sets_
  };

 private:
  std::vector<Inst> program_;
  std::vector<std::bitset<256>> sets_;
};

}  // namespace tprobe::core
