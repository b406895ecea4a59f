#!/usr/bin/env python3
"""`tprobe kernels`' critical path beside HolisticTraceAnalysis's `critical_path_analysis` on the
same traces (docs/kernels.md, "Critical path"; docs/benchmarks.md, "The critical path against
HTA").

Runs HTA from its source folder (with a Python that has its dependencies: pandas, networkx) on
HTA's own critical-path test traces and on tprobe's ranges fixture, runs `tprobe kernels --json`
on the same traces over the same window, and prints one Markdown table: the window, the path's
length, its host / device / delay shares, the top host events and kernels on it, and HTA's run
time. HTA's figures are in the unit it keeps the trace's times in (microseconds: it rounds a
nanosecond-resolution trace to whole microseconds, start up and end down), shown here in ns.

Usage:
  python3 benchmarks/critical_path_vs_hta.py --hta /path/to/HolisticTraceAnalysis \\
      --tprobe build/cpu/src/app/tprobe [--hta-python /usr/bin/python3] \\
      [--ranges tests/fixtures/traces/hf-sdpa-ranges-nonreentrant-2x256.json.gz] [--json OUT]
Nothing of HTA is copied: it is run where it is.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

# HTA run in its own interpreter; prints one JSON object.
HTA_RUNNER = r"""
import contextlib, io, json, logging, sys, time
hta_dir, trace_dir, annotation, instance = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
sys.path.insert(0, hta_dir)
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
if isinstance(instance, list):
    instance = tuple(instance)
out = {}
with contextlib.redirect_stdout(io.StringIO()):
    analyzer = TraceAnalysis(trace_dir=trace_dir)
    t0 = time.perf_counter()
    result = analyzer.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
    out["seconds"] = time.perf_counter() - t0
if result is None or not result[1]:
    out["ok"] = False
else:
    graph = result[0]
    df = graph.get_critical_path_breakdown()
    out["ok"] = True
    out["length"] = float(df.duration.sum())
    out["by_bound"] = {k: float(v) for k, v in df.groupby("bound_by").duration.sum().items() if k}
    out["edges"] = {k: int(v) for k, v in df.groupby("type").duration.count().items()}
    def top(kinds):
        part = df[df.bound_by.isin(kinds)].groupby("s_name").duration.sum()
        return [[str(k), float(v)] for k, v in part.sort_values(ascending=False).head(3).items()]
    out["top_host"] = top(["cpu_bound"])
    out["top_device"] = top(["gpu_compute_bound", "gpu_communication_bound"])
    clipped = graph.trace_df
    out["window"] = [float(clipped.ts.min()), float((clipped.ts + clipped.dur).max())]
    out["events"] = int(len(clipped))
