// A user's trace by phase × part × layer: module events and fwdbwd flows to core's vocabulary.
// The attribution alone (its views are trace_parts_report.cpp, the part diff part_diff.cpp); Size:
// over 800 lines because the Attributor is one class whose thread trees and range sets
// every rule reads.
#include "tprobe/core/trace/attribute/trace_parts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "trace/attribute/detail/trace_parts_internal.hpp"

namespace tprobe::core {
namespace detail {
namespace {

// What a module's class says about the part it computes (docs/kernels.md, "Parts").
enum class ModClass : uint8_t {
  kDecoderLayer,
  kAttention,
  kRouter,
  kExperts,
  kMoeBlock,  // a sparse-MoE block: its router, experts and shared experts are its children
  kMlp,
  kLinear,  // a bare torch Linear (or PEFT's LoRA Linear): placed only as an MoE block's child
  kNorm,
  kEmbedding,
  kRotary,
  kTextModel,
  kBaseModel,  // "…Model": the decoder stack when it sits inside a "…ForCausalLM" (Llama's)
  kCausalLm,
  // PEFT's LoRA on a module's parameters (target_parameters: ParamWrapper, around the experts'
  // fused weights): it computes for the module it wraps, so it takes that module's role.
  kPeftParamWrapper,
  kOther,
};

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// "Gemma4TextAttention_3" -> "Gemma4TextAttention": the trailing _N is torch's instance counter.
std::string class_of(const std::string& instance) {
  const std::size_t u = instance.rfind('_');
  if (u == std::string::npos || u + 1 >= instance.size()) return instance;
  for (std::size_t i = u + 1; i < instance.size(); ++i) {
    if (instance[i] < '0' || instance[i] > '9') return instance;
  }
  return instance.substr(0, u);
}

ModClass classify_module(const std::string& cls) {
  if (cls == "ParamWrapper") return ModClass::kPeftParamWrapper;
  if (ends_with(cls, "DecoderLayer")) return ModClass::kDecoderLayer;
  if (contains(cls, "Rotary")) return ModClass::kRotary;
  if (contains(cls, "Embedding")) return ModClass::kEmbedding;
  if (contains(cls, "Attention")) return ModClass::kAttention;
  if (contains(cls, "Router")) return ModClass::kRouter;
  // DeepSeek-V3's routed experts (transformers 5) are "DeepseekV3NaiveMoe".
  if (contains(cls, "Experts") || ends_with(cls, "NaiveMoe")) return ModClass::kExperts;
  if (ends_with(cls, "MoeBlock") || ends_with(cls, "MoEBlock") || ends_with(cls, "Moe") ||
      ends_with(cls, "MoE")) {
    return ModClass::kMoeBlock;
  }
  if (ends_with(cls, "MLP")) return ModClass::kMlp;
  if (cls == "Linear") return ModClass::kLinear;
  if (contains(cls, "Norm")) return ModClass::kNorm;
  if (ends_with(cls, "TextModel")) return ModClass::kTextModel;
  if (contains(cls, "CausalLM") || contains(cls, "ConditionalGeneration")) return ModClass::kCausalLm;
  if (ends_with(cls, "Model")) return ModClass::kBaseModel;
  return ModClass::kOther;
}

// The part an MoE block's direct child computes (docs/kernels.md, "Parts"), by the block's other
// children: kUnplaced for a class no rule names.
enum class Role : uint8_t { kNone, kRouter, kExperts, kShared, kUnplaced };

bool is_part_module(ModClass c) {
  return c == ModClass::kAttention || c == ModClass::kRouter || c == ModClass::kExperts ||
         c == ModClass::kMlp || c == ModClass::kMoeBlock;
}
bool norm_neighbour(ModClass c) {  // a layer norm beside these belongs to them
  return c == ModClass::kAttention || c == ModClass::kExperts || c == ModClass::kMlp ||
         c == ModClass::kMoeBlock;
}
StepPart part_of(ModClass c, bool core) {
  switch (c) {
    case ModClass::kAttention:
      return core ? StepPart::kAttentionCore : StepPart::kAttentionProj;
    case ModClass::kRouter:
      return StepPart::kRouter;
    case ModClass::kExperts:
    case ModClass::kMoeBlock:
      return StepPart::kExperts;
    case ModClass::kMlp:
      return StepPart::kDenseMlp;
    default:
      return StepPart::kOther;
  }
}

// Ops whose name says they are the attention math (SDPA and its backends, flash, eager softmax);
// only consulted inside an attention module.
bool core_op_name(const std::string& n) {
  return contains(n, "attention") || contains(n, "softmax") || contains(n, "flash");
}

enum class IvKind : uint8_t {
  kModule,
  kAttentionFunction,
  kMaskFunction,
  kLossFunction,
  kBackwardCall,
  kCoreOp,
  kNode
};

constexpr uint32_t kNoName = UINT32_MAX;

// How a backward op's interval came by its fwdbwd flow (docs/kernels.md, "Parts").
enum class Via : uint8_t {
  kOwn,       // a flow's "f" end binds to it
  kSequence,  // an evaluate_function range: the bound op inside it with its sequence number
  kAfter,     // an AccumulateGrad range: the node evaluated just before it on its thread
};

struct Iv {
  int64_t start = 0, end = 0;
  int32_t parent = -1;
  IvKind kind = IvKind::kModule;
  ModClass cls = ModClass::kOther;
  uint32_t module = 0;
  int64_t flow = -1;  // kNode: the fwdbwd flow id, -1 for a backward range without one
  uint32_t name_id = kNoName;  // kNode bound by a flow: the bound op's name
  Via via = Via::kOwn;         // kNode with a flow: how it came by it
  StepPart norm_part = StepPart::kOther;  // a decoder layer's own norm: its part by neighbours
};

// A flow-bound backward op by its thread and "Sequence number".
struct SeqNode {
  int64_t tid = 0, seq = 0;
  Iv iv;
};

// The kept intervals of one thread as a nesting tree (by time containment).
struct ThreadTree {
  std::vector<Iv> ivs;  // by start ascending, end descending
  std::vector<int64_t> starts;

