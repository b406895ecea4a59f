#!/usr/bin/env python3
"""Two builds of `tprobe kernels`' read on the same traces: before / after a change.

Times COMMAND_A and COMMAND_B ({} in each is the trace's path) on every TRACE: one warm-up each,
then REPEATS rounds alternating A, B, A, B ..., each run's user+sys CPU (the kernel's accounting of
the finished child), wall and peak RSS. Prints every run, the medians and the median of the
pairwise CPU ratios B / A. With --replicate FIXTURE --copies N it first writes a large trace from
a committed fixture (kernels_parts_overhead.py's copies: each one more ProfilerStep with its own
ids, its [memory] events included) and times on it too.

Usage: benchmarks/kernels_ab_bench.py --a "CMD_A {}" --b "CMD_B {}" [--repeats 7]
         [--replicate FIXTURE --copies 13 --dir DIR] [TRACE ...]
"""
import argparse
import os
import shlex
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels_parts_overhead import run, write_traces  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--replicate")
    ap.add_argument("--copies", type=int, default=13)
    ap.add_argument("--dir", default="/tmp/kernels-ab")
    ap.add_argument("traces", nargs="*")
    a = ap.parse_args()
    traces = list(a.traces)
    if a.replicate:
        os.makedirs(a.dir, exist_ok=True)
        base = os.path.basename(a.replicate).split(".")[0]
        big = os.path.join(a.dir, "%s-x%d.json" % (base, a.copies))
        stripped = os.path.join(a.dir, "%s-x%d-no-modules.json" % (base, a.copies))
        if not os.path.exists(big):
            write_traces(big, stripped, a.copies, a.replicate)
        traces.append(big)
    for t in traces:
        print("# %s: %.1f MB" % (t, os.path.getsize(t) / 1e6))
        cmds = {k: [c.replace("{}", t) for c in shlex.split(v)] for k, v in (("A", a.a), ("B", a.b))}
        for k in "AB":
            run(cmds[k])
        res = {"A": [], "B": []}
        for _ in range(a.repeats):
            for k in "AB":
                cpu, wall, rss = run(cmds[k])
                res[k].append((cpu, wall, rss))
                print("%s %.3f %.3f %d" % (k, cpu, wall, rss))
        for k in "AB":
            r = res[k]
            print("median %s cpu %.3f s, wall %.3f s, max RSS %.1f MiB" % (
                k, statistics.median(x[0] for x in r), statistics.median(x[1] for x in r),
                statistics.median(x[2] for x in r) / 1024))
        ratios = [y[0] / x[0] for x, y in zip(res["A"], res["B"])]
        print("CPU B / A, pair by pair: %s; median %.3f (%+.1f %%)" % (
            ", ".join("%.3f" % v for v in ratios), statistics.median(ratios),
            (statistics.median(ratios) - 1) * 100))


if __name__ == "__main__":
    main()
