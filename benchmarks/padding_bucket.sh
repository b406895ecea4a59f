#!/usr/bin/env bash
# Benchmark of `tprobe padding` and `tprobe bucket` at up to 1,000,000 records, and of the analyses
# alone (tprobe_padding_bench, benchmarks/padding_bucket_bench.cpp) at up to 2,000,000
# (docs/benchmarks.md). Needs a RelWithDebInfo/Release build (the cpu preset) and GNU time
# (/usr/bin/time -v). Prints to stdout only: one line per run, and the in-process timings the bench
# prints; the generated inputs live in a temporary folder removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TPROBE_BIN:-build/cpu/src/app/tprobe}
bench=${TPROBE_BENCH:-build/cpu/benchmarks/tprobe_padding_bench}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
measure() {  # label, command...: wall, user+sys, max RSS of one run
  local label=$1
  shift
  /usr/bin/time -v "$@" >"$tmp/out" 2>"$tmp/time"
  awk -v l="$label" -F': ' '/Elapsed \(wall/ {w=$2} /User time/ {u=$2} /System time/ {s=$2}
    /Maximum resident/ {m=$2} END {printf "%-44s wall %s  cpu %.2f s  maxrss %.1f MiB\n", l, w, u+s, m/1024}' "$tmp/time"
}
echo "== whole binary (includes libtorch start-up, see 'env')"
measure "tprobe env" "$bin" env
for n in 250000 500000 1000000; do
  measure "tprobe padding synthetic:$n" "$bin" padding --dataset "synthetic:$n" --json "$tmp/p.json"
  measure "tprobe bucket synthetic:$n (5 sizes x 3 seeds)" "$bin" bucket --dataset "synthetic:$n" \
    --cost 6.8715e-4,8.8509e-8 --json "$tmp/b.json"
done
python3 scripts/gen-lengths.py 1000000 "$tmp/l.txt" --format text
python3 scripts/gen-lengths.py 1000000 "$tmp/l.jsonl.gz" --format jsonl
measure "tprobe padding 1M text file" "$bin" padding --dataset "$tmp/l.txt"
measure "tprobe padding 1M jsonl.gz file" "$bin" padding --dataset "$tmp/l.jsonl.gz"
measure "tprobe bucket 1M jsonl.gz + --emit-order" "$bin" bucket --dataset "$tmp/l.jsonl.gz" \
  --cost 6.8715e-4,8.8509e-8 --emit-order "$tmp/order.jsonl"
echo "== in-process analysis only (tprobe_padding_bench: no libtorch)"
for n in 250000 500000 1000000 2000000; do
  measure "bench synthetic:$n" "$bench" "synthetic:$n"
  cat "$tmp/out"
done
measure "bench 1M jsonl.gz" "$bench" "$tmp/l.jsonl.gz"
cat "$tmp/out"
