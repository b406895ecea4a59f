#!/usr/bin/env python3
"""Checks `tprobe kernels`' memory figures against a plain-Python pass over the same trace.

Reads a torch.profiler Chrome trace (.json or .json.gz) with the json and decimal modules only —
no tprobe code — and computes, from its `[memory]` instant events (profile_memory=True), per
device (Device Type, Device Id): the first, last and peak Total Allocated / Total Reserved, the
running sum of Bytes, the frees of memory allocated before the trace, what was resident before
the trace, the bytes alive at the peak, and the downsampled timeline, by the definitions of
docs/kernels.md ("Memory"). With an evidence file of `tprobe kernels TRACE --json E`, every figure
is compared with results.memory and any difference is printed; exit 1 when one differs.

Usage: kernels_memory_check.py TRACE [EVIDENCE] [--json OUT]
  OUT: the figures computed here, as JSON (per device, keyed "TYPE:ID").
"""
import argparse
import decimal
import gzip
import json
import sys

FIELDS = ("Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id")
TIMELINE_POINTS = 400
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=decimal.Decimal)


def ts_ns(v):
    """Microseconds as written -> integer nanoseconds, half away from zero (as tprobe reads)."""
    d = decimal.Decimal(str(v)) if not isinstance(v, decimal.Decimal) else v
    return int((d * 1000).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def in_range(field, v):
    if not is_int(v):
        return False
    if field == "Addr":
        return 0 <= v < 2**64
    if field == "Bytes":
        return INT64_MIN < v <= INT64_MAX
    if field in ("Total Allocated", "Total Reserved"):
        return 0 <= v <= INT64_MAX
    if field == "Device Type":
        return 0 <= v < 2**31
    return -1 <= v < 2**31  # Device Id


def memory_events(doc):
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    kept, skipped = [], 0
    for order, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") not in ("i", "I") or e.get("name") != "[memory]":
            continue
        args = e.get("args")
        if "ts" not in e or not isinstance(args, dict) or not all(
                f in args and in_range(f, args[f]) for f in FIELDS):
            skipped += 1
            continue
        kept.append({"order": order, "ts": ts_ns(e["ts"]), "tid": e.get("tid"),
                     "addr": args["Addr"], "bytes": args["Bytes"],
                     "alloc": args["Total Allocated"], "reserved": args["Total Reserved"],
                     "type": args["Device Type"], "id": args["Device Id"]})
    return kept, skipped


def point(e):
    return {"ts_ns": e["ts"], "allocated_bytes": e["alloc"], "reserved_bytes": e["reserved"]}


def timeline(ev):
    """First and last events; between them, per equal time bucket, the event with the largest
    Total Allocated (the first of equals)."""
    n = len(ev)
    if n <= TIMELINE_POINTS:
        return [point(e) for e in ev]
    buckets = TIMELINE_POINTS - 2
    t0, width = ev[0]["ts"], ev[-1]["ts"] - ev[0]["ts"] + 1
    best = {}
    for i in range(1, n - 1):
        b = (ev[i]["ts"] - t0) * buckets // width
        if b not in best or ev[i]["alloc"] > ev[best[b]]["alloc"]:
            best[b] = i
    return [point(ev[0])] + [point(ev[best[b]]) for b in sorted(best)] + [point(ev[-1])]


def steps_of(doc):
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    steps = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        if str(e.get("cat", "")).lower() not in ("cpu_op", "operator", "user_annotation"):
            continue
        name = e.get("name", "")
        if not isinstance(name, str) or not name.startswith("ProfilerStep#"):
            continue
        num = name[len("ProfilerStep#"):]
        if not num.isdigit() or len(num) > 11 or "ts" not in e or "dur" not in e:
            continue
        s, end = ts_ns(e["ts"]), ts_ns(e["ts"]) + max(ts_ns(e["dur"]), 0)
        n = int(num)
        lo, hi = steps.get(n, (s, end))
        steps[n] = (min(lo, s), max(hi, end))
    return sorted((lo, hi, n) for n, (lo, hi) in steps.items())


def step_at(steps, ts):
    found = -1
    for lo, hi, n in steps:  # the last step starting at or before ts, if it holds ts
        if lo <= ts:
            found = n if ts <= hi else -1
    return found


def device_figures(ev, steps):
    ev.sort(key=lambda e: (e["ts"], e["order"]))
    n = len(ev)
    peak = max(range(n), key=lambda i: (ev[i]["alloc"], -i))
    peak_res = max(range(n), key=lambda i: (ev[i]["reserved"], -i))
    mismatches = sum(1 for i in range(1, n) if ev[i - 1]["alloc"] + ev[i]["bytes"] != ev[i]["alloc"])
    open_at = {}  # addr -> stack of open allocations
    freed_at = [None] * n
    unmatched = unmatched_bytes = pre_freed = dup = size_mismatch = 0
    for i, e in enumerate(ev):
        if e["bytes"] > 0:
            stack = open_at.setdefault(e["addr"], [])
            dup += 1 if stack else 0
            stack.append(i)
        elif e["bytes"] < 0:
            stack = open_at.get(e["addr"])
            if not stack:
                unmatched += 1
                unmatched_bytes += -e["bytes"]
                pre_freed += -e["bytes"] if i <= peak else 0
                continue
            a = stack.pop()
            freed_at[a] = i
            size_mismatch += 1 if ev[a]["bytes"] != -e["bytes"] else 0
    allocs = [i for i in range(n) if ev[i]["bytes"] > 0]
    alive = [i for i in allocs if i <= peak and (freed_at[i] is None or freed_at[i] > peak)]
    never = [i for i in allocs if freed_at[i] is None]
    resident_before = ev[0]["alloc"] - ev[0]["bytes"]
    alive_bytes = sum(ev[i]["bytes"] for i in alive)
    resident = resident_before - pre_freed
    pk = point(ev[peak])
    pk.update({"index": peak, "step": step_at(steps, ev[peak]["ts"])})
    return {
        "device_type": ev[0]["type"], "device_id": ev[0]["id"], "events": n,
        "allocations": len(allocs), "frees": sum(1 for e in ev if e["bytes"] < 0),
        "zero_byte_events": sum(1 for e in ev if e["bytes"] == 0),
        "allocated_bytes_total": sum(ev[i]["bytes"] for i in allocs),
        "freed_bytes_total": sum(-e["bytes"] for e in ev if e["bytes"] < 0),
        "bytes_sum": sum(e["bytes"] for e in ev),
        "first": point(ev[0]), "last": point(ev[-1]), "peak": pk,
        "peak_reserved": point(ev[peak_res]),
        "unmatched_frees": unmatched, "unmatched_free_bytes": unmatched_bytes,
        "duplicate_allocations": dup, "size_mismatched_frees": size_mismatch,
        "total_mismatches": mismatches,
        "never_freed_allocations": len(never),
        "never_freed_bytes": sum(ev[i]["bytes"] for i in never),
        "resident_before_trace_bytes": resident_before,
        "alive_at_peak": {"allocations": len(alive), "bytes": alive_bytes,
                          "resident_bytes": resident, "pre_trace_freed_bytes": pre_freed,
                          "unexplained_bytes": ev[peak]["alloc"] - resident - alive_bytes},
        "timeline": timeline(ev),
    }


def compute(path):
    doc = load(path)
    kept, skipped = memory_events(doc)
    steps = steps_of(doc)
    by_device = {}
    for e in kept:
        by_device.setdefault((e["type"], e["id"]), []).append(e)
    return {"events": len(kept), "skipped_events": skipped,
            "devices": {f"{t}:{i}": device_figures(ev, steps)
                        for (t, i), ev in sorted(by_device.items())}}


def compare(mine, results):
    """Differences between the figures here and results.memory of tprobe's evidence."""
    diffs = []
    mem = results.get("memory")
    if not isinstance(mem, dict):
        return ["results.memory is missing"]
    for key in ("events", "skipped_events"):
        if mem.get(key) != mine[key]:
            diffs.append(f"{key}: tprobe {mem.get(key)}, python {mine[key]}")
    theirs = {f"{d['device_type']}:{d['device_id']}": d for d in mem.get("devices", [])}
    if sorted(theirs) != sorted(mine["devices"]):
        diffs.append(f"devices: tprobe {sorted(theirs)}, python {sorted(mine['devices'])}")
    for key, d in mine["devices"].items():
        t = theirs.get(key)
        if t is None:
            continue
        for field, value in d.items():
            if field == "timeline":
                tl = t.get("timeline", {})
                got = [{"ts_ns": a, "allocated_bytes": b, "reserved_bytes": c}
                       for a, b, c in zip(tl.get("ts_ns", []), tl.get("allocated_bytes", []),
                                          tl.get("reserved_bytes", []))]
                if got != value or tl.get("events") != d["events"]:
                    diffs.append(f"{key} timeline: tprobe {len(got)} points, python {len(value)} "
                                 f"(first difference at "
                                 f"{next((i for i, (x, y) in enumerate(zip(got, value)) if x != y), min(len(got), len(value)))})")
            elif isinstance(value, dict):
                for sub, v in value.items():
                    if t.get(field, {}).get(sub) != v:
                        diffs.append(f"{key} {field}.{sub}: tprobe {t.get(field, {}).get(sub)}, "
                                     f"python {v}")
            elif t.get(field) != value:
                diffs.append(f"{key} {field}: tprobe {t.get(field)}, python {value}")
        # tprobe's placed rows must add up to its alive bytes (the part split is tprobe's own).
        rows = t.get("alive_at_peak", {}).get("by_phase_part", [])
        if sum(r.get("bytes", 0) for r in rows) != d["alive_at_peak"]["bytes"]:
            diffs.append(f"{key} alive_at_peak.by_phase_part[].bytes add up to "
                         f"{sum(r.get('bytes', 0) for r in rows)}, not the alive bytes "
                         f"{d['alive_at_peak']['bytes']}")
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("evidence", nargs="?")
    ap.add_argument("--json", dest="out")
    a = ap.parse_args()
    mine = compute(a.trace)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(mine, f)
    for key, d in mine["devices"].items():
        p = d["alive_at_peak"]
        print(f"{key}: {d['events']} events, first {d['first']['allocated_bytes']}, peak "
              f"{d['peak']['allocated_bytes']} at {d['peak']['ts_ns']} ns (step "
              f"{d['peak']['step']}), last {d['last']['allocated_bytes']}; alive at the peak "
              f"{p['bytes']} in {p['allocations']} allocations + resident {p['resident_bytes']}; "
              f"{d['unmatched_frees']} frees without an allocation ({d['unmatched_free_bytes']} "
              f"bytes); {len(d['timeline'])} timeline points")
    if a.evidence:
        with open(a.evidence) as f:
            results = json.load(f)["results"]
        diffs = compare(mine, results)
        for line in diffs:
            print("DIFFERS:", line)
        print("equal" if not diffs else f"{len(diffs)} difference(s)")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
