#!/usr/bin/env bash
# The main job: every probe on its embedded default, no checkpoint, no GPU, no network.
# Tables go to stdout; evidence files to ${TPROBE_OUT:-out}/. Each later probe adds a line here.
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
# scaling-fit on documented example points: domain.md item 1 (the published post-mortem's three
# widths at batch 2), not points measured by this job.
run scaling-fit --batch 2 --point 2048:1.776 --point 8192:11.570 --point 16384:35.017 \
  --at 4096,32768 --json "$out/scaling-fit.json"
run flops --model gemma4-26b-a4b --batch 2 --width 16384 --attention sdpa-causal \
  --json "$out/flops.json"
run inspect --model gemma4-26b-a4b --json "$out/inspect.json"
echo
echo "evidence files written to $out/:"
ls -1 "$out"
