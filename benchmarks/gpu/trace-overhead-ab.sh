#!/usr/bin/env bash
# GPU host: what the traced step and the memory step cost at 2 x W (default 2048). `tprobe profile
# --model gemma4-26b-a4b --widths W --repeats 5` (traced and memory steps on) RUNS times (default
# 4); each run's traced step and memory step against its timed median, and their spread over the
# runs. (At 5a05c85 this script alternated a CUPTI buffer pool on and off, TPROBE_CUPTI_BUFFER_POOL;
# the pool made no difference beyond the noise and was removed: docs/benchmarks.md.)
# Expects a built tree. Output: $OUT/traceab/.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/traceab
W=${W:-2048}
RUNS=${RUNS:-4}
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
for i in $(seq 1 "$RUNS"); do
  echo "== run $i ($(date +%T))" | tee -a "$LOG"
  timeout ${AB_TIMEOUT:-60} $T profile --model gemma4-26b-a4b --widths $W --repeats 5 \
    --json "$D/run-$i.json" >"$D/run-$i.txt" 2>&1
  echo "exit $?" | tee -a "$LOG"
done
python3 - "$D" "$RUNS" <<'PY' 2>&1 | tee -a "$LOG"
import json, os, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
print(f"{'run':>3} {'median s':>9} {'traced s':>9} {'trace ovh':>9} {'mem ovh':>8} {'untagged':>8}")
ovh = []
for i in range(1, runs + 1):
    try:
        j = json.load(open(os.path.join(d, f"run-{i}.json")))
    except Exception as e:
        print(f"{i:>3} {e}")
        continue
    for p in j["results"]["points"]:
        kt = p.get("kernel_trace") or {}
        o = p.get("trace_overhead_ratio")
        if o is not None:
            ovh.append(o)
        m = (p.get("memory") or {}).get("overhead_ratio")
        print(f"{i:>3} {p['step']['median_s']:>9.4f} {p.get('traced_step_s') or 0:>9.4f} "
              f"{100 * (o or 0):>+8.2f}% {100 * (m or 0):>+7.2f}% "
              f"{(kt.get('attribution') or {}).get('untagged_records')!s:>8}")
if ovh:
    print(f"traced-step overhead: median {100 * statistics.median(ovh):+.2f} % over {len(ovh)} runs "
          f"(min {100 * min(ovh):+.2f}, max {100 * max(ovh):+.2f})")
PY