  void build() {
    std::stable_sort(ivs.begin(), ivs.end(), [](const Iv& a, const Iv& b) {
      if (a.start != b.start) return a.start < b.start;
      if (a.end != b.end) return a.end > b.end;
      return static_cast<int>(a.kind) > static_cast<int>(b.kind);  // a node around a module
    });
    std::vector<int32_t> stack;
    starts.resize(ivs.size());
    for (std::size_t i = 0; i < ivs.size(); ++i) {
      while (!stack.empty() && ivs[static_cast<std::size_t>(stack.back())].end < ivs[i].end)
        stack.pop_back();
      ivs[i].parent = stack.empty() ? -1 : stack.back();
      stack.push_back(static_cast<int32_t>(i));
      starts[i] = ivs[i].start;
    }
  }

  // The intervals holding t (ends inclusive), innermost first.
  void chain(int64_t t, std::vector<int32_t>& out) const {
    out.clear();
    auto it = std::upper_bound(starts.begin(), starts.end(), t);
    int32_t i = static_cast<int32_t>(it - starts.begin()) - 1;
    while (i >= 0 && ivs[static_cast<std::size_t>(i)].end < t) i = ivs[static_cast<std::size_t>(i)].parent;
    for (; i >= 0; i = ivs[static_cast<std::size_t>(i)].parent) {
      if (ivs[static_cast<std::size_t>(i)].end >= t) out.push_back(i);
    }
  }
};

// Merged ranges per thread: is a launch inside an Optimizer.* range?
class RangeSet {
 public:
  void add(int64_t tid, int64_t s, int64_t e) { by_tid_[tid].emplace_back(s, e); }
  void seal() {
    for (auto& [tid, v] : by_tid_) {
      std::sort(v.begin(), v.end());
      std::vector<std::pair<int64_t, int64_t>> m;
      for (const auto& r : v) {
        if (!m.empty() && r.first <= m.back().second)
          m.back().second = std::max(m.back().second, r.second);
        else
          m.push_back(r);
      }
      v = std::move(m);
    }
  }
  bool contains(int64_t tid, int64_t t) const {
    auto it = by_tid_.find(tid);
    if (it == by_tid_.end()) return false;
    const auto& v = it->second;
    auto r = std::upper_bound(v.begin(), v.end(), std::make_pair(t, INT64_MAX));
    if (r == v.begin()) return false;
    --r;
    return t >= r->first && t <= r->second;
  }

 private:
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_tid_;
};

struct Resolved {
  bool ok = false;
  bool any_module = false;
  int64_t unplaced = -1;  // not ok: the module (instance index) inside a layer no rule places
  StepTag tag;
};

class Attributor {
 public:
  Attributor(const PartsInput& in, const TracePartsOptions& options, TraceParts& out)
      : in_(in), options_(options), out_(out) {}

  void run() {
    classes_.reserve(in_.module_names.size());
    for (const std::string& n : in_.module_names) classes_.push_back(classify_module(class_of(n)));
    number_layers();
    add_python();
    add_nodes();
    add_core_ops();
    for (auto& [tid, tree] : trees_) tree.build();
    block_.assign(in_.module_names.size(), 0);
    role_.assign(in_.module_names.size(), Role::kNone);
    for (auto& [tid, tree] : trees_) find_moe_blocks(tree);
    for (auto& [tid, tree] : trees_) moe_roles(tree);
    for (auto& [tid, tree] : trees_) layer_norm_parts(tree);
    for (const PartsRange& r : in_.optimizer_ranges) optimizer_.add(r.tid, r.start_ns, r.end_ns);
    optimizer_.seal();
    attribute_rows();
  }

 private:
  // Layer k = the k-th distinct decoder-layer instance by its first call.
  void number_layers() {
    std::map<uint32_t, int64_t> first;
    for (const PyEvent& e : in_.python) {
      if (e.kind != PyKind::kModule || classes_[e.module] != ModClass::kDecoderLayer) continue;
      auto it = first.find(e.module);
      if (it == first.end() || e.start_ns < it->second) first[e.module] = e.start_ns;
    }
    std::vector<std::pair<int64_t, uint32_t>> order;
    for (const auto& [m, t] : first) order.emplace_back(t, m);
    std::sort(order.begin(), order.end());
    for (std::size_t i = 0; i < order.size(); ++i) {
      layer_of_[order[i].second] = static_cast<int32_t>(i);
      out_.decoder_layers.push_back(in_.module_names[order[i].second]);
    }
  }

  void add_python() {
    for (const PyEvent& e : in_.python) {
      Iv iv;
      iv.start = e.start_ns;
      iv.end = e.end_ns;
      switch (e.kind) {
        case PyKind::kModule:
          iv.kind = IvKind::kModule;
          iv.module = e.module;
          iv.cls = classes_[e.module];
          ++out_.module_event_count;
          break;
        case PyKind::kAttentionFunction:
          iv.kind = IvKind::kAttentionFunction;
          break;
        case PyKind::kMaskFunction:
          iv.kind = IvKind::kMaskFunction;
          break;
        case PyKind::kLossFunction:
          iv.kind = IvKind::kLossFunction;
          break;
        case PyKind::kBackwardCall:
          iv.kind = IvKind::kBackwardCall;
          break;
      }
      trees_[e.tid].ivs.push_back(iv);
    }
  }

