#!/usr/bin/env bash
# GPU-host call 2 for backward parity (needs build/cuda): HF + PEFT write the mid-size bf16
# checkpoint, a PEFT adapter after one AdamW step and the loss + LoRA gradients (fp32 reference,
# HF's own bf16 eager and sdpa beside it) into a temporary folder (removed at exit); then
# `tprobe parity --backward` in bf16 with each attention path (eager, sdpa, flash-window), sdpa
# with gradient checkpointing too, and fp32 eager. Evidence and logs -> $OUT/parity-backward/
# (OUT defaults to ./out). Budget: <= 120 s; every step under timeout.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/parity-backward
mkdir -p "$D"
LOG=$D/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
S=scripts/make_parity_fixture.py
TP=build/cuda/src/app/tprobe
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
MID=$W/ckpt
REF=$W/ref

say "mid checkpoint (bf16, input_ids only)"
timeout 30 python3 $S mid "$MID" noref >"$D/mid.log" 2>&1
echo "mid rc $?" | tee -a "$LOG"
say "HF + PEFT adapter and gradients (CUDA)"
timeout 35 python3 $S backward "$MID" "$REF" cuda quick >"$D/hf.log" 2>&1
echo "hf rc $?" | tee -a "$LOG"
cp "$REF/summary.json" "$D/hf-summary.json" 2>/dev/null

run() {  # name, then tprobe parity arguments
  local name=$1
  shift
  timeout 25 $TP parity --checkpoint "$MID" --adapter "$REF/peft_adapter" \
    --reference "$REF/backward.safetensors" --backward --device cuda "$@" \
    --json "$D/$name.json" >"$D/$name.txt" 2>&1
  echo "$name exit $?" | tee -a "$LOG"
}
say "tprobe parity --backward"
run bf16-eager --dtype bf16 --attn eager
run bf16-sdpa --dtype bf16 --attn sdpa
run bf16-flash-window --dtype bf16 --attn flash-window
run bf16-sdpa-ckpt --dtype bf16 --attn sdpa --checkpointing on
run fp32-eager --dtype fp32 --attn eager

say summary
grep -hE "^HF bf16" "$D/hf.log" | cut -c1-300 | tee -a "$LOG"
for f in "$D"/*.txt; do
  echo "-- $(basename "$f")" | tee -a "$LOG"
  grep -E "global relative L2|worst module|zero on one|verdict rule|tolerance|Error|error" "$f" \
    | head -8 | tee -a "$LOG"
done
say done
