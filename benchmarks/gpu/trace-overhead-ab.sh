#!/usr/bin/env bash
# GPU host: what the traced step costs at 2 x W (default 2048), and what the CUPTI buffer pool
# saves it. `tprobe profile --model gemma4-26b-a4b --widths W --repeats 5` (traced and memory steps
# on), RUNS times (default 2) alternating the pool on (the default) and off
# (TPROBE_CUPTI_BUFFER_POOL=off: buffers allocated when CUPTI asks, zeroed by CUPTI in the step);
# each run's traced step and memory step against its timed median. Expects a built tree.
# Output: $OUT/traceab/.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/traceab
W=${W:-2048}
RUNS=${RUNS:-2}
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
for i in $(seq 1 "$RUNS"); do
  for pool in on off; do
    echo "== run $i, buffer pool $pool ($(date +%T))" | tee -a "$LOG"
    TPROBE_CUPTI_BUFFER_POOL=$pool timeout ${AB_TIMEOUT:-60} $T profile --model gemma4-26b-a4b \
      --widths $W --repeats 5 --json "$D/pool-$pool-$i.json" >"$D/pool-$pool-$i.txt" 2>&1
    echo "exit $?" | tee -a "$LOG"
  done
done
python3 - "$D" "$RUNS" <<'PY' 2>&1 | tee -a "$LOG"
import json, os, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
print(f"{'run':>3} {'pool':>4} {'median s':>9} {'traced s':>9} {'trace ovh':>9} {'mem ovh':>8} {'untagged':>8}  problems")
ovh = {"on": [], "off": []}
for i in range(1, runs + 1):
    for pool in ("on", "off"):
        try:
            j = json.load(open(os.path.join(d, f"pool-{pool}-{i}.json")))
        except Exception as e:
            print(f"{i:>3} {pool:>4} {e}")
            continue
        for p in j["results"]["points"]:
            kt = p.get("kernel_trace") or {}
            o = p.get("trace_overhead_ratio")
            if o is not None:
                ovh[pool].append(o)
            m = (p.get("memory") or {}).get("overhead_ratio")
            print(f"{i:>3} {pool:>4} {p['step']['median_s']:>9.4f} {p.get('traced_step_s') or 0:>9.4f} "
                  f"{100 * (o or 0):>+8.2f}% {100 * (m or 0):>+7.2f}% "
                  f"{(kt.get('attribution') or {}).get('untagged_records')!s:>8}  {kt.get('problems')}")
for pool, v in ovh.items():
    if v:
        print(f"pool {pool}: traced-step overhead median {100 * statistics.median(v):+.2f} % over {len(v)} runs "
              f"(min {100 * min(v):+.2f}, max {100 * max(v):+.2f})")
PY