  // Backward ops: the cpu_op each "f" end binds to (the longest op starting at the end's ts on
  // its thread, as Kineto's enclosing-slice binding has it), and every evaluate_function range
  // (a backward op without a link when no flow binds inside it).
  void add_nodes() {
    // Per flow id (sorted vectors, not maps: a long trace holds a few thousand flows a step):
    // how many "s" and "f" ends it has, and where its "s" end is.
    struct Count {
      int s = 0, f = 0;
      std::pair<int64_t, int64_t> start;  // (tid, ts) of the "s" end
    };
    std::vector<int64_t> ids;
    ids.reserve(in_.flows.size());
    for (const FlowEnd& f : in_.flows) ids.push_back(f.id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    const auto index = [&](int64_t id) {
      return static_cast<std::size_t>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin());
    };
    std::vector<Count> count(ids.size());
    for (const FlowEnd& f : in_.flows) {
      Count& c = count[index(f.id)];
      if (f.start) {
        ++c.s;
        c.start = {f.tid, f.ts_ns};
      } else {
        ++c.f;
      }
    }
    struct End {
      int64_t tid, ts, id;
    };
    std::vector<End> ends;  // the paired "f" ends, by (tid, ts), file order within one
    for (const FlowEnd& f : in_.flows) {
      if (f.start) continue;
      const Count& c = count[index(f.id)];
      if (c.f != 1 || c.s != 1) {
        ++out_.fwdbwd_unpaired;
        continue;
      }
      ++out_.fwdbwd_links;
      ends.push_back({f.tid, f.ts_ns, f.id});
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (count[i].s > 0 && (count[i].s != 1 || count[i].f == 0))
        out_.fwdbwd_unpaired += count[i].s;
      if (count[i].s == 1) start_of_.push_back({ids[i], count[i].start});
    }
    std::vector<int64_t>().swap(ids);
    std::vector<Count>().swap(count);
    std::stable_sort(ends.begin(), ends.end(), [](const End& x, const End& y) {
      return x.tid != y.tid ? x.tid < y.tid : x.ts < y.ts;
    });
    // The distinct (tid, ts) of the ends, each with its first end, and the longest cpu_op there.
    std::vector<std::pair<int64_t, int64_t>> keys;
    std::vector<std::size_t> first_end;
    for (std::size_t i = 0; i < ends.size(); ++i) {
      if (keys.empty() || keys.back() != std::make_pair(ends[i].tid, ends[i].ts)) {
        keys.emplace_back(ends[i].tid, ends[i].ts);
        first_end.push_back(i);
      }
    }
    std::vector<const PartsOp*> bound(keys.size(), nullptr);
    if (!keys.empty() && in_.ops) {
      for (const PartsOp& op : *in_.ops) {
        const std::pair<int64_t, int64_t> at{op.tid, op.start_ns};
        auto it = std::lower_bound(keys.begin(), keys.end(), at);
        if (it == keys.end() || *it != at) continue;
        const PartsOp*& b = bound[static_cast<std::size_t>(it - keys.begin())];
        if (b == nullptr || op.end_ns > b->end_ns) b = &op;
      }
    }
    // The bound ops by (thread, sequence number): the node op an evaluate_function range runs.
    std::vector<SeqNode> by_seq;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const PartsOp* op = bound[k];
      if (op == nullptr) continue;  // no op to bind to: its rows stay with the enclosing range
      ++out_.backward_ops_linked;
      Iv iv;
      iv.kind = IvKind::kNode;
      iv.start = op->start_ns;
      iv.end = op->end_ns;
      iv.flow = ends[first_end[k]].id;  // two flows binding to one op: the first (both name its
                                        // forward)
      iv.name_id = op->name_id;
      trees_[keys[k].first].ivs.push_back(iv);
      if (op->seq >= 0) by_seq.push_back({keys[k].first, op->seq, iv});
    }
    std::vector<End>().swap(ends);
    std::stable_sort(by_seq.begin(), by_seq.end(), [](const SeqNode& x, const SeqNode& y) {
      return x.tid != y.tid ? x.tid < y.tid : x.seq < y.seq;
    });
    // Each (thread, number)'s ops by start.
    for (std::size_t i = 0; i < by_seq.size();) {
      std::size_t j = i;
      while (j < by_seq.size() && by_seq[j].tid == by_seq[i].tid && by_seq[j].seq == by_seq[i].seq)
        ++j;
      std::sort(by_seq.begin() + static_cast<std::ptrdiff_t>(i),
                by_seq.begin() + static_cast<std::ptrdiff_t>(j),
                [](const SeqNode& x, const SeqNode& c) { return x.iv.start < c.iv.start; });
      i = j;
    }
    add_backward_ranges(by_seq);
  }

  // The "s" end of flow `id` as (tid, ts), nullptr when it has none (or more than one).
  const std::pair<int64_t, int64_t>* flow_start(int64_t id) const {
    if (id < 0) return nullptr;
    auto it = std::lower_bound(
        start_of_.begin(), start_of_.end(), id,
        [](const std::pair<int64_t, std::pair<int64_t, int64_t>>& e, int64_t x) {
          return e.first < x;
        });
    return it != start_of_.end() && it->first == id ? &it->second : nullptr;
  }

  // Every evaluate_function range is a backward op; its flow, when it can have one:
  // - the engine evaluates a node inside `evaluate_function: X` and then, still inside the range
  //   but outside the node op X, handles X's gradients (aten::sum reducing a broadcast one,
  //   aten::add_ accumulating two into one input, aten::to casting one): the range takes the flow
  //   of the bound op inside it that carries its own "Sequence number" (torch writes the node's
  //   number on both);
  // - an `evaluate_function: torch::autograd::AccumulateGrad` range (a leaf's .grad written; no
  //   forward op, no number) takes the flow of the range on its thread that ended last at or
  //   before its start: AccumulateGrad's sequence number is the largest there is, so the engine's
  //   ready queue runs it as soon as the node that produced its gradient has finished.
  // Without the number, or with no linked range before it, a range has no flow (its rows stay
  // with an enclosing backward op's flow, or untagged): the negative controls in the tests.
  void add_backward_ranges(const std::vector<SeqNode>& by_seq) {
    std::vector<const PartsRange*> order;
    order.reserve(in_.backward_ranges.size());
    for (const PartsRange& r : in_.backward_ranges) order.push_back(&r);
    std::stable_sort(order.begin(), order.end(), [](const PartsRange* a, const PartsRange* b) {
      if (a->tid != b->tid) return a->tid < b->tid;
      if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
      return a->end_ns > b->end_ns;
    });
    // Per thread, the ranges seen so far by (end, start): the one that ended last before a time.
    std::map<std::pair<int64_t, int64_t>, Iv> ended;
    int64_t tid = 0;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const PartsRange& r = *order[i];
      if (i == 0 || r.tid != tid) ended.clear();
      tid = r.tid;
      Iv iv;
      iv.kind = IvKind::kNode;
      iv.start = r.start_ns;
      iv.end = r.end_ns;
      if (r.accumulate_grad) {
        auto it = ended.upper_bound({r.start_ns, INT64_MAX});
        if (it != ended.begin() && (--it)->second.flow >= 0) {
          iv.flow = it->second.flow;
          iv.name_id = it->second.name_id;
          iv.via = Via::kAfter;
        }
      } else if (r.seq >= 0) {
        const auto [lo, hi] = std::equal_range(
            by_seq.begin(), by_seq.end(), SeqNode{r.tid, r.seq, Iv{}},
            [](const SeqNode& x, const SeqNode& y) {
              return x.tid != y.tid ? x.tid < y.tid : x.seq < y.seq;
            });
        auto b = std::lower_bound(lo, hi, r.start_ns,
                                  [](const SeqNode& x, int64_t t) { return x.iv.start < t; });
        if (b != hi && b->iv.end <= r.end_ns) {
          iv.flow = b->iv.flow;
          iv.name_id = b->iv.name_id;
          iv.via = Via::kSequence;
        }
      }
      ended[{r.end_ns, r.start_ns}] = iv;
      trees_[r.tid].ivs.push_back(iv);
    }
  }

