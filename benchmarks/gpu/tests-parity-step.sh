#!/usr/bin/env bash
# GPU host, one call that checks the tree end to end and re-measures the 26B-A4B step beside
# Hugging Face + PEFT in the same run: build (cuda preset, -DTPROBE_WERROR=ON), tprobe env, the
# whole ctest suite (gpu label included), parity on the HF tiny fixture (CUDA fp32, eager and
# sdpa), tprobe's step (tprobe_step_bench, sdpa and flash-window) and the HF step
# (../hf_lora_step.py, sdpa) at 2x2048 and 2x8192. Output: $OUT/tests-parity-step/ (OUT defaults
# to ./out): log.txt, build.log, env.{json,txt}, ctest.log, parity-tiny-*.json, step-*.json; the
# step lines come last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/tests-parity-step
mkdir -p "$D"
LOG=$D/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$LOG"
bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.log" 2>&1
echo "build rc $?" | tee -a "$LOG"
B=build/cuda
say env
$B/src/app/tprobe env --json "$D/env.json" >"$D/env.txt" 2>&1; cat "$D/env.txt" >>"$LOG"
say ctest
ctest --test-dir $B -j 8 --timeout 120 >"$D/ctest.log" 2>&1; echo "ctest rc $?" | tee -a "$LOG"
grep -E "tests passed|Failed|Skipped|\(Failed\)" "$D/ctest.log" | tee -a "$LOG"
say parity tiny
T=tests/fixtures/gemma4-tiny-hf
for a in eager sdpa; do
  $B/src/app/tprobe parity --checkpoint $T --reference $T/reference.safetensors --attn $a \
    --device cuda --json "$D/parity-tiny-$a.json" >>"$LOG" 2>&1; echo "parity exit $? ($a, cuda fp32)" | tee -a "$LOG"
done
for attn in sdpa flash-window; do
  say tprobe step $attn
  timeout 100 $B/benchmarks/tprobe_step_bench --attn $attn --moe grouped_mm --seq 2048 --seq 8192 \
    --json "$D/step-tprobe-$attn.json" 2>&1 | tee -a "$LOG" | grep -E "best|init"
done
say hf step sdpa
timeout 150 python3 benchmarks/hf_lora_step.py --attn sdpa --seq 2048 8192 \
  --json "$D/step-hf-sdpa.json" 2>&1 | tee -a "$LOG" | grep -E "best|HF transformers"
say done
