#!/usr/bin/env bash
# GPU host: records one with_stack HF + PEFT LoRA step per transformers decoder family (Llama,
# Qwen3-MoE, Mixtral, gpt-oss when transformers has it, Gemma-3 text) at tiny random shapes, for
# `tprobe kernels`' family fixtures (issue 48; benchmarks/gpu/record_family_traces.py says how).
# Output: $OUT/family-traces/ (<family>.json.gz, <family>.config.json, <family>.txt, log.txt),
# tarred into ONE file, $OUT/family-traces.tgz. Needs torch, transformers and peft; no tprobe
# build. Then, on a CPU host: python3 benchmarks/family_attribution.py <family>.json.gz.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/family-traces
mkdir -p "$D"
nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader | tee -a "$D/log.txt"
timeout 540 python3 benchmarks/gpu/record_family_traces.py "$D" ${FAMILIES:+--families "$FAMILIES"} \
  >"$D/record.txt" 2>&1
echo "record exit $?" | tee -a "$D/log.txt"
tail -12 "$D/record.txt"
# The attribution of each trace by the documented rules, beside it (stdlib Python only).
for t in "$D"/*.json.gz; do
  [ -e "$t" ] || continue
  python3 benchmarks/family_attribution.py "$t" >"${t%.json.gz}.cells.json" 2>>"$D/log.txt" ||
    echo "attribution of $t failed" | tee -a "$D/log.txt"
done
tar -C "$OUT" -czf "$OUT/family-traces.tgz" family-traces
ls -la "$D" "$OUT/family-traces.tgz"