  void add_core_ops() {
    if (!in_.ops || !in_.op_names) return;
    std::vector<uint8_t> core(in_.op_names->size());
    for (std::size_t i = 0; i < core.size(); ++i) core[i] = core_op_name((*in_.op_names)[i]);
    for (const PartsOp& op : *in_.ops) {
      if (op.name_id >= core.size() || !core[op.name_id]) continue;
      auto t = trees_.find(op.tid);
      if (t == trees_.end()) continue;  // a thread without modules: nothing to refine
      Iv iv;
      iv.kind = IvKind::kCoreOp;
      iv.start = op.start_ns;
      iv.end = op.end_ns;
      t->second.ivs.push_back(iv);
    }
  }

  // The module interval enclosing ivs[i] (the nearest module among its ancestors), -1 for none.
  static int32_t parent_module(const ThreadTree& tree, std::size_t i) {
    int32_t p = tree.ivs[i].parent;
    while (p >= 0 && tree.ivs[static_cast<std::size_t>(p)].kind != IvKind::kModule)
      p = tree.ivs[static_cast<std::size_t>(p)].parent;
    return p;
  }

  // A module's class as the rules read it: an MLP holding a router or experts (gpt-oss's
  // GptOssMLP) is an MoE block.
  ModClass eff(const Iv& iv) const {
    if (iv.kind == IvKind::kModule && iv.module < block_.size() && block_[iv.module])
      return ModClass::kMoeBlock;
    return iv.cls;
  }

  // MoE blocks by class ("…SparseMoeBlock", "…MoeBlock", "…MoE", "…Moe"), or by the tree: an
  // MLP whose direct children include a router or experts module.
  void find_moe_blocks(const ThreadTree& tree) {
    for (std::size_t i = 0; i < tree.ivs.size(); ++i) {
      const Iv& iv = tree.ivs[i];
      if (iv.kind != IvKind::kModule) continue;
      if (iv.cls == ModClass::kMoeBlock) block_[iv.module] = 1;
      if (iv.cls != ModClass::kRouter && iv.cls != ModClass::kExperts) continue;
      const int32_t p = parent_module(tree, i);
      if (p >= 0 && tree.ivs[static_cast<std::size_t>(p)].cls == ModClass::kMlp)
        block_[tree.ivs[static_cast<std::size_t>(p)].module] = 1;
    }
  }

  // What each direct child of an MoE block computes (docs/kernels.md, "Parts"): a router class is
  // the router, an experts class the routed experts; an MLP is the shared expert when the block
  // also holds an experts module (transformers 5), else one of the routed experts (the expert
  // list of transformers 4); a bare Linear is the shared expert's gate when the block holds a
  // router module, else the first one the block calls is the router (the `gate` Linear of
  // transformers 4) and later ones the shared expert's gate; a norm is the experts'; any other
  // class is unplaced.
  void moe_roles(const ThreadTree& tree) {
    std::map<int32_t, std::vector<int32_t>> kids;  // block interval -> direct module children
    for (std::size_t i = 0; i < tree.ivs.size(); ++i) {
      if (tree.ivs[i].kind != IvKind::kModule) continue;
      const int32_t p = parent_module(tree, i);
      if (p >= 0 && eff(tree.ivs[static_cast<std::size_t>(p)]) == ModClass::kMoeBlock)
        kids[p].push_back(static_cast<int32_t>(i));
    }
    for (const auto& [block, children] : kids) {
      bool router = false, experts = false, first_linear = true;
      // A ParamWrapper stands for the first module inside it that is not one (PEFT nests one
      // per wrapped parameter); with none inside it, it stays unplaced.
      auto wrapped = [&](int32_t k) {
        const Iv& iv = tree.ivs[static_cast<std::size_t>(k)];
        if (iv.cls != ModClass::kPeftParamWrapper) return eff(iv);
        for (std::size_t j = static_cast<std::size_t>(k) + 1;
             j < tree.ivs.size() && tree.ivs[j].start < iv.end; ++j) {
          const Iv& in = tree.ivs[j];
          if (in.kind == IvKind::kModule && in.cls != ModClass::kPeftParamWrapper &&
              in.cls != ModClass::kOther)
            return eff(in);
        }
        return ModClass::kOther;
      };
      for (int32_t k : children) {
        const ModClass c = wrapped(k);
        router |= c == ModClass::kRouter;
        experts |= c == ModClass::kExperts;
      }
      for (int32_t k : children) {  // in call order: ivs are by start
        const Iv& iv = tree.ivs[static_cast<std::size_t>(k)];
        Role r = Role::kUnplaced;
        switch (wrapped(k)) {
          case ModClass::kRouter:
            r = Role::kRouter;
            break;
          case ModClass::kExperts:
          case ModClass::kNorm:
            r = Role::kExperts;
            break;
          case ModClass::kMlp:
            r = experts ? Role::kShared : Role::kExperts;
            break;
          case ModClass::kLinear:
            r = router || !first_linear ? Role::kShared : Role::kRouter;
            first_linear = false;
            break;
          default:
            break;
        }
        role_[iv.module] = r;
      }
    }
  }

