#!/usr/bin/env bash
# GPU host, one call: `tprobe profile --model gemma4-26b-a4b` on its defaults (six widths
# 2048..16384, batch 2, three timed repeats, one traced and one memory step per point), twice in a
# row: the fixed-term verdict of both runs, and each point's traced-step and memory-step overhead.
# Builds tprobe and its torch module only (-DTPROBE_WERROR=ON). Output: $OUT/verdict/; a table last.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/verdict
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  say build tprobe tprobe_torch -DTPROBE_WERROR=ON
  TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
  grep -c 'warning:' "$D/build.txt" | sed 's/^/warnings: /' | tee -a "$LOG"
  grep -m5 -B2 -A6 'error:' "$D/build.txt" | tee -a "$LOG"
fi
for i in 1 2; do
  say profile defaults, run $i
  timeout ${RUN_TIMEOUT:-235} $T profile --model gemma4-26b-a4b --json "$D/run$i.json" >"$D/run$i.txt" 2>&1
  echo "exit $? (run $i)" | tee -a "$LOG"
  grep -E "^fixed term" "$D/run$i.txt" | tee -a "$LOG"
done
say summary
python3 - "$D" <<'PY' 2>&1 | tee -a "$LOG"
import json, os, sys
d = sys.argv[1]
runs = []
for i in (1, 2):
    try:
        runs.append(json.load(open(os.path.join(d, f"run{i}.json"))))
    except Exception as e:
        print(f"run{i}: {e}")
        runs.append(None)
print(f"{'width':>6} {'run1 step':>10} {'run2 step':>10} {'traced ovh 1':>12} {'traced ovh 2':>12} {'mem ovh 1':>9} {'mem ovh 2':>9}")
pts = [{p["width"]: p for p in (r or {}).get("results", {}).get("points", []) if p.get("outcome") == "ok"} for r in runs]
def ovh(p):
    m = (p or {}).get("memory") or {}
    o = m.get("overhead_ratio")
    return f"{100 * o:+.1f}%" if o is not None else "-"
for w in sorted(set(pts[0]) | set(pts[1])):
    a, b = pts[0].get(w), pts[1].get(w)
    s = lambda p: f"{p['step']['median_s']:.3f}" if p else "-"
    t = lambda p: f"{100 * p['trace_overhead_ratio']:+.1f}%" if p and p.get("trace_overhead_ratio") is not None else "-"
    print(f"{w:>6} {s(a):>10} {s(b):>10} {t(a):>12} {t(b):>12} {ovh(a):>9} {ovh(b):>9}")
for i, r in enumerate(runs, 1):
    ft = ((r or {}).get("results", {}).get("scaling_fit") or {}).get("fixed_term") or {}
    print(f"run {i}: outcome {ft.get('outcome')}, C = {ft.get('c_s')}, [{ft.get('c_low_s')}, {ft.get('c_high_s')}], material {ft.get('material_s')}, p = {ft.get('p_value')}")
PY
say done
