#!/usr/bin/env bash
# GPU host: tprobe profile's peak memory and where it goes (the memory step) beside Hugging Face +
# PEFT's peak in the same call, at WIDTHS (default 2048 8192 16384), batch 2, 26B-A4B shapes with
# random weights: HF with use_reentrant=True and False (benchmarks/hf_lora_step.py), tprobe on its
# faithful default (reentrant checkpointing, the harness's chunk-checkpoint CE; traced and memory
# steps) and `--checkpointing non-reentrant` at every width, and the chunked CE at 2,048; with
# TINY=1 the tiny model's raw memory history for CI's replay test.
# Output: $OUT/memfaithful/ (OUT defaults to ./out); a short table comes last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/memfaithful
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
W=${WIDTHS:-2048 8192 16384}
WC=$(echo $W | tr ' ' ',')
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
say tprobe profile default, widths $WC
timeout 300 $T profile --model gemma4-26b-a4b --widths $WC --repeats 2 \
  --json "$D/tp-default.json" >"$D/tp-default.txt" 2>&1
echo "exit $? (tprobe default)" | tee -a "$LOG"
grep -E " ok|oom|error" "$D/tp-default.txt" | head -6 | tee -a "$LOG"
say tprobe non-reentrant, widths $WC
timeout 200 $T profile --model gemma4-26b-a4b --widths $WC --warmup 1 --repeats 1 --trace off \
  --checkpointing non-reentrant --json "$D/tp-nonreentrant.json" >"$D/tp-nonreentrant.txt" 2>&1
echo "exit $? (tprobe non-reentrant)" | tee -a "$LOG"
say tprobe at 2048: chunked CE
timeout 120 $T profile --model gemma4-26b-a4b --widths 2048 --repeats 2 --trace off \
  --ce chunked --json "$D/tp-chunked.json" >"$D/tp-chunked.txt" 2>&1
echo "exit $? (tprobe chunked)" | tee -a "$LOG"
if [ "${TINY:-0}" = 1 ]; then
  say tiny raw memory history
  timeout 60 $T profile --model gemma4-tiny --device cuda --dtype bf16 --widths 64 --rank 8 --alpha 16 \
    --ce-chunk 64 --repeats 1 --trace off --raw-memory "$D/raw-memory-tiny-cuda.json" \
    --json "$D/tp-tiny.json" >"$D/tp-tiny.txt" 2>&1
  echo "exit $? (tiny)" | tee -a "$LOG"
fi
for c in reentrant non-reentrant; do
  say hf step $c
  timeout 200 python3 benchmarks/hf_lora_step.py --seq $W --reps 1 --checkpointing $c \
    --json "$D/hf-$c.json" >"$D/hf-$c.txt" 2>&1
  echo "exit $? (hf $c)" | tee -a "$LOG"
  grep -E "^HF" "$D/hf-$c.txt" | tee -a "$LOG"
done
say summary
python3 - "$D" <<'PY' 2>&1 | tee -a "$LOG"
import json, os, sys
d = sys.argv[1]
G = 2 ** 30
def load(n):
    try:
        return json.load(open(os.path.join(d, n)))
    except Exception as e:
        print(f"{n}: {e}")
        return None
def tp(n):
    return {p["width"]: p for p in ((load(n) or {}).get("results", {}).get("points", []))
            if p.get("outcome") == "ok"}
def hf(n):
    return {p["seq"]: p.get("peak_allocated_bytes")
            for p in (load(n) or {}).get("widths", []) if p.get("outcome") == "ok"}
f = lambda b: f"{b / G:.2f}" if b else "-"
pct = lambda x: f"{100 * x:+.1f}%" if x is not None else "-"
def item(m, key):
    for i in m.get("items", []):
        if key in i["label"]:
            return i["bytes"]
    return None
for mode, tn, hn in (("reentrant", "tp-default.json", "hf-reentrant.json"),
                     ("non-reentrant", "tp-nonreentrant.json", "hf-non-reentrant.json")):
    t, h = tp(tn), hf(hn)
    print(f"-- {mode}: {tn} against {hn}")
    print(f"{'width':>6} {'HF GiB':>7} {'tprobe':>7} {'vs HF':>6} {'items':>7} {'items/pk':>8} {'recompute':>9} {'loss head':>9} "
          f"{'trace ovh':>9} {'mem ovh':>7}  peak in")
    for w in sorted(set(t) | set(h)):
        p, r = t.get(w) or {}, h.get(w)
        a = p.get("peak_allocated_bytes")
        m = p.get("memory") or {}
        items = sum(i["bytes"] for i in m.get("items", []) if i.get("in_peak")) if m else None
        mp = m.get("peak_allocated_bytes")
        at = m.get("peak_at", {})
        print(f"{w:>6} {f(r):>7} {f(a):>7} {pct(a / r - 1 if a and r else None):>6} {f(items):>7} "
              f"{pct(items / mp - 1 if items and mp else None):>8} {f(item(m, 'recompute working set')):>9} "
              f"{f(item(m, 'loss head')):>9} {pct(p.get('trace_overhead_ratio')):>9} {pct(m.get('overhead_ratio')):>7}  "
              f"{at.get('phase')} {at.get('part')} L{at.get('layer')}")
t = tp("tp-default.json")
for w in sorted(t):
    print(f"items at {w} (default):")
    for i in (t[w].get("memory") or {}).get("items", []):
        print(f"   {i['bytes'] / G:8.2f} GiB  {i['label']}{'' if i.get('in_peak') else ' (beside)'}")
for w, p in tp("tp-chunked.json").items():
    print(f"chunked CE at {w}: peak {f(p.get('peak_allocated_bytes'))} GiB, step {p['step']['median_s']:.3f} s")
PY
say done