  // A decoder layer's own norms (input, post-attention, pre/post feed-forward, ...) take the part
  // of the module they sit beside: the one just before them if that is the attention, dense MLP
  // or experts module, else the one just after; the layer's closing norm is `other`.
  void layer_norm_parts(ThreadTree& tree) {
    std::map<int32_t, std::vector<int32_t>> children;  // layer -> direct module children
    for (std::size_t i = 0; i < tree.ivs.size(); ++i) {
      if (tree.ivs[i].kind != IvKind::kModule) continue;
      int32_t p = tree.ivs[i].parent;
      while (p >= 0 && tree.ivs[static_cast<std::size_t>(p)].kind != IvKind::kModule)
        p = tree.ivs[static_cast<std::size_t>(p)].parent;
      if (p >= 0 && tree.ivs[static_cast<std::size_t>(p)].cls == ModClass::kDecoderLayer)
        children[p].push_back(static_cast<int32_t>(i));
    }
    for (const auto& [layer, kids] : children) {
      for (std::size_t j = 0; j < kids.size(); ++j) {
        Iv& k = tree.ivs[static_cast<std::size_t>(kids[j])];
        if (k.cls != ModClass::kNorm) continue;
        const ModClass prev =
            j > 0 ? eff(tree.ivs[static_cast<std::size_t>(kids[j - 1])]) : ModClass::kOther;
        const ModClass next = j + 1 < kids.size()
                                  ? eff(tree.ivs[static_cast<std::size_t>(kids[j + 1])])
                                  : ModClass::kOther;
        k.norm_part = norm_neighbour(prev)   ? part_of(prev, false)
                      : norm_neighbour(next) ? part_of(next, false)
                                             : StepPart::kOther;
      }
    }
  }

  // The tag of the code running at chain[0..n) (innermost first), forward phase.
  Resolved resolve(const ThreadTree& tree, const std::vector<int32_t>& chain, std::size_t n) const {
    Resolved r;
    bool core = false, mask = false, loss = false, emb = false, rot = false, text = false,
         causal = false;
    int32_t layer_iv = -1, direct = -1, last_module = -1, role_iv = -1;
    ModClass part_mod = ModClass::kOther;
    bool part_core = false, base = false;
    for (std::size_t p = 0; p < n; ++p) {
      const Iv& iv = tree.ivs[static_cast<std::size_t>(chain[p])];
      switch (iv.kind) {
        case IvKind::kAttentionFunction:
        case IvKind::kCoreOp:
          core = true;
          break;
        case IvKind::kMaskFunction:
          mask = true;
          break;
        case IvKind::kLossFunction:
          loss = true;
          break;
        case IvKind::kBackwardCall:
        case IvKind::kNode:
          break;
        case IvKind::kModule:
          r.any_module = true;
          if (layer_iv < 0) {
            if (iv.cls == ModClass::kDecoderLayer) {
              layer_iv = chain[p];
              direct = last_module;
            } else if (is_part_module(eff(iv))) {
              part_mod = eff(iv);  // scanning outwards: the last one is the outermost
              part_core = core;
            }
            if (role_[iv.module] != Role::kNone) role_iv = chain[p];  // the outermost
          }
          emb |= iv.cls == ModClass::kEmbedding;
          rot |= iv.cls == ModClass::kRotary;
          text |= iv.cls == ModClass::kTextModel;
          // "…Model" inside the innermost "…ForCausalLM" (LlamaModel): the decoder stack, as a
          // TextModel is (PEFT's LoraModel, outside it, is not).
          text |= base && iv.cls == ModClass::kCausalLm && !causal;
          base |= iv.cls == ModClass::kBaseModel;
          causal |= iv.cls == ModClass::kCausalLm;
          if (layer_iv < 0) last_module = chain[p];
          break;
      }
    }
    StepTag& t = r.tag;
    t.phase = StepPhase::kForward;
    if (layer_iv >= 0) {
      const Iv& layer = tree.ivs[static_cast<std::size_t>(layer_iv)];
      auto li = layer_of_.find(layer.module);
      t.layer = li == layer_of_.end() ? -1 : li->second;
      t.layer_kind = type_of_layer(t.layer);
      r.ok = true;
      const Role role =
          role_iv >= 0 ? role_[tree.ivs[static_cast<std::size_t>(role_iv)].module] : Role::kNone;
      if (role == Role::kUnplaced) {
        r.ok = false;
        r.unplaced = tree.ivs[static_cast<std::size_t>(role_iv)].module;
      } else if (role != Role::kNone) {
        t.part = role == Role::kRouter    ? StepPart::kRouter
                 : role == Role::kExperts ? StepPart::kExperts
                                          : StepPart::kSharedExperts;
      } else if (part_mod != ModClass::kOther) {
        t.part = part_of(part_mod, part_core);
      } else if (direct >= 0 && tree.ivs[static_cast<std::size_t>(direct)].cls == ModClass::kNorm) {
        t.part = tree.ivs[static_cast<std::size_t>(direct)].norm_part;
      } else if (direct >= 0) {
        // a module in the layer no rule names: its time is listed under its name, not guessed
        r.ok = false;
        r.unplaced = tree.ivs[static_cast<std::size_t>(direct)].module;
      } else {
        t.part = StepPart::kOther;
      }
    } else if (emb) {
      t.part = StepPart::kEmbedding;
      r.ok = true;
    } else if (rot) {
      t.part = StepPart::kAttentionProj;
      r.ok = true;
    } else if (mask) {
      t.part = StepPart::kAttentionCore;
      r.ok = true;
    } else if (text) {
      t.part = StepPart::kOther;
      r.ok = true;
    } else if (causal || loss) {
      t.phase = StepPhase::kLoss;
      t.part = StepPart::kLossHead;
      r.ok = true;
    }
    return r;
  }

  // Where the code running on `tid` at `t` belongs (a row's launch call, a memory event's
  // allocation): docs/kernels.md, "Parts". `chain` and `fwd_chain` are scratch.
  struct Place {
    std::optional<StepTag> tag;
    PlaceWhy why = PlaceWhy::kNoModule;
    uint32_t outside_op = kNoName;  // set: placed by this op outside the model's modules
    int64_t unplaced = -1;          // kUnplaced: the module no rule places
    StepPhase unplaced_phase = StepPhase::kForward;
    bool linked = false;            // a backward placement through a fwdbwd flow
    bool linked_enclosing = false;  // of those: through the flow of an enclosing backward op
    Via via = Via::kOwn;            // of those: how the backward op came by its flow
  };