print(json.dumps(out))
"""


def run_hta(python, hta_dir, trace_dir, annotation, instance):
    t0 = time.perf_counter()
    p = subprocess.run([python, "-c", HTA_RUNNER, hta_dir, trace_dir, annotation,
                        json.dumps(instance)], capture_output=True, text=True)
    if p.returncode != 0:
        return {"ok": False, "error": p.stderr.strip().splitlines()[-1:] or ["exit %d" % p.returncode],
                "wall_s": time.perf_counter() - t0}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["wall_s"] = time.perf_counter() - t0
    return out


def run_tprobe(tprobe, trace, args):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.json")
        p = subprocess.run([tprobe, "kernels", trace, "--json", path] + args,
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("tprobe kernels %s failed: %s" % (trace, p.stderr.strip()))
        with open(path) as f:
            return json.load(f)["results"]


def pct(x):
    return "%.2f %%" % (100.0 * x)


def short(name, n=34):
    return name if len(name) <= n else name[: n - 1] + "…"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hta", required=True, help="HTA's source folder (holds hta/ and tests/)")
    ap.add_argument("--tprobe", required=True, help="the tprobe binary")
    ap.add_argument("--hta-python", default="/usr/bin/python3",
                    help="a Python with HTA's dependencies (default /usr/bin/python3)")
    ap.add_argument("--ranges", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                     "fixtures", "traces",
                                                     "hf-sdpa-ranges-nonreentrant-2x256.json.gz"))
    ap.add_argument("--json", help="also write every figure here")
    a = ap.parse_args()
    data = os.path.join(a.hta, "tests", "data", "critical_path")

    staged = tempfile.mkdtemp(prefix="cp-vs-hta.")  # HTA reads a folder of traces
    ranges_dir = os.path.join(staged, "ranges")
    os.makedirs(ranges_dir)
    os.symlink(os.path.abspath(a.ranges), os.path.join(ranges_dir, "rank0.json.gz"))

    cases = []  # (label, trace file, trace dir, HTA annotation, HTA instance, tprobe args)
    found = {}
    for name in ("simple_add", "alexnet", "cuda_event_sync", "cuda_event_sync_multi_stream"):
        files = sorted(glob.glob(os.path.join(data, name, "*.json*")))
        if not files:
            print("no trace in %s, left out" % os.path.join(data, name), file=sys.stderr)
            continue
        found[name] = files[0]
        cases.append((name + " (whole trace)", files[0], os.path.join(data, name), "", None, []))
    # The ProfilerStep of HTA's event-sync trace, and each step of the ranges fixture.
    for label, trace, tdir, index in (
            ("cuda_event_sync (ProfilerStep)", found.get("cuda_event_sync"),
             os.path.join(data, "cuda_event_sync"), 0),
            ("ranges fixture, first step", a.ranges, ranges_dir, 0),
            ("ranges fixture, second step", a.ranges, ranges_dir, 1)):
        if trace is None:
            continue
        steps = [s["step"] for s in run_tprobe(a.tprobe, trace, [])["trace"]["profiler_steps"]]
        cases.append((label, trace, tdir, "ProfilerStep", index, ["--step", str(steps[index])]))

    rows, everything = [], []
    for label, trace, tdir, annotation, instance, args in cases:
        t0 = time.perf_counter()
        res = run_tprobe(a.tprobe, trace, args)
        tprobe_s = time.perf_counter() - t0
        cp = res["trace"]["critical_path"]
        hta = run_hta(a.hta_python, a.hta, tdir, annotation, instance)
        everything.append({"case": label, "trace": trace, "tprobe_args": args,
                           "hta_annotation": annotation, "hta_instance": instance,
                           "tprobe": cp, "tprobe_wall_s": tprobe_s, "hta": hta})
        top_t = ", ".join("%s %.0f µs" % (short(o["name"]), o["ns"] / 1000)
                          for o in cp.get("host_ops", [])[:3])
        top_tk = ", ".join("%s %.0f µs" % (short(k["family"]), k["ns"] / 1000)
                           for k in cp.get("kernels", [])[:2])
        tp = "%.3f ms: host %s / device %s / delay %s" % (
            cp["length_ns"] / 1e6, pct(cp["host_ratio"]), pct(cp["device_ratio"]),
            pct(cp["delay_ratio"])) if cp["available"] else "n/a: " + cp["why_not"]
        window_t = "%.3f ms" % (cp["window_ns"] / 1e6)
        if hta.get("ok"):
            by, length = hta["by_bound"], hta["length"]
            host = by.get("cpu_bound", 0) + by.get("data_loading", 0)
            device = by.get("gpu_compute_bound", 0) + by.get("gpu_communication_bound", 0)
            delay = by.get("gpu_kernel_launch_overhead", 0) + by.get("gpu_kernel_kernel_overhead", 0)
            ht = "%.3f ms: host %s / device %s / delay %s" % (
                length / 1e3, pct(host / length), pct(device / length), pct(delay / length))
            window_h = "%.3f ms" % ((hta["window"][1] - hta["window"][0]) / 1e3)
            top_h = ", ".join("%s %.0f µs" % (short(n), v) for n, v in hta["top_host"])
            top_hk = ", ".join("%s %.0f µs" % (short(n), v) for n, v in hta["top_device"][:2])
            hta_s = "%.1f s" % hta["seconds"]
        else:
            ht, window_h, top_h, top_hk = "failed: %s" % hta.get("error"), "", "", ""
            hta_s = "%.1f s" % hta["wall_s"]
        rows.append([label, window_t + " / " + window_h, tp, ht, top_t, top_h, top_tk, top_hk,
                     "%.2f s / %s" % (tprobe_s, hta_s)])

    head = ["trace (window)", "window tprobe / HTA", "tprobe: length, shares",
            "HTA: length, shares", "tprobe top host (self)", "HTA top cpu_bound",
            "tprobe top kernels", "HTA top gpu_compute_bound", "run time tprobe / HTA"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(everything, f, indent=1)


if __name__ == "__main__":
    main()
