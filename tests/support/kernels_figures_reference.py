#!/usr/bin/env python3
"""Plain-Python reference for `tprobe kernels`' per-stream time, user ranges, repeated kernel
sequences, time series and the engine-glue rule (docs/kernels.md).

Reads a torch.profiler trace with `json` and `decimal` alone (times as exact decimals turned into
integer nanoseconds) and computes, from the definitions in docs/kernels.md and without any of
tprobe's code, over every device row (no step or device selection):

- results.trace.streams: per (device, stream) rows, kernels, memcpys, memsets, their times, the
  sum, the busy time (the rows' union), the part of it another stream was busy too, first start,
  last end, and the two ratios;
- results.trace.user_ranges: every device row in the innermost user_annotation range (ProfilerStep#N
  left out) holding its launch on its launch thread, else the training loop's thread's at that
  time; per range path, instances, host time, rows, kernel and copy time, borrowed rows,
  inclusive time; the rows outside; Kineto's gpu_user_annotation agreement;
- results.trace.kernel_sequences: runs of consecutive kernels per stream, launched by one thread,
  no copy between; sequences of 3..12 kernels (whole names) recurring at least twice,
  non-overlapping, the maximal ones, the top 50 by the idle inside;
- results.trace.time_series: per device at most 400 buckets; the queue length per stream (bucket
  max, time-weighted mean) and each copy kind's bytes and bytes per second;
- results.attribution.linked_evaluate_rows: rows launched inside an
  `autograd::engine::evaluate_function` range (not AccumulateGrad) but outside the op bound to a
  fwdbwd flow end inside it (the engine's glue).

With an evidence file of `tprobe kernels TRACE --json E`, every figure is compared with it and
each difference printed; exit 1 when one differs. Kernel names Kineto wrote mangled ("_Z...") are
demangled with c++filt when it is installed (tprobe demangles them too).

Usage: kernels_figures_reference.py TRACE [EVIDENCE]
"""
import bisect
import decimal
import gzip
import json
import shutil
import subprocess
import sys
from collections import defaultdict

DEVICE = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
          "gpu_memset": "memset", "memset": "memset"}
LAUNCH = {"cuda_runtime", "runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver"}
MIN_LEN, MAX_LEN, MIN_OCC, KEPT = 3, 12, 2, 50
MAX_BUCKETS = 400


def ns(us):
    q = decimal.Decimal(us) * 1000
    return int(q.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=decimal.Decimal)


def demangled(names):
    mangled = sorted(n for n in names if n.startswith("_Z"))
    out = {n: n for n in names}
    if mangled and shutil.which("c++filt"):
        res = subprocess.run(["c++filt"], input="\n".join(mangled) + "\n", capture_output=True,
                             text=True, check=True)
        for m, d in zip(mangled, res.stdout.split("\n")):
            out[m] = d
    return out


