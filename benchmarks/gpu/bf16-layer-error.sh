#!/usr/bin/env bash
# GPU-host diagnostics for the bf16 parity gap (docs/gemma4-engine.md): per-layer hidden states of
# tprobe and HF, each against HF fp32, on the mid-size HF checkpoint.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}; LOG=$OUT/log.txt
( TPROBE_BUILD_TARGETS="tprobe" timeout 300 bash scripts/gpu-build.sh -DTPROBE_WERROR=OFF >/tmp/build.log 2>&1; echo "build rc $?" >>/tmp/build.log ) &
timeout 200 python3 scripts/make_parity_fixture.py mid /tmp/mid 2>&1 | grep -E "rel L2|loss=" >>"$LOG"
wait
tail -2 /tmp/build.log >>"$LOG"
B=build/cuda/src/app/tprobe
$B parity --checkpoint /tmp/mid --reference /tmp/mid/reference.safetensors --device cuda --dtype bf16 --attn eager \
  --dump-hidden /tmp/dump.safetensors >/dev/null 2>>"$LOG"; echo "parity exit $?" >>"$LOG"
for spec in "sdpa grouped_mm" "flash-window grouped_mm" "eager loop"; do
  set -- $spec
  $B parity --checkpoint /tmp/mid --reference /tmp/mid/reference.safetensors --device cuda --dtype bf16 --attn $1 \
    --moe $2 --baseline-key logits_hf_bf16_sdpa 2>&1 | grep -E "attention|relative|median|p99|Δ loss" >>"$LOG"
done
timeout 120 python3 scripts/compare_hidden.py /tmp/mid /tmp/mid/reference.safetensors /tmp/dump.safetensors 2>&1 | grep -v Loading >>"$LOG"
