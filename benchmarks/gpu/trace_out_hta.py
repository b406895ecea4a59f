#!/usr/bin/env python3
"""One `profile --trace-out` case of trace-out-hta.sh: kernels' reading of the trace against
profile's evidence (the same totals and phase x part rows), then HolisticTraceAnalysis loading the
trace from its source folder. Prints one line per check; exits 1 when one fails.

Usage: trace_out_hta.py --hta HTA_SRC --dir CASE_DIR   (CASE_DIR holds profile.json, kernels.json
and step.json.gz). HTA is run where it is; nothing of it is copied.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hta", required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    ok = True
    prof = json.load(open(os.path.join(a.dir, "profile.json")))["results"]
    kern = json.load(open(os.path.join(a.dir, "kernels.json")))["results"]
    want, got = prof["kernel_table"]["totals"], kern["kernel_table"]["totals"]
    same = want["sum_ns"] == got["sum_ns"] and want["events"] == got["events"]
    print(f"totals: profile sum_ns={want['sum_ns']} events={want['events']}; "
          f"kernels sum_ns={got['sum_ns']} events={got['events']}: {'EQUAL' if same else 'DIFFER'}")
    ok &= same
    point = prof["kernel_table_point"]
    pts = [p for p in prof["points"]
           if p["width"] == point["width"] and p["batch"] == point["batch"] and not p["padded"]]
    parts_same = bool(pts) and pts[0]["kernel_trace"]["by_phase_part"] == kern["by_phase_part"]
    print(f"phase x part rows: {len(kern['by_phase_part'] or [])}: "
          f"{'EQUAL' if parts_same else 'DIFFER'}")
    ok &= parts_same
    print(f"trace_out: {json.dumps(prof.get('trace_out'))}")

    # HTA reads a folder of rank traces: the trace alone in a temporary folder.
    sys.path.insert(0, a.hta)
    try:
        from hta.trace_analysis import TraceAnalysis
    except Exception as e:  # noqa: BLE001 - say what is missing and stop
        print(f"HTA: cannot import hta from {a.hta}: {e!r}")
        return 1
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(os.path.join(a.dir, "step.json.gz"), os.path.join(d, "rank-0.json.gz"))
        t0 = time.perf_counter()
        try:
            analyzer = TraceAnalysis(trace_dir=d)
        except Exception as e:  # noqa: BLE001 - the check's point: HTA refused the trace
            print(f"HTA: TraceAnalysis failed: {e!r}")
            return 1
        print(f"HTA: TraceAnalysis loaded the trace in {time.perf_counter() - t0:.1f} s")
        try:  # how many events it holds (HTA's internal API: informative only)
            print(f"HTA: {len(analyzer.t.get_trace(0))} events in rank 0's frame")
        except Exception as e:  # noqa: BLE001
            print(f"HTA: event count not read ({e!r})")
        try:
            breakdown = analyzer.get_gpu_kernel_breakdown(visualize=False)
            print(f"HTA: kernel breakdown, {len(breakdown[1])} kernel rows")
        except Exception as e:  # noqa: BLE001 - loaded, but the breakdown failed: say so
            print(f"HTA: loaded; get_gpu_kernel_breakdown failed: {e!r}")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
