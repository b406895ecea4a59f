#!/usr/bin/env bash
# GPU host: records the small CUDA fixtures CI replays without a GPU — a raw trace of tprobe's own
# tiny-model step (`profile --raw-trace`: records, launch contexts, autograd links) and a
# torch.profiler trace of a Hugging Face + PEFT tiny Gemma-4 step recorded with with_stack=True
# (module events). Builds tprobe first when it is not built. Output: $OUT/fixtures/.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/fixtures
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader | tee -a "$LOG"
if [ ! -x "$T" ]; then
  say build
  TPROBE_BUILD_TARGETS="tprobe" bash scripts/gpu-build.sh >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
fi
say tiny raw trace
timeout 60 $T profile --model gemma4-tiny --device cuda --dtype bf16 --attn sdpa --moe loop --lora-dtype model --widths 64 \
  --rank 8 --alpha 16 --ce-chunk 64 --repeats 1 --raw-trace "$D/raw-trace-tiny-cuda.json" \
  >"$D/profile-tiny.txt" 2>&1
echo "exit $? (tiny)" | tee -a "$LOG"
grep -E "ok:|untagged" "$D/profile-tiny.txt" | head -5 | tee -a "$LOG"
say hf trace with stack
timeout 180 python3 benchmarks/hf_profile_trace.py "$D" --seq 256 --active 1 --stack-only \
  >"$D/hf-stack.txt" 2>&1
echo "exit $? (hf)" | tee -a "$LOG"
tail -3 "$D/hf-stack.txt" | tee -a "$LOG"
rm -f "$D/summary.json"
ls -la "$D" | tee -a "$LOG"
say done
