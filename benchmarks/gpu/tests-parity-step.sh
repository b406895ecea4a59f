#!/usr/bin/env bash
# One GPU-host call that checks the merged tree end to end and re-measures the 26B-A4B step beside
# Hugging Face + PEFT in the same run: build (cuda preset), tprobe env, the whole ctest suite
# (gpu label included), parity on the HF tiny fixture, tprobe's step (sdpa, flash-window) and the
# HF step at 2x2048 and 2x8192. Logs and evidence go to $OUT; the table of steps comes last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
LOG=$OUT/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$LOG"
bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$OUT/build.log" 2>&1
echo "build rc $?" | tee -a "$LOG"
B=build/cuda
say env
$B/src/app/tprobe env --json "$OUT/env-h200.json" >"$OUT/env-h200.txt" 2>&1; cat "$OUT/env-h200.txt" >>"$LOG"
say ctest
ctest --test-dir $B -j 8 --timeout 120 >"$OUT/ctest.log" 2>&1; echo "ctest rc $?" | tee -a "$LOG"
grep -E "tests passed|Failed|Skipped|\(Failed\)" "$OUT/ctest.log" | tee -a "$LOG"
say parity tiny
T=tests/fixtures/gemma4-tiny-hf
for a in eager sdpa; do
  $B/src/app/tprobe parity --checkpoint $T --reference $T/reference.safetensors --attn $a \
    --device cuda --json "$OUT/parity-tiny-$a.json" >>"$LOG" 2>&1; echo "parity exit $? ($a, cuda fp32)" | tee -a "$LOG"
done
for attn in sdpa flash-window; do
  say tprobe step $attn
  timeout 100 $B/benchmarks/tprobe_step_bench --attn $attn --moe grouped_mm --seq 2048 --seq 8192 \
    --json "$OUT/step-tprobe-$attn.json" 2>&1 | tee -a "$LOG" | grep -E "best|init"
done
say hf step sdpa
timeout 150 python3 benchmarks/hf_lora_step.py --attn sdpa --seq 2048 8192 \
  --json "$OUT/step-hf-sdpa.json" 2>&1 | tee -a "$LOG" | grep -E "best|HF transformers"
say done
