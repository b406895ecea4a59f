#!/usr/bin/env python3
"""Derives per-rank traces from one real single-GPU torch.profiler trace (tests/fixtures/traces/).

No multi-GPU trace is available yet, so the multi-rank view of `tprobe kernels DIR` is tested on
traces made from a real one: ProfilerStep#STEP of the input (its host events and the device rows
they launched, every other event dropped), copied once per rank with
  - distributedInfo {backend nccl, rank r, world_size N}, as Kineto writes it for a
    torch.distributed job;
  - rank r's time stretched by (1 + 0.1 r) around the step start, so rank N-1 is the slowest and
    no stream gains overlaps;
  - NCCL all-reduce kernels on stream 99: one beside every 40th backward kernel (overlapping
    compute, like bucketed gradient all-reduce) and one after the last kernel (exposed), their
    durations fixed in ns so the tests can check the communication numbers by hand.
Files are named like tensorboard_trace_handler's: host_<pid>.<r>.pt.trace.json.gz.

Usage: derive_rank_traces.py IN.json.gz OUT_DIR [--ranks 2] [--step 4]
"""
import argparse
import gzip
import json
import os

OVERLAPPED_NS = 20_000
EXPOSED_NS = 150_000


def us(ns):
    return round(ns / 1000.0, 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out_dir")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--step", type=int, default=4)
    a = ap.parse_args()
    with gzip.open(a.src, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    name = f"ProfilerStep#{a.step}"
    step = next(e for e in events if e.get("cat") == "user_annotation" and e.get("name") == name)
    lo, hi = step["ts"], step["ts"] + step["dur"]
    host_cats = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"}
    dev_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    host = [e for e in events if e.get("cat") in host_cats and e.get("ph") == "X"
            and lo <= e["ts"] <= hi]
    corr = {e["args"]["correlation"] for e in host
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    dev = [e for e in events if e.get("cat") in dev_cats and e.get("args", {}).get("correlation") in corr]
    ann = [e for e in events if e.get("cat") == "gpu_user_annotation" and e.get("name") == name]
    meta = [e for e in events if e.get("ph") == "M"]
    kept = meta + host + dev + ann
    backward_corr = set()
    bwd_tids = {e["tid"] for e in host if e["name"].startswith("autograd::engine::evaluate_function")}
    for e in host:
        if e.get("cat") == "cuda_runtime" and e["tid"] in bwd_tids:
            backward_corr.add(e["args"].get("correlation"))
    os.makedirs(a.out_dir, exist_ok=True)
    for r in range(a.ranks):
        k = 1.0 + 0.1 * r
        def stretch(ts):
            return lo + (ts - lo) * k
        out = []
        for e in kept:
            e = json.loads(json.dumps(e))
            if "ts" in e and e.get("ph") != "M":
                end = stretch(e["ts"] + e.get("dur", 0))
                e["ts"] = round(stretch(e["ts"]), 3)
                if "dur" in e:
                    e["dur"] = round(end - e["ts"], 3)
            out.append(e)
        dev_r = sorted((e for e in out if e.get("cat") == "kernel"), key=lambda e: e["ts"])
        bwd = [e for e in dev_r if e["args"].get("correlation") in backward_corr]
        nccl = []
        for i, e in enumerate(bwd):
            if i % 40 == 39:
                nccl.append((e["ts"], OVERLAPPED_NS))
        last_end = max(e["ts"] + e["dur"] for e in out if e.get("cat") in dev_cats)
        nccl.append((round(last_end + 5.0, 3), EXPOSED_NS))
        for i, (ts, dur_ns) in enumerate(nccl):
            out.append({"ph": "X", "cat": "kernel",
                        "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                        "pid": 0, "tid": 99, "ts": ts, "dur": us(dur_ns),
                        "args": {"device": 0, "stream": 99, "correlation": 900000000 + i}})
        d = {"schemaVersion": doc.get("schemaVersion", 1), "deviceProperties": doc["deviceProperties"],
             "distributedInfo": {"backend": "nccl", "rank": r, "world_size": a.ranks},
             "displayTimeUnit": "ms", "baseTimeNanoseconds": doc.get("baseTimeNanoseconds", 0),
             "traceEvents": out, "traceName": f"derived rank {r} of {os.path.basename(a.src)}"}
        path = os.path.join(a.out_dir, f"h200_607.{r}.pt.trace.json.gz")
        with gzip.open(path, "wt", compresslevel=9) as f:
            json.dump(d, f, separators=(",", ":"))
        print(f"{path}: {len(out)} events, {len(nccl)} nccl kernels "
              f"({len(nccl) - 1} x {OVERLAPPED_NS} ns overlapped + 1 x {EXPOSED_NS} ns exposed), "
              f"stretch {k:.1f}, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
