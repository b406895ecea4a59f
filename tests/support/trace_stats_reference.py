#!/usr/bin/env python3
"""Plain-Python reference for the launch-bound statistics of `tprobe kernels` (docs/kernels.md).

Reads a torch.profiler trace with `json` alone (times as decimal.Decimal, so nothing rounds) and
computes, from the definitions in docs/kernels.md and without any of tprobe's code, the figures
tests/cli/kernels_cli_test.cpp holds tprobe's evidence against: the idle split (host wait, kernel
wait, no launch), the launch statistics, the queue length per stream, the copy bandwidth and the
host-op census, over every device row (no step or device selection).

Usage: trace_stats_reference.py TRACE.json[.gz] [--ops aten::mm,aten::linear]  (prints JSON)
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
OPS = {"cpu_op", "operator"}
DAY_NS = 86400 * 10**9


def ns(us):
    """Microseconds (Decimal or int) to integer nanoseconds, half away from zero."""
    q = decimal.Decimal(us) * 1000
    return int(q.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def pct(sorted_values, p):
    n = len(sorted_values)
    return sorted_values[-(-p * n // 100) - 1] if n else 0


def dist(values):
    v = sorted(values)
    if not v:
        return {"count": 0, "sum_ns": 0, "min_ns": 0, "p50_ns": 0, "p90_ns": 0, "p99_ns": 0,
                "max_ns": 0}
    return {"count": len(v), "sum_ns": sum(v), "min_ns": v[0], "p50_ns": pct(v, 50),
            "p90_ns": pct(v, 90), "p99_ns": pct(v, 99), "max_ns": v[-1]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--ops", default="aten::mm,aten::linear,aten::copy_,aten::_grouped_mm")
    a = ap.parse_args()
    opener = gzip.open if a.trace.endswith(".gz") else open
    with opener(a.trace, "rt") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc

    rows, launches, ops = [], {}, []
    for i, e in enumerate(events):
        if e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        args = e.get("args", {})
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
            rows.append({"start": start, "end": start + dur, "device": dev, "stream": stream,
                         "kind": DEVICE[cat], "name": e["name"], "corr": corr,
                         "bytes": args.get("bytes")})
        elif cat in LAUNCH:
            corr = args.get("correlation", 0)
            if "ts" not in e or not isinstance(corr, int) or corr == 0:
                continue
            dur = ns(e["dur"]) if "dur" in e else -1
            if dur < 0 or dur > DAY_NS:
                dur = -1
            l = {"ts": ns(e["ts"]), "dur": dur, "tid": e.get("tid")}
            if corr not in launches or l["ts"] < launches[corr]["ts"]:
                launches[corr] = l
        elif cat in OPS and "ts" in e and "dur" in e:
            start = ns(e["ts"])
            ops.append({"i": i, "tid": e.get("tid"), "start": start,
                        "end": start + max(ns(e["dur"]), 0), "name": e["name"]})
    for r in rows:
        r["launch"] = launches.get(r["corr"]) if r["corr"] else None

    out = {}
    # Idle split per device.
    idle = []
    for dev in sorted({r["device"] for r in rows}):
        d = sorted((r for r in rows if r["device"] == dev),
                   key=lambda r: (r["start"], r["launch"] is None,
                                  r["launch"]["ts"] if r["launch"] else 0))
        s = {"device": dev, "idle_ns": 0, "gaps": 0, "host_wait_ns": 0, "kernel_wait_ns": 0,
             "unlaunched_ns": 0, "host_wait_gaps": 0}
        busy_end = d[0]["end"]
        for r in d[1:]:
            if r["start"] > busy_end:
                gap = r["start"] - busy_end
                s["idle_ns"] += gap
                s["gaps"] += 1
                if r["launch"] is None:
                    s["unlaunched_ns"] += gap
                else:
                    host = min(max(r["launch"]["ts"] - busy_end, 0), gap)
                    s["host_wait_ns"] += host
                    s["kernel_wait_ns"] += gap - host
                    s["host_wait_gaps"] += host > 0
            busy_end = max(busy_end, r["end"])
        idle.append(s)
    out["idle_split"] = idle

    # Launch statistics over kernel rows.
    kernels = [r for r in rows if r["kind"] == "kernel"]
    launched = [r for r in kernels if r["launch"]]
    known = [r for r in launched if r["launch"]["dur"] >= 0]
    shorter = [r for r in known if r["end"] - r["start"] < r["launch"]["dur"]]
    out["launches"] = {
        "kernels": len(kernels), "with_launch": len(launched),
        "launch_duration_unknown": len(launched) - len(known),
        "launch_call": dist([r["launch"]["dur"] for r in known]),
        "launch_delay": dist([r["start"] - r["launch"]["ts"] for r in launched]),
        "negative_delay": sum(1 for r in launched if r["start"] < r["launch"]["ts"]),
        "shorter_than_launch": len(shorter),
        "shorter_than_launch_ns": sum(r["end"] - r["start"] for r in shorter),
    }

    # Queue length per (device, stream).
    queues = []
    for key in sorted({(r["device"], r["stream"]) for r in rows}):
        mine = [r for r in rows if (r["device"], r["stream"]) == key]
        ch = []
        for r in mine:
            if r["launch"]:
                ch.append((min(r["launch"]["ts"], r["start"]), 1))
                ch.append((r["end"], -1))
        ch.sort()  # (t, -1) before (t, +1)
        hist, length = defaultdict(int), 0
        for j, (t, delta) in enumerate(ch):
            length += delta
            if j + 1 < len(ch) and ch[j + 1][0] > t:
                hist[length] += ch[j + 1][0] - t
        q = {"device": key[0], "stream": key[1], "rows": len(ch) // 2,
             "unlaunched_rows": len(mine) - len(ch) // 2,
             "window_start_ns": ch[0][0] if ch else 0, "window_end_ns": ch[-1][0] if ch else 0,
             "max_length": max(hist) if hist else 0,
             "time_at_length_ns": [hist.get(n, 0) for n in range(max(hist) + 1)] if hist else []}
        queues.append(q)
    out["queue_length"] = queues

    # Copies per name.
    copies = defaultdict(lambda: {"count": 0, "rows_with_bytes": 0, "bytes": 0, "total_ns": 0})
    for r in rows:
        if r["kind"] == "kernel":
            continue
        c = copies[r["name"]]
        c["count"] += 1
        if isinstance(r["bytes"], int) and r["bytes"] >= 0:
            c["rows_with_bytes"] += 1
            c["bytes"] += r["bytes"]
            c["total_ns"] += r["end"] - r["start"]
    out["copies"] = {k: v for k, v in sorted(copies.items())}

    # Host ops: top-level = no other op on the thread contains it (the first written of two
    # equal intervals contains the other); device rows to the latest-starting top-level op
    # holding the launch's start.
    by_tid = defaultdict(list)
    for o in ops:
        by_tid[o["tid"]].append(o)
    top = {}
    calls, top_calls = defaultdict(int), defaultdict(int)
    for tid, v in by_tid.items():
        v.sort(key=lambda o: (o["start"], -o["end"], o["i"]))
        reach = None
        tops = []
        for o in v:
            if reach is None or o["end"] > reach:
                tops.append(o)
                top_calls[o["name"]] += 1
            calls[o["name"]] += 1
            reach = o["end"] if reach is None else max(reach, o["end"])
        top[tid] = tops
    dev_rows, dev_ns = defaultdict(int), defaultdict(int)
    outside = 0
    for r in rows:
        holder = None
        if r["launch"] and r["launch"]["tid"] in top:
            tops = top[r["launch"]["tid"]]
            k = bisect.bisect_right([o["start"] for o in tops], r["launch"]["ts"])
            if k and tops[k - 1]["end"] >= r["launch"]["ts"]:
                holder = tops[k - 1]
        if holder is None:
            outside += 1
            continue
        dev_rows[holder["name"]] += 1
        dev_ns[holder["name"]] += r["end"] - r["start"]
    out["host_ops"] = {
        "ops": len(ops), "top_level_ops": sum(top_calls.values()),
        "rows_in_op": len(rows) - outside, "rows_outside_op": outside,
        "names": len(calls),
        "some": {n: {"calls": calls[n], "top_level_calls": top_calls[n],
                     "device_rows": dev_rows[n], "device_ns": dev_ns[n]}
                 for n in a.ops.split(",")},
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
