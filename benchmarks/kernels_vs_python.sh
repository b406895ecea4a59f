#!/usr/bin/env bash
# Side-by-side timing of `tprobe kernels` against the plain-Python baseline (json.load + sum) on
# one trace, for docs/benchmarks.md: one warm-up of each, then REPEATS rounds alternating
# tprobe, python, tprobe, python ...; prints every run and the medians of user+sys CPU, wall and
# peak RSS, and the CPU ratio.
#
# Usage: benchmarks/kernels_vs_python.sh TRACE.json [REPEATS=3] [TPROBE=build/cpu/src/app/tprobe]
set -euo pipefail
trace=$1
repeats=${2:-3}
tprobe=${3:-build/cpu/src/app/tprobe}
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run() {  # label command...: appends "label user sys wall maxrss_kb" to $log
  local label=$1
  shift
  local t
  t=$(mktemp)
  /usr/bin/time -f '%U %S %e %M' -o "$t" "$@" > /dev/null
  echo "$label $(cat "$t")" | tee -a "$log"
  rm -f "$t"
}

echo "# warm-up"
run warmup-tprobe "$tprobe" kernels "$trace" --top 3
run warmup-python python3 "$here/trace_sum_baseline.py" "$trace"
echo "# label user_s sys_s wall_s max_rss_kb"
for ((i = 0; i < repeats; i++)); do
  run tprobe "$tprobe" kernels "$trace" --top 3
  run python python3 "$here/trace_sum_baseline.py" "$trace"
done
python3 - "$log" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for who in ("tprobe", "python"):
    r = [x for x in rows if x[0] == who]
    cpu = statistics.median(float(x[1]) + float(x[2]) for x in r)
    wall = statistics.median(float(x[3]) for x in r)
    rss = statistics.median(int(x[4]) for x in r) / 1024
    med[who] = cpu
    print(f"median {who}: cpu(user+sys) {cpu:.2f} s, wall {wall:.2f} s, peak RSS {rss:.0f} MiB "
          f"({len(r)} runs)")
print(f"cpu ratio python/tprobe: {med['python'] / med['tprobe']:.2f}x")
EOF
