#!/usr/bin/env bash
# The main job: every probe on its embedded default, no checkpoint, no GPU, no network.
# Tables go to stdout; evidence files to ${TPROBE_OUT:-out}/. Each probe adds its line(s) here.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TPROBE_BIN:-build/cpu/src/app/tprobe}
out=${TPROBE_OUT:-out}
mkdir -p "$out"
run() {
  echo
  echo "\$ tprobe $*"
  "$bin" "$@"
}
run env --json "$out/env.json"
# What the checkpoint holds and what LoRA / 4-bit would touch (embedded 26B-A4B shapes).
run inspect --model gemma4-26b-a4b --json "$out/inspect.json"
# The embedded synthetic corpus; truncation at 8,192 as in the post-mortem (domain.md item 8).
run padding --max-seq-len 8192 --json "$out/padding.json"
# scaling-fit on documented example points: domain.md item 1 (the published post-mortem's three
# widths at batch 2), not points measured by this job; the quadratic share is also weighted over
# the micro-batch widths the padding probe just measured.
run scaling-fit --batch 2 --point 2048:1.776 --point 8192:11.570 --point 16384:35.017 \
  --at 4096,32768 --widths-from "$out/padding.json" --json "$out/scaling-fit.json"
# The sampler sweep, with step time predicted from that fit.
run bucket --max-seq-len 8192 --scaling-fit "$out/scaling-fit.json" --json "$out/bucket.json" \
  --emit-order "$out/bucket-order.jsonl"
run flops --model gemma4-26b-a4b --batch 2 --width 16384 --attention sdpa-causal \
  --json "$out/flops.json"
fx=tests/fixtures/gemma4-tiny-hf  # written by Hugging Face transformers (scripts/make_parity_fixture.py)
run parity --checkpoint "$fx" --reference "$fx/reference.safetensors" --json "$out/parity.json"
# The measured LoRA step on the CPU (tiny shapes, random weights): times, memory, FLOPs and the
# scaling fit over three widths, plus the standard padded point; no kernel table on the CPU.
run profile --device cpu --model gemma4-tiny --dtype fp32 --widths 64,128,256 --pad-fraction 0.5 \
  --rank 8 --alpha 16 --ce-chunk 256 --json "$out/profile.json"
echo
echo "evidence files written to $out/:"
ls -1 "$out"
