#!/usr/bin/env bash
# GPU host: what fits. `tprobe profile` on its defaults (26B-A4B shapes, random weights, batch 2) at
# 2,048 / 8,192 / 16,384, the memory model fitted on those peaks, and for an 80 GiB card and a
# 95.6 GiB card with 3 GiB reserved the predicted edges — the largest width at batch 2 and the
# largest batch at 16,384 — each measured with the step past it under an allocator cap of the
# budget (OOM recorded as data). Builds tprobe and its torch module only (-DTPROBE_WERROR=ON).
# Output: $OUT/memfit/ (OUT defaults to ./out); the what-fits table comes last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/memfit
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
git rev-parse HEAD 2>/dev/null | tee -a "$LOG"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  say build tprobe tprobe_torch -DTPROBE_WERROR=ON
  TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
  grep -c 'warning:' "$D/build.txt" | sed 's/^/warnings: /' | tee -a "$LOG"
  grep -m5 -A6 'error:' "$D/build.txt" | tee -a "$LOG"
fi
say profile with --gpu-memory 80,95.6 --reserve 0,3
timeout 480 $T profile --model gemma4-26b-a4b --widths 2048,8192,16384 --warmup 1 --repeats 1 \
  --trace off --memory off --gpu-memory 80,95.6 --reserve 0,3 --json "$D/profile-fit.json" \
  >"$D/profile-fit.txt" 2>&1
echo "exit $? (profile)" | tee -a "$LOG"
grep -E "^2x|^[0-9]+x" "$D/profile-fit.txt" | cut -c1-160 | tee -a "$LOG"
sed -n '/^what fits/,/^$/p' "$D/profile-fit.txt" | tee -a "$LOG"
say done