  Place place(int64_t tid, int64_t t, std::vector<int32_t>& chain,
              std::vector<int32_t>& fwd_chain) {
    Place pl;
    if (optimizer_.contains(tid, t)) {
      pl.tag = StepTag{StepPhase::kOptimizer, StepPart::kOther, -1, std::nullopt};
      pl.why = PlaceWhy::kTagged;
      return pl;
    }
    auto tr = trees_.find(tid);
    if (tr != trees_.end()) tr->second.chain(t, chain);
    else chain.clear();
    std::size_t node = chain.size();
    bool backward_call = false;
    for (std::size_t p = 0; p < chain.size(); ++p) {
      const IvKind k = tr->second.ivs[static_cast<std::size_t>(chain[p])].kind;
      if (k == IvKind::kNode) {
        node = p;
        break;
      }
      backward_call |= k == IvKind::kBackwardCall;
    }
    if (node == chain.size()) {
      Resolved r = chain.empty() ? Resolved{} : resolve(tr->second, chain, chain.size());
      if (r.ok) {
        pl.tag = r.tag;
      } else if (r.unplaced >= 0) {
        pl.why = PlaceWhy::kUnplaced;
        pl.unplaced = r.unplaced;
      } else if (r.any_module) {
        pl.why = PlaceWhy::kNoPart;
      } else if ((pl.outside_op = outermost_op(tid, t)) != kNoName) {
        // The harness's own code around the model: its op is known, its module is none.
        pl.tag = StepTag{backward_call ? StepPhase::kBackward : StepPhase::kForward,
                         StepPart::kOther, -1, std::nullopt};
      }
    } else {
      Resolved r = resolve(tr->second, chain, node);
      if (r.any_module || r.ok) {  // forward code run inside a backward op: a recompute
        if (r.ok) {
          pl.tag = r.tag;
          pl.tag->phase = StepPhase::kRecompute;
        } else if (r.unplaced >= 0) {
          pl.why = PlaceWhy::kUnplaced;
          pl.unplaced = r.unplaced;
          pl.unplaced_phase = StepPhase::kRecompute;
        } else {
          pl.why = PlaceWhy::kNoPart;
        }
      } else {
        const Iv& bw = tr->second.ivs[static_cast<std::size_t>(chain[node])];
        const std::pair<int64_t, int64_t>* s = flow_start(bw.flow);
        std::optional<StepTag> outer;
        if (s == nullptr) outer = enclosing_link(tr->second, chain, node);
        if (s == nullptr && outer) {
          // The autograd engine's glue inside an enclosing backward op: a reentrant
          // checkpoint's backward runs its layer's recompute and nodes inside one op.
          pl.tag = outer;
          pl.linked = pl.linked_enclosing = true;
        } else if (s == nullptr) {
          pl.why = PlaceWhy::kUnlinked;
        } else {
          Resolved fr = resolve_flow_start(*s, fwd_chain);
          if (fr.ok) {
            pl.tag = backward_of(fr.tag);
            pl.linked = true;
            pl.via = bw.via;
          } else if (fr.unplaced >= 0) {
            pl.why = PlaceWhy::kUnplaced;
            pl.unplaced = fr.unplaced;
            pl.unplaced_phase = StepPhase::kBackward;
          } else if (fr.any_module) {
            pl.why = PlaceWhy::kNoPart;
          } else {
            // The backward of an op the harness ran outside every module.
            pl.tag = StepTag{StepPhase::kBackward, StepPart::kOther, -1, std::nullopt};
            pl.outside_op = bw.name_id;
          }
        }
      }
    }
    if (pl.tag) pl.why = PlaceWhy::kTagged;
    else pl.outside_op = kNoName;
    return pl;
  }

  void attribute_rows() {
    TracePartsCounts& n = out_.counts;
    std::vector<int32_t> chain, fwd_chain;
    for (const PartsRow& row : in_.rows) {
      ++n.rows;
      if (!row.launched) {
        ++n.untagged_no_launch;
        add(row, std::nullopt);
        continue;
      }
      const Place pl = place(row.tid, row.launch_ns, chain, fwd_chain);
      n.linked += pl.linked;
      n.linked_enclosing += pl.linked_enclosing;
      n.linked_evaluate += pl.linked && pl.via == Via::kSequence;
      n.linked_accumulate += pl.linked && pl.via == Via::kAfter;
      switch (pl.why) {
        case PlaceWhy::kTagged:
          break;
        case PlaceWhy::kNoModule:
          ++n.untagged_no_module;
          break;
        case PlaceWhy::kUnlinked:
          ++n.untagged_unlinked;
          break;
        case PlaceWhy::kNoPart:
          ++n.untagged_no_part;
          break;
        case PlaceWhy::kUnplaced:
          ++n.untagged_unplaced;
          add_unplaced(row, pl.unplaced, pl.unplaced_phase);
          break;
      }
      if (pl.tag && pl.outside_op != kNoName) add_outside(row, pl.outside_op, pl.tag->phase);
      add(row, pl.tag);
    }
    finish();
  }

 public:
  // Rows that carry their attribution (tprobe's own traces): each as written, no rule run.
  void run_recorded() {
    TracePartsCounts& n = out_.counts;
    for (const PartsRow& row : in_.rows) {
      ++n.rows;
      std::optional<StepTag> tag;
      if (row.recorded_tag >= 0) {
        ++n.recorded;
        tag = in_.recorded_tags[static_cast<std::size_t>(row.recorded_tag)];
      }
      add(row, tag);
    }
    finish();
  }

  // Every point, by the rule of place(); after run().
  void place_points(const std::vector<PartsPoint>& points, std::vector<PointPlace>& placed) {
    std::vector<int32_t> chain, fwd_chain;
    placed.clear();
    placed.reserve(points.size());
    for (const PartsPoint& p : points) {
      const Place pl = place(p.tid, p.ts_ns, chain, fwd_chain);
      PointPlace out;
      out.tagged = pl.tag.has_value();
      if (pl.tag) out.tag = *pl.tag;
      out.why = pl.why;
      if (pl.outside_op != kNoName)
        out.outside_op = in_.op_names && pl.outside_op < in_.op_names->size()
                             ? (*in_.op_names)[pl.outside_op]
                             : "?";
      placed.push_back(std::move(out));
    }
  }

