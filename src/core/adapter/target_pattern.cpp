// A Thompson-NFA / Pike-VM matcher for PEFT's target_modules regex subset: a bounded recursive
// descent parser (depth <= kMaxDepth), a compiler to Char/Split/Jmp instructions (size <=
// kMaxProgram), and a simulation that keeps each instruction at most once per text position, so
// matching is O(|text| * |program|) whatever the pattern (no backtracking, no recursion).
#include "tprobe/core/adapter/target_pattern.hpp"

#include <fmt/format.h>

#include <memory>

#include "base/strict_json.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

namespace {

using Set = std::bitset<256>;

struct Node {
  enum class Kind { kSet, kCat, kAlt, kRepeat, kBegin, kEnd } kind;
  Set set;                                   // kSet
  std::vector<std::unique_ptr<Node>> items;  // kCat, kAlt; kRepeat: one
  int min = 0, max = -1;                     // kRepeat: max -1 = unbounded
};
using NodePtr = std::unique_ptr<Node>;

NodePtr make(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  return n;
}

Set digits() {
  Set s;
  for (int c = '0'; c <= '9'; ++c) s.set(static_cast<std::size_t>(c));
  return s;
}
Set word() {
  Set s = digits();
  for (int c = 'a'; c <= 'z'; ++c) s.set(static_cast<std::size_t>(c));
  for (int c = 'A'; c <= 'Z'; ++c) s.set(static_cast<std::size_t>(c));
  s.set('_');
  return s;
}
Set space() {
  Set s;
  for (char c : std::string(" \t\n\r\f\v")) s.set(static_cast<unsigned char>(c));
  return s;
}

class Parser {
 public:
  Parser(std::string_view p, const std::string& where) : p_(p), where_(where) {}

  NodePtr parse() {
    NodePtr n = alternation(0);
    if (i_ < p_.size()) refuse("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] void refuse(const std::string& what) const {
    fail("{}: target_modules regex '{}': {} at offset {} is outside the linear-time subset "
         "tprobe matches (docs/lora-gate.md)",
         where_, detail::printable(std::string(p_), 40), what, i_);
  }
  bool more() const { return i_ < p_.size(); }
  char peek() const { return p_[i_]; }

  NodePtr alternation(int depth) {
    if (depth > TargetPattern::kMaxDepth) {
      refuse(fmt::format("groups nested deeper than {}", TargetPattern::kMaxDepth));
    }
    auto alt = make(Node::Kind::kAlt);
    alt->items.push_back(concatenation(depth));
    while (more() && peek() == '|') {
      ++i_;
      alt->items.push_back(concatenation(depth));
    }
    if (alt->items.size() == 1) return std::move(alt->items.front());
    return alt;
  }

  NodePtr concatenation(int depth) {
    auto cat = make(Node::Kind::kCat);
    while (more() && peek() != '|' && peek() != ')') {
      NodePtr atom = this->atom(depth);
      cat->items.push_back(quantified(std::move(atom)));
    }
    return cat;
  }

  // Reads "{m}", "{m,}", "{m,n}" at i_ (on '{'); false (i_ unchanged) when it is a literal brace.
  bool counted(int& min, int& max) {
    std::size_t j = i_ + 1;
    auto number = [&](int& out) {
      std::size_t start = j;
      long v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
        v = v * 10 + (p_[j] - '0');
        if (v > 1000000) v = 1000000;
        ++j;
      }
      out = static_cast<int>(v);
      return j > start;
    };
    const bool has_min = number(min);
    max = min;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(max)) max = -1;
    } else if (!has_min) {
      return false;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    if (!has_min) min = 0;
    i_ = j + 1;
    return true;
  }

  NodePtr quantified(NodePtr atom) {
    bool quantified_once = false;
    while (more()) {
      int min = 0, max = -1;
      const char c = peek();
      if (c == '*') {
        ++i_;
      } else if (c == '+') {
        min = 1;
        ++i_;
      } else if (c == '?') {
        max = 1;
        ++i_;
      } else if (c == '{') {
        if (!counted(min, max)) break;
        if (min > TargetPattern::kMaxRepeat || max > TargetPattern::kMaxRepeat) {
          refuse(fmt::format("a counted repetition above {}", TargetPattern::kMaxRepeat));
        }
        if (max >= 0 && max < min) refuse("a counted repetition {m,n} with n < m");
      } else {
        break;
      }
      if (quantified_once) refuse("a repetition of a repetition (nothing to repeat)");
      if (atom->kind == Node::Kind::kBegin || atom->kind == Node::Kind::kEnd) {
        refuse("nothing to repeat");
      }
      quantified_once = true;
      if (more() && peek() == '?') ++i_;  // lazy: the same set of full matches
      if (more() && peek() == '+') refuse("a possessive repetition");
      auto r = make(Node::Kind::kRepeat);
      r->min = min;
      r->max = max;
      r->items.push_back(std::move(atom));
      atom = std::move(r);
    }
    return atom;
  }

