#!/usr/bin/env bash
# GPU call 2 for issue 17: build the two benchmark targets, then (1) one head_dim-512 attention
# layer at N = 2,048 / 8,192 / 16,384 (B=2, bf16): blockwise-GEMM at blocks 256/512/1024 (and 512
# saving the log-sum-exp) beside is_causal SDPA on repeated KV (flash-window's old global path),
# forward and forward+backward;
# (2) the 26B-A4B LoRA step at 2x16,384 with --attn flash-window, new global path and then the old
# one (TPROBE_FLASH_WINDOW_GLOBAL=sdpa) in the same call. Writes to "$OUT/global-attn/";
# bounded at about 235 s; the summary comes last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/global-attn
mkdir -p "$D"
LOG=$D/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say build
TPROBE_BUILD_TARGETS="tprobe_global_attn_bench tprobe_step_bench" \
  timeout 125 bash scripts/gpu-build.sh >"$D/build.log" 2>&1
echo "build rc $?" | tee -a "$LOG"
B=build/cuda/benchmarks
say layer
timeout 35 $B/tprobe_global_attn_bench --seq 2048 8192 16384 --block 256 512 1024 --lse-block 512 \
  --json "$D/layer.json" >"$D/layer.txt" 2>&1
echo "layer rc $?" | tee -a "$LOG"
for g in blockwise sdpa; do
  say step flash-window global=$g
  TPROBE_FLASH_WINDOW_GLOBAL=$g timeout 90 $B/tprobe_step_bench --attn flash-window \
    --moe grouped_mm --seq 16384 --reps 2 --json "$D/step-flash-window-$g.json" \
    >"$D/step-flash-window-$g.txt" 2>&1
  echo "step rc $? ($g)" | tee -a "$LOG"
done
say done
echo "--- summary"
grep -E "error|rc [^0]" "$D/build.log" | tail -5
cat "$D/layer.txt"
grep -hE "best|error" "$D"/step-flash-window-*.txt
grep -E " rc " "$LOG"