 private:
  // The outermost cpu_op of `tid` holding `t` (ends inclusive), kNoName when none does. A
  // thread's top-level ops are sorted once, on the first row of that thread that asks.
  uint32_t outermost_op(int64_t tid, int64_t t) {
    auto it = top_ops_.find(tid);
    if (it == top_ops_.end()) it = top_ops_.emplace(tid, top_level_ops(tid)).first;
    const std::vector<const PartsOp*>& v = it->second;
    auto r = std::upper_bound(v.begin(), v.end(), t,
                              [](int64_t x, const PartsOp* op) { return x < op->start_ns; });
    if (r == v.begin()) return kNoName;
    --r;
    return t <= (*r)->end_ns ? (*r)->name_id : kNoName;
  }

  std::vector<const PartsOp*> top_level_ops(int64_t tid) const {
    std::vector<const PartsOp*> v, top;
    if (!in_.ops) return top;
    for (const PartsOp& op : *in_.ops) {
      if (op.tid == tid) v.push_back(&op);
    }
    std::sort(v.begin(), v.end(), [](const PartsOp* a, const PartsOp* b) {
      return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
    });
    for (const PartsOp* op : v) {
      // inside the last top-level op: not top-level (a partial overlap starts a new one)
      if (!top.empty() && op->end_ns <= top.back()->end_ns) continue;
      top.push_back(op);
    }
    return top;
  }

  void add_unplaced(const PartsRow& row, int64_t module, StepPhase phase) {
    const std::string cls = class_of(in_.module_names[static_cast<std::size_t>(module)]);
    UnplacedModuleRow& u = unplaced_[{cls, static_cast<int>(phase)}];
    if (u.module.empty()) {
      u.module = cls;
      u.phase = to_string(phase);
    }
    ++u.rows;
    const int64_t d = row.end_ns - row.start_ns;
    if (row.kind != ActivityKind::kKernel) {
      u.memcpy_memset_ns += d;
      return;
    }
    ++u.kernels;
    u.kernel_ns += d;
    out_.unplaced_kernel_ns += d;
  }

  void add_outside(const PartsRow& row, uint32_t op, StepPhase phase) {
    ++out_.counts.outside_model;
    OutsideModelRow& o = outside_[{op, static_cast<int>(phase)}];
    if (o.op.empty()) {
      o.op = in_.op_names && op < in_.op_names->size() ? (*in_.op_names)[op] : "?";
      o.phase = to_string(phase);
    }
    ++o.rows;
    const int64_t d = row.end_ns - row.start_ns;
    if (row.kind != ActivityKind::kKernel) {
      o.memcpy_memset_ns += d;
      return;
    }
    ++o.kernels;
    o.kernel_ns += d;
    out_.outside_model_kernel_ns += d;
  }

  // What the forward op at a flow's start (thread, ts) resolves to: its enclosing modules, up to
  // its own innermost backward op when it ran inside one (a recompute). `fwd` is scratch.
  Resolved resolve_flow_start(const std::pair<int64_t, int64_t>& at, std::vector<int32_t>& fwd) {
    fwd.clear();
    auto ft = trees_.find(at.first);
    if (ft == trees_.end()) return Resolved{};
    ft->second.chain(at.second, fwd);
    if (fwd.empty()) return Resolved{};
    std::size_t fnode = fwd.size();
    for (std::size_t q = 0; q < fwd.size(); ++q) {
      if (ft->second.ivs[static_cast<std::size_t>(fwd[q])].kind == IvKind::kNode) {
        fnode = q;
        break;
      }
    }
    return resolve(ft->second, fwd, fnode);
  }

  // A row launched in a backward op with no flow of its own: the nearest enclosing backward op
  // whose flow names a forward op gives the tag (backward of that op: for a reentrant
  // checkpoint, the checkpoint call), and the decoder layer that op recomputes inside it, when it
  // recomputes one, gives the layer — the layer's backward `other`, as tprobe's own engine files
  // its glue. Nothing without a flow: the negative control (no fwdbwd events) stays untagged.
  std::optional<StepTag> enclosing_link(const ThreadTree& tree, const std::vector<int32_t>& chain,
                                        std::size_t node) {
    std::vector<int32_t> fwd;
    for (std::size_t p = node + 1; p < chain.size(); ++p) {
      const Iv& iv = tree.ivs[static_cast<std::size_t>(chain[p])];
      if (iv.kind != IvKind::kNode || iv.flow < 0) continue;
      const std::pair<int64_t, int64_t>* s = flow_start(iv.flow);
      if (s == nullptr) continue;
      Resolved fr = resolve_flow_start(*s, fwd);
      if (!fr.ok) continue;
      StepTag tag = backward_of(fr.tag);
      if (tag.layer < 0) {
        // the decoder layer recomputed inside this op (the first one that starts in it)
        auto from = std::lower_bound(tree.starts.begin(), tree.starts.end(), iv.start);
        for (auto k = static_cast<std::size_t>(from - tree.starts.begin()); k < tree.ivs.size();
             ++k) {
          const Iv& m = tree.ivs[k];
          if (m.start > iv.end) break;  // ivs are by start ascending
          if (m.kind != IvKind::kModule || m.cls != ModClass::kDecoderLayer) continue;
          auto li = layer_of_.find(m.module);
          if (li == layer_of_.end()) continue;
          tag.layer = li->second;
          tag.layer_kind = type_of_layer(tag.layer);
          tag.part = StepPart::kOther;
          break;
        }
      }
      return tag;
    }
    return std::nullopt;
  }

  struct Key {
    int phase, kind, part;  // ranks; phase 100: untagged
    bool operator<(const Key& o) const {
      return std::tie(phase, kind, part) < std::tie(o.phase, o.kind, o.part);
    }
  };

