#!/usr/bin/env bash
# GPU host: `tprobe levers` on the 26B-A4B shapes (random weights, LoRA r64 on the seven targets,
# batch 2) at 2,048 and 16,384 plus the half-padded 2x16,384 point (PAD=' ' leaves it out): the
# faithful baseline, every lever alone (LEVERS=a,b: those), the best combination. Builds first
# unless SKIP_BUILD=1. Output: $OUT/levers/ (OUT
# defaults to ./out); the levers table comes last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/levers
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee -a "$LOG"
git rev-parse HEAD 2>/dev/null | tee -a "$LOG"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  say build
  TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
fi
say tprobe levers
timeout ${LIMIT:-420} $T levers --model gemma4-26b-a4b --widths ${WIDTHS:-2048,16384} \
  ${PAD:---pad-fraction 0.5} --repeats ${REPEATS:-2} ${LEVERS:+--levers $LEVERS} --json "$D/levers.json" \
  >"$D/levers.txt" 2>&1
echo "exit $? (levers)" | tee -a "$LOG"
sed -n '/^Levers against/,/^How to pull/p' "$D/levers.txt" | tee -a "$LOG"
say done
