#!/usr/bin/env python3
"""The plain-Python baseline of docs/benchmarks.md: json.load a trace and sum the device rows.

What a user writes without tprobe: load the whole Chrome trace, add up `dur` of the kernel,
gpu_memcpy and gpu_memset events. Prints the sum (us) and the count, for checking against
`tprobe kernels` on the same file.

Usage: trace_sum_baseline.py TRACE.json[.gz]
"""
import gzip
import json
import sys


def main():
    path = sys.argv[1]
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    total, n = 0.0, 0
    for ev in doc["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat", "").lower() in (
                "kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"):
            total += float(ev["dur"])
            n += 1
    print(f"device_sum_us={total:.3f} device_rows={n}")


if __name__ == "__main__":
    main()
