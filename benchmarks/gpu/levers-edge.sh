#!/usr/bin/env bash
# GPU host: what each lever does to the memory edge. `tprobe levers` on the 26B-A4B shapes (random
# weights) at 2 x W (default 2048) for the checkpointing and CE levers, with --gpu-memory CARD
# (default 80): after each configuration's sweep, its largest
# batch at W is measured step by step under an allocator cap of the card (OOM as data).
# Builds tprobe and its torch module only (-DTPROBE_WERROR=ON). Output: $OUT/leversedge/.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/leversedge
W=${W:-2048}
CARD=${CARD:-80}
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee -a "$LOG"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  say build tprobe tprobe_torch -DTPROBE_WERROR=ON
  TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
  grep -c 'warning:' "$D/build.txt" | sed 's/^/warnings: /' | tee -a "$LOG"
  grep -m5 -B2 -A6 'error:' "$D/build.txt" | tee -a "$LOG"
fi
say levers ${LEVERS:-checkpointing,ce} at 2x$W, --gpu-memory $CARD
timeout ${LEVERS_TIMEOUT:-300} $T levers --model gemma4-26b-a4b --random-init --widths $W --repeats 2 \
  --levers ${LEVERS:-checkpointing,ce} --gpu-memory $CARD --json "$D/levers.json" >"$D/levers.txt" 2>&1
echo "exit $? (levers)" | tee -a "$LOG"
grep -E "^(baseline|checkpointing|ce|best) " "$D/levers.txt" | cut -c1-150 | head -12 | tee -a "$LOG"
sed -n '/^What each lever does to the memory edge/,/^$/p' "$D/levers.txt" | tee -a "$LOG"
say done
