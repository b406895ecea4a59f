#!/usr/bin/env bash
# One GPU-host session (it produced docs/parity.md's numbers and the first step table): build (cuda preset), write the HF fixtures, parity checks,
# tprobe step benchmark and the HF+PEFT step benchmark, sequentially on one GPU. Logs to $OUT.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p /tmp/r
LOG=$OUT/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$LOG" 2>&1

( TPROBE_BUILD_TARGETS="tprobe tprobe_step_bench" timeout 330 bash scripts/gpu-build.sh \
    -DTPROBE_WERROR=OFF >/tmp/r/build.log 2>&1; echo "build rc $?" >>/tmp/r/build.log ) &
BUILD=$!
TINY=tests/fixtures/gemma4-tiny-hf  # written by this script's `tiny` mode in an earlier session
say fixture mid
timeout 200 python3 scripts/make_parity_fixture.py mid /tmp/mid >>"$LOG" 2>&1
wait $BUILD
grep -E "error|build rc" /tmp/r/build.log | head -40 >>"$LOG"; tail -3 /tmp/r/build.log >>"$LOG"
B=build/cuda
if [ -x $B/src/app/tprobe ]; then
  say parity tiny
  for a in eager sdpa; do
    $B/src/app/tprobe parity --checkpoint $TINY --reference $TINY/reference.safetensors --attn $a --baseline-key logits_sdpa --json /tmp/r/p_tiny_$a.json >>"$LOG" 2>&1; echo "exit $? (tiny $a)" >>"$LOG"
  done
  say parity mid
  for spec in "fp32 sdpa grouped_mm" "fp32 flash-window loop" "bf16 sdpa grouped_mm" "bf16 flash-window grouped_mm" "bf16 eager loop"; do
    set -- $spec
    $B/src/app/tprobe parity --checkpoint /tmp/mid --reference /tmp/mid/reference.safetensors --device cuda \
      --dtype $1 --attn $2 --moe $3 --baseline-key logits_hf_bf16_sdpa --json /tmp/r/p_mid_$1_$2_$3.json >>"$LOG" 2>&1; echo "exit $? ($spec)" >>"$LOG"
  done
  for attn in sdpa flash-window; do
    say tprobe step $attn grouped_mm
    timeout 100 $B/benchmarks/tprobe_step_bench --attn $attn --moe grouped_mm --seq 2048 --seq 8192 --json /tmp/r/step_${attn}_grouped.json >>"$LOG" 2>&1
  done
  say tprobe step sdpa loop
  timeout 60 $B/benchmarks/tprobe_step_bench --attn sdpa --moe loop --seq 2048 --json /tmp/r/step_sdpa_loop.json >>"$LOG" 2>&1
fi
say hf step sdpa
timeout 200 python3 benchmarks/hf_lora_step.py --attn sdpa --seq 2048 8192 --profile --json /tmp/r/hf_sdpa.json >>"$LOG" 2>&1
say done
cp /tmp/r/build.log "$OUT/" 2>/dev/null
tar czf "$OUT/results.tar.gz" -C /tmp/r . 2>/dev/null
