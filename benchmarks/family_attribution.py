#!/usr/bin/env python3
"""A plain-Python attribution of a torch.profiler trace by the rules of docs/kernels.md ("Parts").

    family_attribution.py TRACE[.json|.json.gz]            per-cell kernel ns as JSON on stdout
    family_attribution.py TRACE --compare EVIDENCE.json     compare with `tprobe kernels TRACE
                                                            --json EVIDENCE.json`'s cells

Written from the documentation, not from tprobe's code, with the standard library only (json,
gzip, decimal): every selected device row (kernel, memcpy, memset) is placed by its launch call's
thread and time into a (phase, decoder layer, part) cell; the cells' kernel nanoseconds are
printed ("cells": "phase|layer|part" -> ns, layer "-" outside the decoder layers; "untagged_ns";
"unplaced": module class -> ns). The compare mode reads a kernels evidence file and checks every
cell: per layer from results.by_layer, outside the layers from results.by_phase_part (layer kind
"-"), and the untagged total; exit 0 when all agree to the nanosecond, 1 otherwise (each
difference printed).

Times: Kineto's microsecond text shifted exactly into integer nanoseconds (Decimal), digits past
the nanosecond rounded half away from zero, as tprobe reads them.
"""
import bisect
import decimal
import gzip
import json
import sys

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
KERNEL_CATS = {"kernel", "Kernel"}


def ns(v):
    d = decimal.Decimal(str(v)) * 1000
    return int(d.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=decimal.Decimal)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def class_of(instance):
    head, _, tail = instance.rpartition("_")
    return head if head and tail.isdigit() else instance


def classify(cls):
    """The module class rules (docs/kernels.md, "Parts")."""
    if cls == "ParamWrapper":  # PEFT's LoRA on a module's parameters: the role of what it wraps
        return "param_wrapper"
    if cls.endswith("DecoderLayer"):
        return "layer"
    if "Rotary" in cls:
        return "rotary"
    if "Embedding" in cls:
        return "embedding"
    if "Attention" in cls:
        return "attention"
    if "Router" in cls:
        return "router"
    if "Experts" in cls or cls.endswith("NaiveMoe"):
        return "experts"
    if cls.endswith(("MoeBlock", "MoEBlock", "Moe", "MoE")):
        return "block"
    if cls.endswith("MLP"):
        return "mlp"
    if cls == "Linear":
        return "linear"
    if "Norm" in cls:
        return "norm"
    if cls.endswith("TextModel"):
        return "text"
    if "CausalLM" in cls or "ConditionalGeneration" in cls:
        return "causal"
    if cls.endswith("Model"):
        return "base"
    return "other"


class Iv:
    __slots__ = ("start", "end", "kind", "module", "cls", "flow", "parent", "norm_part")

    def __init__(self, start, end, kind, module=None, cls="other", flow=None):
        self.start, self.end, self.kind = start, end, kind
        self.module, self.cls, self.flow = module, cls, flow
        self.parent = -1
        self.norm_part = "other"


KIND_RANK = {"node": 6, "core": 5, "backward_call": 4, "loss": 3, "mask": 2, "attn": 1,
             "module": 0}


class Tree:
    def __init__(self):
        self.ivs = []

    def build(self):
        self.ivs.sort(key=lambda v: (v.start, -v.end, -KIND_RANK[v.kind]))
        stack = []
        for i, v in enumerate(self.ivs):
            while stack and self.ivs[stack[-1]].end < v.end:
                stack.pop()
            v.parent = stack[-1] if stack else -1
            stack.append(i)
        self.starts = [v.start for v in self.ivs]

    def chain(self, t):
        i = bisect.bisect_right(self.starts, t) - 1
        while i >= 0 and self.ivs[i].end < t:
            i = self.ivs[i].parent
        out = []
        while i >= 0:
            if self.ivs[i].end >= t:
                out.append(i)
            i = self.ivs[i].parent
        return out

    def parent_module(self, i):
        p = self.ivs[i].parent
        while p >= 0 and self.ivs[p].kind != "module":
            p = self.ivs[p].parent
        return p


