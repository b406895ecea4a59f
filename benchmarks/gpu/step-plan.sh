#!/usr/bin/env bash
# GPU host: the plan a point is refused by before it runs (core/cost/step_plan.hpp) against what
# the steps measure. Builds with -DTPROBE_WERROR=ON and runs the whole ctest (unless SKIP_BUILD=1),
# then `tprobe profile` on the 26B-A4B shapes (random weights, batch 2): the faithful default at
# 2,048 and 16,384, and eager attention at 4,096 and 65,536 (the eager layer's fp32 probabilities
# [2, 16, 65536, 65536] are 512 GiB: refused before running). Every point that ran must have
# planned_floor_bytes <= its measured peak_allocated_bytes (the plan is a lower bound).
# Output: $OUT/step-plan/ (OUT defaults to ./out); a short table comes last.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/step-plan
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee -a "$LOG"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  say build -DTPROBE_WERROR=ON
  bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
  grep -c 'warning:' "$D/build.txt" | sed 's/^/warnings: /' | tee -a "$LOG"
  if [ "${SKIP_CTEST:-0}" != 1 ]; then
    say ctest -j 8
    (cd build/cuda && timeout 300 ctest -j 8 >"$D/ctest.txt" 2>&1)
    echo "ctest exit $?" | tee -a "$LOG"
    grep -E "tests passed|Total Test time|\(Failed\)|Timeout" "$D/ctest.txt" | tee -a "$LOG"
  fi
fi
if [ "${SKIP_PROFILE:-0}" = 1 ]; then exit 0; fi
say profile default 2048,16384
timeout 250 $T profile --model gemma4-26b-a4b --widths 2048,16384 --repeats 2 --trace off \
  --memory off --json "$D/default.json" >"$D/default.txt" 2>&1
echo "exit $? (default)" | tee -a "$LOG"
say profile eager 4096,65536
timeout 250 $T profile --model gemma4-26b-a4b --attn eager --widths 4096,65536 --repeats 2 \
  --trace off --memory off --json "$D/eager.json" >"$D/eager.txt" 2>&1
echo "exit $? (eager)" | tee -a "$LOG"
grep -E " ok|oom|error" "$D/default.txt" "$D/eager.txt" | cut -c1-400 | tee -a "$LOG"
python3 - "$D" <<'PY' | tee -a "$LOG"
import json, sys
d = sys.argv[1]
G = 1024 ** 3
print("%-8s %-8s %-6s %-8s %12s %12s %8s" % ("run", "width", "out", "refused", "planned GiB",
                                            "peak GiB", "ok"))
for run in ("default", "eager"):
    try:
        doc = json.load(open("%s/%s.json" % (d, run)))
    except Exception as e:
        print(run, "no evidence:", e)
        continue
    for p in doc["results"]["points"]:
        peak = p.get("peak_allocated_bytes") or 0
        plan = p["planned_floor_bytes"]
        held = "yes" if p["outcome"] != "ok" or plan <= peak else "NO"
        print("%-8s %-8d %-6s %-8s %12.2f %12.2f %8s" % (run, p["width"], p["outcome"],
              p["refused_before_running"], plan / G, peak / G, held))
PY
