#!/usr/bin/env bash
# Padded backward parity on the GPU host (needs build/cuda): the committed right-padded HF + PEFT
# reference (tests/fixtures/gemma4-tiny-hf/backward_padded.safetensors, fp32 eager) against
# tprobe's sdpa path, which the CPU machine's libtorch 1.13 lacks (the model tests' padded cases
# on libtorch 2.11's CPU), then `tprobe parity --backward` on CUDA: fp32 eager / sdpa / blockwise
# and bf16 flash-window (no HF bf16 padded gradients: the fixed 5e-2 fallback rule).
# Evidence and logs -> $OUT/padded-parity/. Budget: <= 90 s; every step under timeout.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/padded-parity
mkdir -p "$D"
LOG=$D/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
TP=build/cuda/src/app/tprobe
FIX=tests/fixtures/gemma4-tiny-hf
ADAPTER=tests/fixtures/adapters/peft-tiny-step1

say "model tests: padded parity (CPU, every path libtorch 2.11 has)"
timeout 60 build/cuda/tests/tprobe_model_tests --gtest_filter='*ParityPadded*:ParityPadding.*' \
  >"$D/model-tests.txt" 2>&1
echo "model tests rc $?" | tee -a "$LOG"

run() {  # name, then tprobe parity arguments
  local name=$1
  shift
  timeout 20 $TP parity --checkpoint $FIX --adapter $ADAPTER \
    --reference $FIX/backward_padded.safetensors --backward "$@" \
    --json "$D/$name.json" >"$D/$name.txt" 2>&1
  echo "$name exit $?" | tee -a "$LOG"
}
say "tprobe parity --backward on the padded reference"
run cpu-fp32-sdpa --attn sdpa
run cuda-fp32-eager --device cuda --attn eager
run cuda-fp32-sdpa --device cuda --attn sdpa
run cuda-fp32-blockwise --device cuda --attn blockwise
run cuda-fp32-sdpa-ckpt --device cuda --attn sdpa --checkpointing on
run cuda-bf16-flash-window --device cuda --dtype bf16 --attn flash-window

say summary
grep -E "^padded|OK|FAILED|SKIPPED" "$D/model-tests.txt" | cut -c1-300 | tee -a "$LOG"
for f in "$D"/c*.txt; do
  echo "-- $(basename "$f")" | tee -a "$LOG"
  grep -E "attention|\|Δ loss\||global relative L2|worst tensor|right-padded|verdict rule|tolerance|rror" \
    "$f" | head -10 | tee -a "$LOG"
done
say done
