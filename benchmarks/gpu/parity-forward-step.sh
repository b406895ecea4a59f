#!/usr/bin/env bash
# GPU host, one call (it produced the first mid-size parity numbers and the first step table in
# docs/gemma4-engine.md):
# build tprobe and tprobe_step_bench (cuda preset) while HF writes the mid-size checkpoint and its
# references (scripts/make_parity_fixture.py mid), then forward parity of the HF tiny fixture
# (eager, sdpa) and of the mid checkpoint (fp32 and bf16, per attention path and MoE dispatch),
# tprobe's step (sdpa and flash-window with grouped_mm at 2x2048 and 2x8192, sdpa with the expert
# loop at 2x2048) and the HF + PEFT step (../hf_lora_step.py --profile), one after the other.
# Output: $OUT/parity-forward-step/ (OUT defaults to ./out): log.txt, build.log, p_*.json,
# step_*.json, hf_sdpa.json. The mid checkpoint goes to a temporary folder, removed at exit.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/parity-forward-step
mkdir -p "$D"
LOG=$D/log.txt
MID=$(mktemp -d)
trap 'rm -rf "$MID"' EXIT
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$LOG" 2>&1

( TPROBE_BUILD_TARGETS="tprobe tprobe_step_bench" timeout 330 bash scripts/gpu-build.sh \
    -DTPROBE_WERROR=OFF >"$D/build.log" 2>&1; echo "build rc $?" >>"$D/build.log" ) &
BUILD=$!
TINY=tests/fixtures/gemma4-tiny-hf  # written by make_parity_fixture.py's `tiny` mode earlier
say fixture mid
timeout 200 python3 scripts/make_parity_fixture.py mid "$MID" >>"$LOG" 2>&1
wait $BUILD
grep -E "error|build rc" "$D/build.log" | head -40 >>"$LOG"; tail -3 "$D/build.log" >>"$LOG"
B=build/cuda
if [ -x $B/src/app/tprobe ]; then
  say parity tiny
  for a in eager sdpa; do
    $B/src/app/tprobe parity --checkpoint $TINY --reference $TINY/reference.safetensors --attn $a --baseline-key logits_sdpa --json "$D/p_tiny_$a.json" >>"$LOG" 2>&1; echo "exit $? (tiny $a)" >>"$LOG"
  done
  say parity mid
  for spec in "fp32 sdpa grouped_mm" "fp32 flash-window loop" "bf16 sdpa grouped_mm" "bf16 flash-window grouped_mm" "bf16 eager loop"; do
    set -- $spec
    $B/src/app/tprobe parity --checkpoint "$MID" --reference "$MID/reference.safetensors" --device cuda \
      --dtype $1 --attn $2 --moe $3 --baseline-key logits_hf_bf16_sdpa --json "$D/p_mid_$1_$2_$3.json" >>"$LOG" 2>&1; echo "exit $? ($spec)" >>"$LOG"
  done
  for attn in sdpa flash-window; do
    say tprobe step $attn grouped_mm
    timeout 100 $B/benchmarks/tprobe_step_bench --attn $attn --moe grouped_mm --seq 2048 --seq 8192 --json "$D/step_${attn}_grouped.json" >>"$LOG" 2>&1
  done
  say tprobe step sdpa loop
  timeout 60 $B/benchmarks/tprobe_step_bench --attn sdpa --moe loop --seq 2048 --json "$D/step_sdpa_loop.json" >>"$LOG" 2>&1
fi
say hf step sdpa
timeout 200 python3 benchmarks/hf_lora_step.py --attn sdpa --seq 2048 8192 --profile --json "$D/hf_sdpa.json" >>"$LOG" 2>&1
say done
