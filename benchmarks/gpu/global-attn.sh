#!/usr/bin/env bash
# GPU call 1 for issue 17 (global attention, head_dim 512): the PyTorch prototype of the blockwise
# GEMM attention beside is_causal SDPA (flash-window's path before it) at B=2, N=16,384, plus its
# error against an fp32 reference. Python only, no build. Writes to "$OUT/global-attn/"; about
# 60 s, bounded at 110 s.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/global-attn
mkdir -p "$D"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$D/gpu.txt" 2>&1
timeout 110 python3 benchmarks/gpu/global_attn_proto.py --n 16384 --ref-n 4000 \
  --blocks 512 1024 2048 4096 --json "$D/proto.json" >"$D/proto.log" 2>&1
echo "proto rc $?" >>"$D/proto.log"
# summary last: the two tables and the return code
if grep -q '^B=2' "$D/proto.log"; then sed -n '/^B=2/,$p' "$D/proto.log"; else tail -n 30 "$D/proto.log"; fi