  NodePtr set_node(const Set& s) {
    auto n = make(Node::Kind::kSet);
    n->set = s;
    return n;
  }

  // An escape after '\' (i_ on the character after it), as a set.
  Set escape(bool in_class) {
    if (!more()) refuse("a trailing backslash");
    const char c = p_[i_++];
    switch (c) {
      case 'd': return digits();
      case 'D': return ~digits();
      case 'w': return word();
      case 'W': return ~word();
      case 's': return space();
      case 'S': return ~space();
      case 'n': return Set().set('\n');
      case 't': return Set().set('\t');
      case 'r': return Set().set('\r');
      case 'f': return Set().set('\f');
      case 'v': return Set().set('\v');
      default: break;
    }
    if (c >= '0' && c <= '9') {
      --i_;
      refuse(in_class ? "an octal escape" : "a backreference");
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      --i_;
      refuse(fmt::format("the escape '\\{}' (assertions and unknown escapes are not supported)",
                         c));
    }
    return Set().set(static_cast<unsigned char>(c));
  }

  NodePtr atom(int depth) {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (more() && peek() == '?') {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else {
          refuse("lookaround, named groups and inline flags");
        }
      }
      NodePtr inner = alternation(depth + 1);
      if (!more() || peek() != ')') refuse("a '(' without its ')'");
      ++i_;
      return inner;
    }
    if (c == '[') return class_node();
    if (c == '*' || c == '+' || c == '?') refuse("nothing to repeat");
    ++i_;
    if (c == '.') return set_node(~Set().set('\n'));
    if (c == '^') return make(Node::Kind::kBegin);
    if (c == '$') return make(Node::Kind::kEnd);
    if (c == '\\') return set_node(escape(false));
    return set_node(Set().set(static_cast<unsigned char>(c)));
  }

  NodePtr class_node() {
    ++i_;  // '['
    bool negate = false;
    if (more() && peek() == '^') {
      negate = true;
      ++i_;
    }
    Set s;
    bool first = true;
    while (true) {
      if (!more()) refuse("a '[' without its ']'");
      char c = p_[i_];
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      if (c == '[' && i_ + 1 < p_.size() && (p_[i_ + 1] == ':' || p_[i_ + 1] == '=')) {
        refuse("a POSIX class");
      }
      int lo;
      ++i_;
      if (c == '\\') {
        const Set e = escape(true);
        if (e.count() != 1) {
          s |= e;
          continue;
        }
        lo = 0;
        while (!e.test(static_cast<std::size_t>(lo))) ++lo;
      } else {
        lo = static_cast<unsigned char>(c);
      }
      int hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        char h = p_[i_++];
        if (h == '\\') {
          const Set e = escape(true);
          if (e.count() != 1) refuse("a class escape as a range end");
          hi = 0;
          while (!e.test(static_cast<std::size_t>(hi))) ++hi;
        } else {
          hi = static_cast<unsigned char>(h);
        }
        if (hi < lo) refuse("a range with its ends reversed");
      }
      for (int k = lo; k <= hi; ++k) s.set(static_cast<std::size_t>(k));
    }
    return set_node(negate ? ~s : s);
  }

  std::string_view p_;
  const std::string& where_;
  std::size_t i_ = 0;
};

class Compiler {
 public:
  Compiler(std::vector<TargetPattern::Inst>& prog, std::vector<Set>& sets,
           const std::string& where)
      : prog_(prog), sets_(sets), where_(where) {}

