#!/usr/bin/env bash
# GPU host: where the Hugging Face + PEFT step's peak goes (hf_lora_step.py --memory-sites) for
# reentrant and non-reentrant checkpointing, with and without an all-ones attention_mask, at
# WIDTHS (default 2048 8192 16384), and the tiny HF fixtures with torch.profiler's memory events
# (profile_memory=True) under both checkpointing modes. No tprobe build. Output: $OUT/memsites/.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/memsites
mkdir -p "$D"
LOG=$D/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
say "transformers' default use_reentrant"
python3 -c "import inspect, transformers; print([l.strip() for l in inspect.getsource(transformers.PreTrainedModel.gradient_checkpointing_enable).splitlines() if 'use_reentrant' in l])" 2>&1 | tee -a "$LOG"
for c in "reentrant" "non-reentrant" "non-reentrant --ones-mask"; do
  n=$(echo $c | tr -d ' -')
  say hf step $c, memory sites
  timeout ${SITES_TIMEOUT:-200} python3 benchmarks/hf_lora_step.py --seq ${WIDTHS:-2048 8192 16384} --reps 1 \
    --checkpointing $c --memory-sites --json "$D/hf-$n.json" >"$D/hf-$n.txt" 2>&1
  echo "exit $? ($c)" | tee -a "$LOG"
  grep -E "^HF|memory:" "$D/hf-$n.txt" | tee -a "$LOG"
done
for ck in ${TINY_MODES-reentrant non-reentrant}; do
  say tiny HF trace with memory events, $ck
  timeout 120 python3 benchmarks/hf_profile_trace.py "$D" --seq 256 --active 1 --memory-only \
    --checkpointing $ck >"$D/hf-memory-$ck.txt" 2>&1
  echo "exit $? (tiny $ck)" | tee -a "$LOG"
  tail -2 "$D/hf-memory-$ck.txt" | tee -a "$LOG"
done
rm -f "$D/summary.json"
ls -la "$D" | tee -a "$LOG"
say done
