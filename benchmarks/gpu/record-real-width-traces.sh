#!/usr/bin/env bash
# GPU host: issue 48, item 4 — one with_stack HF + PEFT LoRA step of MoE decoders at a released
# model's real widths (Qwen3-30B-A3B with $QWEN_LAYERS layers, Mixtral-8x7B with $MIXTRAL_LAYERS),
# batch 2 x $SEQ, recorded by benchmarks/gpu/record_family_traces.py --real. The gzipped traces are
# cut into 15 MiB pieces ($OUT/real-<family>.json.gz.partNN, a call brings back files of at most
# 16 MiB) beside real-meta.tgz (<family>.config.json, <family>.txt, the log). On a CPU host:
#   cat real-<family>.json.gz.part* > <family>.json.gz
#   tprobe kernels <family>.json.gz --config <family>.config.json
#   python3 benchmarks/family_attribution.py <family>.json.gz   (the cells to compare)
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/real
mkdir -p "$D"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$D/log.txt"
for spec in "qwen3_moe_30b:${QWEN_LAYERS:-8}" "mixtral_8x7b:${MIXTRAL_LAYERS:-4}"; do
  fam=${spec%%:*}
  layers=${spec##*:}
  [ "$layers" = 0 ] && continue
  timeout ${RECORD_TIMEOUT:-260} python3 benchmarks/gpu/record_family_traces.py "$D" --families "$fam" \
    --real "$layers" --seq "${SEQ:-2048}" >>"$D/record.txt" 2>&1
  echo "$fam exit $?" | tee -a "$D/log.txt"
  if [ -f "$D/$fam.json.gz" ]; then
    split -b 15M -d "$D/$fam.json.gz" "$OUT/real-$fam.json.gz.part"
  fi
done
tail -8 "$D/record.txt"
rm -f "$D"/*.json.gz
tar -C "$OUT" -czf "$OUT/real-meta.tgz" real  # configs, what ran, the log
rm -rf "$D"
ls -la "$OUT"