  void emit(const Node& n) {
    using Op = TargetPattern::Inst::Op;
    switch (n.kind) {
      case Node::Kind::kSet: {
        sets_.push_back(n.set);
        push({Op::kChar, 0, 0, static_cast<int>(sets_.size() - 1)});
        break;
      }
      case Node::Kind::kBegin: push({Op::kBegin, 0, 0, -1}); break;
      case Node::Kind::kEnd: push({Op::kEnd, 0, 0, -1}); break;
      case Node::Kind::kCat:
        for (const auto& item : n.items) emit(*item);
        break;
      case Node::Kind::kAlt: {
        std::vector<int> jumps;
        for (std::size_t k = 0; k < n.items.size(); ++k) {
          if (k + 1 < n.items.size()) {
            const int split = push({Op::kSplit, 0, 0, -1});
            prog_[static_cast<std::size_t>(split)].x = split + 1;
            emit(*n.items[k]);
            jumps.push_back(push({Op::kJmp, 0, 0, -1}));
            prog_[static_cast<std::size_t>(split)].y = size();
          } else {
            emit(*n.items[k]);
          }
        }
        for (int j : jumps) prog_[static_cast<std::size_t>(j)].x = size();
        break;
      }
      case Node::Kind::kRepeat: {
        const Node& e = *n.items.front();
        for (int k = 0; k < n.min; ++k) emit(e);
        if (n.max < 0) {  // e*
          const int split = push({Op::kSplit, 0, 0, -1});
          emit(e);
          push({Op::kJmp, split, 0, -1});
          prog_[static_cast<std::size_t>(split)].x = split + 1;
          prog_[static_cast<std::size_t>(split)].y = size();
        } else {
          std::vector<int> splits;
          for (int k = n.min; k < n.max; ++k) {  // (e(e(e)?)?)?
            const int split = push({Op::kSplit, 0, 0, -1});
            prog_[static_cast<std::size_t>(split)].x = split + 1;
            splits.push_back(split);
            emit(e);
          }
          for (int s : splits) prog_[static_cast<std::size_t>(s)].y = size();
        }
        break;
      }
    }
  }

  int push(TargetPattern::Inst inst) {
    if (prog_.size() >= TargetPattern::kMaxProgram) {
      fail("{}: target_modules regex compiles to more than {} instructions (counted "
           "repetitions multiply it): refused",
           where_, TargetPattern::kMaxProgram);
    }
    prog_.push_back(inst);
    return size() - 1;
  }
  int size() const { return static_cast<int>(prog_.size()); }

 private:
  std::vector<TargetPattern::Inst>& prog_;
  std::vector<Set>& sets_;
  const std::string& where_;
};

// Iterative destruction: a long chain of nodes must not recurse through unique_ptr destructors.
void release(NodePtr root) {
  std::vector<NodePtr> stack;
  stack.push_back(std::move(root));
  while (!stack.empty()) {
    NodePtr n = std::move(stack.back());
    stack.pop_back();
    for (auto& c : n->items) stack.push_back(std::move(c));
  }
}

}  // namespace

TargetPattern::TargetPattern(std::string_view pattern, const std::string& where) {
  if (pattern.size() > kMaxLength) {
    fail("{}: target_modules regex of {} bytes is longer than {}: refused", where,
         pattern.size(), kMaxLength);
  }
  NodePtr root = Parser(pattern, where).parse();
  Compiler(program_, sets_, where).emit(*root);
  release(std::move(root));
  program_.push_back({Inst::Op::kMatch, 0, 0, -1});
}

bool TargetPattern::full_match(std::string_view text) const {
  const std::size_t n = program_.size();
  std::vector<int> current, next, stack;
  std::vector<std::size_t> seen(n, static_cast<std::size_t>(-1));  // position last added at
  current.reserve(n);
  next.reserve(n);
  // Follows Split/Jmp/assertions from `pc` at text position `pos`; adds Char and Match states.
  auto add = [&](std::vector<int>& list, int pc0, std::size_t pos) {
    stack.push_back(pc0);
    while (!stack.empty()) {
      const int pc = stack.back();
      stack.pop_back();
      const auto upc = static_cast<std::size_t>(pc);
      if (seen[upc] == pos) continue;
      seen[upc] = pos;
      const Inst& in = program_[upc];
      switch (in.op) {
        case Inst::Op::kJmp: stack.push_back(in.x); break;
        case Inst::Op::kSplit:
          stack.push_back(in.y);
          stack.push_back(in.x);
          break;
        case Inst::Op::kBegin:
          if (pos == 0) stack.push_back(pc + 1);
          break;
        case Inst::Op::kEnd:
          if (pos == text.size()) stack.push_back(pc + 1);
          break;
        case Inst::Op::kChar:
        case Inst::Op::kMatch: list.push_back(pc); break;
      }
    }
  };
  add(current, 0, 0);
  for (std::size_t pos = 0; pos < text.size() && !current.empty(); ++pos) {
    const auto c = static_cast<unsigned char>(text[pos]);
    next.clear();
    for (int pc : current) {
      const Inst& in = program_[static_cast<std::size_t>(pc)];
      if (in.op == Inst::Op::kChar && sets_[static_cast<std::size_t>(in.set)].test(c)) {
        add(next, pc + 1, pos + 1);
      }
    }
    current.swap(next);
  }
  for (int pc : current) {
    if (program_[static_cast<std::size_t>(pc)].op == Inst::Op::kMatch) return true;
  }
  return false;
}

}  // namespace tprobe::core
