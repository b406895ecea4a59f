#!/usr/bin/env bash
# GPU host: `tprobe kernels` on the user's own 26B run with memory events — one Hugging Face +
# PEFT step (benchmarks/hf_lora_step.py: 26B-A4B shapes, random weights, LoRA r64 on the seven
# targets, reentrant checkpointing, batch 2 x W, default 2048) recorded by torch.profiler with
# profile_memory=True and with_stack=True, read by `tprobe kernels --model gemma4-26b-a4b`, and its
# memory figures compared with the plain-Python pass (benchmarks/kernels_memory_check.py).
# Builds tprobe only. Output: $OUT/kmem26b/ (the trace itself stays on the host: ~100+ MB).
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/kmem26b
W=${W:-2048}
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee -a "$LOG"
if [ ! -x "$T" ]; then
  say build tprobe -DTPROBE_WERROR=ON
  TPROBE_BUILD_TARGETS="tprobe" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
fi
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
TR=$TMPD/hf-26b-memory-2x$W.json
say hf step, profile_memory=True, with_stack=True
timeout 200 python3 benchmarks/hf_lora_step.py --attn sdpa --seq $W --reps 1 --trace-out $TR \
  --with-stack --profile-memory --json "$D/hf.json" >"$D/hf.txt" 2>&1
echo "exit $? (hf)" | tee -a "$LOG"; grep -E "HF |trace" "$D/hf.txt" | tee -a "$LOG"; ls -la $TR | tee -a "$LOG"
say kernels
/usr/bin/time -f "read %e s %M KiB" timeout 150 $T kernels $TR --model gemma4-26b-a4b \
  --json "$D/kernels.json" >"$D/kernels.txt" 2>"$D/time.txt"
echo "exit $? (kernels)" | tee -a "$LOG"; tail -1 "$D/time.txt" | tee -a "$LOG"
sed -n '/[Mm]emory/,/^$/p' "$D/kernels.txt" | head -40 | tee -a "$LOG"
say plain-Python check
timeout 150 python3 benchmarks/kernels_memory_check.py $TR "$D/kernels.json" --json "$D/check.json" \
  >"$D/check.txt" 2>&1
echo "exit $? (check: 0 = every figure equal)" | tee -a "$LOG"; tail -15 "$D/check.txt" | tee -a "$LOG"
say done
