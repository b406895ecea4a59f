#!/usr/bin/env bash
# GPU host: the epoch of the embedded (synthetic) corpus on the 26B-A4B shapes (random weights,
# LoRA r64 on the seven targets, batch 2), `tprobe levers --dataset synthetic` under three
# samplers: sequential (file order), bucket:2 (bucket's sampler, seed 0) and packed (rows of
# 16,384, next-fit). Each run measures the baseline and the attention/packing lever at WIDTHS
# (default 2048,8192,16384: three widths, so the curve has its fixed term) plus the half-padded
# point, predicts every configuration's epoch from its curve, and measures the baseline and the
# packing path on SAMPLES (default 24) micro-batches drawn from the epoch. Builds first unless
# SKIP_BUILD=1; SAMPLERS='sequential bucket:2 packed' picks. Output: $OUT/epoch/ (OUT defaults
# to ./out): <sampler>.json / .txt per run; the epoch tables come last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/epoch
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
for S in ${SAMPLERS:-sequential bucket:2 packed}; do
  N=${S//:/-}
  say "tprobe levers --sampler $S"
  timeout ${LIMIT:-590} $T levers --model gemma4-26b-a4b --widths ${WIDTHS:-2048,8192,16384} \
    --pad-fraction 0.5 --repeats ${REPEATS:-2} --levers attention,packing \
    --dataset synthetic --sampler "$S" --accum 8 --epoch-samples ${SAMPLES:-24} \
    --json "$D/$N.json" >"$D/$N.txt" 2>&1
  echo "exit $? (levers --sampler $S)" | tee -a "$LOG"
done
for S in ${SAMPLERS:-sequential bucket:2 packed}; do
  N=${S//:/-}
  sed -n '/^The epoch:/,$p' "$D/$N.txt" | tee -a "$LOG"
done
say done