class Attribution:
    def __init__(self, events, layer_kinds=None):
        self.layer_kinds = layer_kinds or []
        self.trees = {}
        self.ops = []
        self.flows_s, self.flows_f = {}, {}
        self.ranges, self.optimizer = [], {}
        self.steps, self.launch, self.rows = [], {}, []
        for e in events:
            self.read(e)
        self.bind_flows()
        self.add_ranges()
        self.add_core_ops()
        for t in self.trees.values():
            t.build()
        self.number_layers()
        self.blocks, self.roles = set(), {}
        for t in self.trees.values():
            self.find_blocks(t)
        for t in self.trees.values():
            self.find_roles(t)
        for t in self.trees.values():
            self.norm_parts(t)

    # ---- reading ------------------------------------------------------------------------
    def read(self, e):
        ph, cat, name = e.get("ph"), e.get("cat", ""), e.get("name", "")
        tid = e.get("tid")
        args = e.get("args") or {}
        if ph in ("s", "f") and cat == "fwdbwd":
            if "id" in e and "ts" in e:
                (self.flows_s if ph == "s" else self.flows_f).setdefault(e["id"], []).append(
                    (tid, ns(e["ts"])))
            return
        if ph != "X" or "ts" not in e:
            return
        start = ns(e["ts"])
        end = start + max(ns(e.get("dur", 0)), 0)
        if cat in DEVICE_CATS:
            self.rows.append((args.get("correlation"), start, end, cat))
        elif cat in ("cuda_runtime", "cuda_driver"):
            if "correlation" in args:
                self.launch[args["correlation"]] = (tid, start)
        elif cat == "python_function":
            self.python(tid, start, end, name)
        else:
            if name.startswith("ProfilerStep#"):
                self.steps.append((start, end))
            elif name.startswith("autograd::engine::evaluate_function"):
                self.ranges.append((tid, start, end, args.get("Sequence number", -1),
                                    name.endswith("AccumulateGrad")))
            elif name.startswith("Optimizer."):
                self.optimizer.setdefault(tid, []).append((start, end))
            if cat == "cpu_op":
                self.ops.append((tid, start, end, name, args.get("Sequence number", -1)))

    def python(self, tid, start, end, name):
        tree = self.trees.setdefault(tid, Tree())
        if name.startswith("nn.Module: "):
            inst = name[len("nn.Module: "):]
            if inst:
                tree.ivs.append(Iv(start, end, "module", inst, classify(class_of(inst))))
            return
        sep = name.rfind("): ")
        if sep < 0:
            return
        file, func = name[:sep], name[sep + 3:]
        if "attention_forward" in func:
            kind = "attn"
        elif "masking_utils" in file:
            kind = "mask"
        elif "loss" in func or "Loss" in func or "cross_entropy" in func:
            kind = "loss"
        elif func == "backward" and ("torch/_tensor.py" in file or "torch/autograd/" in file):
            kind = "backward_call"
        else:
            return
        tree.ivs.append(Iv(start, end, kind))

    # ---- backward ops -------------------------------------------------------------------
    def bind_flows(self):
        """The longest cpu_op starting at each paired "f" end is a backward op with that flow."""
        self.flow_start = {}
        ends = {}
        for fid, s in self.flows_s.items():
            if len(s) == 1 and len(self.flows_f.get(fid, [])) == 1:
                self.flow_start[fid] = s[0]
                ends.setdefault(self.flows_f[fid][0], []).append(fid)
        bound = {}
        for op in self.ops:
            key = (op[0], op[1])
            if key in ends and (key not in bound or op[2] > bound[key][2]):
                bound[key] = op
        self.by_seq = {}
        for key, ids in ends.items():
            op = bound.get(key)
            if op is None:
                continue
            iv = Iv(op[1], op[2], "node", flow=ids[0])
            self.trees.setdefault(op[0], Tree()).ivs.append(iv)
            if op[4] is not None and op[4] >= 0:
                self.by_seq.setdefault((op[0], op[4]), []).append(iv)
        for v in self.by_seq.values():
            v.sort(key=lambda x: x.start)

    def add_ranges(self):
        """evaluate_function ranges: the flow of the node op with their sequence number, or
        (AccumulateGrad) of the range that ended last at or before their start."""
        order = sorted(self.ranges, key=lambda r: (r[0], r[1], -r[2]))
        ended, tid = [], None
        for r in order:
            if r[0] != tid:
                ended, tid = [], r[0]
            iv = Iv(r[1], r[2], "node")
            if r[4]:
                before = [x for x in ended if (x[0], x[1]) <= (r[1], float("inf"))]
                if before:
                    last = max(before, key=lambda x: (x[0], x[1]))[2]
                    iv.flow = last.flow
            elif r[3] is not None and r[3] >= 0:
                cands = [b for b in self.by_seq.get((r[0], r[3]), []) if b.start >= r[1]]
                if cands and cands[0].end <= r[2]:
                    iv.flow = cands[0].flow
            ended = [x for x in ended if (x[0], x[1]) != (r[2], r[1])] + [(r[2], r[1], iv)]
            self.trees.setdefault(r[0], Tree()).ivs.append(iv)

    def add_core_ops(self):
        for tid, s, e, name, _ in self.ops:
            if tid in self.trees and ("attention" in name or "softmax" in name or "flash" in name):
                self.trees[tid].ivs.append(Iv(s, e, "core"))

    # ---- the module tree ----------------------------------------------------------------
    def number_layers(self):
        first = {}
        for t in self.trees.values():
            for v in t.ivs:
                if v.kind == "module" and v.cls == "layer":
                    first[v.module] = min(first.get(v.module, v.start), v.start)
        order = sorted((s, m) for m, s in first.items())
        self.layer_of = {m: i for i, (s, m) in enumerate(order)}

    def eff(self, v):
        return "block" if v.kind == "module" and v.module in self.blocks else v.cls

    def find_blocks(self, t):
        for i, v in enumerate(t.ivs):
            if v.kind != "module":
                continue
            if v.cls == "block":
                self.blocks.add(v.module)
            if v.cls in ("router", "experts"):
                p = t.parent_module(i)
                if p >= 0 and t.ivs[p].cls == "mlp":
                    self.blocks.add(t.ivs[p].module)

    def find_roles(self, t):
        kids = {}
        for i, v in enumerate(t.ivs):
            if v.kind == "module":
                p = t.parent_module(i)
                if p >= 0 and self.eff(t.ivs[p]) == "block":
                    kids.setdefault(p, []).append(i)
        def wrapped(k):
            v = t.ivs[k]
            if v.cls != "param_wrapper":
                return self.eff(v)
            for j in range(k + 1, len(t.ivs)):
                w = t.ivs[j]
                if w.start >= v.end:
                    break
                if w.kind == "module" and w.cls not in ("param_wrapper", "other"):
                    return self.eff(w)
            return "other"

        for children in kids.values():
            classes = [wrapped(k) for k in children]
            router, experts, first_linear = "router" in classes, "experts" in classes, True
            for k, c in zip(children, classes):
                role = "unplaced"
                if c == "router":
                    role = "router"
                elif c in ("experts", "norm"):
                    role = "experts"
                elif c == "mlp":
                    role = "shared_experts" if experts else "experts"
                elif c == "linear":
                    role = "shared_experts" if router or not first_linear else "router"
                    first_linear = False
                self.roles[t.ivs[k].module] = role

    def norm_parts(self, t):
        kids = {}
        for i, v in enumerate(t.ivs):
            if v.kind == "module":
                p = t.parent_module(i)
                if p >= 0 and t.ivs[p].cls == "layer":
                    kids.setdefault(p, []).append(i)
        near = {"attention": "attention_proj", "experts": "experts", "mlp": "dense_mlp",
                "block": "experts"}
        for children in kids.values():
            for j, k in enumerate(children):
                if t.ivs[k].cls != "norm":
                    continue
                prev = self.eff(t.ivs[children[j - 1]]) if j > 0 else None
                nxt = self.eff(t.ivs[children[j + 1]]) if j + 1 < len(children) else None
                t.ivs[k].norm_part = near.get(prev) or near.get(nxt) or "other"

    # ---- placing ------------------------------------------------------------------------
    def resolve(self, t, chain, n):
        """(tag, any_module, unplaced): tag = (phase, layer, part) of forward code."""
        core = mask = loss = emb = rot = text = causal = base = any_module = False
        layer_iv = direct = last_module = role_iv = -1
        part_mod, part_core = None, False
        for p in range(n):
            v = t.ivs[chain[p]]
            if v.kind in ("attn", "core"):
                core = True
            elif v.kind == "mask":
                mask = True
            elif v.kind == "loss":
                loss = True
            elif v.kind == "module":
                any_module = True
                if layer_iv < 0:
                    if v.cls == "layer":
                        layer_iv, direct = chain[p], last_module
                    elif self.eff(v) in ("attention", "router", "experts", "mlp", "block"):
                        part_mod, part_core = self.eff(v), core
                    if v.module in self.roles:
                        role_iv = chain[p]
                emb |= v.cls == "embedding"
                rot |= v.cls == "rotary"
                # "…Model" inside the innermost "…ForCausalLM" (LlamaModel) is the decoder stack
                text |= v.cls == "text" or (base and v.cls == "causal" and not causal)
                base |= v.cls == "base"
                causal |= v.cls == "causal"
                if layer_iv < 0:
                    last_module = chain[p]
        if layer_iv >= 0:
            layer = self.layer_of.get(t.ivs[layer_iv].module, -1)
            if role_iv >= 0:
                role = self.roles[t.ivs[role_iv].module]
                if role == "unplaced":
                    return None, True, class_of(t.ivs[role_iv].module)
                return ("forward", layer, role), True, None
            if part_mod is not None:
                if part_mod == "attention":
                    part = "attention_core" if part_core else "attention_proj"
                else:
                    part = {"router": "router", "experts": "experts", "block": "experts",
                            "mlp": "dense_mlp"}[part_mod]
                return ("forward", layer, part), True, None
            if direct >= 0 and t.ivs[direct].cls == "norm":
                return ("forward", layer, t.ivs[direct].norm_part), True, None
            if direct >= 0:
                return None, True, class_of(t.ivs[direct].module)
            return ("forward", layer, "other"), True, None
        if emb:
            return ("forward", -1, "embedding"), any_module, None
        if rot:
            return ("forward", -1, "attention_proj"), any_module, None
        if mask:
            return ("forward", -1, "attention_core"), any_module, None
        if text:
            return ("forward", -1, "other"), any_module, None
        if causal or loss:
            return ("loss", -1, "loss_head"), any_module, None
        return None, any_module, None

    def resolve_flow(self, fid):
        tid, ts = self.flow_start[fid]
        t = self.trees.get(tid)
        if t is None:
            return None, False, None
        chain = t.chain(ts)
        if not chain:
            return None, False, None
        n = next((q for q, i in enumerate(chain) if t.ivs[i].kind == "node"), len(chain))
        return self.resolve(t, chain, n)

    @staticmethod
    def backward_of(tag):
        phase, layer, part = tag
        return ("loss" if phase == "loss" else "backward", layer, part)

    def in_optimizer(self, tid, ts):
        return any(s <= ts <= e for s, e in self.optimizer.get(tid, []))

    def outermost_op(self, tid, ts):
        return any(o[0] == tid and o[1] <= ts <= o[2] for o in self.ops_by_tid.get(tid, []))

    def enclosing(self, t, chain, node):
        for p in range(node + 1, len(chain)):
            v = t.ivs[chain[p]]
            if v.kind != "node" or v.flow is None or v.flow not in self.flow_start:
                continue
            tag, _, _ = self.resolve_flow(v.flow)
            if tag is None:
                continue
            tag = self.backward_of(tag)
            if tag[1] < 0:
                for m in t.ivs:
                    if m.start < v.start or m.start > v.end:
                        continue
                    if m.kind == "module" and m.cls == "layer" and m.module in self.layer_of:
                        tag = (tag[0], self.layer_of[m.module], "other")
                        break
            return tag
        return None

    def place(self, tid, ts):
        """((phase, layer, part) or None, unplaced module class or None)."""
        if self.in_optimizer(tid, ts):
            return ("optimizer", -1, "other"), None
        t = self.trees.get(tid)
        chain = t.chain(ts) if t else []
        node = len(chain)
        backward_call = False
        for p, i in enumerate(chain):
            if t.ivs[i].kind == "node":
                node = p
                break
            backward_call |= t.ivs[i].kind == "backward_call"
        if node == len(chain):
            tag, any_module, unplaced = self.resolve(t, chain, len(chain)) if chain else (
                None, False, None)
            if tag or unplaced or any_module:
                return tag, unplaced
            if self.outermost_op(tid, ts):
                return ("backward" if backward_call else "forward", -1, "other"), None
            return None, None
        tag, any_module, unplaced = self.resolve(t, chain, node)
        if tag or any_module:
            return (("recompute",) + tag[1:] if tag else None), unplaced
        bw = t.ivs[chain[node]]
        if bw.flow is None or bw.flow not in self.flow_start:
            return self.enclosing(t, chain, node), None
        tag, any_module, unplaced = self.resolve_flow(bw.flow)
        if tag:
            return self.backward_of(tag), None
        if unplaced or any_module:
            return None, unplaced
        return ("backward", -1, "other"), None

    def run(self):
        self.ops_by_tid = {}
        for o in self.ops:
            self.ops_by_tid.setdefault(o[0], []).append(o)
        cells, unplaced, untagged = {}, {}, 0
        kernels = 0
        if not any(v.kind == "module" for t in self.trees.values() for v in t.ivs):
            # no module events (recorded without with_stack=True): nothing is attributed
            return {"kernel_ns": 0, "untagged_ns": 0, "cells": {}, "unplaced": {},
                    "decoder_layers": 0, "note": "no module events"}
        for corr, start, end, cat in self.rows:
            where = self.launch.get(corr) if corr is not None else None
            at = where[1] if where else start
            if self.steps and not any(s <= at <= e for s, e in self.steps):
                continue
            d = end - start
            if cat not in KERNEL_CATS:
                continue
            kernels += d
            tag, up = self.place(*where) if where else (None, None)
            if tag is None:
                untagged += d
                if up:
                    unplaced[up] = unplaced.get(up, 0) + d
                continue
            phase, layer, part = tag
            key = "{}|{}|{}".format(phase, layer if layer >= 0 else "-", part)
            cells[key] = cells.get(key, 0) + d
        return {"kernel_ns": kernels, "untagged_ns": untagged,
                "cells": dict(sorted(cells.items())), "unplaced": dict(sorted(unplaced.items())),
                "decoder_layers": len(self.layer_of)}


