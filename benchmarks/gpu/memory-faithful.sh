#!/usr/bin/env bash
# GPU host: tprobe profile's peak memory and where it goes (the memory step) beside Hugging Face +
# PEFT's peak in the same call, at WIDTHS (default 2048 8192 16384), batch 2, 26B-A4B shapes with
# random weights: HF with use_reentrant=True and False (benchmarks/hf_lora_step.py), tprobe on its
# faithful default (reentrant checkpointing, the harness's chunk-checkpoint CE) and, at 2,048,
# non-reentrant and the chunked CE; the tiny model's raw memory history for CI's replay test.
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
  say build -DTPROBE_WERROR=ON
  bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
  grep -c 'warning:' "$D/build.txt" | sed 's/^/warnings: /' | tee -a "$LOG"
  grep -m5 -B2 -A6 'error:' "$D/build.txt" | tee -a "$LOG"
fi
say tprobe profile default, widths $WC
timeout 300 $T profile --model gemma4-26b-a4b --widths $WC --repeats 2 --trace off \
  --json "$D/tp-default.json" >"$D/tp-default.txt" 2>&1
echo "exit $? (tprobe default)" | tee -a "$LOG"
grep -E " ok|oom|error" "$D/tp-default.txt" | head -6 | tee -a "$LOG"
say tprobe at 2048: non-reentrant, chunked CE
timeout 120 $T profile --model gemma4-26b-a4b --widths 2048 --repeats 2 --trace off \
  --checkpointing non-reentrant --json "$D/tp-nonreentrant.json" >"$D/tp-nonreentrant.txt" 2>&1
echo "exit $? (tprobe non-reentrant)" | tee -a "$LOG"
timeout 120 $T profile --model gemma4-26b-a4b --widths 2048 --repeats 2 --trace off \
  --ce chunked --json "$D/tp-chunked.json" >"$D/tp-chunked.txt" 2>&1
echo "exit $? (tprobe chunked)" | tee -a "$LOG"
say tiny raw memory history
timeout 60 $T profile --model gemma4-tiny --device cuda --dtype bf16 --widths 64 --rank 8 --alpha 16 \
  --ce-chunk 64 --repeats 1 --trace off --raw-memory "$D/raw-memory-tiny-cuda.json" \
  --json "$D/tp-tiny.json" >"$D/tp-tiny.txt" 2>&1
echo "exit $? (tiny)" | tee -a "$LOG"
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
    j = load(n)
    out = {}
    for p in (j or {}).get("results", {}).get("points", []):
        if p.get("outcome") == "ok":
            m = p.get("memory") or {}
            out[p["width"]] = (p.get("peak_allocated_bytes"), m)
    return out
def hf(n):
    j = load(n)
    return {p["seq"]: p.get("peak_allocated_bytes") for p in (j or {}).get("widths", []) if p.get("outcome") == "ok"}
t, hr, hn = tp("tp-default.json"), hf("hf-reentrant.json"), hf("hf-non-reentrant.json")
print(f"{'width':>6} {'HF reent':>9} {'HF non-r':>9} {'tprobe':>8} {'vs R':>7} {'vs NR':>7} {'replay':>8} {'items':>8} {'step peak':>9} {'mem ovh':>8}  peak in")
for w in sorted(set(t) | set(hr) | set(hn)):
    a, m = t.get(w, (None, {}))
    r, n = hr.get(w), hn.get(w)
    f = lambda b: f"{b / G:.2f}" if b else "-"
    rel = lambda x, y: f"{100 * (x / y - 1):+.1f}%" if x and y else "-"
    items = sum(i["bytes"] for i in m.get("items", []) if i.get("in_peak")) if m else None
    at = m.get("peak_at", {}) if m else {}
    ovh = m.get("overhead_ratio") if m else None
    print(f"{w:>6} {f(r):>9} {f(n):>9} {f(a):>8} {rel(a, r):>7} {rel(a, n):>7} {f(m.get('peak_allocated_bytes')):>8} {f(items):>8} "
          f"{f(m.get('allocator_peak_allocated_bytes')):>9} {('%+.1f%%' % (100 * ovh)) if ovh is not None else '-':>8}  "
          f"{at.get('phase')} {at.get('part')} L{at.get('layer')}")
    for i in m.get("items", []):
        print(f"         {i['bytes'] / G:8.2f} GiB  {i['label']}{'' if i.get('in_peak') else ' (beside)'}")
for n in ("tp-nonreentrant.json", "tp-chunked.json"):
    for w, (a, m) in tp(n).items():
        print(f"{n}: {w}: peak {a / G if a else 0:.2f} GiB")
PY
say done