  void add(const PartsRow& row, const std::optional<StepTag>& tag) {
    const int64_t d = row.end_ns - row.start_ns;
    first_ = std::min(first_, row.start_ns);
    last_ = std::max(last_, row.end_ns);
    if (tag) ++out_.counts.attributed;
    else ++out_.counts.untagged;
    Key k = tag ? Key{static_cast<int>(tag->phase), layer_kind_rank(tag->layer_kind),
                      static_cast<int>(tag->part)}
                : Key{100, layer_kind_rank(std::nullopt), 100};
    PartRow& r = rows_[k];
    StepBreakdown& b = out_.breakdown;
    if (r.phase.empty()) {
      r.phase = tag ? to_string(tag->phase) : "untagged";
      r.part = tag ? to_string(tag->part) : "untagged";
      r.layer_kind = layer_kind_name(tag ? tag->layer_kind : std::nullopt);
    }
    if (row.kind != ActivityKind::kKernel) {
      r.memcpy_memset_ns += d;
      b.memcpy_memset_ns += d;
      return;
    }
    ++r.kernels;
    r.kernel_ns += d;
    ++b.kernels;
    b.kernel_ns += d;
    if (!tag) b.untagged_kernel_ns += d;
    if (tag && tag->layer >= 0) {
      LayerRow& l = layers_[tag->layer];
      l.layer = tag->layer;
      l.layer_kind = layer_kind_name(tag->layer_kind);
      l.kernel_ns[to_string(tag->phase)][to_string(tag->part)] += d;
    }
  }

  void finish() {
    StepBreakdown& b = out_.breakdown;
    for (auto& [k, r] : rows_) b.rows.push_back(std::move(r));
    for (auto& [i, l] : layers_) b.layers.push_back(std::move(l));
    b.span_ns = first_ <= last_ ? last_ - first_ : 0;
    for (auto& [k, o] : outside_) out_.outside_model.push_back(std::move(o));
    for (auto& [k, u] : unplaced_) out_.unplaced.push_back(std::move(u));
    std::stable_sort(out_.unplaced.begin(), out_.unplaced.end(),
                     [](const UnplacedModuleRow& a, const UnplacedModuleRow& c) {
                       return std::tie(c.kernel_ns, a.module, a.phase) <
                              std::tie(a.kernel_ns, c.module, c.phase);
                     });
    std::stable_sort(out_.outside_model.begin(), out_.outside_model.end(),
                     [](const OutsideModelRow& a, const OutsideModelRow& c) {
                       return std::tie(c.kernel_ns, a.op, a.phase) <
                              std::tie(a.kernel_ns, c.op, c.phase);
                     });
  }

  const PartsInput& in_;
  // The type of decoder layer `layer` by the model's config; none outside the layers or unknown.
  std::optional<LayerType> type_of_layer(int32_t layer) const {
    if (layer < 0 || static_cast<std::size_t>(layer) >= options_.layer_types.size()) {
      return std::nullopt;
    }
    return options_.layer_types[static_cast<std::size_t>(layer)];
  }

  const TracePartsOptions& options_;
  TraceParts& out_;
  std::vector<ModClass> classes_;
  std::map<uint32_t, int32_t> layer_of_;
  std::unordered_map<int64_t, ThreadTree> trees_;
  // Flow id -> (tid, ts) of its one "s" end, by id.
  std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> start_of_;
  RangeSet optimizer_;
  std::map<Key, PartRow> rows_;
  std::map<int32_t, LayerRow> layers_;
  std::map<std::pair<uint32_t, int>, OutsideModelRow> outside_;
  std::map<std::pair<std::string, int>, UnplacedModuleRow> unplaced_;  // by class and phase
  std::vector<uint8_t> block_;  // by module instance: an MoE block
  std::vector<Role> role_;      // by module instance: its part as an MoE block's child
  std::unordered_map<int64_t, std::vector<const PartsOp*>> top_ops_;  // by thread, on demand
  int64_t first_ = INT64_MAX, last_ = INT64_MIN;
};

}  // namespace

TraceParts attribute_trace_parts(const PartsInput& in, const TracePartsOptions& options,
                                 const std::vector<PartsPoint>* points,
                                 std::vector<PointPlace>* placed) {
  TraceParts out;
  if (placed) placed->clear();
  out.python_events = in.python_events;
  out.attribution_off = !options.attribute;
  out.model = options.model;
  out.layer_kinds_known = !options.layer_types.empty();
  out.layer_ffn = options.layer_ffn;
  for (const PyEvent& e : in.python) out.module_events |= e.kind == PyKind::kModule;
  if (!in.recorded_tags.empty() && options.attribute) {
    // tprobe's own trace: the rows' attribution as written, exactly profile's (module events
    // beside it are not consulted).
    out.recorded_tags = true;
    out.layer_kinds_known = true;  // written with each row
    Attributor attributor(in, options, out);
    attributor.run_recorded();
    out.notes.push_back(
        "the rows carry tprobe's own attribution (a trace profile --trace-out wrote): the phase × "
        "part table is profile's, as recorded; no module rule ran");
    return out;
  }
  if (!out.module_events) {
    // Nothing to place the rows with; the flows are still counted for the status line.
    out.counts.rows = in.selected_rows;
    return out;
  }
  Attributor attributor(in, options, out);
  attributor.run();
  if (points && placed) attributor.place_points(*points, *placed);
  if (out.layer_kinds_known && static_cast<std::size_t>(out.decoder_layers.size()) !=
                                   options.layer_types.size()) {
    out.notes.push_back(fmt::format(
        "the trace has {} distinct decoder-layer module(s), the model config ({}) {} layer(s): "
        "is it the traced model's? (layers past the config's have no kind)",
        out.decoder_layers.size(), options.model, options.layer_types.size()));
  }
  for (const std::string& n : options.kind_notes) out.notes.push_back(n);
  if (!out.layer_kinds_known) {
    out.notes.push_back(
        "layer kinds unknown (give --config config.json, --checkpoint DIR or --model NAME)");
  }
  if (out.fwdbwd_links == 0) {
    out.notes.push_back(
        "the trace holds no fwdbwd flows: backward rows cannot be linked to their forward op "
        "and stay untagged");
  }
  return out;
}

}  // namespace detail

}  // namespace tprobe::core
