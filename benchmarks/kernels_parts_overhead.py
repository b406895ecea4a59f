#!/usr/bin/env python3
"""The read overhead of `tprobe kernels`' module attribution (docs/kernels.md, "Parts").

Writes two large traces from the committed with_stack fixture
(tests/fixtures/traces/hf-sdpa-stack-2x256.json.gz, one HF + PEFT step): COPIES copies of its
events, each shifted past the one before in time (ts + k * (span + 1 ms)) with its ids shifted
(correlation, External id, flow ids: + k * 10^7) and its ProfilerStep#N renumbered N + k, so every
copy is one more step with its own launches and flows; the second trace is the same without its
python_function and fwdbwd events, which is a trace the module attribution does not run on. Then
times COMMAND on each ({} in it is the trace's path): one warm-up each, then REPEATS rounds
alternating with, without, with, without ..., each run's user+sys CPU (the kernel's accounting of
the finished child) and wall. Prints every run, the medians and the median of the pairwise CPU
ratios (with / without). With --off ARGS (the command's arguments that turn the attribution
off, e.g. --off "--parts off"), a third run per round reads the trace WITH module events and the
attribution off: "attribution" = with / with-off is what the attribution adds to reading the same
file; "events" = with-off / without is what reading the extra python_function and fwdbwd events
costs (the recording's size, not the attribution).

Usage: benchmarks/kernels_parts_overhead.py [--copies 13] [--repeats 5] [--dir DIR] -- COMMAND
  e.g. --off "--parts off" -- build/cpu/src/app/tprobe kernels {} --top 3
       -- build/cpu/benchmarks/tprobe_kernels_read_bench {}
  (DIR: where the two traces are written, kept and reused when present; default a temporary
  folder, removed at the end)
"""
import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "traces", "hf-sdpa-stack-2x256.json.gz")
ID_SHIFT = 10**7


def shifted(e, k, dt):
    if k == 0:
        return e
    e = dict(e)
    if "ts" in e:
        e["ts"] = e["ts"] + k * dt
    if "id" in e and isinstance(e["id"], int):
        e["id"] = e["id"] + k * ID_SHIFT
    name = e.get("name")
    if isinstance(name, str) and name.startswith("ProfilerStep#"):
        e["name"] = "ProfilerStep#%d" % (int(name[len("ProfilerStep#"):]) + k)
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ("correlation", "External id"):
            if isinstance(args.get(key), int) and args[key] != 0:
                args[key] = args[key] + k * ID_SHIFT
        e["args"] = args
    return e


def write_traces(out_with, out_without, copies, fixture=FIXTURE):
    doc = json.load(gzip.open(fixture))
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    ends = [e["ts"] + e["dur"] for e in events
            if isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))]
    span = max(ends + ts) - min(ts)
    dt = span + 1000.0  # µs: each copy starts 1 ms after the one before ends
    def is_once(e):  # metadata and the trace's own markers; a [memory] event is one per copy
        return (e.get("ph") in ("M", "i") and e.get("name") != "[memory]") or e.get("cat") == "Trace"
    once = [e for e in events if is_once(e)]
    each = [e for e in events if not is_once(e)]
    for e in once:  # the trace window grows to hold every copy
        if e.get("cat") == "Trace" and isinstance(e.get("dur"), (int, float)):
            e["dur"] = e["dur"] + (copies - 1) * dt
        if e.get("name") == "Record Window End" and isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] + (copies - 1) * dt
    head = json.dumps(doc)[:-1]  # the other top-level keys, without the closing brace
    with open(out_with, "w") as fw, open(out_without, "w") as fo:
        for f in (fw, fo):
            f.write(head + (", " if doc else "") + '"traceEvents": [')
        first = {fw: True, fo: True}

        def put(f, e):
            f.write(("" if first[f] else ",\n") + json.dumps(e))
            first[f] = False

        for e in once:
            put(fw, e)
            put(fo, e)
        for k in range(copies):
            for e in each:
                s = shifted(e, k, dt)
                put(fw, s)
                if s.get("cat") not in ("python_function", "fwdbwd"):
                    put(fo, s)
        for f in (fw, fo):
            f.write("]}\n")


def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), err))
    return ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=13)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dir")
    ap.add_argument("--off", help="arguments appended to COMMAND to turn the attribution off")
    ap.add_argument("command", nargs="+")
    a = ap.parse_args()
    if not any("{}" in c for c in a.command):
        sys.exit("the command must hold {} where the trace's path goes")
    tmp = None
    d = a.dir
    if d is None:
        d = tmp = tempfile.mkdtemp(prefix="tprobe-parts-bench-")
    os.makedirs(d, exist_ok=True)
    with_path = os.path.join(d, "with-modules-%d.json" % a.copies)
    without_path = os.path.join(d, "without-modules-%d.json" % a.copies)
    try:
        if not (os.path.exists(with_path) and os.path.exists(without_path)):
            write_traces(with_path, without_path, a.copies)
        for p in (with_path, without_path):
            print("# %s: %.1f MB" % (p, os.path.getsize(p) / 1e6))
        cmds = {w: [c.replace("{}", p) for c in a.command]
                for w, p in (("with", with_path), ("without", without_path))}
        kinds = ["with", "without"]
        if a.off:
            cmds["with-off"] = cmds["with"] + a.off.split()
            kinds = ["with", "with-off", "without"]
        for w in kinds:
            run(cmds[w])  # warm-up: the page cache, the binary
        res = {w: [] for w in kinds}
        print("# run cpu_s wall_s max_rss_kb")
        for i in range(a.repeats):
            for w in kinds:
                cpu, wall, rss = run(cmds[w])
                res[w].append((cpu, wall, rss))
                print("%-8s %.3f %.3f %d" % (w, cpu, wall, rss))
        for w in kinds:
            r = res[w]
            print("median %-8s cpu %.3f s, wall %.3f s, max RSS %.1f MiB" % (
                w, statistics.median(x[0] for x in r), statistics.median(x[1] for x in r),
                statistics.median(x[2] for x in r) / 1024))
        ratios = [x[0] / y[0] for x, y in zip(res["with"], res["without"])]
        print("CPU with / without, pair by pair: %s; median %.3f (overhead %+.1f %%)" % (
            ", ".join("%.3f" % x for x in ratios), statistics.median(ratios),
            (statistics.median(ratios) - 1) * 100))
        if a.off:
            for name, x, y in (("attribution (with / with-off)", "with", "with-off"),
                               ("events (with-off / without)", "with-off", "without")):
                r = [p[0] / q[0] for p, q in zip(res[x], res[y])]
                print("CPU %s, pair by pair: %s; median %.3f (%+.1f %%)" % (
                    name, ", ".join("%.3f" % v for v in r), statistics.median(r),
                    (statistics.median(r) - 1) * 100))
    finally:
        if tmp:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
