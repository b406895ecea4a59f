#!/usr/bin/env python3
"""Plain-Python reference for the critical path of `tprobe kernels` (docs/kernels.md, "Critical
path").

Reads a torch.profiler trace with `json` alone (times as decimal.Decimal, turned into integer
nanoseconds as the definitions say) and computes, from the definitions in docs/kernels.md and
without any of tprobe's code, every figure of `results.trace.critical_path`: the window, the
walk's nodes and edges, the time on the path by kind, per ProfilerStep and per phase, the host
events by the self time they hold on the path, the device time per kernel name (the test adds the
names up by family with the kernel table's own families), and the graph's counts.

Usage: critical_path_reference.py TRACE.json[.gz] [--step N]   (prints JSON)
"""
import argparse
import bisect
import decimal
import gzip
import json
from collections import defaultdict

DEVICE = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
          "gpu_memset": "memset", "memset": "memset"}
LAUNCH = {"cuda_runtime", "runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver"}
DAY_NS = 86400 * 10**9
EVALUATE = "autograd::engine::evaluate_function"
SYNC_KIND = {"Context Sync": "context", "Stream Sync": "stream", "Event Sync": "event",
             "Stream Wait Event": "stream_wait_event"}
RECORD = {"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "cuEventRecordWithFlags"}
BLOCKING = {"cudaDeviceSynchronize": "context", "cuCtxSynchronize": "context",
            "cudaStreamSynchronize": "stream", "cuStreamSynchronize": "stream",
            "cudaEventSynchronize": "event", "cuEventSynchronize": "event"}
PHASES = ["forward", "backward", "optimizer", "unknown"]
KINDS = ["host_event_ns", "runtime_ns", "host_untraced_ns", "device_ns", "copy_ns",
         "launch_delay_ns", "queue_ns", "wait_ns", "sync_ns"]


def ns(us):
    """Microseconds (Decimal or int) to integer nanoseconds, half away from zero."""
    q = decimal.Decimal(us) * 1000
    return int(q.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def int_arg(args, key):
    v = args.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def step_number(name):
    if not name.startswith("ProfilerStep#"):
        return -1
    num = name[13:]
    return int(num) if num.isdigit() and 0 < len(num) <= 11 else -1


class Ranges:
    """Per thread, merged intervals; contains() holds both ends."""

    def __init__(self):
        self.by_tid = defaultdict(list)

    def add(self, tid, a, b):
        self.by_tid[tid].append((a, b))

    def seal(self):
        for tid, v in self.by_tid.items():
            v.sort()
            merged = []
            for a, b in v:
                if merged and a <= merged[-1][1]:
                    merged[-1] = (merged[-1][0], max(merged[-1][1], b))
                else:
                    merged.append((a, b))
            self.by_tid[tid] = merged

    def contains(self, tid, t):
        v = self.by_tid.get(tid)
        if not v:
            return False
        k = bisect.bisect_right(v, (t, float("inf")))
        return k > 0 and v[k - 1][0] <= t <= v[k - 1][1]


def shares():
    return {k: 0 for k in KINDS}


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--step", type=int, default=None)
    a = ap.parse_args()
    events = read(a.trace)

    rows, launches, ops, annots, syncs = [], [], [], [], []
    for i, e in enumerate(events):
        if e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        args = e.get("args", {}) or {}
        if cat in DEVICE:
            dur = ns(e["dur"])
            if dur < 0:
                continue
            start = ns(e["ts"])
            dev = int_arg(args, "device")
            dev = dev if dev is not None and dev >= 0 else (
                e["pid"] if isinstance(e.get("pid"), int) else 0)
            stream = int_arg(args, "stream")
            stream = stream if stream is not None and stream >= 0 else e.get("tid")
            corr = int_arg(args, "correlation") or 0
            rows.append({"start": start, "end": start + dur, "device": dev, "stream": stream,
                         "kind": DEVICE[cat], "name": e["name"], "corr": corr})
        elif cat in LAUNCH:
            corr = int_arg(args, "correlation") or 0
            if "ts" not in e or corr == 0:
                continue
            dur = ns(e["dur"]) if "dur" in e else -1
            if dur < 0 or dur > DAY_NS:
                dur = -1
            launches.append({"corr": corr, "ts": ns(e["ts"]), "dur": dur, "tid": e.get("tid"),
                             "name": e.get("name", "")})
        elif cat in ("cpu_op", "operator", "user_annotation"):
            if "ts" not in e or "dur" not in e:
                continue
            start = ns(e["ts"])
            ev = {"tid": e.get("tid"), "start": start, "end": start + max(ns(e["dur"]), 0),
                  "name": e.get("name", ""), "kind": "annotation" if cat == "user_annotation"
                  else "op"}
            (annots if cat == "user_annotation" else ops).append(ev)
        elif cat == "cuda_sync":
            if "ts" not in e or "dur" not in e:
                continue
            dur = ns(e["dur"])
            if dur < 0 or dur > DAY_NS:
                continue
            dev = int_arg(args, "device")
            s = {"device": dev if dev is not None and dev >= 0 else 0,
                 "stream": int_arg(args, "stream") if int_arg(args, "stream") is not None else -1,
                 "corr": int_arg(args, "correlation") or 0,
                 "kind": SYNC_KIND.get(e.get("name", ""), "other")}
            for key, field in (("wait_on_cuda_event_record_corr_id", "record"),
                               ("wait_on_stream", "wait_stream")):
                v = int_arg(args, key)
                s[field] = v if v is not None and v >= 0 else -1
            syncs.append(s)

    # Steps and phases, as the kernel table has them.
    steps = {}
    backward, optimizer = Ranges(), Ranges()
    step_tids = set()
    for o in ops + annots:
        n = step_number(o["name"])
        if n >= 0:
            lo, hi = steps.get(n, (o["start"], o["end"]))
            steps[n] = (min(lo, o["start"]), max(hi, o["end"]))
            step_tids.add(o["tid"])
        elif o["name"].startswith(EVALUATE):
            backward.add(o["tid"], o["start"], o["end"])
        elif o["name"].startswith("Optimizer."):
            optimizer.add(o["tid"], o["start"], o["end"])
    backward.seal()
    optimizer.seal()
    backward_only = {t for t in backward.by_tid if t not in step_tids}
    step_list = sorted(steps.items())  # by N

    def phase(tid, t):
        if optimizer.contains(tid, t):
            return "optimizer"
        if backward.contains(tid, t) or tid in backward_only:
            return "backward"
        return "forward"

    def step_of(t):
        k = bisect.bisect_right([s[1][0] for s in step_list], t)
        if k == 0:
            return -1
        n, (lo, hi) = step_list[k - 1]
        return n if t <= hi else -1

    # The first call of each correlation; the host events in the reader's order.
    launches.sort(key=lambda l: (l["corr"], l["ts"]))
    first_call = {}
    for l in launches:
        first_call.setdefault(l["corr"], l)
    host = [dict(o) for o in ops] + [dict(o) for o in annots]
    for l in launches:
        if l["dur"] < 0:
            continue
        l["host"] = len(host)
        host.append({"tid": l["tid"], "start": l["ts"], "end": l["ts"] + l["dur"],
                     "name": l["name"], "kind": "runtime", "corr": l["corr"]})
    for h in host:
        h["phase"] = phase(h["tid"], h["start"])

    selected = []
    for r in rows:
        l = first_call.get(r["corr"]) if r["corr"] else None
        r["launch"] = l["host"] if l is not None and "host" in l else -1
        r["phase"] = "unknown" if l is None else phase(l["tid"], l["ts"])
        r["step"] = step_of(l["ts"] if l is not None else r["start"])
        if a.step is None or r["step"] == a.step:
            selected.append(r)
    rows = selected

    if a.step is None:
        w0 = min([h["start"] for h in host] + [r["start"] for r in rows])
        w1 = max([h["end"] for h in host] + [r["end"] for r in rows])
        step_ranges = [(n, lo, hi) for n, (lo, hi) in step_list]
    else:
        lo, hi = steps[a.step]
        w0, w1 = lo, hi
        step_ranges = [(a.step, lo, hi)]

    graph = defaultdict(int)
    out = {"window_start_ns": w0, "window_end_ns": w1, "window_ns": w1 - w0}

    # ---- host chains ----
    valid = [i for i, h in enumerate(host) if h["end"] >= h["start"]]
    graph["host_events"] = len(valid)
    tids = sorted({host[i]["tid"] for i in valid})
    tindex = {t: k for k, t in enumerate(tids)}
    graph["threads"] = len(tids)
    by_tid = defaultdict(list)
    for i in valid:
        by_tid[host[i]["tid"]].append(i)
    chain_t, chain_ev, chain_end, chain_thread, held = [], [], [], [], []
    thread_begin = []
    start_pos, end_pos = {}, {}
    top_level = set()
    tops = []
    parent = {}
    for k, tid in enumerate(tids):
        v = sorted(by_tid[tid], key=lambda i: (host[i]["start"], -host[i]["end"], i))
        thread_begin.append(len(chain_t))
        nodes, stack, mytops = [], [], []
        for h in v:
            while stack and host[stack[-1]]["end"] < host[h]["end"]:
                x = stack.pop()
                nodes.append((host[x]["end"], x, 1))
            if not stack:
                top_level.add(h)
                mytops.append(h)
            else:
                parent[h] = stack[-1]
            nodes.append((host[h]["start"], h, 0))
            stack.append(h)
        while stack:
            x = stack.pop()
            nodes.append((host[x]["end"], x, 1))
        nodes.sort(key=lambda n: n[0])  # stable: the nesting order breaks ties
        tops.append(mytops)
        for j, (t, h, is_end) in enumerate(nodes):
            p = len(chain_t)
            chain_t.append(t)
            chain_ev.append(h)
            chain_end.append(is_end)
            chain_thread.append(k)
            # The segment into a node: held by the event started just before it, or by the parent
            # of the event that ended just before it.
            if j == 0:
                held.append(-1)
            else:
                _, before, before_end = nodes[j - 1]
                held.append(parent.get(before, -1) if before_end else before)
            if is_end:
                end_pos[h] = p
            else:
                start_pos[h] = p
    thread_begin.append(len(chain_t))
    H = len(chain_t)
    top_ends = [[host[y]["end"] for y in v] for v in tops]

    calls_by_corr = sorted(((host[i]["corr"], host[i]["start"], i) for i in valid
                            if host[i]["kind"] == "runtime"))
    corr_keys = [c[0] for c in calls_by_corr]

    def call_of(corr):
        k = bisect.bisect_left(corr_keys, corr)
        return calls_by_corr[k][2] if k < len(corr_keys) and corr_keys[k] == corr else -1

    records = defaultdict(list)
    for i in sorted(valid, key=lambda i: (host[i]["tid"], host[i]["start"], -host[i]["end"], i)):
        if host[i]["kind"] == "runtime" and host[i]["name"] in RECORD:
            records[host[i]["tid"]].append(i)
    record_starts = {t: [host[i]["start"] for i in v] for t, v in records.items()}

    # ---- device ----
    R = len(rows)
    graph["device_rows"] = R
    launch_ns = [host[r["launch"]]["start"] if r["launch"] >= 0 else None for r in rows]
    graph["rows_with_launch"] = sum(1 for x in launch_ns if x is not None)
    order = sorted(range(R), key=lambda i: (rows[i]["device"], rows[i]["stream"],
                                            rows[i]["start"], rows[i]["end"], i))
    stream_prev = [-1] * R
    rank = {}
    keys = []
    for k, i in enumerate(order):
        rank[i] = k
        key = (rows[i]["device"], rows[i]["stream"])
        if keys and keys[-1] == key:
            stream_prev[i] = order[k - 1]
        else:
            keys.append(key)
    graph["streams"] = len(keys)

    def launch_order(members):
        v = sorted(((launch_ns[i], i) for i in members if launch_ns[i] is not None))
        best, last = -1, []
        for _, i in v:
            if best < 0 or rows[i]["end"] > rows[best]["end"]:
                best = i
            last.append(best)
        return [t for t, _ in v], [i for _, i in v], last

    by_stream = {key: launch_order([i for i in range(R)
                                    if (rows[i]["device"], rows[i]["stream"]) == key])
                 for key in keys}
    by_device = {d: launch_order([i for i in range(R) if rows[i]["device"] == d])
                 for d in sorted({rows[i]["device"] for i in range(R)})}
    by_thread = {t: launch_order([i for i in range(R) if launch_ns[i] is not None
                                  and host[rows[i]["launch"]]["tid"] == t]) for t in tids}

    def last_ending_before(o, t):
        k = bisect.bisect_left(o[0], t)
        return o[2][k - 1] if k else -1

    def launched_last_before(o, t):
        k = bisect.bisect_left(o[0], t)
        return o[1][k - 1] if k else -1

    def last_launch_of_thread(c):
        return launched_last_before(by_thread[host[c]["tid"]], host[c]["start"])

    def record_for(record_corr, c):
        if record_corr > 0:
            return call_of(record_corr)
        v = records.get(host[c]["tid"], [])
        k = bisect.bisect_left(record_starts.get(host[c]["tid"], []), host[c]["start"])
        if k == 0:
            return -1
        graph["record_by_thread"] += 1
        return v[k - 1]

    def recorded_row(rec, device, wait_stream):
        if rec < 0:
            return -1
        t = host[rec]["start"]
        if wait_stream < 0:
            last = last_launch_of_thread(rec)
            if last < 0:
                return -1
            device, wait_stream = rows[last]["device"], rows[last]["stream"]
        o = by_stream.get((device, wait_stream))
        return last_ending_before(o, t) if o else -1

    sync_row, wait_src = {}, {}

    def add_sync(c, r):
        if c not in sync_row or rows[r]["end"] > rows[sync_row[c]]["end"]:
            sync_row[c] = r
        graph["sync_edges"] += 1

    has_event = set()
    for s in syncs:
        graph["syncs"] += 1
        kind = s["kind"]
        if kind == "other":
            graph["other_syncs"] += 1
            continue
        graph[{"stream": "stream_syncs", "context": "context_syncs", "event": "event_syncs",
               "stream_wait_event": "stream_wait_events"}[kind]] += 1
        c = call_of(s["corr"])
        if c < 0:
            graph["unresolved_syncs"] += 1
            continue
        has_event.add(c)
        t = host[c]["start"]
        r = -1
        if kind == "stream":
            o = by_stream.get((s["device"], s["stream"]))
            r = last_ending_before(o, t) if o else -1
        elif kind == "context":
            o = by_device.get(s["device"])
            r = last_ending_before(o, t) if o else -1
        elif kind == "event":
            if BLOCKING.get(host[c]["name"]) != "event":
                graph["event_queries"] += 1
                continue
            r = recorded_row(record_for(s["record"], c), s["device"], s["wait_stream"])
        else:
            src = recorded_row(record_for(s["record"], c), s["device"], s["wait_stream"])
            o = by_stream.get((s["device"], s["stream"]))
            target = -1
            if o:
                k = bisect.bisect_left(o[0], t)
                target = o[1][k] if k < len(o[1]) else -1
            if src < 0 or target < 0:
                graph["unresolved_syncs"] += 1
                continue
            if target not in wait_src or rows[src]["end"] > rows[wait_src[target]]["end"]:
                wait_src[target] = src
            graph["wait_edges"] += 1
            continue
        if r < 0:
            graph["unresolved_syncs"] += 1
            continue
        add_sync(c, r)
    for _, _, c in calls_by_corr:
        kind = BLOCKING.get(host[c]["name"])
        if c in has_event or kind is None:
            continue
        r = -1
        if kind == "event":
            r = recorded_row(record_for(0, c), 0, -1)
        else:
            last = last_launch_of_thread(c)
            if last >= 0:
                o = by_device.get(rows[last]["device"]) if kind == "context" else \
                    by_stream.get((rows[last]["device"], rows[last]["stream"]))
                r = last_ending_before(o, host[c]["start"]) if o else -1
        if r < 0:
            graph["unresolved_syncs"] += 1
            continue
        graph["inferred_syncs"] += 1
        add_sync(c, r)

    inside = sum(1 for r in rows if r["end"] > w0 and r["start"] < w1)
    if w1 <= w0 or not rows or inside == 0 or graph["rows_with_launch"] == 0:
        out["available"] = False
        out["graph"] = dict(graph)
        print(json.dumps(out, indent=1))
        return

    # ---- the walk ----
    def time_of(node):
        if node < H:
            return chain_t[node]
        r, end = divmod(node - H, 2)
        return rows[r]["end"] if end else rows[r]["start"]

    def consider(best, node, t, step):
        return (node, t, step) if best is None or t > best[1] else best

    worker = [t in backward_only for t in tids]

    def host_pred(p):
        best = None
        k, h, t = chain_thread[p], chain_ev[p], chain_t[p]
        first = p == thread_begin[k]
        if not first:
            best = consider(best, p - 1, chain_t[p - 1], "thread")
        if chain_end[p] and h in sync_row:
            r = sync_row[h]
            if rows[r]["end"] < t:
                best = consider(best, H + 2 * r + 1, rows[r]["end"], "sync")
            else:
                graph["skewed_edges"] += 1
        if worker[k]:
            if chain_end[p] or h not in top_level:
                return best
            for a2 in range(len(tids)):
                if worker[a2]:
                    continue
                b, e = thread_begin[a2], thread_begin[a2 + 1]
                q = bisect.bisect_left(chain_t, t, b, e)
                if q == b:
                    continue
                best = consider(best, q - 1, chain_t[q - 1], "fork")
            return best
        gap = None if first else chain_t[p - 1]
        for b2 in range(len(tids)):
            if not worker[b2]:
                continue
            v = tops[b2]
            j = bisect.bisect_left(top_ends[b2], t)
            if j == 0:
                continue
            x = v[j - 1]
            if gap is not None and host[x]["start"] < gap:
                continue
            best = consider(best, end_pos[x], host[x]["end"], "join")
        return best

    def row_pred(r, end):
        x = rows[r]
        if end:
            return (H + 2 * r, x["start"], "row")
        best = None
        prev = stream_prev[r]
        if prev >= 0:
            if rows[prev]["end"] <= x["start"]:
                best = consider(best, H + 2 * prev + 1, rows[prev]["end"], "stream")
            else:
                graph["skewed_edges"] += 1
        if r in wait_src:
            src = wait_src[r]
            if rows[src]["end"] < x["start"]:
                best = consider(best, H + 2 * src + 1, rows[src]["end"], "stream_wait")
            else:
                graph["skewed_edges"] += 1
        if launch_ns[r] is not None:
            if launch_ns[r] < x["start"]:
                best = consider(best, start_pos[x["launch"]], launch_ns[r], "launch")
            else:
                graph["skewed_edges"] += 1
        return best

    # The walk's first node: the latest at or before the window's end.
    best, bt = None, 0
    for k in range(len(tids)):
        b, e = thread_begin[k], thread_begin[k + 1]
        q = bisect.bisect_right(chain_t, w1, b, e)
        if q == b:
            continue
        if best is None or chain_t[q - 1] > bt:
            best, bt = q - 1, chain_t[q - 1]
    for r, x in enumerate(rows):
        end = x["end"] <= w1
        if not end and x["start"] > w1:
            continue
        t = x["end"] if end else x["start"]
        if best is None or t > bt or (t == bt and best >= H and rank[r] < rank[(best - H) // 2]):
            best, bt = H + 2 * r + (1 if end else 0), t
    node = best

    step_ranges.sort(key=lambda s: (s[1], s[0]))
    total, outside = shares(), shares()
    per_step = {s[0]: shares() for s in step_ranges}
    per_phase = {p: shares() for p in PHASES}
    op_ns, op_events, seen_host = defaultdict(int), defaultdict(int), set()
    name_ns, name_rows, seen_row = defaultdict(int), defaultdict(int), set()
    edges = defaultdict(int)

    def add(s, kind, n, runtime, copy):
        key = {"host": "host_event_ns", "untraced": "host_untraced_ns", "device": "device_ns",
               "launch": "launch_delay_ns", "queue": "queue_ns", "wait": "wait_ns",
               "sync": "sync_ns"}[kind]
        s[key] += n
        if kind == "host" and runtime:
            s["runtime_ns"] += n
        if kind == "device" and copy:
            s["copy_ns"] += n

    def account(lo, hi, kind, is_row, owner):
        n = hi - lo
        if n < 0:
            return
        runtime = not is_row and host[owner]["kind"] == "runtime"
        copy = is_row and rows[owner]["kind"] != "kernel"
        ph = rows[owner]["phase"] if is_row else host[owner]["phase"]
        add(total, kind, n, runtime, copy)
        add(per_phase[ph], kind, n, runtime, copy)
        covered = 0
        for st, s0, s1 in step_ranges:
            o = min(hi, s1) - max(lo, s0)
            if o > 0:
                add(per_step[st], kind, o, runtime, copy)
                covered += o
        add(outside, kind, n - min(covered, n), runtime, copy)
        if n == 0:
            return
        if kind == "host":
            key = (host[owner]["name"], host[owner]["kind"])
            op_ns[key] += n
            if owner not in seen_host:
                seen_host.add(owner)
                op_events[key] += 1
        elif kind == "device":
            name_ns[rows[owner]["name"]] += n
            if owner not in seen_row:
                seen_row.add(owner)
                name_rows[rows[owner]["name"]] += 1

    out["last_node_ns"] = time_of(node)
    nodes = 1
    limit = H + 2 * R + 1
    for _ in range(limit):
        t = time_of(node)
        if t <= w0:
            break
        if node < H:
            p = host_pred(node)
        else:
            r, end = divmod(node - H, 2)
            p = row_pred(r, end == 1)
        if p is None:
            break
        pnode, pt, step = p
        lo, hi = max(pt, w0), min(t, w1)
        edges[step] += 1
        if step == "thread":
            h = held[node]
            if h >= 0:
                account(lo, hi, "host", False, h)
            else:
                account(lo, hi, "untraced", False, chain_ev[node])
        elif step == "join":
            h = held[node]
            if h >= 0:
                account(lo, hi, "host", False, h)
            else:
                account(lo, hi, "untraced", False, chain_ev[node])
        elif step == "fork":
            account(lo, hi, "untraced", False, chain_ev[node])
        elif step == "sync":
            account(lo, hi, "sync", False, chain_ev[node])
        else:
            kind = {"row": "device", "launch": "launch", "stream": "queue",
                    "stream_wait": "wait"}[step]
            account(lo, hi, kind, True, (node - H) // 2)
        node = pnode
        nodes += 1

    def with_totals(s):
        d = dict(s)
        d["host_ns"] = s["host_event_ns"] + s["host_untraced_ns"]
        d["delay_ns"] = s["launch_delay_ns"] + s["queue_ns"] + s["wait_ns"] + s["sync_ns"]
        return d

    out["available"] = True
    out["first_node_ns"] = time_of(node)
    out["path_nodes"] = nodes
    t = with_totals(total)
    out.update(t)
    out["length_ns"] = t["host_ns"] + t["device_ns"] + t["delay_ns"]
    out["outside_path_ns"] = (w1 - w0) - out["length_ns"]
    out["edges_on_path"] = {k: edges.get(k, 0) for k in
                            ("thread", "join", "fork", "row", "launch", "stream", "stream_wait",
                             "sync")}
    out["by_step"] = [dict(with_totals(per_step[st]), step=st, start_ns=s0, end_ns=s1)
                      for st, s0, s1 in sorted(step_ranges)]
    out["outside_steps"] = with_totals(outside)
    out["by_phase"] = [dict(with_totals(per_phase[p]), phase=p) for p in PHASES]
    out["host_ops"] = sorted(({"name": n, "kind": k, "ns": v, "events": op_events[(n, k)]}
                              for (n, k), v in op_ns.items()),
                             key=lambda o: (-o["ns"], o["name"], o["kind"]))
    out["device_ns_by_name"] = {n: {"ns": v, "rows": name_rows[n]} for n, v in
                                sorted(name_ns.items())}
    out["graph"] = dict(graph)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
