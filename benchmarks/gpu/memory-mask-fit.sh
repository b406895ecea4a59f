#!/usr/bin/env bash
# GPU host, one call: (1) the attention_mask choice — Hugging Face + PEFT with use_reentrant=False
# and an all-ones attention_mask (benchmarks/hf_lora_step.py --ones-mask) beside `tprobe profile
# --checkpointing non-reentrant --attention-mask ones` and beside tprobe without the mask, at
# WIDTHS (default 2048 8192 16384), batch 2, 26B-A4B shapes, random weights; (2) what fits on the
# default fit (the reserved peak) with a fourth sweep width, so the memory model keeps a residual
# degree of freedom: --gpu-memory 80,95.6 --reserve 0,3, each edge and the step past it measured
# under an allocator cap (SKIP_FIT=1 leaves (2) out; MASKS="ones" runs tprobe with the mask only).
# Builds tprobe and its torch module only (-DTPROBE_WERROR=ON).
# Output: $OUT/maskfit/ (OUT defaults to ./out); the tables come last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/maskfit
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
W=${WIDTHS:-2048 8192 16384}
WC=$(echo $W | tr ' ' ',')
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
git rev-parse HEAD 2>/dev/null | tee -a "$LOG"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  say build tprobe tprobe_torch -DTPROBE_WERROR=ON
  TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
  grep -c 'warning:' "$D/build.txt" | sed 's/^/warnings: /' | tee -a "$LOG"
  grep -m5 -B2 -A6 'error:' "$D/build.txt" | tee -a "$LOG"
fi
if [ "${SKIP_HF:-0}" != 1 ]; then
  say hf non-reentrant, all-ones attention_mask, widths $WC
  timeout 170 python3 benchmarks/hf_lora_step.py --seq $W --reps 1 --checkpointing non-reentrant \
    --ones-mask --json "$D/hf-nr-ones.json" >"$D/hf-nr-ones.txt" 2>&1
  echo "exit $? (hf)" | tee -a "$LOG"
  grep -E "^HF" "$D/hf-nr-ones.txt" | tee -a "$LOG"
fi
for m in ${MASKS:-ones none}; do
  say tprobe non-reentrant --attention-mask $m
  timeout 150 $T profile --model gemma4-26b-a4b --widths $WC --warmup 1 --repeats 1 --trace off \
    --checkpointing non-reentrant --attention-mask $m --json "$D/tp-nr-$m.json" >"$D/tp-nr-$m.txt" 2>&1
  echo "exit $? (tprobe $m)" | tee -a "$LOG"
done
if [ "${SKIP_FIT:-0}" != 1 ]; then
say what fits: --gpu-memory 80,95.6 --reserve 0,3, default fit peak, widths 2048,8192,12288,16384
timeout 300 $T profile --model gemma4-26b-a4b --widths 2048,8192,12288,16384 --warmup 1 --repeats 1 \
  --trace off --memory off --gpu-memory 80,95.6 --reserve 0,3 --json "$D/profile-fit.json" \
  >"$D/profile-fit.txt" 2>&1
echo "exit $? (profile fit)" | tee -a "$LOG"
grep -E "^[0-9]+x" "$D/profile-fit.txt" | cut -c1-150 | tee -a "$LOG"
sed -n '/^what fits/,/^$/p' "$D/profile-fit.txt" | tee -a "$LOG"
grep -E "^fit:|costs" "$D/profile-fit.txt" | tee -a "$LOG"
fi
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
    j = load(n) or {}
    return {p["width"]: (p.get("peak_allocated_bytes"), p["step"]["median_s"])
            for p in j.get("results", {}).get("points", []) if p.get("outcome") == "ok"}
h = {p["seq"]: (p.get("peak_allocated_bytes"), p.get("best_step_s"))
     for p in (load("hf-nr-ones.json") or {}).get("widths", []) if p.get("outcome") == "ok"}
o, n = tp("tp-nr-ones.json"), tp("tp-nr-none.json")
print(f"{'width':>6} {'HF ones GiB':>11} {'tp ones GiB':>11} {'vs HF':>7} {'tp none GiB':>11} {'ones-none MiB':>13} {'HF s':>7} {'tp ones s':>9}")
for w in sorted(set(h) | set(o)):
    hb, hs = h.get(w, (None, None))
    ob, os_ = o.get(w, (None, None))
    nb, _ = n.get(w, (None, None))
    f = lambda b: f"{b / G:.2f}" if b else "-"
    print(f"{w:>6} {f(hb):>11} {f(ob):>11} {(f'{100 * (ob / hb - 1):+.1f}%' if ob and hb else '-'):>7} {f(nb):>11} "
          f"{(f'{(ob - nb) / 2**20:.1f}' if ob and nb else '-'):>13} {(f'{hs:.3f}' if hs else '-'):>7} {(f'{os_:.3f}' if os_ else '-'):>9}")
PY
say done