def evidence_cells(path):
    with open(path) as f:
        res = json.load(f)["results"]
    cells = {}
    in_layers = {}  # (phase, part) -> ns in layers of kind "-" (no config: every layer's)
    for layer in res.get("by_layer") or []:
        for phase, parts in layer["kernel_s"].items():
            for part, s in parts.items():
                cells["{}|{}|{}".format(phase, layer["layer"], part)] = round(s * 1e9)
                if layer["layer_kind"] == "-":
                    in_layers[(phase, part)] = in_layers.get((phase, part), 0) + round(s * 1e9)
    untagged = 0
    for r in res.get("by_phase_part") or []:
        s = round(r["kernel_s"] * 1e9)
        if r["phase"] == "untagged":
            untagged += s
        elif r["layer_kind"] == "-":
            # the row outside the layers: the "-" row less the layers of kind "-"
            key = "{}|-|{}".format(r["phase"], r["part"])
            cells[key] = cells.get(key, 0) + s - in_layers.get((r["phase"], r["part"]), 0)
    cells = {k: v for k, v in cells.items() if v}
    unplaced = {}
    for u in res.get("unplaced_modules") or []:
        unplaced[u["module"]] = unplaced.get(u["module"], 0) + round(u["kernel_s"] * 1e9)
    return cells, untagged, unplaced


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--compare"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = Attribution(load(argv[1])).run()
    if len(argv) == 2:
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    cells, untagged, unplaced = evidence_cells(argv[3])
    mine = {k: v for k, v in out["cells"].items() if v}
    bad = 0
    for k in sorted(set(mine) | set(cells)):
        if mine.get(k, 0) != cells.get(k, 0):
            print("cell {}: python {} ns, tprobe {} ns".format(k, mine.get(k, 0), cells.get(k, 0)))
            bad += 1
    if untagged != out["untagged_ns"]:
        print("untagged: python {} ns, tprobe {} ns".format(out["untagged_ns"], untagged))
        bad += 1
    if unplaced != out["unplaced"]:
        print("unplaced: python {}, tprobe {}".format(out["unplaced"], unplaced))
        bad += 1
    print("{} cells compared, {} differ; untagged {} ns of {} ns".format(
        len(set(mine) | set(cells)), bad, out["untagged_ns"], out["kernel_ns"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
