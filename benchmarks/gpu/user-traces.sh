#!/usr/bin/env bash
# GPU host, Python only (no tprobe build): the torch.profiler traces `tprobe kernels`' third round
# reads (docs/kernels.md), recorded the way users record them.
# - hf-sdpa-stack-nonreentrant-2x256: the small Gemma-4-shaped HF + PEFT step with_stack=True
#   under use_reentrant=False, `model(input_ids, labels).loss.backward()` (committed fixture);
# - hf-sdpa-ranges-nonreentrant-2x256: the same step inside the user's own record_function ranges,
#   a side-stream host-to-device copy and CUDA sync events (committed fixture);
# - hf-26b-stack-nonreentrant-2x2048: one 26B-A4B-shaped HF + PEFT step (random weights, LoRA r64
#   on the seven targets), transformers' own loss, use_reentrant=False, with_stack=True (gzipped,
#   read on the CPU machine; not committed).
# Output: $OUT/usertraces/.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/usertraces
mkdir -p "$D"
LOG=$D/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee -a "$LOG"
say tiny stack non-reentrant
timeout 180 python3 benchmarks/hf_profile_trace.py "$D" --seq 256 --active 1 --stack-only \
  --checkpointing non-reentrant >"$D/tiny-stack.txt" 2>&1
echo "exit $? (tiny stack)" | tee -a "$LOG"; tail -2 "$D/tiny-stack.txt" | tee -a "$LOG"
say tiny ranges non-reentrant
timeout 180 python3 benchmarks/hf_profile_trace.py "$D" --seq 256 --active 2 --ranges \
  --checkpointing non-reentrant >"$D/tiny-ranges.txt" 2>&1
echo "exit $? (tiny ranges)" | tee -a "$LOG"; tail -2 "$D/tiny-ranges.txt" | tee -a "$LOG"
rm -f "$D/summary.json"
say 26b step, hf loss, non-reentrant, with_stack
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
TR=$TMPD/hf-26b-stack-nonreentrant-2x${W:-2048}.json
timeout 300 python3 benchmarks/hf_lora_step.py --attn sdpa --seq ${W:-2048} --reps 1 --hf-loss \
  --checkpointing non-reentrant --trace-out $TR --with-stack --json "$D/hf-26b.json" \
  >"$D/hf-26b.txt" 2>&1
echo "exit $? (26b)" | tee -a "$LOG"; grep -E "HF |trace" "$D/hf-26b.txt" | tee -a "$LOG"
ls -la $TR | tee -a "$LOG"
gzip -6 -c $TR >"$D/$(basename $TR).gz"
ls -la "$D" | tee -a "$LOG"
say done
