#!/usr/bin/env bash
# GPU host: the build with -DTPROBE_WERROR=ON and the whole ctest at -j 8, then `tprobe profile`
# on its defaults (the faithful baseline: sdpa, fp32 LoRA factors, HF's RMSNorm, the experts as
# transformers runs them, per-layer checkpointing with input grads) beside the Hugging Face + PEFT
# step of the same shapes (26B-A4B, random weights, batch 2) at 2,048 and 16,384 in the same call,
# with a torch.profiler trace of the HF step at 2,048 diffed against tprobe's kernel table by
# family (`tprobe kernels A B`). Output: $OUT/faithful/ (OUT defaults to ./out); a short table
# comes last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/faithful
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee -a "$LOG"
git rev-parse HEAD 2>/dev/null | tee -a "$LOG"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  say build -DTPROBE_WERROR=ON
  bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
  grep -c 'warning:' "$D/build.txt" | sed 's/^/warnings: /' | tee -a "$LOG"
  say ctest -j 8
  (cd build/cuda && timeout 240 ctest -j 8 >"$D/ctest.txt" 2>&1)
  echo "ctest exit $?" | tee -a "$LOG"
  grep -E "tests passed|Total Test time|\(Failed\)|Timeout" "$D/ctest.txt" | tee -a "$LOG"
fi
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT

say tprobe profile on its defaults
timeout 200 $T profile --model gemma4-26b-a4b --widths 2048,16384 --repeats 3 --trace on \
  --table-width 2048 --json "$D/profile-default.json" >"$D/profile-default.txt" 2>&1
echo "exit $? (profile default)" | tee -a "$LOG"
grep -E " ok|oom|error|baseline" "$D/profile-default.txt" | head -8 | tee -a "$LOG"

say hf step sdpa
timeout 200 python3 benchmarks/hf_lora_step.py --attn sdpa --seq 2048 16384 --reps 3 \
  --trace-out "$TMPD/hf-trace-2048.json" --json "$D/hf-sdpa.json" >"$D/hf-sdpa.txt" 2>&1
echo "exit $? (hf)" | tee -a "$LOG"
grep -E "HF |experts" "$D/hf-sdpa.txt" | tee -a "$LOG"

say kernels: HF trace vs tprobe kernel table at 2x2048, by family
timeout 60 $T kernels "$TMPD/hf-trace-2048.json" "$D/profile-default.json" \
  --json "$D/kernels-hf-vs-default.json" >"$D/kernels-hf-vs-default.txt" 2>&1
echo "exit $? (kernels diff)" | tee -a "$LOG"

say summary
python3 - "$D" <<'PY' 2>&1 | tee -a "$LOG"
import json, os, sys
d = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(d, name)))
    except Exception as e:
        print(f"{name}: {e}")
        return None
def med(xs):
    xs = sorted(xs); n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2]))
tp = load("profile-default.json")
hf = load("hf-sdpa.json")
tpt = {}
if tp:
    r = tp["results"]
    print("tprobe baseline:", json.dumps(r.get("baseline")))
    for p in r["points"]:
        if p.get("outcome") == "ok" and not p.get("lengths"):
            tpt[p["width"]] = (med(p["samples_s"]), p.get("peak_allocated_bytes"))
hft = {}
if hf:
    for p in hf.get("widths", []):
        if p.get("outcome") == "ok" and not p.get("lengths"):
            hft[p["seq"]] = (med(p["step_s"]), p.get("peak_allocated_bytes"))
print(f"{'width':>6} {'HF + PEFT':>10} {'tprobe default':>15} {'tprobe/HF':>10} {'HF peak GiB':>12} {'tprobe GiB':>11}")
for w in sorted(set(tpt) | set(hft)):
    h, t = hft.get(w, (None, None)), tpt.get(w, (None, None))
    ratio = f"{t[0] / h[0]:.3f}" if h[0] and t[0] else "-"
    g = lambda b: f"{b / 2**30:.1f}" if b else "-"
    print(f"{w:>6} {h[0] or 0:>10.3f} {t[0] or 0:>15.3f} {ratio:>10} {g(h[1]):>12} {g(t[1]):>11}")
PY
say done
