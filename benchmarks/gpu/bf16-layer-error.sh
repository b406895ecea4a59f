#!/usr/bin/env bash
# GPU host: where the bf16 parity error of the mid-size HF checkpoint arises (docs/gemma4-engine.md):
# builds tprobe while HF writes the checkpoint (scripts/make_parity_fixture.py mid), then bf16
# parity on CUDA per attention path and MoE dispatch (HF's bf16 sdpa logits as the baseline), and
# every layer's hidden state of tprobe (`parity --dump-hidden`, eager) and of HF, each against HF
# fp32 (scripts/compare_hidden.py). Output: $OUT/bf16-layer-error/ (OUT defaults to ./out):
# log.txt, build.log. The checkpoint and the dump go to a temporary folder, removed at exit.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/bf16-layer-error
mkdir -p "$D"
LOG=$D/log.txt
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
MID=$W/mid
( TPROBE_BUILD_TARGETS="tprobe" timeout 300 bash scripts/gpu-build.sh -DTPROBE_WERROR=OFF >"$D/build.log" 2>&1; echo "build rc $?" >>"$D/build.log" ) &
timeout 200 python3 scripts/make_parity_fixture.py mid "$MID" 2>&1 | grep -E "rel L2|loss=" >>"$LOG"
wait
tail -2 "$D/build.log" >>"$LOG"
B=build/cuda/src/app/tprobe
$B parity --checkpoint "$MID" --reference "$MID/reference.safetensors" --device cuda --dtype bf16 --attn eager \
  --dump-hidden "$W/dump.safetensors" >/dev/null 2>>"$LOG"; echo "parity exit $?" >>"$LOG"
for spec in "sdpa grouped_mm" "flash-window grouped_mm" "eager loop"; do
  set -- $spec
  $B parity --checkpoint "$MID" --reference "$MID/reference.safetensors" --device cuda --dtype bf16 --attn $1 \
    --moe $2 --baseline-key logits_hf_bf16_sdpa 2>&1 | grep -E "attention|relative|median|p99|Δ loss" >>"$LOG"
done
timeout 120 python3 scripts/compare_hidden.py "$MID" "$MID/reference.safetensors" "$W/dump.safetensors" 2>&1 | grep -v Loading >>"$LOG"
