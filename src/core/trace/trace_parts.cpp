// A user's trace by phase × part × layer: module events and fwdbwd flows to core's vocabulary.
#include "tprobe/core/trace/trace_parts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "base/strict_json.hpp"
#include "base/string_util.hpp"
#include "tprobe/core/base/error.hpp"
#include "trace/trace_parts_internal.hpp"

namespace tprobe::core {
namespace detail {
namespace {

// What a module's class says about the part it computes (docs/kernels.md, "Parts").
enum class ModClass : uint8_t {
  kDecoderLayer,
  kAttention,
  kRouter,
  kExperts,
  kMlp,
  kNorm,
  kEmbedding,
  kRotary,
  kTextModel,
  kCausalLm,
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
  if (ends_with(cls, "DecoderLayer")) return ModClass::kDecoderLayer;
  if (contains(cls, "Rotary")) return ModClass::kRotary;
  if (contains(cls, "Embedding")) return ModClass::kEmbedding;
  if (contains(cls, "Attention")) return ModClass::kAttention;
  if (contains(cls, "Router")) return ModClass::kRouter;
  if (contains(cls, "Experts")) return ModClass::kExperts;
  if (ends_with(cls, "MLP")) return ModClass::kMlp;
  if (contains(cls, "Norm")) return ModClass::kNorm;
  if (ends_with(cls, "TextModel")) return ModClass::kTextModel;
  if (contains(cls, "CausalLM") || contains(cls, "ConditionalGeneration")) return ModClass::kCausalLm;
  return ModClass::kOther;
}

bool is_part_module(ModClass c) {
  return c == ModClass::kAttention || c == ModClass::kRouter || c == ModClass::kExperts ||
         c == ModClass::kMlp;
}
bool norm_neighbour(ModClass c) {  // a layer norm beside these belongs to them
  return c == ModClass::kAttention || c == ModClass::kExperts || c == ModClass::kMlp;
}
StepPart part_of(ModClass c, bool core) {
  switch (c) {
    case ModClass::kAttention:
      return core ? StepPart::kAttentionCore : StepPart::kAttentionProj;
    case ModClass::kRouter:
      return StepPart::kRouter;
    case ModClass::kExperts:
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
    std::map<int64_t, std::pair<int64_t, int64_t>> starts;  // id -> (tid, ts) of the "s" end
    std::map<int64_t, int> seen_s, seen_f;
    for (const FlowEnd& f : in_.flows) (f.start ? seen_s : seen_f)[f.id] += 1;
    for (const FlowEnd& f : in_.flows) {
      if (f.start && seen_s[f.id] == 1) starts[f.id] = {f.tid, f.ts_ns};
    }
    std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> ends;  // (tid, ts) -> ids
    for (const FlowEnd& f : in_.flows) {
      if (f.start) continue;
      if (seen_f[f.id] != 1 || !starts.count(f.id)) {
        ++out_.fwdbwd_unpaired;
        continue;
      }
      ++out_.fwdbwd_links;
      ends[{f.tid, f.ts_ns}].push_back(f.id);
    }
    for (const auto& [id, n] : seen_s) {
      if (n != 1 || !seen_f.count(id)) out_.fwdbwd_unpaired += n;
    }
    start_of_ = std::move(starts);
    // The longest cpu_op at each end.
    std::map<std::pair<int64_t, int64_t>, const PartsOp*> bound;
    if (!ends.empty() && in_.ops) {
      for (const PartsOp& op : *in_.ops) {
        auto it = ends.find({op.tid, op.start_ns});
        if (it == ends.end()) continue;
        const PartsOp*& b = bound[it->first];
        if (b == nullptr || op.end_ns > b->end_ns) b = &op;
      }
    }
    // The bound ops by (thread, sequence number): the node op an evaluate_function range runs.
    std::map<std::pair<int64_t, int64_t>, std::vector<Iv>> by_seq;
    for (const auto& [key, ids] : ends) {
      auto b = bound.find(key);
      if (b == bound.end()) continue;  // no op to bind to: its rows stay with the enclosing range
      ++out_.backward_ops_linked;
      Iv iv;
      iv.kind = IvKind::kNode;
      iv.start = b->second->start_ns;
      iv.end = b->second->end_ns;
      iv.flow = ids.front();  // two flows binding to one op: the first (both name its forward)
      iv.name_id = b->second->name_id;
      trees_[key.first].ivs.push_back(iv);
      if (b->second->seq >= 0) by_seq[{key.first, b->second->seq}].push_back(iv);
    }
    for (auto& [key, v] : by_seq) {
      std::sort(v.begin(), v.end(), [](const Iv& a, const Iv& c) { return a.start < c.start; });
    }
    add_backward_ranges(by_seq);
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
  void add_backward_ranges(const std::map<std::pair<int64_t, int64_t>, std::vector<Iv>>& by_seq) {
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
        auto s = by_seq.find({r.tid, r.seq});
        if (s != by_seq.end()) {
          auto b = std::lower_bound(s->second.begin(), s->second.end(), r.start_ns,
                                    [](const Iv& x, int64_t t) { return x.start < t; });
          if (b != s->second.end() && b->end <= r.end_ns) {
            iv.flow = b->flow;
            iv.name_id = b->name_id;
            iv.via = Via::kSequence;
          }
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
            j > 0 ? tree.ivs[static_cast<std::size_t>(kids[j - 1])].cls : ModClass::kOther;
        const ModClass next = j + 1 < kids.size()
                                  ? tree.ivs[static_cast<std::size_t>(kids[j + 1])].cls
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
    int32_t layer_iv = -1, direct = -1, last_module = -1;
    ModClass part_mod = ModClass::kOther;
    bool part_core = false;
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
            } else if (is_part_module(iv.cls)) {
              part_mod = iv.cls;  // scanning outwards: the last one is the outermost
              part_core = core;
            }
          }
          emb |= iv.cls == ModClass::kEmbedding;
          rot |= iv.cls == ModClass::kRotary;
          text |= iv.cls == ModClass::kTextModel;
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
      t.layer_kind = t.layer >= 0 && static_cast<std::size_t>(t.layer) < options_.layer_kinds.size()
                         ? options_.layer_kinds[static_cast<std::size_t>(t.layer)]
                         : LayerKind::kNone;
      if (part_mod != ModClass::kOther) {
        t.part = part_of(part_mod, part_core);
      } else if (direct >= 0 && tree.ivs[static_cast<std::size_t>(direct)].cls == ModClass::kNorm) {
        t.part = tree.ivs[static_cast<std::size_t>(direct)].norm_part;
      } else {
        t.part = StepPart::kOther;
      }
      r.ok = true;
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
    bool linked = false;            // a backward placement through a fwdbwd flow
    bool linked_enclosing = false;  // of those: through the flow of an enclosing backward op
    Via via = Via::kOwn;            // of those: how the backward op came by its flow
  };

  Place place(int64_t tid, int64_t t, std::vector<int32_t>& chain,
              std::vector<int32_t>& fwd_chain) {
    Place pl;
    if (optimizer_.contains(tid, t)) {
      pl.tag = StepTag{StepPhase::kOptimizer, StepPart::kOther, -1, LayerKind::kNone};
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
      } else if (r.any_module) {
        pl.why = PlaceWhy::kNoPart;
      } else if ((pl.outside_op = outermost_op(tid, t)) != kNoName) {
        // The harness's own code around the model: its op is known, its module is none.
        pl.tag = StepTag{backward_call ? StepPhase::kBackward : StepPhase::kForward,
                         StepPart::kOther, -1, LayerKind::kNone};
      }
    } else {
      Resolved r = resolve(tr->second, chain, node);
      if (r.any_module || r.ok) {  // forward code run inside a backward op: a recompute
        if (r.ok) {
          pl.tag = r.tag;
          pl.tag->phase = StepPhase::kRecompute;
        } else {
          pl.why = PlaceWhy::kNoPart;
        }
      } else {
        const Iv& bw = tr->second.ivs[static_cast<std::size_t>(chain[node])];
        auto s = bw.flow >= 0 ? start_of_.find(bw.flow) : start_of_.end();
        std::optional<StepTag> outer;
        if (s == start_of_.end()) outer = enclosing_link(tr->second, chain, node);
        if (s == start_of_.end() && outer) {
          // The autograd engine's glue inside an enclosing backward op: a reentrant
          // checkpoint's backward runs its layer's recompute and nodes inside one op.
          pl.tag = outer;
          pl.linked = pl.linked_enclosing = true;
        } else if (s == start_of_.end()) {
          pl.why = PlaceWhy::kUnlinked;
        } else {
          Resolved fr = resolve_flow_start(s->second, fwd_chain);
          if (fr.ok) {
            pl.tag = backward_of(fr.tag);
            pl.linked = true;
            pl.via = bw.via;
          } else if (fr.any_module) {
            pl.why = PlaceWhy::kNoPart;
          } else {
            // The backward of an op the harness ran outside every module.
            pl.tag = StepTag{StepPhase::kBackward, StepPart::kOther, -1, LayerKind::kNone};
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
      }
      if (pl.tag && pl.outside_op != kNoName) add_outside(row, pl.outside_op, pl.tag->phase);
      add(row, pl.tag);
    }
    finish();
  }

 public:
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
      auto s = start_of_.find(iv.flow);
      if (s == start_of_.end()) continue;
      Resolved fr = resolve_flow_start(s->second, fwd);
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
          tag.layer_kind =
              static_cast<std::size_t>(tag.layer) < options_.layer_kinds.size()
                  ? options_.layer_kinds[static_cast<std::size_t>(tag.layer)]
                  : LayerKind::kNone;
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
    Key k = tag ? Key{static_cast<int>(tag->phase), kind_rank(tag->layer_kind),
                      static_cast<int>(tag->part)}
                : Key{100, kind_rank(LayerKind::kNone), 100};
    PartRow& r = rows_[k];
    StepBreakdown& b = out_.breakdown;
    if (r.phase.empty()) {
      r.phase = tag ? to_string(tag->phase) : "untagged";
      r.part = tag ? to_string(tag->part) : "untagged";
      r.layer_kind = tag ? to_string(tag->layer_kind) : "-";
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
      l.layer_kind = to_string(tag->layer_kind);
      l.kernel_ns[to_string(tag->phase)][to_string(tag->part)] += d;
    }
  }

  static int kind_rank(LayerKind k) {
    return k == LayerKind::kSliding ? 0 : k == LayerKind::kFull ? 1 : 2;
  }

  void finish() {
    StepBreakdown& b = out_.breakdown;
    for (auto& [k, r] : rows_) b.rows.push_back(std::move(r));
    for (auto& [i, l] : layers_) b.layers.push_back(std::move(l));
    b.span_ns = first_ <= last_ ? last_ - first_ : 0;
    for (auto& [k, o] : outside_) out_.outside_model.push_back(std::move(o));
    std::stable_sort(out_.outside_model.begin(), out_.outside_model.end(),
                     [](const OutsideModelRow& a, const OutsideModelRow& c) {
                       return std::tie(c.kernel_ns, a.op, a.phase) <
                              std::tie(a.kernel_ns, c.op, c.phase);
                     });
  }

  const PartsInput& in_;
  const TracePartsOptions& options_;
  TraceParts& out_;
  std::vector<ModClass> classes_;
  std::map<uint32_t, int32_t> layer_of_;
  std::unordered_map<int64_t, ThreadTree> trees_;
  std::map<int64_t, std::pair<int64_t, int64_t>> start_of_;
  RangeSet optimizer_;
  std::map<Key, PartRow> rows_;
  std::map<int32_t, LayerRow> layers_;
  std::map<std::pair<uint32_t, int>, OutsideModelRow> outside_;
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
  out.layer_kinds_known = !options.layer_kinds.empty();
  for (const PyEvent& e : in.python) out.module_events |= e.kind == PyKind::kModule;
  if (!out.module_events) {
    // Nothing to place the rows with; the flows are still counted for the status line.
    out.counts.rows = in.selected_rows;
    return out;
  }
  Attributor attributor(in, options, out);
  attributor.run();
  if (points && placed) attributor.place_points(*points, *placed);
  if (out.layer_kinds_known && static_cast<std::size_t>(out.decoder_layers.size()) !=
                                   options.layer_kinds.size()) {
    out.notes.push_back(fmt::format(
        "the trace has {} distinct decoder-layer module(s), the model config ({}) {} layer(s): "
        "is it the traced model's? (layers past the config's have no kind)",
        out.decoder_layers.size(), options.model, options.layer_kinds.size()));
  }
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

namespace {

std::string secs(int64_t ns) { return format_seconds(static_cast<double>(ns) * 1e-9); }

int kind_rank(const std::string& k) { return k == "sliding" ? 0 : k == "full" ? 1 : 2; }
int part_rank(const std::string& p) {
  auto v = parse_step_part(p);
  return v ? static_cast<int>(*v) : 100;
}
int phase_rank(const std::string& p) {
  auto v = parse_step_phase(p);
  return v ? static_cast<int>(*v) : 100;
}

// At most `n` bytes of `s`, cut at a UTF-8 character boundary.
std::string clip(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

std::string span_share(int64_t ns, int64_t of) {
  return of > 0 ? format_percent(static_cast<double>(ns) / static_cast<double>(of)) : "-";
}

}  // namespace

std::string trace_parts_hint() {
  return "no module events in this trace: record it with torch.profiler.profile(..., "
         "with_stack=True) for the phase × part table (with_modules=True alone records none for "
         "an eager model); the phase split above is from the launching ops";
}

std::string trace_parts_why_none(const TraceParts& p) {
  return p.attribution_off ? "the phase × part attribution was turned off (--parts off)"
                           : trace_parts_hint();
}

Json to_json(const TraceParts& p) {
  Json out;
  const TracePartsCounts& c = p.counts;
  out["parts"] = {{"module_events", p.module_events},
                  {"attribution_off", p.attribution_off},
                  {"python_events", p.python_events},
                  {"module_event_count", p.module_event_count},
                  {"fwdbwd_links", p.fwdbwd_links},
                  {"fwdbwd_unpaired", p.fwdbwd_unpaired},
                  {"backward_ops_linked", p.backward_ops_linked},
                  {"decoder_layers", p.decoder_layers},
                  {"model", p.model.empty() ? Json(nullptr) : Json(p.model)},
                  {"layer_kinds_known", p.layer_kinds_known},
                  {"notes", p.notes},
                  {"hint", p.module_events ? Json(nullptr) : Json(trace_parts_why_none(p))}};
  out["attribution"] = {{"rows", c.rows},
                        {"attributed_rows", c.attributed},
                        {"linked_rows", c.linked},
                        {"linked_enclosing_rows", c.linked_enclosing},
                        {"linked_evaluate_rows", c.linked_evaluate},
                        {"linked_accumulate_rows", c.linked_accumulate},
                        {"untagged_rows", c.untagged},
                        {"untagged_no_launch_rows", c.untagged_no_launch},
                        {"untagged_no_module_rows", c.untagged_no_module},
                        {"untagged_unlinked_rows", c.untagged_unlinked},
                        {"untagged_no_part_rows", c.untagged_no_part},
                        {"outside_model_rows", c.outside_model}};
  if (!p.module_events) {
    out["by_phase_part"] = nullptr;
    out["by_layer"] = nullptr;
    out["outside_model"] = nullptr;
    return out;
  }
  Json outside = Json::array();
  for (const OutsideModelRow& o : p.outside_model) {
    outside.push_back({{"op", o.op},
                       {"phase", o.phase},
                       {"rows", o.rows},
                       {"kernels", o.kernels},
                       {"kernel_s", static_cast<double>(o.kernel_ns) * 1e-9},
                       {"memcpy_memset_s", static_cast<double>(o.memcpy_memset_ns) * 1e-9}});
  }
  out["outside_model"] = std::move(outside);
  out["attribution"]["outside_model_kernel_s"] = static_cast<double>(p.outside_model_kernel_ns) * 1e-9;
  out["attribution"]["outside_model_kernel_share_ratio"] =
      p.breakdown.kernel_ns > 0
          ? static_cast<double>(p.outside_model_kernel_ns) / static_cast<double>(p.breakdown.kernel_ns)
          : 0.0;
  const Json b = to_json(p.breakdown);
  out["by_phase_part"] = b["rows"];
  out["by_layer"] = b["layers"];
  out["attribution"]["kernels"] = p.breakdown.kernels;
  out["attribution"]["kernel_s"] = b["kernel_s"];
  out["attribution"]["kernel_ns"] = p.breakdown.kernel_ns;
  out["attribution"]["memcpy_memset_s"] = b["memcpy_memset_s"];
  out["attribution"]["span_s"] = b["span_s"];
  out["attribution"]["untagged_kernel_s"] = b["untagged_kernel_s"];
  out["attribution"]["untagged_kernel_share_ratio"] = b["untagged_kernel_share_ratio"];
  return out;
}

Table phase_part_matrix(const StepBreakdown& b, const std::string& title,
                        const std::vector<std::string>& phases, int64_t span_ns) {
  Table m(title);
  m.column("layers", Align::kLeft).column("part", Align::kLeft);
  for (const auto& ph : phases) m.column(ph);
  m.column("all phases");
  if (span_ns >= 0) m.column("of span");
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& r : b.rows) {
    std::pair<std::string, std::string> k{r.layer_kind, r.part};
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& c) {
    return std::make_pair(kind_rank(a.first), part_rank(a.second)) <
           std::make_pair(kind_rank(c.first), part_rank(c.second));
  });
  auto cell = [&](const std::string& kind, const std::string& part, const std::string& phase) {
    int64_t ns = 0;
    for (const auto& r : b.rows) {
      if (r.layer_kind == kind && r.part == part && r.phase == phase) ns += r.kernel_ns;
    }
    return ns;
  };
  for (const auto& [kind, part] : keys) {
    std::vector<std::string> row = {kind, part};
    int64_t all = 0;
    for (const auto& ph : phases) {
      const int64_t ns = cell(kind, part, ph);
      all += ns;
      row.push_back(ns > 0 ? secs(ns) : "");
    }
    row.push_back(secs(all));
    if (span_ns >= 0) row.push_back(span_share(all, span_ns));
    m.row(std::move(row));
  }
  m.separator();
  std::vector<std::string> total = {"all", "all"};
  for (const auto& ph : phases) {
    int64_t ns = 0;
    for (const auto& r : b.rows) {
      if (r.phase == ph) ns += r.kernel_ns;
    }
    total.push_back(ns > 0 ? secs(ns) : "");
  }
  total.push_back(secs(b.kernel_ns));
  if (span_ns >= 0) total.push_back(span_share(b.kernel_ns, span_ns));
  m.row(std::move(total));
  return m;
}

Table layer_matrix(const StepBreakdown& b, const std::string& title,
                   const std::vector<std::string>& phases) {
  Table t(title);
  t.column("layer").column("kind", Align::kLeft);
  for (const auto& ph : phases) t.column(ph);
  t.column("all phases");
  for (const LayerRow& l : b.layers) {
    std::vector<std::string> row = {std::to_string(l.layer), l.layer_kind};
    int64_t all = 0;
    for (const auto& ph : phases) {
      int64_t ns = 0;
      auto it = l.kernel_ns.find(ph);
      if (it != l.kernel_ns.end()) {
        for (const auto& [part, v] : it->second) ns += v;
      }
      all += ns;
      row.push_back(ns > 0 ? secs(ns) : "");
    }
    row.push_back(secs(all));
    t.row(std::move(row));
  }
  return t;
}

std::vector<Table> trace_parts_tables(const TraceParts& p, const std::string& title_prefix) {
  std::vector<Table> out;
  if (!p.module_events) {
    Table t(title_prefix + "Parts");
    t.column(trace_parts_why_none(p), Align::kLeft);
    out.push_back(t);
    return out;
  }
  const std::vector<std::string> phases = {"forward",  "loss",      "recompute",
                                           "backward", "optimizer", "untagged"};
  const StepBreakdown& b = p.breakdown;
  Table m = phase_part_matrix(
      b,
      fmt::format("{}where the trace's device time went, by phase and part (kernel time over the "
                  "selected steps; share of the device span {})",
                  title_prefix, secs(b.span_ns)),
      phases, b.span_ns);
  const TracePartsCounts& c = p.counts;
  auto share = [&](int64_t ns) {
    return b.kernel_ns > 0 ? format_percent(double(ns) / double(b.kernel_ns)) : std::string("-");
  };
  m.note(fmt::format(
      "{} of {} device rows placed ({} backward rows through a fwdbwd flow, {} of them through "
      "the flow of an enclosing backward op, {} through the node op of their evaluate_function "
      "range, {} in AccumulateGrad through the node evaluated before it; {} launched by ops "
      "outside the model's modules, "
      "part other: {} kernel time ({}), by op below); untagged {}: no launch {}, outside every "
      "module and op {}, backward op without a flow {}, in modules that name no part {}; "
      "untagged kernel time {} ({})",
      format_count(c.attributed), format_count(c.rows), format_count(c.linked),
      format_count(c.linked_enclosing), format_count(c.linked_evaluate),
      format_count(c.linked_accumulate), format_count(c.outside_model),
      secs(p.outside_model_kernel_ns), share(p.outside_model_kernel_ns), format_count(c.untagged),
      c.untagged_no_launch, c.untagged_no_module, c.untagged_unlinked, c.untagged_no_part,
      secs(b.untagged_kernel_ns), share(b.untagged_kernel_ns)));
  m.note(fmt::format(
      "{} module events, {} decoder layer(s){}; forward and recompute rows by their launching op's "
      "enclosing modules, backward rows by the module of the forward op their fwdbwd flow names "
      "(docs/kernels.md, \"Parts\"); memcpy/memset rows are counted in the evidence "
      "(memcpy_memset_s), not in these kernel times ({})",
      format_count(p.module_event_count), p.decoder_layers.size(),
      p.model.empty() ? "" : ", layer kinds from " + p.model, secs(b.memcpy_memset_ns)));
  for (const std::string& n : p.notes) m.note(n);
  out.push_back(m);
  if (!p.outside_model.empty()) {
    Table o(title_prefix +
            "time outside the model's modules by launching op (in the table above as part other, "
            "layers -)");
    o.column("op", Align::kLeft)
        .column("phase", Align::kLeft)
        .column("rows")
        .column("kernel time")
        .column("of kernel time");
    for (const OutsideModelRow& r : p.outside_model) {
      o.row({clip(r.op, 80), r.phase, format_count(r.rows), secs(r.kernel_ns),
             share(r.kernel_ns)});
    }
    o.separator();
    o.row({"all", "", format_count(c.outside_model), secs(p.outside_model_kernel_ns),
           share(p.outside_model_kernel_ns)});
    o.note("forward side: the outermost cpu_op holding the launch (phase backward inside torch's "
           "own backward call); backward side: the backward op whose fwdbwd flow names a forward "
           "op outside every module");
    out.push_back(o);
  }
  if (!b.layers.empty()) {
    out.push_back(layer_matrix(b, title_prefix + "kernel time per decoder layer (parts summed)",
                               {"forward", "recompute", "backward"}));
  }
  return out;
}

// ---- part-level diff ------------------------------------------------------------------------

namespace {

double finite_seconds(const Json& v, const std::string& where) {
  if (!v.is_number()) fail("{}: 'kernel_s' must be a number", where);
  const double s = v.get<double>();
  if (!std::isfinite(s) || s < 0 || s > 1e6)
    fail("{}: 'kernel_s' = {} is not a time in 0..1e6 s", where, s);
  return s;
}

std::string vocab_string(const Json& row, const char* key, const std::string& where) {
  auto it = row.find(key);
  if (it == row.end() || !it->is_string()) fail("{}: '{}' must be a string", where, key);
  const std::string v = it->get<std::string>();
  const std::string k = key;
  const bool ok = v == "untagged" || (k == "phase" && parse_step_phase(v)) ||
                  (k == "part" && parse_step_part(v)) ||
                  (k == "layer_kind" && (v == "untagged" || parse_layer_kind(v)));
  if (!ok) fail("{}: '{}' = \"{}\" is not in tprobe's vocabulary", where, key, detail::printable(v));
  return v;
}

std::vector<PartRow> rows_from_json(const Json& rows, const std::string& where) {
  if (!rows.is_array()) fail("{}: must be an array", where);
  std::vector<PartRow> out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string w = fmt::format("{}[{}]", where, i);
    const Json& r = rows[i];
    if (!r.is_object()) fail("{}: not an object", w);
    PartRow p;
    p.phase = vocab_string(r, "phase", w);
    p.layer_kind = vocab_string(r, "layer_kind", w);
    p.part = vocab_string(r, "part", w);
    auto ks = r.find("kernel_s");
    if (ks == r.end()) fail("{}: 'kernel_s' is missing", w);
    p.kernel_ns = std::llround(finite_seconds(*ks, w) * 1e9);
    auto kn = r.find("kernels");
    if (kn != r.end()) {
      if (!kn->is_number_integer() || (!kn->is_number_unsigned() && kn->get<int64_t>() < 0) ||
          (kn->is_number_unsigned() && kn->get<uint64_t>() > uint64_t{1} << 53))
        fail("{}: 'kernels' must be a non-negative integer", w);
      p.kernels = kn->get<int64_t>();
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

PartSide part_side_from_evidence(const Json& results, const std::string& probe,
                                 const std::string& where) {
  PartSide s;
  s.label = where;
  if (!results.is_object()) fail("{}: results must be an object", where);
  if (probe == "profile") {
    auto pts = results.find("points");
    if (pts == results.end() || !pts->is_array()) {
      s.why_not = "its results hold no points[]";
      return s;
    }
    // The point of the evidence's kernel table (the widest traced point by default), else the
    // last point with a phase × part breakdown.
    int64_t want_b = -1, want_w = -1;
    auto kp = results.find("kernel_table_point");
    if (kp != results.end() && kp->is_object() && kp->contains("batch") && kp->contains("width") &&
        (*kp)["batch"].is_number_integer() && (*kp)["width"].is_number_integer()) {
      want_b = (*kp)["batch"].get<int64_t>();
      want_w = (*kp)["width"].get<int64_t>();
    }
    const Json* chosen = nullptr;
    std::string chosen_name;
    for (std::size_t i = 0; i < pts->size(); ++i) {
      const Json& p = (*pts)[i];
      if (!p.is_object()) fail("{}: results.points[{}] is not an object", where, i);
      auto kt = p.find("kernel_trace");
      if (kt == p.end() || !kt->is_object() || !kt->contains("by_phase_part") ||
          !(*kt)["by_phase_part"].is_array())
        continue;
      const bool has_bw = p.contains("batch") && p["batch"].is_number_integer() &&
                          p.contains("width") && p["width"].is_number_integer();
      const std::string name =
          has_bw ? fmt::format("{}x{}", p["batch"].get<int64_t>(), p["width"].get<int64_t>())
                 : fmt::format("points[{}]", i);
      const bool wanted = has_bw && p["batch"].get<int64_t>() == want_b &&
                          p["width"].get<int64_t>() == want_w;
      if (chosen == nullptr || wanted || want_b < 0) {
        chosen = &p;
        chosen_name = name;
        if (wanted) break;
      }
    }
    if (chosen == nullptr) {
      s.why_not = "no point of its results carries kernel_trace.by_phase_part (profile ran "
                  "without a kernel trace)";
      return s;
    }
    s.rows = rows_from_json((*chosen)["kernel_trace"]["by_phase_part"],
                            where + ": results.points[" + chosen_name + "].kernel_trace.by_phase_part");
    s.origin = "profile evidence, point " + chosen_name;
  } else {
    auto rows = results.find("by_phase_part");
    if (rows == results.end() || rows->is_null()) {
      s.why_not = "its results hold no by_phase_part (a trace without module events)";
      return s;
    }
    s.rows = rows_from_json(*rows, where + ": results.by_phase_part");
    s.origin = probe + " evidence";
    // The steps the rows sum over (a per-step diff divides by it): absent is one step; anything
    // else than a count is refused, never read as one step.
    auto st = results.find("parts_steps");
    if (st != results.end()) {
      if (!st->is_number_integer() || st->get<int64_t>() < 1 ||
          st->get<int64_t>() > (int64_t{1} << 30)) {
        fail("{}: results.parts_steps is {}: not a step count (an integer 1..1073741824)", where,
             detail::printable(st->dump(), 40));
      }
      s.steps = st->get<int64_t>();
    }
  }
  for (const PartRow& r : s.rows) s.kernel_ns += r.kernel_ns;
  s.available = true;
  return s;
}

PartSide part_side_from_trace(const TraceParts& parts, int64_t steps, const std::string& label) {
  PartSide s;
  s.label = label;
  s.origin = "trace";
  s.steps = std::max<int64_t>(steps, 1);
  if (!parts.module_events) {
    s.why_not = parts.attribution_off
                    ? "its phase × part attribution was turned off (--parts off)"
                    : "it holds no module events (record with with_stack=True)";
    return s;
  }
  s.rows = parts.breakdown.rows;
  for (const PartRow& r : s.rows) s.kernel_ns += r.kernel_ns;
  s.available = true;
  return s;
}

PartDiff diff_parts(const PartSide& a, const PartSide& b) {
  PartDiff d;
  d.a = a;
  d.b = b;
  if (!a.available || !b.available) {
    d.why_not = !a.available ? "A: " + a.why_not : "B: " + b.why_not;
    return d;
  }
  d.available = true;
  std::map<std::tuple<int, int, int, std::string, std::string, std::string>, PartDiffRow> rows;
  auto add = [&](const PartSide& s, bool is_b) {
    for (const PartRow& r : s.rows) {
      PartDiffRow& x = rows[{phase_rank(r.phase), kind_rank(r.layer_kind), part_rank(r.part),
                             r.phase, r.layer_kind, r.part}];
      x.phase = r.phase;
      x.layer_kind = r.layer_kind;
      x.part = r.part;
      (is_b ? x.b_ns : x.a_ns) += r.kernel_ns;
    }
  };
  add(a, false);
  add(b, true);
  for (auto& [k, r] : rows) {
    r.a_share_ratio = a.kernel_ns > 0 ? double(r.a_ns) / double(a.kernel_ns) : 0;
    r.b_share_ratio = b.kernel_ns > 0 ? double(r.b_ns) / double(b.kernel_ns) : 0;
    r.a_ns /= a.steps;
    r.b_ns /= b.steps;
    d.rows.push_back(r);
  }
  return d;
}

Json to_json(const PartDiff& d) {
  auto side = [](const PartSide& s) {
    return Json{{"label", s.label},
                {"available", s.available},
                {"why_not", s.why_not.empty() ? Json(nullptr) : Json(s.why_not)},
                {"origin", s.origin},
                {"steps", s.steps},
                {"kernel_ns", s.kernel_ns}};
  };
  Json out = {{"available", d.available},
              {"why_not", d.why_not.empty() ? Json(nullptr) : Json(d.why_not)},
              {"a", side(d.a)},
              {"b", side(d.b)},
              {"rows", Json::array()}};
  for (const PartDiffRow& r : d.rows) {
    out["rows"].push_back({{"phase", r.phase},
                           {"layer_kind", r.layer_kind},
                           {"part", r.part},
                           {"a_ns_per_step", r.a_ns},
                           {"b_ns_per_step", r.b_ns},
                           {"delta_ns_per_step", r.b_ns - r.a_ns},
                           {"ratio", r.a_ns > 0 ? Json(double(r.b_ns) / double(r.a_ns))
                                                : Json(nullptr)},
                           {"a_share_ratio", r.a_share_ratio},
                           {"b_share_ratio", r.b_share_ratio}});
  }
  return out;
}

std::vector<Table> part_diff_tables(const PartDiff& d) {
  std::vector<Table> out;
  if (!d.available) {
    Table t("Parts compared");
    t.column(fmt::format("no phase × part comparison: {}", d.why_not), Align::kLeft);
    out.push_back(t);
    return out;
  }
  Table t(fmt::format("Parts compared, per step: A = {} ({}, {} step(s)), B = {} ({}, {} step(s))",
                      d.a.label, d.a.origin, d.a.steps, d.b.label, d.b.origin, d.b.steps));
  t.column("phase", Align::kLeft)
      .column("layers", Align::kLeft)
      .column("part", Align::kLeft)
      .column("A")
      .column("B")
      .column("B − A")
      .column("B / A")
      .column("A share")
      .column("B share");
  std::string last_phase;
  int64_t ta = 0, tb = 0;
  for (const PartDiffRow& r : d.rows) {
    if (!last_phase.empty() && r.phase != last_phase) t.separator();
    last_phase = r.phase;
    ta += r.a_ns;
    tb += r.b_ns;
    const int64_t delta = r.b_ns - r.a_ns;
    t.row({r.phase, r.layer_kind, r.part, secs(r.a_ns), secs(r.b_ns),
           (delta > 0 ? "+" : delta < 0 ? "−" : "") + secs(std::llabs(delta)),
           r.a_ns > 0 && r.b_ns > 0 ? fmt::format("{:.2f}×", double(r.b_ns) / double(r.a_ns))
           : r.a_ns > 0            ? "gone"
           : r.b_ns > 0            ? "new"
                                   : "",
           format_percent(r.a_share_ratio), format_percent(r.b_share_ratio)});
  }
  t.separator();
  t.row({"all", "", "", secs(ta), secs(tb),
         (tb - ta > 0 ? "+" : tb - ta < 0 ? "−" : "") + secs(std::llabs(tb - ta)),
         ta > 0 ? fmt::format("{:.2f}×", double(tb) / double(ta)) : "", "100.0 %", "100.0 %"});
  t.note("kernel time only (memcpy/memset left out), divided by the profiler steps each side "
         "covers; shares are of each side's own kernel total");
  out.push_back(t);
  return out;
}

}  // namespace tprobe::core