def read(path):
    doc = load(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    rows, launches, ranges, dev_ranges, ops, flow_ends, evals = [], {}, [], [], [], [], []
    for i, e in enumerate(events):
        cat = str(e.get("cat", "")).lower()
        args = e.get("args", {}) if isinstance(e.get("args"), dict) else {}
        ph = e.get("ph")
        if cat == "fwdbwd" and ph == "f" and "ts" in e and "id" in e:
            flow_ends.append((e.get("tid"), ns(e["ts"])))
        if ph != "X":
            continue
        if cat in DEVICE:
            dur = ns(e["dur"])
            if dur < 0:
                continue
            start = ns(e["ts"])
            dev = args["device"] if isinstance(args.get("device"), int) and args["device"] >= 0 \
                else (e["pid"] if isinstance(e.get("pid"), int) else 0)
            stream = args["stream"] if isinstance(args.get("stream"), int) and args["stream"] >= 0 \
                else e.get("tid")
            corr = args.get("correlation", 0) if isinstance(args.get("correlation"), int) else 0
            b = args.get("bytes")
            rows.append({"i": i, "start": start, "end": start + dur, "device": dev,
                         "stream": stream, "kind": DEVICE[cat], "name": e["name"], "corr": corr,
                         "bytes": b if isinstance(b, int) and b >= 0 else None})
        elif cat in LAUNCH:
            corr = args.get("correlation", 0)
            if "ts" not in e or not isinstance(corr, int) or corr == 0:
                continue
            dur = ns(e["dur"]) if "dur" in e else -1
            if dur < 0 or dur > 86400 * 10**9:
                dur = -1
            l = {"ts": ns(e["ts"]), "dur": dur, "tid": e.get("tid")}
            if corr not in launches or l["ts"] < launches[corr]["ts"]:
                launches[corr] = l
        elif cat in ("cpu_op", "operator", "user_annotation") and "ts" in e and "dur" in e:
            start = ns(e["ts"])
            end = start + max(ns(e["dur"]), 0)
            if cat == "user_annotation":
                ranges.append({"i": i, "tid": e.get("tid"), "start": start, "end": end,
                               "name": e["name"], "ext": args.get("External id", 0)})
            else:
                ops.append({"tid": e.get("tid"), "start": start, "end": end})
                if e["name"].startswith("autograd::engine::evaluate_function") and \
                        not e["name"].endswith("AccumulateGrad"):
                    evals.append({"tid": e.get("tid"), "start": start, "end": end})
        elif cat == "gpu_user_annotation" and "ts" in e and "dur" in e and ns(e["dur"]) > 0:
            start = ns(e["ts"])
            dev = args["device"] if isinstance(args.get("device"), int) and args["device"] >= 0 \
                else (e["pid"] if isinstance(e.get("pid"), int) else 0)
            stream = args["stream"] if isinstance(args.get("stream"), int) and args["stream"] >= 0 \
                else e.get("tid")
            dev_ranges.append({"device": dev, "stream": stream, "start": start,
                               "end": start + ns(e["dur"]), "ext": args.get("External id", 0)})
    names = demangled({r["name"] for r in rows})
    for r in rows:
        r["name"] = names[r["name"]]
        r["launch"] = launches.get(r["corr"]) if r["corr"] else None
    return rows, ranges, dev_ranges, ops, flow_ends, evals


def streams(rows):
    by = {}
    for r in rows:
        s = by.setdefault((r["device"], r["stream"]), {
            "device": r["device"], "stream": r["stream"], "rows": 0, "kernels": 0, "memcpys": 0,
            "memsets": 0, "kernel_ns": 0, "memcpy_ns": 0, "memset_ns": 0, "sum_ns": 0,
            "busy_ns": 0, "concurrent_ns": 0, "first_start_ns": r["start"],
            "last_end_ns": r["end"]})
        d = r["end"] - r["start"]
        s["rows"] += 1
        s[{"kernel": "kernels", "memcpy": "memcpys", "memset": "memsets"}[r["kind"]]] += 1
        s[r["kind"] + "_ns"] += d
        s["sum_ns"] += d
        s["first_start_ns"] = min(s["first_start_ns"], r["start"])
        s["last_end_ns"] = max(s["last_end_ns"], r["end"])
    for dev in sorted({r["device"] for r in rows}):
        mine = [r for r in rows if r["device"] == dev]
        points = sorted({r["start"] for r in mine} | {r["end"] for r in mine})
        # busy streams over each elementary interval, from the rows' own intervals
        count = defaultdict(lambda: [0] * len(points))
        idx = {t: k for k, t in enumerate(points)}
        for r in mine:
            c = count[r["stream"]]
            for k in range(idx[r["start"]], idx[r["end"]]):
                c[k] += 1
        for k in range(len(points) - 1):
            dt = points[k + 1] - points[k]
            busy = [s for s, c in count.items() if c[k] > 0]
            for s in busy:
                by[(dev, s)]["busy_ns"] += dt
                if len(busy) > 1:
                    by[(dev, s)]["concurrent_ns"] += dt
        total = sum(s["sum_ns"] for (d, _), s in by.items() if d == dev)
        span = points[-1] - points[0]
        for (d, _), s in by.items():
            if d == dev:
                s["sum_share_ratio"] = s["sum_ns"] / total if total else 0.0
                s["busy_span_ratio"] = s["busy_ns"] / span if span else 0.0
    return [by[k] for k in sorted(by)]


def innermost(candidates, t):
    held = [c for c in candidates if c["start"] <= t <= c["end"]]
    if not held:
        return None
    # innermost: the latest start, then the earliest end (the nesting's deepest)
    return max(held, key=lambda c: (c["start"], -c["end"]))


def user_ranges(rows, ranges, dev_ranges):
    steps = [u for u in ranges if u["name"].startswith("ProfilerStep#")]
    user = [u for u in ranges if not u["name"].startswith("ProfilerStep#") and u["end"] >= u["start"]]
    total = sum(r["end"] - r["start"] for r in rows)
    out = {"available": bool(user), "ranges": len(user), "total_ns": total}
    by_tid = defaultdict(list)
    for u in user:
        by_tid[u["tid"]].append(u)
    count = defaultdict(int)
    for u in (steps if steps else user):
        count[u["tid"]] += 1
    main = min(count, key=lambda t: (-count[t], t)) if count else None
    if main not in by_tid:
        main = None
    out["main_tid"] = main if main is not None else -1
    # each range's path: the names of the ranges holding it on its thread, outermost first
    for tid, v in by_tid.items():
        for u in v:
            holders = [p for p in v if p is not u and p["start"] <= u["start"] and
                       p["end"] >= u["end"] and (p["start"], -p["end"]) < (u["start"], -u["end"])]
            holders.sort(key=lambda p: (p["start"], -p["end"]))
            u["path"] = " > ".join([p["name"] for p in holders] + [u["name"]])
    paths = {}
    for u in user:
        p = paths.setdefault(u["path"], {"path": u["path"], "name": u["name"],
                                         "depth": u["path"].count(" > "), "instances": 0,
                                         "host_ns": 0, "rows": 0, "kernels": 0, "kernel_ns": 0,
                                         "memcpy_memset_ns": 0, "borrowed_rows": 0})
        p["instances"] += 1
        p["host_ns"] += u["end"] - u["start"]
    outside = {"rows": 0, "kernel_ns": 0, "memcpy_memset_ns": 0}
    checked = same = 0
    for r in rows:
        d = r["end"] - r["start"]
        hit, borrowed = None, False
        if r["launch"]:
            hit = innermost(by_tid.get(r["launch"]["tid"], []), r["launch"]["ts"])
            if hit is None and main is not None and r["launch"]["tid"] != main:
                hit = innermost(by_tid[main], r["launch"]["ts"])
                borrowed = hit is not None
        if hit is None:
            outside["rows"] += 1
            outside["kernel_ns" if r["kind"] == "kernel" else "memcpy_memset_ns"] += d
            continue
        p = paths[hit["path"]]
        p["rows"] += 1
        p["borrowed_rows"] += borrowed
        if r["kind"] == "kernel":
            p["kernels"] += 1
            p["kernel_ns"] += d
        else:
            p["memcpy_memset_ns"] += d
        if not borrowed:
            dv = innermost([x for x in dev_ranges if x["ext"] and x["device"] == r["device"] and
                            x["stream"] == r["stream"]], r["start"])
            if dv is not None:
                checked += 1
                same += dv["ext"] == hit["ext"]
    for p in paths.values():
        p["inclusive_ns"] = sum(q["kernel_ns"] + q["memcpy_memset_ns"] for q in paths.values()
                                if q["path"] == p["path"] or q["path"].startswith(p["path"] + " > "))
        p["share_ratio"] = (p["kernel_ns"] + p["memcpy_memset_ns"]) / total if total else 0.0
    out["paths"] = paths
    out["outside"] = outside
    out["kineto_checked"], out["kineto_same"] = checked, same
    return out


def kernel_sequences(rows):
    order = sorted(rows, key=lambda r: (r["device"], r["stream"], r["start"], r["i"]))
    runs, cur, prev = [], [], None
    for r in order:
        joins = prev is not None and prev["device"] == r["device"] and \
            prev["stream"] == r["stream"] and r["kind"] == "kernel" and r["launch"] and \
            prev["launch"]["tid"] == r["launch"]["tid"]
        if not joins:
            if len(cur) >= MIN_LEN:
                runs.append(cur)
            cur = []
        prev = None
        if r["kind"] != "kernel" or not r["launch"]:
            continue
        cur.append(r)
        prev = r
    if len(cur) >= MIN_LEN:
        runs.append(cur)
    kept = {}
    for L in range(MIN_LEN, MAX_LEN + 1):
        seen = {}
        for ri, run in enumerate(runs):
            for p in range(len(run) - L + 1):
                key = tuple(x["name"] for x in run[p:p + L])
                e = seen.setdefault(key, {"first": run[p]["start"], "occ": 0, "last": None,
                                          "kernel_ns": 0, "gap_ns": 0, "call_ns": 0})
                if e["last"] is not None and e["last"][0] == ri and p < e["last"][1]:
                    continue
                e["last"] = (ri, p + L)
                e["occ"] += 1
                for k in range(p, p + L):
                    e["kernel_ns"] += run[k]["end"] - run[k]["start"]
                    if k > p:
                        e["gap_ns"] += max(0, run[k]["start"] - run[k - 1]["end"])
                        if run[k]["launch"]["dur"] > 0:
                            e["call_ns"] += run[k]["launch"]["dur"]
        kept[L] = {k: v for k, v in seen.items() if v["occ"] >= MIN_OCC}
    dropped = set()
    for L in range(MAX_LEN, MIN_LEN, -1):
        for key, e in kept[L].items():
            for sub in (key[:-1], key[1:]):
                s = kept[L - 1].get(sub)
                if s is not None and s["occ"] == e["occ"]:
                    dropped.add(sub)
    found = [(k, e) for L in kept for k, e in kept[L].items() if k not in dropped]
    found.sort(key=lambda ke: (-ke[1]["gap_ns"], -ke[1]["occ"], -len(ke[0]), ke[1]["first"],
                               list(ke[0])))
    top = [{"kernels": list(k), "length": len(k), "occurrences": e["occ"],
            "kernel_ns": e["kernel_ns"], "gap_ns": e["gap_ns"],
            "launches_removed": (len(k) - 1) * e["occ"], "launch_call_ns": e["call_ns"],
            "first_start_ns": e["first"]} for k, e in found[:KEPT]]
    kernels = sum(1 for r in rows if r["kind"] == "kernel")
    return {"kernels": kernels, "runs": len(runs), "found": len(found), "top": top}


def time_series(rows):
    out = []
    for dev in sorted({r["device"] for r in rows}):
        mine = [r for r in rows if r["device"] == dev]  # file order, as tprobe adds them

        def queued(r):
            return min(r["launch"]["ts"], r["start"]) if r["launch"] else r["start"]
        start = min(queued(r) for r in mine)
        end = max(r["end"] for r in mine)
        width = max(1, -(-(end - start) // MAX_BUCKETS))
        n = max(1, -(-(end - start) // width))

        def lo(b):
            return start + b * width

        def hi(b):
            return min(end, start + (b + 1) * width)

        def index(t):
            return min(max((t - start) // width, 0), n - 1)
        queues = []
        for stream in sorted({r["stream"] for r in mine if r["launch"]}):
            ch = sorted([(queued(r), 1) for r in mine if r["stream"] == stream and r["launch"]] +
                        [(r["end"], -1) for r in mine if r["stream"] == stream and r["launch"]])
            mx, integral, length = [0] * n, [0] * n, 0
            for k in range(len(ch) - 1):
                length += ch[k][1]
                s, e = ch[k][0], ch[k + 1][0]
                if e <= s or length <= 0:
                    continue
                b = index(s)
                while b < n and lo(b) < e:
                    ov = min(e, hi(b)) - max(s, lo(b))
                    if ov > 0:
                        mx[b] = max(mx[b], length)
                        integral[b] += length * ov
                    b += 1
            mean = [integral[b] / (hi(b) - lo(b)) if hi(b) > lo(b) else 0.0 for b in range(n)]
            queues.append({"stream": stream, "max_length": mx, "mean_length": mean})
        copies = {}
        for r in mine:
            if r["kind"] == "kernel" or r["bytes"] is None:
                continue
            c = copies.setdefault(r["name"], {"name": r["name"], "rows": 0, "bytes": [0.0] * n})
            c["rows"] += 1
            d = r["end"] - r["start"]
            if d <= 0:
                c["bytes"][index(r["start"])] += float(r["bytes"])
                continue
            b = index(r["start"])
            while b < n and lo(b) < r["end"]:
                ov = min(r["end"], hi(b)) - max(r["start"], lo(b))
                if ov > 0:
                    c["bytes"][b] += float(r["bytes"]) * float(ov) / float(d)
                b += 1
        for c in copies.values():
            c["bytes_per_s"] = [c["bytes"][b] * 1e9 / float(hi(b) - lo(b)) if hi(b) > lo(b)
                                else 0.0 for b in range(n)]
        out.append({"device": dev, "start_ns": start, "end_ns": end, "bucket_ns": width,
                    "buckets": n, "queue_length": queues,
                    "copy_bandwidth": [copies[k] for k in sorted(copies)]})
    return out


def held_by(sorted_ivs, starts, longest, t):
    """The intervals of a start-sorted list holding t (ends inclusive); `longest`: the longest
    interval's length, so the scan back from t stops."""
    k = bisect.bisect_right(starts, t)
    out = []
    while k > 0 and starts[k - 1] >= t - longest:
        k -= 1
        if sorted_ivs[k]["end"] >= t:
            out.append(sorted_ivs[k])
    return out


def glue_rows(rows, ops, flow_ends, evals):
    ends = set(flow_ends)
    longest = {}  # the longest op starting at each flow end: the node op the flow binds to
    for o in ops:
        k = (o["tid"], o["start"])
        if k in ends and (k not in longest or o["end"] > longest[k]["end"]):
            longest[k] = o
    nodes = defaultdict(list)
    for (tid, _), o in longest.items():
        nodes[tid].append(o)
    by_tid = defaultdict(list)
    for e in evals:
        by_tid[e["tid"]].append(e)
    index = {}
    for tid, v in list(by_tid.items()) + [((tid, "n"), v) for tid, v in nodes.items()]:
        v.sort(key=lambda x: (x["start"], -x["end"]))
        index[tid] = ([x["start"] for x in v], max(x["end"] - x["start"] for x in v))
    n = 0
    for r in rows:
        if not r["launch"]:
            continue
        tid, t = r["launch"]["tid"], r["launch"]["ts"]
        if tid not in by_tid:
            continue
        held = held_by(by_tid[tid], index[tid][0], index[tid][1], t)
        if not held:
            continue
        e = max(held, key=lambda x: (x["start"], -x["end"]))  # the innermost range
        in_node = False
        if tid in nodes:
            starts, span = index[(tid, "n")]
            in_node = any(e["start"] <= o["start"] and o["end"] <= e["end"]
                          for o in held_by(nodes[tid], starts, span, t))
        n += not in_node
    return n


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    rows, ranges, dev_ranges, ops, flow_ends, evals = read(sys.argv[1])
    mine = {"streams": streams(rows), "user_ranges": user_ranges(rows, ranges, dev_ranges),
            "kernel_sequences": kernel_sequences(rows), "time_series": time_series(rows),
            "glue_rows": glue_rows(rows, ops, flow_ends, evals)}
    if len(sys.argv) == 2:
        print(json.dumps(mine, indent=1, default=str))
        return 0
    with open(sys.argv[2]) as f:
        ev = json.load(f)["results"]
    tr = ev["trace"]
    diffs = []

    def same(what, a, b):
        if isinstance(a, float) or isinstance(b, float):
            ok = abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(a)), abs(float(b)))
        else:
            ok = a == b
        if not ok:
            diffs.append(f"{what}: tprobe {a!r}, python {b!r}")

    if len(tr["streams"]) != len(mine["streams"]):
        diffs.append(f"streams: {len(tr['streams'])} rows, python {len(mine['streams'])}")
    for a, b in zip(tr["streams"], mine["streams"]):
        for k in b:
            same(f"streams[{b['device']},{b['stream']}].{k}", a[k], b[k])
    u, p = tr["user_ranges"], mine["user_ranges"]
    for k in ("available", "ranges", "main_tid", "total_ns", "kineto_checked", "kineto_same"):
        same(f"user_ranges.{k}", u[k], p[k])
    for k in ("rows", "kernel_ns", "memcpy_memset_ns"):
        same(f"user_ranges.outside.{k}", u["outside"][k], p["outside"][k])
    # tprobe writes a tree (each row's parent, an earlier row, and its own name): its paths
    rows = [dict(r) for r in u["rows"]]
    for r in rows:
        r["path"] = r["name"] if r["parent"] < 0 else rows[r["parent"]]["path"] + " > " + r["name"]
    if sorted(r["path"] for r in rows) != sorted(p["paths"]):
        diffs.append(f"user_ranges paths: tprobe {[r['path'] for r in rows]}, "
                     f"python {sorted(p['paths'])}")
    for r in rows:
        q = p["paths"].get(r["path"])
        if q:
            for k in q:
                same(f"user_ranges[{r['path']}].{k}", r[k], q[k])
    s, q = tr["kernel_sequences"], mine["kernel_sequences"]
    for k in ("kernels", "runs", "found"):
        same(f"kernel_sequences.{k}", s[k], q[k])
    same("kernel_sequences.hash_collisions", s["hash_collisions"], 0)
    same("kernel_sequences.top (count)", len(s["top"]), len(q["top"]))
    for i, (a, b) in enumerate(zip(s["top"], q["top"])):
        for k in b:
            same(f"kernel_sequences.top[{i}].{k}", a[k], b[k])
    ts = tr["time_series"]["devices"]
    same("time_series.devices (count)", len(ts), len(mine["time_series"]))
    for a, b in zip(ts, mine["time_series"]):
        for k in ("device", "start_ns", "end_ns", "bucket_ns", "buckets"):
            same(f"time_series[{b['device']}].{k}", a[k], b[k])
        same(f"time_series[{b['device']}] streams", [x["stream"] for x in a["queue_length"]],
             [x["stream"] for x in b["queue_length"]])
        for x, y in zip(a["queue_length"], b["queue_length"]):
            same(f"time_series[{b['device']}] stream {y['stream']} max_length", x["max_length"],
                 y["max_length"])
            for j, (m, n) in enumerate(zip(x["mean_length"], y["mean_length"])):
                same(f"time_series[{b['device']}] stream {y['stream']} mean_length[{j}]", m, n)
        same(f"time_series[{b['device']}] copies", [x["name"] for x in a["copy_bandwidth"]],
             [x["name"] for x in b["copy_bandwidth"]])
        for x, y in zip(a["copy_bandwidth"], b["copy_bandwidth"]):
            same(f"time_series copy {y['name']} rows", x["rows"], y["rows"])
            for j in range(len(y["bytes"])):
                same(f"time_series copy {y['name']} bytes[{j}]", x["bytes"][j], y["bytes"][j])
                same(f"time_series copy {y['name']} bytes_per_s[{j}]", x["bytes_per_s"][j],
                     y["bytes_per_s"][j])
    if (ev.get("parts") or {}).get("module_events"):  # the attribution ran
        same("attribution.linked_evaluate_rows", ev["attribution"]["linked_evaluate_rows"],
             mine["glue_rows"])
    for d in diffs[:40]:
        print(d)
    print(f"{len(diffs)} difference(s); streams {len(mine['streams'])}, user range paths "
          f"{len(p['paths'])}, sequences {q['found']}, series devices {len(mine['time_series'])}, "
          f"glue rows {mine['glue_rows']}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
