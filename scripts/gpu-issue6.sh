#!/usr/bin/env bash
# One GPU-host session for issue 6: build (cuda preset), write the HF fixtures, parity checks,
# tprobe step benchmark and the HF+PEFT step benchmark, sequentially on one GPU. Logs to $OUT.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/r
LOG=$OUT/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$LOG" 2>&1

( TPROBE_BUILD_TARGETS="tprobe tprobe_step_bench tprobe_model_tests" timeout 330 bash scripts/gpu-build.sh \
    -DTPROBE_WERROR=OFF >/tmp/r/build.log 2>&1; echo "build rc $?" >>/tmp/r/build.log ) &
BUILD=$!
TINY=tests/fixtures/gemma4-tiny-hf  # written by this script's `tiny` mode in an earlier session
say fixture mid
timeout 200 python3 scripts/make_parity_fixture.py mid /tmp/mid >>"$LOG" 2>&1
wait $BUILD
grep -E "error|build rc" /tmp/r/build.log | head -40 >>"$LOG"; tail -3 /tmp/r/build.log >>"$LOG"
B=build/cuda
if [ -x $B/src/app/tprobe ]; then
  say model tests; timeout 120 $B/tests/tprobe_model_tests 2>&1 | tail -25 >>"$LOG"
  say parity tiny
  $B/src/app/tprobe parity --checkpoint $TINY --reference $TINY/reference.safetensors --attn eager --json /tmp/r/p_tiny_eager.json >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
  $B/src/app/tprobe parity --checkpoint $TINY --reference $TINY/reference.safetensors --attn sdpa --logits-key logits_sdpa --loss-key loss_sdpa --json /tmp/r/p_tiny_sdpa.json >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
  say parity mid
  for spec in "fp32 sdpa loop" "bf16 sdpa loop" "bf16 flash-window loop" "bf16 eager loop" "bf16 sdpa grouped_mm"; do
    set -- $spec
    $B/src/app/tprobe parity --checkpoint /tmp/mid --reference /tmp/mid/reference.safetensors --device cuda \
      --dtype $1 --attn $2 --moe $3 --json /tmp/r/p_mid_$1_$2_$3.json >>"$LOG" 2>&1; echo "exit $? ($spec)" >>"$LOG"
  done
  say tprobe step sdpa
  timeout 150 $B/benchmarks/tprobe_step_bench --attn sdpa --seq 2048 --seq 8192 --json /tmp/r/step_sdpa.json >>"$LOG" 2>&1
  say tprobe step flash-window
  timeout 120 $B/benchmarks/tprobe_step_bench --attn flash-window --seq 2048 --seq 8192 --json /tmp/r/step_flash.json >>"$LOG" 2>&1
  say tprobe step sdpa grouped_mm
  timeout 90 $B/benchmarks/tprobe_step_bench --attn sdpa --moe grouped_mm --seq 8192 --json /tmp/r/step_sdpa_grouped.json >>"$LOG" 2>&1
fi
say hf step sdpa
timeout 200 python3 benchmarks/hf_lora_step.py --attn sdpa --seq 2048 8192 --profile --json /tmp/r/hf_sdpa.json >>"$LOG" 2>&1
say done
cp /tmp/r/build.log "$OUT/" 2>/dev/null
tar czf "$OUT/results.tar.gz" -C /tmp/r . 2>/dev/null
