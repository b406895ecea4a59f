#!/usr/bin/env bash
# GPU-host call 1 for backward parity (Python only, no build): HF transformers + PEFT write
#  1. for the committed tiny fixture (CPU, fp32 + HF's bf16): PEFT adapters before/after one step,
#     loss + LoRA gradients with checkpointing off/on, the input-grads-off trap, a padded batch,
#     and the forward reference with HF's bf16 logits -> $OUT/parity/gemma4-tiny-hf/
#  2. the mid-size checkpoint (bf16, CUDA) and its backward references in a temporary folder
#     (too large to return; removed at exit); only its summary is kept -> $OUT/parity/mid/summary.json
# Budget: <= 150 s. Each step under `timeout`; a failed step is logged and the rest goes on.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/parity
mkdir -p "$D/gemma4-tiny-hf" "$D/mid"
LOG=$D/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
S=scripts/make_parity_fixture.py
T=tests/fixtures/gemma4-tiny-hf
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
MID=$W/mid-ckpt
MIDREF=$W/mid-ref

say "tiny backward references (CPU)"
timeout 50 python3 $S backward $T "$D/gemma4-tiny-hf" cpu >"$D/tiny.log" 2>&1
echo "tiny rc $?" | tee -a "$LOG"

say "mid checkpoint (bf16)"
timeout 40 python3 $S mid "$MID" noref >"$D/mid/mid.log" 2>&1
echo "mid rc $?" | tee -a "$LOG"

say "mid backward references (CUDA)"
timeout 55 python3 $S backward "$MID" "$MIDREF" cuda >"$D/mid/backward.log" 2>&1
echo "mid backward rc $?" | tee -a "$LOG"
cp "$MIDREF/summary.json" "$D/mid/summary.json" 2>/dev/null
ls -la "$MID" "$MIDREF" >>"$D/mid/backward.log" 2>&1

say summary
grep -hE "^(HF bf16|adapters:|WARNING|step \{|bf16 .* failed|padded reference failed)" \
  "$D/tiny.log" "$D/mid/backward.log" 2>/dev/null | cut -c1-300 | tee -a "$LOG"
du -sh "$D" | tee -a "$LOG"
say done
