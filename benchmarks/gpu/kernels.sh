#!/usr/bin/env bash
# GPU-host call for `tprobe kernels` (issue 10): real torch.profiler traces of a Hugging Face + PEFT
# LoRA step of a small Gemma-4-shaped model (benchmarks/hf_profile_trace.py), with the
# key_averages() double-count sums beside each. Python only, no tprobe build. Budget: 120 s.
# Output: "$OUT/kernels/" (traces *.json.gz, *.sums.json, summary.json, log.txt).
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/kernels
mkdir -p "$D"
LOG=$D/log.txt
echo "== start $(date +%T)" | tee "$LOG"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
timeout 110 python3 benchmarks/hf_profile_trace.py "$D" --seq 256 --big-seq 2048 --active 3 \
  >>"$LOG" 2>&1
echo "hf_profile_trace rc $?" | tee -a "$LOG"
echo "== summary $(date +%T)"
ls -l "$D" | tee -a "$LOG"
grep -E "^(torch|hf-|config:)|FAILED|Error" "$LOG" | tail -20
