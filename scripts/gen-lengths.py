#!/usr/bin/env python3
"""Writes a seeded, synthetic token-length dataset for tprobe padding/bucket benchmarks.

usage: scripts/gen-lengths.py RECORDS OUT [--format jsonl|csv|text] [--seed N]
OUT ending in .gz is gzip-compressed. Lengths are log-uniform in [64, 16384] per source, with
longer sources named dialogue_*; Python's random.Random is the same Mersenne Twister on every
platform, so a seed gives the same file everywhere.
"""
import argparse
import gzip
import math
import random
import sys

SOURCES = [("chat", 64, 4096), ("code", 128, 8192), ("qa_docs", 128, 6000),
           ("dialogue_long", 1024, 16384), ("dialogue_agent", 4096, 16384)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("records", type=int)
    ap.add_argument("out")
    ap.add_argument("--format", choices=["jsonl", "csv", "text"], default="jsonl")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    opener = gzip.open if a.out.endswith(".gz") else open
    with opener(a.out, "wt") as f:
        if a.format == "csv":
            f.write("length,source\n")
        for _ in range(a.records):
            name, lo, hi = SOURCES[rng.randrange(len(SOURCES))]
            n = int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
            if a.format == "jsonl":
                f.write('{"length": %d, "source": "%s"}\n' % (n, name))
            elif a.format == "csv":
                f.write("%d,%s\n" % (n, name))
            else:
                f.write("%d\n" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
