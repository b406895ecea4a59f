#!/usr/bin/env bash
# GPU host: the phase × part attribution of `tprobe profile` (docs/profile.md, "Attribution").
# Builds (scripts/gpu-build.sh), records a tiny-model raw trace on CUDA (a replay fixture for CI),
# then profiles the 26B-A4B shapes (random init, LoRA r64 on 7 targets, checkpointing, chunked CE,
# batch 2, grouped_mm) at the default four widths under --attn sdpa and under --attn flash-window
# --norm fused, and prints the checks: parts sum to the kernel total, untagged device time,
# recompute vs forward rows, the backward's experts row, attention core (parts) vs attention
# (kernel names), the fit vs parts cross-check, the traced step's overhead.
# Output: $OUT/attribution/ (or ./out/attribution without OUT). Budget: about 6 minutes.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/attribution
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader | tee -a "$LOG"
if [ ! -x "$T" ] || [ -n "${REBUILD:-}" ]; then
  say build
  TPROBE_BUILD_TARGETS="tprobe tprobe_model_tests" bash scripts/gpu-build.sh >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
  tail -3 "$D/build.txt" | tee -a "$LOG"
fi

say model tests on CUDA: attribution, packed rows, step runner
(cd build/cuda && timeout 120 ./tests/tprobe_model_tests --gtest_filter='StepRunner.*:PackedRows.*' \
  >"$D/model-tests.txt" 2>&1); echo "model tests exit $?" | tee -a "$LOG"
grep -E "PASSED|FAILED" "$D/model-tests.txt" | tee -a "$LOG"

say tiny raw trace on CUDA
timeout 60 $T profile --model gemma4-tiny --device cuda --dtype bf16 --attn sdpa --moe loop --lora-dtype model --widths 64,128 \
  --rank 8 --alpha 16 --ce-chunk 64 --repeats 1 --raw-trace "$D/raw-trace-tiny-cuda.json" \
  --json "$D/profile-tiny.json" >"$D/profile-tiny.txt" 2>&1
echo "exit $? (tiny)" | tee -a "$LOG"

COMMON=(--model gemma4-26b-a4b --random-init --device cuda --dtype bf16 --batch 2
        --moe grouped_mm --lora-dtype model --checkpointing on --ce chunked --ce-chunk 4096 --rank 64 --alpha 128
        --warmup 1 --repeats 2)
for a in ${RUNS:-sdpa flash-window-fused}; do
  case $a in
    sdpa) args=(--attn sdpa); limit=240 ;;
    flash-window-fused) args=(--attn flash-window --norm fused); limit=150 ;;
    *) echo "unknown run $a" | tee -a "$LOG"; continue ;;
  esac
  say tprobe profile $a
  timeout $limit $T profile "${COMMON[@]}" "${args[@]}" --json "$D/profile-$a.json" \
    >"$D/profile-$a.txt" 2>&1
  echo "exit $? ($a)" | tee -a "$LOG"
done

say checks
python3 benchmarks/gpu/attribution_checks.py "$D" 2>&1 | tee "$D/checks.txt" | tee -a "$LOG"
say done
